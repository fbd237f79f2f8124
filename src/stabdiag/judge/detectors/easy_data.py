"""Data too easy for the model, read without a zero-variance signal: a success-rate reward that sits near its
ceiling from the start, beside independent evals that do not move, while the policy's entropy falls.

Seed 000 (layer 2, "a factor easily missed"): when every task is too easy, whole groups are all-correct,
their variance is zero, the model settles on one way to solve them and its entropy falls - because the task
is too easy, not because the update was too fast.  A run that logs the zero-variance group fraction (TRL's
frac_reward_zero_std) shows that directly (L1.zero-variance-groups, and the entropy floor reads it as the
fall's cause); a run that does not still logs its reward, and a success rate held near 1 from its first
steps says the same thing about its groups.  An eval that moves surely is read the other way: the model
learns (or loses) something the check sees, so the fall is not the data's ease alone.

Every reading is the three-way decision of stats/change.py: sure (a finding), ruled out (clean), or too
noisy to tell; the pattern is found only where all of its parts are, and is clean where one is ruled out.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ..stats.change import CLEAN, FINDING, Reading, end_minus_start, windows
from ..stats.noise import estimate_noise
from ._base import Curve, Evidence, NotJudged

# the standard error of a median over that of a mean of Gaussian points (asymptotic: sqrt(pi / 2))
_MEDIAN_SE = math.sqrt(math.pi / 2.0)
_FIRST_POINTS = 3         # the points a curve's start is read on (their median: robust to one of them)


def ceiling_from_start(reward: Curve, entropy: Curve, evals: list[Curve] | None = None,
                       difficulty: Curve | None = None, *, ceiling_level,
                       min_entropy_fall_share, min_eval_move_share, sure_z, edge_frac, min_points,
                       min_eval_points) -> Evidence | NotJudged | None:
    """A success-rate `reward` (every value on 0..1) whose level over the first `edge_frac` of its step span
    (the window's median) is `sure_z` standard errors above `ceiling_level`, from the reward's own noise, and
    whose first 3 points are not surely under it (a reward that climbs to the ceiling in its first steps
    learned something first), while the `entropy` ends surely below its start (its level over the last
    `edge_frac` minus its level over the first, `sure_z` standard errors clear of 0) by at least
    `min_entropy_fall_share` of its start, and no independent eval moves surely (up or down) by
    `min_eval_move_share` of its start level.  Where no eval is logged the reward's level and the entropy's
    fall are read alone (seed 000 reads the fall from the data's difficulty).  A reward off 0..1 is not a
    success rate and is not judged, nor is a reward or an entropy of fewer than `min_points` points; an eval
    of fewer than `min_eval_points` is not read.  A run that logs its zero-variance group fraction
    (`difficulty`) is not judged: that fraction says directly what the reward's level only suggests."""
    if difficulty is not None and len(difficulty.finite().values):
        return NotJudged(f"the run logs {difficulty.key}, the zero-variance group fraction itself: "
                         "L1.zero-variance-groups reads the data's difficulty from it")
    r = reward.finite()
    if len(r.values) < min_points:
        return NotJudged(f"{r.signal} has {len(r.values)} point(s) (needs {min_points:g})")
    low, high = float(np.min(r.values)), float(np.max(r.values))
    if low < 0.0 or high > 1.0:
        return NotJudged(f"{r.key} spans {low:.3g}..{high:.3g}: not a success rate on 0..1, so it has no "
                         "ceiling to read")
    e = entropy.finite()
    if len(e.values) < min_points:
        return NotJudged(f"{e.signal} has {len(e.values)} point(s) (needs {min_points:g})")

    window = windows(r.steps, edge_frac)[0]
    level, above = _level_above(r, window, ceiling_level)
    first_level, first = _level_above(r, (0, min(_FIRST_POINTS, len(r.values))), ceiling_level)
    at_ceiling = above.decide(0.0, sure_z)
    if at_ceiling == CLEAN or first.decide(0.0, sure_z) == CLEAN:
        # the reward starts surely under the ceiling, over its first window or at its first points (a reward
        # that climbs to the ceiling within its first steps learned something first): the data is not too easy
        return None

    change = end_minus_start(e.steps, e.values, edge_frac, cautious=True)
    if change.start_level <= 0:
        return NotJudged(f"{e.key} starts at {change.start_level:.3g}: it has no level to fall from")
    fall = Reading(-change.reading.estimate, change.reading.se)
    fall_size = min_entropy_fall_share * change.start_level
    falls = fall.decide(fall_size, sure_z)
    if falls == CLEAN:
        return None                    # nothing to explain: the entropy did not fall by that much

    read, moved = _evals(evals or [], min_eval_move_share, sure_z, edge_frac, min_eval_points)
    if moved:
        return None                    # an eval moved: the model's checked ability changed, not the data's ease

    undecided = []
    if at_ceiling != FINDING:
        undecided.append(f"{r.key} starts at {level:.3g} ({above.interval_text(sure_z, shift=ceiling_level)}), "
                         f"neither surely above nor surely under the ceiling {ceiling_level:g}")
    if falls != FINDING:
        undecided.append(f"{e.key} {change.start_level:.3g} -> {change.end_level:.3g}: a fall of "
                         f"{min_entropy_fall_share:.0%} can be neither confirmed nor ruled out ({fall.text(sure_z)})")
    if undecided:
        return NotJudged.too_noisy("; ".join(undecided))
    start = int(r.steps[0])
    return Evidence(start, int(max(r.steps[-1], e.steps[-1])), {
        "signal": r.signal, "key": r.key, "level": level, "ceiling": float(ceiling_level),
        "sure": above.interval_text(sure_z, shift=ceiling_level), "entropy_key": e.key,
        "entropy_start": change.start_level, "entropy_end": change.end_level,
        "entropy_fall_share": fall.estimate / change.start_level,
        "evals": "; ".join(read) if read else "no independent eval logged", "onset": start})


def _level_above(r: Curve, points: tuple[int, int], ceiling: float) -> tuple[float, Reading]:
    """The reward's level over the index range `points` (their median, at least the first 3 points) and that
    level minus `ceiling` with its standard error: the range's mean's under the reward's noise (a point
    variance less what neighbours share; for a wander that never settles, its spread over the range's
    stretch), times the median's sqrt(pi / 2).  A curve too short for a variogram (under 8 points) reads the
    range's spread as independent."""
    a0, a1 = points
    if a1 - a0 < _FIRST_POINTS:
        a0, a1 = 0, min(_FIRST_POINTS, len(r.values))
    values = r.values[a0:a1]
    level = float(st.median(values))
    w = a1 - a0
    noise = estimate_noise(r.values, cautious=True)
    if noise is None:
        var = float(np.var(values, ddof=1)) / w if w > 1 else math.inf
    else:
        wb = max(w // noise.block, 1)
        lags = np.arange(1, wb, dtype=np.float64)
        within = float(np.sum(2.0 * (wb - lags) * noise.semivariogram(lags))) / wb ** 2 if wb > 1 else 0.0
        var = noise.sill - within if math.isfinite(noise.sill) else float(noise.semivariogram(np.array([wb]))[0])
        var = max(var, 0.0)
    return level, Reading(level - ceiling, _MEDIAN_SE * math.sqrt(var))


def _evals(evals: list[Curve], move_share: float, sure_z: float, edge_frac: float,
           min_points: float) -> tuple[list[str], bool]:
    """Each readable eval's change (end level minus start level, read beside the reward with its noise's best
    fit), and whether one moved surely by `move_share` of its start level, either way."""
    read: list[str] = []
    for curve in evals:
        c = curve.finite()
        if len(c.values) < min_points:
            continue
        change = end_minus_start(c.steps, c.values, edge_frac, cautious=False)
        size = move_share * abs(change.start_level)
        moved = Reading(abs(change.reading.estimate), change.reading.se).decide(size, sure_z) == FINDING
        read.append(f"{c.key} {change.start_level:.3g} -> {change.end_level:.3g} "
                    f"({'moved' if moved else 'did not move surely'})")
        if moved:
            return read, True
    return read, False
