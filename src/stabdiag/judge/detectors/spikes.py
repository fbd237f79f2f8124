"""Spike detectors: a jump against the recent level or an EMA, and the climb before a blow-up.

Windows, EMA spans and recovery are set in training steps and turned into logged points at the curve's
own cadence (`Curve.points_for`), so logging every k steps does not stretch them k-fold.  A spike is
large (a ratio of the level: a small model's grad norm of 0.3 that jumps to 4.5 is as much a spike as a
large model's 1.0 -> 15) and sure: further out, in robust sds of the curve itself, than a healthy run of
as many points with this run's own noise tail goes with the per-run false-alarm budget's chance (issue 43
item 5; stats/extremes.py).  A fixed bar of sds is crossed by chance more often the longer the run: i.i.d.
log-normal grad norms (sigma 0.2-1.0) warned on 36.5% of runs and failed on 10% at 5x their EMA and 5
noise sds, Student-t(3) ones warned on 30.5% (bench/calibrate.py, df5563e).  Two readings of how far out,
each at half the budget: the jump over the recent level (the EMA, or the median of the window before) in
the local sd of such jumps, and the point's residual from its eight neighbours in theirs (a smooth climb
leaves none, so a jump on a curve without noise stands out however far its recent level lags).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ... import _stats as st
from ..stats import extremes as ex
from ._base import Curve, Evidence, NotJudged, Quiet

# a median of two points is their mean: logged every 5th step, a second burst right after the first kept
# a pg loss that was back at its level at once "not recovered" (tuning healthy-pg-loss-bursts).  Near
# the run's end the two points there are still read
_MIN_RECOVER_POINTS = 3
_MIN_RECOVER_POINTS_AT_END = 2
# a recent level within this many printed steps of 0 is one the log's precision cannot resolve (a GRPO loss
# printed as 0.0000 while KL is still 0): against it a point is a spike only if it also stands above where
# the curve is now, the median of the last tenth of the recent window (at least 5 points).  A loss that is
# beta * KL climbs from 0.0000 as KL grows, its scatter growing with it: 60 steps in, 0.0025 stood 25x
# above a window of 0.0000s and 0.0001s, and 2.8x the 0.0009 of the ten points before it (Unsloth's
# Mistral-7B GRPO notebook, read live at 30% of its run; at half of it, 0.0104 against 0.0003)
_UNRESOLVED_STEPS = 5
_LOCAL_SHARE = 0.1
_MIN_LOCAL_POINTS = 5
_FIRST_TESTED = 10          # the first 10 points are the level the 11th is read against
_MIN_HUGE_BASELINE = 3      # a huge jump (orders of magnitude) is read against as few as 3 points before it
_SCALE_BLOCK = 128          # points whose jumps set each point's local sd (noise that changes over a run)
_MAX_JUMP_POINTS = 20_000   # points whose jumps over their recent median are read (a stride beyond)
_HALF_NORMAL_MEDIAN = 0.6744897501960817
_TAIL_PREFIXES = 4          # the prefixes a point's noise tail is read on (quarters of the curve: cost bound)
_TYPICAL_CHECKPOINTS = 64   # prefixes a point's typical level so far is read on (cost bound) ...
_TYPICAL_POINTS = 8192      # ... each on at most about this many points
_MIN_PREFIX_POINTS = 150    # ... none shorter: Gaussian noise read on 100 points has a median dof_low of 6 and is
                            # read t(2.5) or heavier in 10% of draws; on 150 points 10, and never (40 draws each)


def _recovered(values: np.ndarray, idx: np.ndarray, recover_points: int, back_under: np.ndarray,
               stay_points: int = 3) -> list[tuple[int, int, bool | None]]:
    """The spike episodes at `idx` as (first index, last index, whether the run came back: None when the
    log ends too soon after it to tell).

    Consecutive spike points are one episode (a blow-up that lasts three steps is one event); one longer
    than `recover_points` is a level shift, not a spike.  The run came back from an episode when the
    `recover_points` points after it have their median under that episode's `back_under` level, or when
    within them the curve gets under it and stays for `stay_points` points (BLOOM-176B: grad norm 960 at
    iteration 31219, still 650 at 31222, back to 0.27 by 31250)."""
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([idx[:1], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks], idx[-1:]])
    k = int(recover_points)

    def recovered(start: int, end: int) -> bool | None:
        if end - start + 1 > k:
            return False                    # elevated for longer than a spike: a level shift
        after = values[end + 1:end + 1 + k]
        if len(after) < min(k, _MIN_RECOVER_POINTS_AT_END):
            return None                     # the log ends (or breaks off) before the run could come back
        if float(st.median(after)) <= back_under[start]:
            return True
        under = values[end + 1:end + k + stay_points] <= back_under[start]    # only the points it reads
        return any(j + stay_points <= len(under) and under[j:j + stay_points].all() for j in range(k))

    return [(int(a), int(e), recovered(a, e)) for a, e in zip(starts, ends)]


def _crowded(v: Curve, episodes, max_count: float, window_steps: float) -> bool:
    """More than `max_count` spike episodes inside some `window_steps` stretch: repeated spikes, not
    isolated ones (llm.c GPT-2 124M absorbs two 5x spikes 1,600 steps apart and trains on)."""
    starts = v.steps[[a for a, _, _ in episodes]]
    k = int(max_count)
    return any(starts[j + k] - starts[j] <= window_steps for j in range(len(starts) - k))


def _spike_evidence(v: Curve, episodes, level: np.ndarray, level_name: str, recover_points: int,
                    isolated_max_count: float, isolated_window_steps: float, budget: _Budget,
                    **said_of_level: str) -> Evidence:
    i = episodes[0][0]
    # a run that came back from every spike warns, however many (issue 25: verl's published DeepSeek-7B
    # GSM8K baseline absorbs 13 grad-norm spikes of 6-160x in 1,120 steps and trains on); repeated ones
    # are said, and one it never came back from fails
    absorbed = all(back for _, _, back in episodes)
    repeated = _crowded(v, episodes, isolated_max_count, isolated_window_steps)
    said = (("repeated, each " if repeated else "") + f"absorbed: back to its level within {recover_points} "
            "points") if absorbed else "not absorbed"
    return Evidence(int(v.steps[i]), int(v.steps[episodes[-1][1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), level_name: float(level[i]),
        "ratio": float(v.values[i] / level[i]) if level[i] > 0 else math.inf, "count": len(episodes),
        "absorbed": said, "budget": budget.text(i), **said_of_level},
        severity="warn" if absorbed else None)


@dataclass(frozen=True, slots=True)
class _Budget:
    """How far a point had to stand out to be a spike in this run, by either of two readings (each at half the
    per-run false-alarm budget `alpha`, over the `tested` points from index `first` on, with the run's own
    noise tail `tail`): `z`, its jump over its level in a robust sd of such jumps read from `z_points[i]`
    points, and `z_apart`, its residual from its eight neighbours in the robust sd of those residuals in its
    block of points (noise apart from the mean: a smooth climb leaves none, so a jump on a curve without
    noise stands out however its level lags).  The bar for each (`bar`) is the run's tail made heavier by
    the scale's own estimation (stats/extremes.py).  `tail` None: too short to read one, only jumps of `huge`
    x the level or more count.  Each point is held to the tail the run had shown before it (`dof_at`, read on
    `tail_points` points: the longest of a few prefixes that ends before its neighbourhood; points before the
    first prefix take the first): a run that jumps and stays noisy (a GRPO loss 0.02 -> 0.6-2.4 for the 16
    steps before its NaN) must not make the tail its jump is read against - one tail for the whole run read
    t(2), and the jump (29 sds) passed as noise.  The prefixes' tails are fitted when a point they hold is
    first asked about (`dof_at`): most runs ask about a few points or none.  The arrays are NaN (0 points)
    where not read."""

    alpha: float
    first: int
    tested: int
    whole: _WholeTail | None
    huge: float
    z: np.ndarray
    z_points: np.ndarray
    z_apart: np.ndarray
    apart_points: np.ndarray
    tails: _PrefixTails | None
    tail_points: np.ndarray
    _bars: dict = field(default_factory=dict)

    @property
    def has_tail(self) -> bool:
        """Whether the run's noise tail is read (`tail` not None), without fitting it."""
        return self.whole is not None and self.whole.readable

    @property
    def tail(self) -> ex.Tail | None:
        """The whole curve's tail (fitted when first asked for)."""
        return self.whole.get() if self.whole is not None else None

    def dof_at(self, i: np.ndarray) -> np.ndarray:
        """The tail (dof) each of the points `i` is held to (inf where no tail is read)."""
        return self.tails.dof_at(i) if self.tails is not None else np.full(len(i), math.inf)

    def bar(self, scale_points: int, dof: float | None = None) -> float:
        """The robust z a point must reach when its sd was read from `scale_points` points and the noise's tail
        is Student-t(`dof`) (None: the lightest tail any point is held to, the lowest bar; inf: no tail)."""
        if not self.has_tail or scale_points < 2:
            return math.inf
        if dof is None:
            dof = self.tails.lightest() if self.tails is not None else math.inf
        dof = float(dof)
        if (scale_points, dof) not in self._bars:
            # two readings at half the budget each: Bonferroni keeps their union within it
            self._bars[scale_points, dof] = ex.point_threshold(self.tested, self.alpha / 2,
                                                               ex.studentized_dof(dof, scale_points))
        return self._bars[scale_points, dof]

    def bars(self, points: np.ndarray, dofs: np.ndarray | float) -> np.ndarray:
        """bar() of each pair of `points` and `dofs` (a few distinct pairs: blocks are mostly full, a few
        prefixes; `dofs` one number: every point's)."""
        if np.ndim(dofs) == 0:
            return self._bars_at(points, float(dofs)) if len(points) else np.zeros(0)
        out = np.zeros(len(points))
        rest = dofs
        while len(rest):                    # each distinct dof (a few; np.diff of inf warns, np.unique is slow)
            dof = float(rest[0])
            rest = rest[rest != dof]
            here = dofs == dof
            out[here] = self._bars_at(points[here], dof)
        return out

    def _bars_at(self, points: np.ndarray, dof: float) -> np.ndarray:
        """bar() of each of `points` (not empty) at one dof: the distinct counts by a table over 0..max (counts
        are points: at most the curve's length), not a sort of a million of them."""
        seen = np.zeros(int(np.max(points)) + 1, dtype=bool)
        seen[points] = True
        counts = np.flatnonzero(seen)
        bar_of_count = np.zeros(len(seen))
        bar_of_count[counts] = [self.bar(int(m), dof) for m in counts.tolist()]
        return bar_of_count[points]

    def sure(self, i: np.ndarray) -> np.ndarray:
        """Past the bar at the points `i` by either reading."""
        if not self.has_tail:
            return np.zeros(len(i), dtype=bool)
        dofs = self.dof_at(i)
        return (self.z[i] >= self.bars(self.z_points[i], dofs)) | \
            (self.z_apart[i] >= self.bars(self.apart_points[i], dofs))

    def text(self, i: int) -> str:
        """What the budget read at point i: "41 robust sds against a bar of 9.3, crossed by chance in 1% of healthy
        runs of 4,000 points with this run's noise tail (Student-t 5)" (the reading that stands out most); or,
        for a short run, why only a huge jump counts."""
        if not self.has_tail:
            return (f"{self.tested + _MIN_HUGE_BASELINE} points are too few to read the run's own noise tail; a jump "
                    f"of {self.huge:g}x or more is one no noise makes")
        tail = float(self.dof_at(np.array([i]))[0])
        dof = "Gaussian" if math.isinf(tail) else f"Student-t {tail:g}"
        readings = [(self.z[i], self.bar(int(self.z_points[i]), tail)),
                    (self.z_apart[i], self.bar(int(self.apart_points[i]), tail))]
        z, bar = max(((z, b) for z, b in readings if np.isfinite(b)), key=lambda zb: (zb[0] - zb[1]) / zb[1]
                     if np.isfinite(zb[0]) else -math.inf, default=(math.nan, math.inf))
        return (f"{_z_text(z)} robust sds against a bar of {bar:.3g}, crossed by chance in {self.alpha:.0%} of healthy "
                f"runs of {self.tested:,} points with this run's noise tail ({dof}, read on its "
                f"{self.tail_points[i]:,} points before)")

    def rate_per_10k(self) -> float:
        """The false alarms the bar implies per 10,000 points: alpha spread over the points tested."""
        return self.alpha * 10_000 / max(self.tested, 1)


