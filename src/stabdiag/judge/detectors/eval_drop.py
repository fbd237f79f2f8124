"""An independent eval read against its own start: did the run leave the model worse at what it is checked
on than it was before training?  Whatever the reward did: a reward function that pays a wrong answer can
collapse the eval in the first steps, before the reward begins to rise, and an eval read only inside the
reward's rise (trend_divergence) then sees it partly recover and follow.

Read the model-free way of stats/change.py: the eval's level at its end minus its level at its start, with
the standard error of that contrast from the eval's own noise (read apart from its mean), and a three-way
decision - surely and largely below its start (a finding), a drop that large ruled out (clean), or too
noisy to tell.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np

from ..stats.change import CLEAN, FINDING, Reading, change_between, windows
from ..stats.evidence import _granularity, family_z, hinge_onset  # the success rate's samples a point (granularity)
from ..stats.extremes import normal_sf
from ..stats.noise import estimate_noise
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged

# an eval whose name says lower is better (an error rate, a distance) falls when it improves: not read
_LOWER_IS_BETTER = re.compile(r"err|\bwer\b|\bcer\b|mse|mae|distance|loss|perplexity|ppl", re.IGNORECASE)


def drop_below_start(evals: list[Curve], reward: Curve | None = None, loss: Curve | None = None, *,
                     min_drop_share, min_drop_z, edge_frac, min_points) -> Evidence | NotJudged | None:
    """An eval in `evals` ends surely below its start: its first logged level (before training where it was
    scored at or before the run's first step) minus its level over the last `edge_frac` of its step span
    (at least its last third of points), `min_drop_z` standard errors clear of 0 from the eval's own noise
    (more beside several evals, for their number), and at least `min_drop_share` of its start level.  A
    drop that large ruled out for every eval is clean; one neither confirmed nor ruled out is too noisy to
    tell.  An eval with fewer than `min_points` points is not read; `reward` or `loss` only tell where
    training began (an eval scored before it is the level before training)."""
    train_start = min((float(c.steps[0]) for c in (reward, loss) if c is not None and len(c.steps)),
                      default=-math.inf)
    family = family_z(min_drop_z, len(evals))
    found: list[tuple[float, Evidence]] = []
    undecided: list[str] = []
    unread: list[str] = []
    judged = False
    for curve in evals:
        c = curve.finite()
        if _LOWER_IS_BETTER.search(c.signal.split(":", 1)[-1]):
            unread.append(f"{c.signal} reads lower as better")
            continue
        if len(c.values) < min_points:
            unread.append(f"{c.signal} has {len(c.values)} point(s) (needs {min_points:g})")
            continue
        first, last = _start_and_end(c.steps, edge_frac)
        # the eval's own change is asserted: its memory read on the safe side (stats/noise.py), so that an eval
        # whose noise wanders (AR 0.97-0.99, a random walk) is not read as one that fell (3-4% of such healthy
        # runs failed with the best fit's memory), and bounded: its start is one point, so a drift over the
        # run weighs fully in the contrast
        change = change_between(c.values, first, last, cautious=True, bounded=True)
        start_level, end_level = change.start_level, change.end_level
        if start_level <= 0:
            unread.append(f"{c.signal} starts at {start_level:.3g}: it has no level to fall from")
            continue
        floor = _binomial_se(c.values, start_level, first, last)
        se, sure_z, read_from = _narrowest(_noise_readings(c.steps, c.values, first, last, change.reading.se),
                                           family, floor)
        drop = Reading(-change.reading.estimate, se)
        size = min_drop_share * start_level
        decision = drop.decide(size, sure_z)
        if decision == CLEAN or (decision != FINDING and drop.estimate < size):
            # ruled out, or not ruled out but not leaning that way either (its estimate under the size): an
            # eval scored on a few dozen items cannot rule out a tenth of its level from one start point, and
            # only one whose estimate is such a drop makes the rule too noisy to tell (as an eval that leans
            # toward following does in trend_divergence).  Judged clean only on enough points: a drop would
            # be found on fewer, its absence is no clean bill there (the house rule of _base.MIN_CLEAN_POINTS)
            if len(c.values) >= MIN_CLEAN_POINTS:
                judged = True
            else:
                unread.append(f"{c.signal} has {len(c.values)} point(s) and no drop of {size:.3g} on them: "
                              f"{MIN_CLEAN_POINTS} are needed to call that clean")
            continue
        said = f"{c.signal} {start_level:.3g} -> {end_level:.3g} (drop {drop.text()})"
        if decision != FINDING:
            undecided.append(f"{said}: a drop of {size:.3g} ({min_drop_share:.0%} of its start) can be neither "
                             f"confirmed nor ruled out at {sure_z:.1f} standard errors (the eval's noise read "
                             f"from {read_from} points)")
            continue
        before = bool(c.steps[0] <= train_start)
        below = np.flatnonzero(c.values < start_level - 0.5 * drop.estimate)
        began = int(c.steps[below[0]]) if len(below) else int(c.steps[last[0]])
        found.append((drop.z, Evidence(began, int(c.steps[-1]), {
            "signal": c.signal, "key": c.key, "start_level": start_level, "end_level": end_level,
            "drop": drop.estimate, "drop_share": drop.estimate / start_level, "drop_low": drop.low(sure_z),
            "drop_z": drop.z, "sure": drop.interval_text() + (f", z {drop.z:.1f}" if math.isfinite(drop.z) else ""),
            "sure_z": sure_z,
            "baseline": "its level before training" if before else "its first logged level",
            "start_step": int(c.steps[0])})))
    if found:
        return max(found, key=lambda item: item[0])[1]
    if undecided:
        return NotJudged.too_noisy("; ".join(undecided))
    if judged:
        return None
    return NotJudged("no eval to read: " + ("; ".join(unread) if unread else "none logged"))


def _start_and_end(steps: np.ndarray, edge_frac: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """The eval's first point (the level before training, or its first logged level) and its points over the
    last `edge_frac` of its step span, at least its last third: a sparse eval's end is read on more than one
    point where it has them."""
    _, (b0, b1) = windows(steps, edge_frac)
    n = len(steps)
    b0 = min(b0, max(n - n // 3, 1))
    return (0, 1), (b0, b1)


def _noise_readings(steps: np.ndarray, values: np.ndarray, first: tuple[int, int], last: tuple[int, int],
                    whole: float) -> list[tuple[float, int]]:
    """The drop's standard error under each reading of the eval's noise, with the points it was read from
    (its degrees of freedom are theirs): the noise read from the whole eval (`whole`), after its start
    point, and after its change point (the hinge or level shift of stats/evidence.py), each where 8 points
    or more are read.  The caller takes the narrowest interval (_narrowest).
    After the start: the point the drop is measured from is left out of the noise it is measured against (a
    prediction of one new point; Student's t at the rest's degrees of freedom), so that a collapse between
    the first two evals is not read as the eval's own scatter - eval_early_collapse on bench/calibrate.py
    --quick, 10 evals at T = 300: 44 / 50 / 50% -> 64 / 67 / 72% found by effect size (each reading at its
    own degrees of freedom), while 2 of 1,500 healthy runs fired against 0 (ar_0.9 and rl_easy, the same
    19-eval draw at z 5.4 against 5.1).
    After the change point: an eval that collapses in its first points and then recovers slowly is a V whose
    kink the whole curve's short-lag variogram reads as a wander (its cautious memory a random walk): at 20
    points 0.42 -> 0.20 -> 0.30, read to +-0.01, was too noisy to tell on 16 of 20 draws.  Read past the
    kink its noise is the eval's own.  Measured on bench/calibrate.py --quick at min_drop_z 3: the same 5 of
    1,400 healthy runs fired as with the whole curve's noise alone and the same 63 of 108 eval_early_collapse
    runs were found, while that V fired on 18 or more of 20 draws (4 of 20 with the whole curve's noise)."""
    cuts = [first[1]]
    onset = hinge_onset(steps, values, min_side_points=3)
    if onset is not None:
        cuts.append(int(np.searchsorted(steps, onset.step, side="right")))
    readings = [(whole, len(values))]
    for cut in sorted(set(cuts)):         # a change point right after the start is the same reading
        after = estimate_noise(values[cut:], cautious=True, bounded=True)
        if after is not None and after.block == 1:
            readings.append((math.sqrt(after.contrast_variance(len(values), first, last)), len(values) - cut))
    return readings


def _narrowest(readings: list[tuple[float, int]], family: float, floor: float) -> tuple[float, float, int]:
    """Of the noise readings (se, points read), the one whose interval is the narrowest once its degrees of
    freedom are paid for (Student's t at `family`'s tail; the se never under `floor`, the eval's sampling
    noise): (se, the t bar, points).  A noise read from the 10 points after a change point at step 300 of 40
    evals has a smaller se than the whole eval's but a t bar of 6.9 against 4.0."""
    scored = []
    for se, points in readings:
        se = max(se, floor)
        bar = t_for_z(family, _noise_df(points))
        scored.append((se * bar, se, bar, points))
    _, se, bar, points = min(scored)
    return se, bar, points


def _binomial_se(values: np.ndarray, level: float, first: tuple[int, int], last: tuple[int, int]) -> float:
    """The least standard error a contrast of two windows of a success rate can have: a rate of n samples a
    point (n from its values' granularity) that stayed at its start `level` varies by p (1 - p) / n a point.
    An accuracy of 2 right of 64 at its first point, 0 at most points after, reads a variogram of almost
    nothing; its drop of 0.031 is worth one sample's 0.022, not 150 standard errors (TRL's exact_match in
    tests/fixtures/framework_runs/grpo_entropy_collapse).  0 off 0..1 or without granularity."""
    v = values[np.isfinite(values)]
    if len(v) < 4 or v.min() < 0 or v.max() > 1:
        return 0.0
    n = _granularity(v, 4096)
    if n is None:
        return 0.0
    p = min(max(level, 0.5 / n), 1.0 - 0.5 / n)
    return math.sqrt(p * (1.0 - p) / n * (1.0 / (first[1] - first[0]) + 1.0 / (last[1] - last[0])))


def _noise_df(points: int) -> float:
    """The degrees of freedom of an eval's noise read from `points` points: 3/4 of its points - 2, at least 1.
    Measured on flat Gaussian evals of 4 to 20 points (1,500 draws each), a drop sure at 3 se fires on
    0.07-0.13% of them at that df against the nominal 0.135%; at points - 2 on 0.13-0.4%, at (points - 2) / 2
    on 0-0.05% (second differences carry less than their count: their neighbours correlate)."""
    return max(0.75 * (points - 2), 1.0)


@functools.lru_cache(maxsize=1024)
def t_for_z(z: float, df: float) -> float:
    """The Student t quantile (`df` degrees of freedom) with the one-sided tail of the normal's `z`: a drop
    read against a noise estimated from a few eval points needs more standard errors to be as sure (at 10
    points, 3 normal standard errors fired on 1.2% of flat evals instead of 0.13%).  Remembered: each eval
    asks it for the same z and a few dfs (60 bisection steps of a continued fraction each)."""
    if df >= 1e4:
        return z
    tail = normal_sf(z)
    low, high = z, max(2.0 * z, 10.0)
    while _t_tail(high, df) > tail:
        high *= 2.0
    for _ in range(60):                  # bisection: the tail falls as t grows
        mid = 0.5 * (low + high)
        low, high = (mid, high) if _t_tail(mid, df) > tail else (low, mid)
    return high


def _t_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom, t >= 0: half the regularized incomplete beta
    I_x(df/2, 1/2) at x = df / (df + t^2)."""
    return 0.5 * _betainc(0.5 * df, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b) by its continued fraction (Lentz's method; Press et al.,
    Numerical Recipes 6.4), on the side where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return front * h / a