def _z_text(z: float) -> str:
    return "over 1000" if not np.isfinite(z) or z > 1000 else f"{z:.3g}"


def _budget(y: np.ndarray, first: int, alpha: float, huge_ratio: float, min_tail_points: float,
            quantum: _Quantum) -> _Budget:
    """The run's bar for a spike (see _Budget): points from index `first` on are tested; the tail is read
    from the residuals of `y` from its neighbours (stats/extremes.py) when the curve has `min_tail_points`
    points or more.  `quantum`: y's logged quantum, which the caller reads too."""
    n = len(y)
    tested = max(n - first, 1)
    whole = None
    z_apart, apart_points = np.full(n, np.nan), np.zeros(n, dtype=np.intp)
    tails, tail_points = None, np.zeros(n, dtype=np.intp)
    if n >= min_tail_points:
        resid = ex.neighbour_residuals(y)
        # one printed step (a loss rounded to 4 decimals) is the least noise a point can carry
        tiny = _tiny(y)
        scale, apart_points = _block_scale(resid, lambda least: quantum.floor(tiny, least))
        z_apart = resid / scale
        whole = _WholeTail(z_apart)
        tails = _PrefixTails(z_apart, int(min_tail_points), whole)
        tail_points = tails.points
        z_apart = _apart_from_before(y, z_apart, scale, ex.point_threshold(tested, alpha / 2, math.inf))
    return _Budget(alpha, first, tested, whole, huge_ratio, np.full(n, np.nan), np.zeros(n, dtype=np.intp), z_apart,
                   apart_points, tails, tail_points)


def _apart_from_before(y: np.ndarray, z: np.ndarray, scale: np.ndarray, least: float) -> np.ndarray:
    """`z` (a point's residual from the median of its neighbours, in sds), where it reaches `least` (the
    lowest bar any point is held to) no higher than the point's height above the median of the neighbours
    before it alone.  At a level step the median of the eight neighbours lies halfway between the two
    levels: the last point before a drop (a loss that fell to exactly 0) stood half the drop above it
    without having jumped from anywhere.  A spike, and a level shift up, jumped from the points before it.
    Never higher than `z`, so the run's budget holds; the tail is still fitted on the residuals themselves."""
    out = z.copy()
    k = ex.NEIGHBOURS
    past = np.flatnonzero(z >= least)                      # a few points: those past the lowest bar
    for i in past[past >= k].tolist():                     # one with fewer than k points before keeps its z
        out[i] = min(z[i], (y[i] - st.median(y[i - k:i])) / scale[i])
    return out


class _WholeTail:
    """fit_tail of a whole curve's residuals, fitted when first asked for (a healthy long curve whose points
    all stay under the lowest bar never needs it); whether it reads one (`readable`) is known at once."""

    def __init__(self, z: np.ndarray):
        self._z, self._tail, self._fitted = z, None, False
        self.readable = ex.tail_readable(z)

    def get(self) -> ex.Tail | None:
        if not self._fitted:
            self._tail, self._fitted = ex.fit_tail(self._z), True
        return self._tail


class _PrefixTails:
    """Each point's tail (the heaviest its 80% interval allows, `dof_low`) and the points it was read on: the
    longest of _TAIL_PREFIXES prefixes (quarters of the curve, at least _MIN_PREFIX_POINTS) that ends before the
    point's neighbourhood (its residual's eight neighbours: the point itself never shapes it); points before
    the first prefix's end take the first.  The prefixes are fixed by the curve's length, not by where its
    large points are (a prefix chosen to end before the first large point would be one without them: a
    tail read too light).  `whole`: the tail of the whole curve (the last prefix), fitted once.  A prefix's
    tail is fitted the first time a point it holds is asked about (a fit of 10,000 residuals costs 25 ms on a
    million-point curve, and a healthy run asks about few points or none)."""

    def __init__(self, z: np.ndarray, min_points: int, whole: _WholeTail):
        n = len(z)
        self._z, self._whole = z, whole
        self._ends = sorted({min(max(min_points, _MIN_PREFIX_POINTS, n * k // _TAIL_PREFIXES), n)
                             for k in range(1, _TAIL_PREFIXES + 1)})
        self._at = np.maximum(np.searchsorted(self._ends, np.arange(n) - ex.NEIGHBOURS, side="right") - 1, 0)
        self._dofs = np.full(len(self._ends), np.nan)        # NaN: not fitted yet
        self.points = np.asarray(self._ends, dtype=np.intp)[self._at]

    def _fit(self, k: int) -> float:
        if np.isnan(self._dofs[k]):
            e = self._ends[k]
            t = self._whole.get() if e == len(self._z) else ex.fit_tail(self._z[:e])
            if t is None:                   # a prefix too short to read takes the whole curve's
                t = self._whole.get()
            self._dofs[k] = t.dof_low if t is not None else math.inf
        return float(self._dofs[k])

    def dof_at(self, i: np.ndarray) -> np.ndarray:
        """The tails of the points `i`."""
        at = self._at[np.asarray(i, dtype=np.intp)]
        for k in _distinct(np.sort(at)).tolist():
            self._fit(k)
        return self._dofs[at]

    def lightest(self) -> float:
        """The lightest tail any point is held to (the prefixes every point's index reaches, all fitted)."""
        if not len(self._at):
            return math.inf
        return max(self._fit(k) for k in range(int(self._at[0]), int(self._at[-1]) + 1))


def _block_scale(resid: np.ndarray, floor) -> tuple[np.ndarray, np.ndarray]:
    """Each point's local robust sd of `resid` (its block of _SCALE_BLOCK points, at least `floor(least)`, a
    floor that may be told the least of those sds) and how many finite points that sd was read from.  The
    same numbers as ex.local_scale with that floor: its sds are the larger of the block's and the floor."""
    raw = ex.local_scale(resid, _SCALE_BLOCK, floor=0.0)
    scale = np.maximum(raw, floor(float(np.min(raw)) if len(raw) else math.inf))
    edges = np.asarray(ex.block_edges(len(resid), _SCALE_BLOCK))
    if len(resid) == 0:
        return scale, np.zeros(0, dtype=np.intp)
    finite = np.add.reduceat(np.isfinite(resid).astype(np.intp), edges[:-1])
    return scale, np.repeat(finite, np.diff(edges))


class _Quantum:
    """A curve's logged quantum (st.logged_quantum: a sort of the whole curve), read only where it can decide
    something: a floor of the larger of it and `base` is `base` alone wherever a bound on it (the least gap of
    the curve's first points) is no larger."""

    def __init__(self, x: np.ndarray):
        self._x = x

    @functools.cached_property
    def exact(self) -> float:
        return st.logged_quantum(self._x)

    @functools.cached_property
    def _bound(self) -> float:
        return st.logged_quantum_bound(self._x)

    def floor(self, base: float, least: float = -math.inf) -> float:
        """A floor f with max(r, f) = max(r, quantum, base) for every r >= `least` (f = max(quantum, base) for
        the default): `base` where the quantum cannot exceed max(least, base)."""
        return base if self._bound <= max(least, base) else max(self.exact, base)


def _tiny(y: np.ndarray) -> float:
    """A scale under which differences are rounding: 1e-9 of the curve's size."""
    return 1e-9 * float(np.max(np.abs(y))) + 1e-300 if len(y) else 1e-300


def _quiet_note(v: Curve, y: np.ndarray, points: np.ndarray, level: np.ndarray, level_said: Callable[[int], str],
                budget: _Budget, recover_points: int, back_under: np.ndarray) -> Quiet | None:
    """Jumps past the size bar, each back at its level within `recover_points` points, that the run's noise
    makes as often as the budget allows: a note (None where one of them was not absorbed: no note for it)."""
    absorbed = [a for a, _, back in _recovered(y, points, recover_points, back_under) if back is True]
    if not absorbed:
        return None
    i = max(absorbed, key=lambda j: v.values[j] / level[j] if level[j] > 0 else 0.0)
    ratio = v.values[i] / level[i] if level[i] > 0 else math.inf
    more = f" (and {len(absorbed) - 1} more)" if len(absorbed) > 1 else ""
    said = f"{v.key} {v.values[i]:.4g} at step {int(v.steps[i])}, {ratio:.1f}x {level_said(i)}{more}"
    if not budget.has_tail:
        return Quiet(f"{said}, back within {recover_points} points: {budget.text(i)}, so a smaller one the run came "
                     "back from is not told from its noise")
    return Quiet(f"{said}, back within {recover_points} points: {budget.text(i)}; this run's noise makes such a "
                 f"jump (implied false alarms: {budget.rate_per_10k():.2g} per 10,000 points)")


def _spikes_vs_recent(x: np.ndarray, window: int, min_ratio: float, budget_of, log_scale: bool, recover: int,
                      quantum_of, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Budget | None]:
    """Which points spike against the median of the `window` points before them (all points so far until
    a full window has passed): past the run's bar (`budget`) in robust sds of those points and, on the log
    scale, by `min_ratio` x that median (a short run's bar: `budget.huge` x, or `min_ratio` x held by the
    `recover` points from it on: a level shift).  Returns the spikes, the
    recent median and sd (NaN where not read), and the points past the size bar only (notes).  The sd is
    never under a floor (the run's point-to-point noise, the log's printed step), so the exact median and
    MAD (O(window) each) are computed only where a cheap lower bound of the median leaves a large enough
    jump possible; budget.z is filled there.  The budget (`budget_of()`, returned too) and the logged quantum
    (`quantum_of()`) are read only where needed: on the log scale, not where no point is min_ratio x the
    lower bound of its recent median (then None is returned for it); points before `first` are not tested."""
    n = len(x)
    med, sd, spike = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    none = np.zeros(0, dtype=np.intp)
    if log_scale:
        least = math.log(min_ratio)                  # spikes and notes alike are at least min_ratio x
        lower = st.recent_median_floor(x, window)
        maybe = np.flatnonzero(x - lower >= least)
        maybe = maybe[maybe >= first]
        if not len(maybe):
            return spike, med, sd, none, None
    budget = budget_of()
    # a history that is flat to the logged precision (a GRPO loss printed as 0.0000 for 30 steps) has a
    # MAD of 0; the run's own point-to-point noise is the floor, so 0.0001 is not a spike ...
    noise = st.noise_sd(x)
    # ... and a loss printed to 4 decimals moves in steps of 0.0001 (`quantum`): one printed step is the least
    # noise
    quantum = quantum_of()
    floor = quantum.floor(max(noise, _tiny(x)))
    if not log_scale:
        if not budget.has_tail:
            return spike, med, sd, none, budget      # a short curve off the log scale: no huge jump defined
        # under the Gaussian tail's bar no point passes its own (a heavier tail's bar is higher: the t quantile's
        # ratio to its quartile falls with the dof, as van Zwet's s-ordering of the t family has it; checked on
        # DOF_GRID in tests/test_stats_extremes.py), so the candidates are picked without fitting a prefix's
        # tail; those picked are then held to their own
        least = min(budget.bar(window, math.inf), budget.bar(_SCALE_BLOCK, math.inf)) * floor
        lower = st.recent_median_floor(x, window)
        maybe = np.flatnonzero(x - lower >= least)
        # the neighbour reading is not bounded by the recent median's: a point past its bar is read too
        apart = np.flatnonzero(budget.z_apart >= budget.bars(budget.apart_points, math.inf))
        apart = apart[budget.z_apart[apart] >= budget.bars(budget.apart_points[apart], budget.dof_at(apart))]
        maybe = _distinct(np.sort(np.concatenate([maybe, apart]))).astype(np.intp)
        maybe = maybe[maybe >= budget.first]
        if not len(maybe):
            return spike, med, sd, none, budget
    m, d = st.recent_median_mad(x, window, maybe)
    d = np.maximum(d, floor)
    jump = x[maybe] - m
    budget.z[maybe] = jump / (d * _wander_factor(x, window, floor))
    budget.z_points[maybe] = np.minimum(maybe, window)          # the points the recent median and sd were read from
    large = jump >= least if log_scale else np.ones(len(maybe), dtype=bool)
    if budget.has_tail:
        sure = budget.sure(maybe)
    else:
        held = np.array([bool(np.all(x[i:i + recover] - mi >= least)) and i + recover <= n
                         for i, mi in zip(maybe.tolist(), m.tolist())])
        sure = (jump >= math.log(budget.huge)) | held
    # a spike needs a baseline: against a recent median of exactly 0 (a GRPO loss or grad norm of 0 while
    # every group is equal: layer 1's consequence) any value is an "infinite" jump (issue 25)
    ok = np.isfinite(m) & (log_scale | (m != 0))
    spike[maybe] = large & sure & ok
    med[maybe], sd[maybe] = m, d
    if not log_scale:
        local = max(_MIN_LOCAL_POINTS, int(_LOCAL_SHARE * window))
        bar = budget.bar(window, budget.tail.dof_low) if budget.has_tail else math.inf
        _drop_climbs_from_zero(x, spike, med, sd, bar, local, lambda: _UNRESOLVED_STEPS * quantum.exact)
    notes = maybe[large & ~sure & ok] if log_scale else none
    return spike, med, sd, notes, budget


def _distinct(sorted_ints: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array (np.unique imports numpy.ma: a cold start's cost)."""
    return sorted_ints[np.concatenate([[True], np.diff(sorted_ints) > 0])] if len(sorted_ints) else sorted_ints


def _wander_factor(x: np.ndarray, window: int, floor: float) -> float:
    """How much further a point typically lies from the median of the `window` points before it than that
    window's own sd says (1 where no further): the median over the curve of |jump| / sd, over its value for
    independent noise (0.6745).  A noise that wanders (AR(1) phi 0.99) leaves a window's points closer to each
    other than to the points that follow it; a median over the whole curve is not moved by the few jumps being
    tested.  Read on at most _MAX_JUMP_POINTS points (a stride through longer curves: cost only)."""
    n = len(x)
    if n <= _FIRST_TESTED + 1:
        return 1.0
    at = np.arange(_FIRST_TESTED, n) if n - _FIRST_TESTED <= _MAX_JUMP_POINTS else \
        _distinct(np.linspace(_FIRST_TESTED, n - 1, _MAX_JUMP_POINTS).astype(np.intp))
    med, sd = st.recent_median_mad(x, window, at)
    ratio = np.abs(x[at] - med) / np.maximum(sd, floor)
    return max(float(st.median(ratio[np.isfinite(ratio)])) / _HALF_NORMAL_MEDIAN, 1.0) if len(at) else 1.0


def _drop_climbs_from_zero(x: np.ndarray, spike: np.ndarray, med: np.ndarray, sd: np.ndarray,
                           min_jump_sd: float, local: int, unresolved_of) -> None:
    """Clear, in place, each run of consecutive spike points that starts against a recent level at or
    under `unresolved_of()` (0 to the log's precision) and whose first point does not also stand
    `min_jump_sd` sds (the larger of the window's and the `local` points' own) above the median of the
    `local` points before it: a curve climbing from 0 that left the window's zeros behind, not a spike.
    A jump from 0 that stands above its last points too stays, however long it then stays up."""
    first = np.flatnonzero(spike & ~np.concatenate([[False], spike[:-1]]))
    if not len(first):
        return
    first = first[np.abs(med[first]) <= unresolved_of()]
    if not len(first):
        return
    now, now_sd = st.recent_median_mad(x, local, first)
    for i in first[~(x[first] - now >= min_jump_sd * np.maximum(now_sd, sd[first]))]:
        end = i + int(np.argmin(spike[i:])) if not spike[i:].all() else len(spike)
        spike[i:end] = False


def _log_scale_loss(values: np.ndarray, *, short_supervised: bool = False) -> bool:
    """A loss read on the log scale: every value positive and its level far above its point-to-point noise
    (a cross-entropy: a spike is a multiple of it), or, `short_supervised` (a run without a reward, too few
    points to read the noise's tail), every value positive: a cross-entropy however much it scatters, whose
    jump by orders of magnitude is one (a 25-point loss scattering by 30% that jumped 125x was not judged).
    A policy-gradient loss near 0, or one that crosses 0, is read on its own scale."""
    if not len(values) or float(np.min(values)) <= 0:
        return False
    return short_supervised or float(st.median(values)) > 10.0 * max(st.noise_sd(values), _tiny(values))


def spike_vs_recent(values: Curve, reward: Curve | None = None, *, window_steps, min_ratio, run_alpha,
                    huge_ratio, min_tail_points, isolated_max_count, isolated_window_steps, recover_steps,
                    recover_sd) -> Evidence | NotJudged | Quiet | None:
    """A point of `values` jumps far above the median of the points in the `window_steps` steps before it:
    further, in robust sds, than a healthy run of as many points with this run's own noise tail shows
    anywhere with chance `run_alpha` (the per-run false-alarm budget, stats/extremes.py), and, for a
    positive loss (read on the log scale: a cross-entropy), at least `min_ratio` x that level.  A curve of
    fewer than `min_tail_points` points has no tail to read: there a jump counts when it is `huge_ratio` x
    its level or more, or `min_ratio` x held by the points of the next `recover_steps` steps (a level shift).
    Consecutive spike points are one episode; the run came back from it when, within `recover_steps` steps,
    the median of the points after it (or 3 in a row) is back within `recover_sd` sds of the level.
    Episodes the run came back from only warn (said to repeat when more than `isolated_max_count` fall
    within `isolated_window_steps` steps); one it did not come back from fails.  Jumps past `min_ratio` that
    the run absorbed and its noise makes as often as the budget allows are a note.  In an RL run (a
    `reward` is logged) a loss near 0 is a policy-gradient loss: bursts it comes back from are not
    reported, and one in the log's last points leaves the rule undecided.

    Against a level that is 0 to the log's precision, a run of spike points whose first point does not also
    stand that far above the last few points is a climb from 0, not a spike (_drop_climbs_from_zero).
    Without a reward the loss is a cross-entropy, however low and noisy, and every spike counts."""
    v = values.finite()
    log_scale = _log_scale_loss(v.values, short_supervised=reward is None and len(v.values) < min_tail_points)
    if len(v.values) <= _FIRST_TESTED and not (log_scale and len(v.values) > _MIN_HUGE_BASELINE):
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; 11 are needed to know its level")
    x = np.log(v.values) if log_scale else v.values
    first = _FIRST_TESTED if len(x) >= min_tail_points else _MIN_HUGE_BASELINE
    window = v.points_for(window_steps, 10)
    recover = v.points_for(recover_steps, _MIN_RECOVER_POINTS)
    quantum_of = functools.cache(lambda: _Quantum(x))
    budget_of = functools.cache(lambda: _budget(x, first, run_alpha, huge_ratio, min_tail_points, quantum_of()))
    spike, med, sd, notes, budget = _spikes_vs_recent(x, window, min_ratio, budget_of, log_scale, recover,
                                                      quantum_of, first)
    level = np.exp(med) if log_scale else med
    if not spike.any():
        if not log_scale and not budget.has_tail:
            return NotJudged(f"{v.signal} has {len(v.values)} finite points, too few ({min_tail_points:g}) to read its "
                             "noise's tail, and no level to read a huge jump against (it lies near 0, or scatters "
                             "by more than a tenth of its level)")
        if len(v.values) <= _FIRST_TESTED:
            return NotJudged(f"{v.signal} has {len(v.values)} finite points and no jump of {huge_ratio:g}x its level;"
                             f" {_FIRST_TESTED + 1} are needed to judge smaller ones")
        if not len(notes) or reward is not None:
            return None
        return _quiet_note(v, x, notes, level, lambda i: f"its recent level {level[i]:.3g}", budget, recover,
                           med + recover_sd * sd)
    episodes = _recovered(x, np.flatnonzero(spike), recover, med + recover_sd * sd)
    # the seed's 10x reads a loss with a positive level (cross-entropy).  A policy-gradient loss that
    # hovers at 0 has no such scale and bursts with the batch's KL: a burst it comes back from is not a
    # finding (healthy TRL GRPO runs show several), one it does not come back from is.
    # "hovers at 0" = a level under 10 robust sds: a cross-entropy loss sits 20-100+ sds above 0, a
    # KL-dominated GRPO loss (0.002 +- 0.001) 2-3 sds
    cross_entropy_like = log_scale | (med > 10.0 * sd) | (reward is None)
    # a burst the finite points end after did not come back where a NaN or Inf follows it: it blew up
    blew_up_after = values.steps[~np.isfinite(values.values)]
    episodes = [(a, e, False if back is None and (blew_up_after > v.steps[e]).any() else back)
                for a, e, back in episodes]
    reported = [(a, e, back) for a, e, back in episodes if cross_entropy_like[a] or back is False]
    if reported:
        return _spike_evidence(v, reported, level, "recent", recover, isolated_max_count, isolated_window_steps,
                               budget)
    # a burst of such a loss in the log's last points: whether the run comes back from it is not known
    # yet (a live log read at 30% of a healthy Unsloth GRPO run ended one point after a 13x burst)
    pending = [a for a, _, back in episodes if back is None]
    if pending:
        i = pending[-1]
        return NotJudged(f"{v.signal} {v.values[i]:.4g} at step {int(v.steps[i])}, "
                         f"{len(v.values) - 1 - i} point(s) before the log ends: whether the run comes back "
                         "from this burst is not known yet", undecided=True)
    return None


def _typical_before(values: np.ndarray, first: int) -> np.ndarray:
    """Each point's typical level so far: the median of the points before it, read at _TYPICAL_CHECKPOINTS
    prefixes from index `first` on (each point takes the last one at or before it; a prefix longer than
    _TYPICAL_POINTS is read on a stride through it: cost bound).  The spike rules floor a collapsed recent
    level at a share of it: of the whole run's median, a level the run shifted to for most of its length
    raised the floor past the jump that began it (a grad norm x50 that stays: no spike)."""
    n = len(values)
    out = np.full(n, np.nan)
    marks = sorted({int(a) for a in np.linspace(max(first, 1), n, _TYPICAL_CHECKPOINTS + 1) if a < n})
    for a, b in zip(marks, [*marks[1:], n]):
        out[a:b] = float(st.median(values[:a:max(1, a // _TYPICAL_POINTS)]))
    return out


def spike_vs_ema(values: Curve, *, ratio_vs_ema, run_alpha, huge_ratio, min_tail_points, ema_span_steps,
                 isolated_max_count, isolated_window_steps, recover_steps, recover_ratio,
                 min_level_of_median) -> Evidence | NotJudged | Quiet | None:
    """A point of `values` (a grad norm) exceeds `ratio_vs_ema` x the EMA (span `ema_span_steps` steps) of the
    points before it, and its jump over the EMA of their logs (a grad norm is read on the log scale) stands
    further out, in robust sds, than a healthy run of as many points with this run's own noise tail shows anywhere
    with chance `run_alpha` (the per-run false-alarm budget, stats/extremes.py).  A curve of fewer than
    `min_tail_points` points has no tail to read: there a jump counts when it is `huge_ratio` x the EMA or
    more, or `ratio_vs_ema` x held by the points of the next `recover_steps` steps (a level shift). The EMA is
    floored at `min_level_of_median` x the run's typical level so far (the median of the points before), so a step
    back to normal after steps of near-zero gradient is no spike (exact zeros are left out). Spikes the run came
    back from (the median of the points within `recover_steps` steps after it, or 3 in a row, under `recover_ratio`
    x the EMA) only warn, said to repeat when more than `isolated_max_count` fall within `isolated_window_steps`
    steps; one it did not come back from fails. Jumps past `ratio_vs_ema` that the run absorbed and its noise makes
    as often as the budget allows are a note.

    Seed 002's second condition, an absolute 5.0, is an example for one model size and would hide a small
    model's 0.3 -> 4.5; the budget takes its place."""
    v = values.finite()
    positive = v.values > 0
    if not positive.all():
        # a grad norm of exactly 0 (every group's rewards equal, a skipped step) is no point on the log scale:
        # the spike test reads the others (L3.frozen-updates reads the zeros)
        v = Curve(v.signal, v.key, v.steps[positive], v.values[positive])
    n = len(v.values)
    if n <= _MIN_HUGE_BASELINE:
        return NotJudged(f"{v.signal} has {n} finite positive points; {_MIN_HUGE_BASELINE + 1} are needed to read "
                         f"a huge jump, {_FIRST_TESTED + 1} any other")
    span = v.points_for(ema_span_steps, 2)
    first = _FIRST_TESTED if n >= min_tail_points else _MIN_HUGE_BASELINE
    # how large is seed 002's: a multiple of the EMA of the values (an arithmetic EMA follows a burst up faster
    # than one of the logs, so a burst's later points are read against it: BLOOM-176B's 2.4 -> 960 -> 650 over 7
    # steps, back to 0.27, is one absorbed episode of 4 points, not a 7-point level shift)
    typical = _typical_before(v.values, first)
    ema_itself, floor_level = st.ema_before(v.values, span), min_level_of_median * typical
    level = np.fmax(ema_itself, floor_level)

    def level_said(i: int) -> str:
        """The level a point is read against: its EMA, or the floor where the EMA had sunk under it."""
        if ema_itself[i] >= floor_level[i] or np.isnan(floor_level[i]):
            return f"its EMA {level[i]:.3g}"
        return (f"its EMA's floor {level[i]:.3g} ({min_level_of_median:g}x its median so far; the EMA was "
                f"{ema_itself[i]:.3g})")
    everywhere = np.arange(n)
    tested = everywhere >= first
    large = (v.values > ratio_vs_ema * level) & tested
    if not large.any():
        # no point is large enough to be a spike or a note, however sure: the budget (the run's noise tail, its
        # scales: most of this rule's time on a long healthy run) would decide nothing
        return _no_spike(v, n, huge_ratio)
    y = np.log(v.values)
    floor = math.log(min_level_of_median) + np.log(typical) if min_level_of_median > 0 else -math.inf
    ema = np.fmax(st.ema_before(y, span), floor)
    jump = y - ema
    quantum = _Quantum(y)
    budget = _budget(y, first, run_alpha, huge_ratio, min_tail_points, quantum)
    base = max(st.noise_sd(y), _tiny(y))
    scale, budget.z_points[:] = _block_scale(jump, lambda least: quantum.floor(base, least))
    budget.z[:] = jump / scale
    recover = v.points_for(recover_steps, _MIN_RECOVER_POINTS)
    at = np.flatnonzero(large)                       # sure is read only where a point is large enough to count
    sure = np.zeros(n, dtype=bool)
    sure[at] = budget.sure(at) if budget.has_tail else \
        ((v.values >= huge_ratio * level) | _held(y, np.log(level), math.log(ratio_vs_ema), recover))[at]
    spike = large & sure
    if not spike.any():
        if n <= _FIRST_TESTED:
            return _no_spike(v, n, huge_ratio)
        notes = np.flatnonzero(large & ~sure)
        return _quiet_note(v, v.values, notes, level, level_said, budget, recover, recover_ratio * level) \
            if len(notes) else None
    episodes = _recovered(v.values, np.flatnonzero(spike), recover, recover_ratio * level)
    return _spike_evidence(v, episodes, level, "ema", recover, isolated_max_count, isolated_window_steps, budget,
                           level_said=level_said(episodes[0][0]))


def _no_spike(v: Curve, n: int, huge_ratio: float) -> NotJudged | None:
    """spike_vs_ema's answer where no point spikes: too few points to judge more than a huge jump, or None."""
    if n <= _FIRST_TESTED:
        return NotJudged(f"{v.signal} has {n} finite points and no jump of {huge_ratio:g}x its EMA; "
                         f"{_FIRST_TESTED + 1} are needed to judge smaller ones")
    return None


def _held(y: np.ndarray, level: np.ndarray, size: float, points: int) -> np.ndarray:
    """Points that jump `size` (on y's scale) over their level with the `points` - 1 points after them all
    still that far over the same level: a level shift of several points at once, each past the size bar.  On
    a curve too short to read its noise's tail, that is evidence a single point of the same size is not."""
    n = len(y)
    out = np.zeros(n, dtype=bool)
    if n < points:
        return out
    over = np.stack([y[k:n - points + 1 + k] - level[:n - points + 1] >= size for k in range(points)])
    out[:n - points + 1] = over.all(axis=0) & np.isfinite(level[:n - points + 1])
    return out


def _ema_spikes(v: Curve, ratio_vs_ema: float, min_jump_sd: float, ema_span_steps: float,
                min_level_of_median: float) -> tuple[np.ndarray, np.ndarray]:
    """Which points of a finite curve spike against the (floored) EMA of the points before them, and
    that EMA."""
    span = v.points_for(ema_span_steps, 2)
    ema = np.fmax(st.ema_before(v.values, span), min_level_of_median * _typical_before(v.values, 1))
    large = v.values > ratio_vs_ema * ema
    if not large.any():
        return large, ema       # none is large: the noise (two selections over the curve) would decide nothing
    noise = max(st.noise_sd(v.values), 1e-12)
    # the EMA must be positive: steps of exactly 0 gradient (all groups equal) are no baseline to spike from
    return large & (v.values - ema >= min_jump_sd * noise) & np.isfinite(ema) & (ema > 0), ema


def rising_trend_before_event(values: Curve, loss: Curve | None = None, *, rise_ratio, baseline_frac,
                              min_lead_steps, ratio_vs_ema, min_jump_sd, ema_span_steps,
                              min_level_of_median) -> Evidence | NotJudged | None:
    """Before an event (the first NaN/Inf in `values` or `loss`, else the first spike of `values`: over
    `ratio_vs_ema` x its EMA of span `ema_span_steps` steps, floored at `min_level_of_median` x its median so
    far, and `min_jump_sd` noise sds above it), the running median of `values` held at or above `rise_ratio` x its
    baseline (the first `baseline_frac` of the steps before the event) over its last `min_lead_steps` steps or
    more, trending up: a precursor, and the evidence says how many steps ahead the climb showed."""
    event = None
    for curve in (values, loss):
        if curve is not None and (~np.isfinite(curve.values)).any():
            step = int(curve.steps[np.argmax(~np.isfinite(curve.values))])
            event = step if event is None else min(event, step)
    v = values.finite()
    if len(v.values) <= 10:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; 11 are needed")
    if event is None:
        spike, _ = _ema_spikes(v, ratio_vs_ema, min_jump_sd, ema_span_steps, min_level_of_median)
        event = int(v.steps[np.argmax(spike)]) if spike.any() else None
    if event is None:
        return None
    before = v.steps < event
    steps, vals = v.steps[before], v.values[before]
    if len(vals) < 10:
        return NotJudged(f"{v.signal} has {len(vals)} points before the event at step {event}; 10 are needed "
                         "to see a climb")
    baseline = st.edge_level_by_steps(steps, vals, baseline_frac, min_points=5)
    smooth = st.rolling_median(vals, 5)
    above = smooth >= rise_ratio * max(baseline, 1e-12)
    if not above[-1]:
        return None
    below = np.flatnonzero(~above)
    start = int(below[-1]) + 1 if len(below) else 0     # where the final stretch above began
    lead = int(event - steps[start])
    if lead < min_lead_steps or st.theil_sen_slope(steps[start:], vals[start:]) <= 0:
        return None
    return Evidence(int(steps[start]), int(event), {
        "signal": v.signal, "key": v.key, "lead": lead, "event_step": int(event),
        "baseline": baseline, "before_event": float(vals[-1]), "rise": float(vals[-1] / baseline)
        if baseline > 0 else math.inf})
