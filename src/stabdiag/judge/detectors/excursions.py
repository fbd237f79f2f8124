"""Departures that last: a loss that climbs back from its best (and holds: a divergence; or recovers: an
excursion), and a grad norm that leaves its level for a stretch and comes back (issue 44 items 1 and 2).

One reading for all of them.  The curve is smoothed over half the shortest stretch that counts (a running
median; long curves on block means), and each point's departure is read against a reference level read on a
wider running median (2% of the curve: the lowest of many short medians is a noise minimum): for a loss its
running best (the lowest such level so far), for a grad norm the median level of the stretch before the
departure began (on the log scale: a ratio).  A departure clears the bar where it is at least a declared share
of the way the loss came down (its start level minus its best: scale-free and offset-free), or a declared
multiple for a grad norm, and at least `min_sd` sds of the noise the curve had shown until then (the larger of
its point-to-point scatter and its spread around a running median of _SPREAD_POINTS: a wander of AR(0.9) noise
moves a point 3x further than its steps); it counts when it stays over the bar for the shortest stretch, in
steps (cadence-free), and it is over when the curve is back within half the bar.  Whether it is sure is one
three-way decision (stats/change.py) on its size against the reference's mean (read before the rise began) - a
finding when the interval clears 0 and the estimate clears the bar, clean when the interval's upper end is
under it, else too noisy to tell.  A finding is the largest of the departures the curve could have shown,
against the lowest of its levels so far: its interval is held to the rule's chance spread over both choices
(_scan_z), with the degrees of freedom of its standard error; a clean reading, one reading's claim, is held to
the rule's own; and a departure one point of the curve's own noise tail could make (a mean of L points past x
on one point past L x, under a Student-t fitted to the residuals outside the departures) is too noisy to
tell (_OnePoint).  A departure that lasts to the log's end (or to a NaN, where the run is cut) did not recover:
its size is the mean of its points, with a standard error from each side's own noise (the departure's at
least the noise before it).  One that recovered held
a level for a stretch: where its bar is the declared size (not the noise's multiple), its size is the mean of
the stretch it held over the bar, under the noise the curve had shown before it (_held_reading).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ... import _stats as st
from ..stats import extremes as ex
from ..stats.change import CLEAN, FINDING, UNDECIDED, Reading
from ..stats.evidence import family_z, sidak_tail
from ..stats.noise import (
    MAX_POINTS,
    Noise,
    block_means,
    estimate_noise,
    finite_values,
    memory_readable,
    second_differences,
)
from ._base import Curve, Evidence, NotJudged

_MIN_REFERENCE_POINTS = 3     # the start level and a level before a departure are medians of at least this many
_REFERENCE_SHARE = 0.02       # a reference level is a running median over 2% of the curve ...
_MAX_REFERENCE_POINTS = 1001  # ... at most this many points (cost bound)
_BACK_SHARE = 0.5             # back: within half the bar of the reference again
_NOISE_GRID = 16              # prefixes the running noise is read on (cost bound)
_MIN_NOISE_POINTS = 8         # a side of a departure with fewer points takes the whole curve's noise
_SPREAD_POINTS = 25          # a curve's spread is read around its running median over this many points (at least)
_SHARE_SAID = 3.0             # a climb past 3x the way the loss came down is said as past its start, not a share


@dataclass(frozen=True, slots=True)
class _Departure:
    """One stretch a curve stayed over its bar, as indices of the points read (`at`: the step of each)."""

    start: int                  # first point over the bar
    end: int                    # last point over the bar
    reference: tuple[int, int]  # the points the reference level was read from (half-open)
    reading: Reading            # mean over [start, end] minus mean over the reference
    bar: float                  # the size it had to clear
    decision: str               # FINDING / CLEAN / UNDECIDED
    recovered: bool             # back under the bar before the log ends
    peak: int                   # the highest smoothed point
    onset: int = -1             # the date given: the bar's last crossing before the peak (-1: `start`)
    z: float = math.nan         # the sureness it was decided at (_scan_z), quoted with its interval

    @property
    def began(self) -> int:
        return self.start if self.onset < 0 else self.onset


@dataclass(frozen=True, slots=True)
class _Read:
    """A curve as the departure reading sees it: its points (block means for long curves) and steps, the
    smoothed curve, the reference level at each point, the bar there, its noise sd, and its departures."""

    steps: np.ndarray
    values: np.ndarray
    smooth: np.ndarray
    reference: np.ndarray
    bar: np.ndarray
    noise_sd: np.ndarray         # the point-to-point noise sd the curve had shown up to each point
    anchor: np.ndarray           # where each point's reference was read (the running best's index; -1: before)
    sure_z: float
    stretch_steps: float
    departures: list[_Departure]
    noise_barred: np.ndarray     # whether each point's bar is the noise's multiple (not a size): see _departure_reading
    quiet: np.ndarray            # the values with the sure departures the curve came back from left out (NaN)


def _points(curve: Curve) -> tuple[np.ndarray, np.ndarray]:
    """The curve's finite points, as block means (and each block's last step) when longer than MAX_POINTS."""
    v = curve.finite()
    values, block = block_means(v.values, MAX_POINTS)
    if block == 1:
        return v.steps, v.values
    return v.steps[block - 1::block][:len(values)], values


def _smoothing_points(steps: np.ndarray, stretch_steps: float) -> int:
    """Odd running-median width: half the shortest stretch, in points at the curve's cadence (at most a
    fifth of the curve)."""
    cadence = float(st.median(np.diff(steps))) if len(steps) > 1 else 1.0
    half = int(round(0.5 * stretch_steps / max(cadence, 1e-12)))
    return max(1, min(half, len(steps) // 5)) | 1


def _noise_so_far(values: np.ndarray, read=st.noise_sd, grid: int = _NOISE_GRID) -> np.ndarray:
    """At each point, `read` (by default the point-to-point noise sd, a robust sd of first differences /
    sqrt 2: blind to a trend, and to a few jumps) of the curve's points up to it, read on a grid of `grid`
    prefixes (each point takes the last prefix ending at or before it; the first prefix, at least 8 points,
    serves the points before it): a departure is measured against the noise the curve had shown until then,
    not against the noise of a divergence that came after (a loss at 4.0 +- 0.1, then 200-600)."""
    n = len(values)
    ends = np.linspace(min(8, n), n, grid).astype(np.intp)
    ends = ends[np.concatenate([[True], np.diff(ends) > 0])]      # np.unique imports numpy.ma
    sds = np.array([read(values[:e]) for e in ends.tolist()])
    at = np.searchsorted(ends, np.arange(1, n + 1), side="right") - 1
    return sds[np.maximum(at, 0)]


def _read(steps: np.ndarray, values: np.ndarray, *, stretch_steps: float, sure_z: float, min_sd: float,
          reference_of, bar_of, walk_when_short: bool = True) -> _Read:
    """Departures of a curve over `reference_of(smooth)`'s level by more than `bar_of(smooth, reference)` and
    `min_sd` noise sds (see the module docstring).  `reference_of` returns, per point, the reference level
    and the index of the point it was read at (the running best) or -1 (the stretch before).  Every
    departure is measured, the ones the curve came back from too, even for a rule that reads only the climb
    held to the end: the sure ones are left out of the noise a later departure is read against."""
    w = _smoothing_points(steps, stretch_steps)
    smooth = st.rolling_median(values, w) if w > 1 else values.astype(np.float64)
    wide = _reference_points(len(values), w)
    reference, anchor = reference_of(values, wide)
    sd = _noise_so_far(values)
    sized = bar_of(smooth, reference)
    # a noise that wanders (AR 0.9) steps little from point to point and strays far: a bar of its steps alone
    # read its wanders as departures (bench/calibrate.py flat_loss)
    spread = _noise_so_far(values - st.rolling_median(values, max(wide, _SPREAD_POINTS) | 1), st.robust_sd) \
        if len(values) > _SPREAD_POINTS else sd
    noise_bar = min_sd * np.maximum(sd, spread)
    bar = np.maximum(sized, noise_bar)
    # a bar set by the noise (a loss that never came down) rests its size on the noise reading alone: there
    # a short curve's unbounded memory is read as a walk (_departure_reading)
    noise_barred = walk_when_short & (sized <= noise_bar)
    over = (smooth - reference >= bar) & np.isfinite(reference) & (bar > 0)
    departures = []
    n = len(values)
    # a departure's noise is read on the points before it without the sure departures the curve came back
    # from: a 15-step excursion of 300 sds, read as noise, left a later climb of 30 sds too noisy to tell
    quiet = values.astype(np.float64, copy=True)
    episodes = _episodes(over, smooth, reference, bar)
    one_point = _OnePoint(values, episodes)
    for a, b in episodes:
        if steps[b] - steps[a] < stretch_steps:
            continue                    # too brief to be more than a spike (the spike rules read those)
        rise = _rise_start(values, reference[a], min(_BACK_SHARE * bar[a], min_sd * sd[a]), a)
        ref = _reference_window(anchor[a], rise, wide, n)
        recovered = b < n - 1
        held = _held_end(smooth, reference[a], bar[a], a, b)
        reading_held = (recovered and sized[a] > min_sd * sd[a] and steps[held] - steps[rise] >= stretch_steps
                        and rise >= _MIN_NOISE_POINTS)
        if reading_held:
            reading, dof = _held_reading(values, ref, (rise, held + 1), quiet), rise - 2.0
        else:
            reading, dof = _departure_reading(values, ref, (a, b + 1), bool(noise_barred[a]), quiet)
        peak = a + int(np.argmax(smooth[a:b + 1]))
        # dated where the smoothed curve last crossed the bar itself before its peak: a wobble over half the
        # bar in the steps before (noise the departure's extent has to tolerate) does not date it
        under = np.flatnonzero(smooth[a:peak + 1] - reference[a] < bar[a])
        onset = a + int(under[-1]) + 1 if len(under) else a
        length = (held + 1 - rise) if reading_held else (b + 1 - a)
        lowest_of = a if anchor[a] >= 0 else 0          # the points its reference was the lowest level of
        z = _scan_z(sure_z, n, length, lowest_of, wide, dof)
        decision = _decide(reading, float(bar[a]), z, sure_z)
        if decision == FINDING and reading.estimate < one_point.bar(length, _scan_tail(sure_z, n, length,
                                                                                        lowest_of, wide)):
            decision = UNDECIDED
        departures.append(_Departure(a, b, ref, reading, float(bar[a]), decision, recovered, peak, onset, z))
        if recovered and decision == FINDING:
            quiet[rise:b + 1] = np.nan
    return _Read(steps, values, smooth, reference, bar, sd, anchor, sure_z, stretch_steps, departures, noise_barred,
                 quiet)


def _scan_count(n: int, length: int, before: int, wide: int) -> int:
    """The departures of `length` points a curve of `n` could have shown: the n / length stretches of that
    length, and, read against the lowest level so far, the `before` / `wide` windows that level was the
    lowest of."""
    return max(int(math.ceil(n / max(length, 1)) * max(math.ceil(before / max(wide, 1)), 1)), 1)


def _scan_tail(sure_z: float, n: int, length: int, before: int = 0, wide: int = 1) -> float:
    """The one-sided chance each of the departures _scan_count counts may take (Sidak's correction), so that
    a run's chance of a false departure is `sure_z`'s, however long the run."""
    return sidak_tail(sure_z, _scan_count(n, length, before, wide))


def _scan_z(sure_z: float, n: int, length: int, before: int = 0, wide: int = 1, dof: float = math.inf) -> float:
    """The sureness a departure of `length` points needs on a curve of `n`: _scan_tail's chance, as a
    quantile of Student's t with the `dof` of its standard error (a noise read from 12 points is itself
    uncertain)."""
    count = _scan_count(n, length, before, wide)
    return ex.t_isf(sidak_tail(sure_z, count), max(dof, 1.0)) if math.isfinite(dof) else family_z(sure_z, count)


class _OnePoint:
    """How far a mean of L points can stand from its level on one point of the curve's noise alone: heavy
    tailed noise (Student-t 3) makes a mean of a few points large by one large point far more often than a
    normal tail says (the one-big-jump principle of subexponential sums: P(mean of L > x) ~ L P(point > L x)).
    The tail is the curve's own (stats/extremes.py, as the spike rules read it: residuals from the median of
    each point's neighbours, a Student-t fitted to the body, its heaviest allowed degrees of freedom), fitted
    when a departure is first found; a Gaussian tail (or one too short to read) bars nothing past the normal
    test."""

    def __init__(self, values: np.ndarray, episodes: list[tuple[int, int]]):
        self._values, self._episodes, self._read = values, episodes, None

    def _tail(self) -> tuple[float, float]:
        if self._read is None:
            resid = ex.neighbour_residuals(self._values)
            for a, b in self._episodes:      # the departures tested do not make the tail they are tested against
                resid[max(a - ex.NEIGHBOURS, 0):b + 1 + ex.NEIGHBOURS] = np.nan
            finite = resid[np.isfinite(resid)]
            scale = st.robust_sd(finite) if len(finite) >= ex.MIN_FIT_POINTS else 0.0
            tail = ex.fit_tail(resid / scale) if scale > 0 else None
            self._read = (scale, tail.dof_low if tail is not None else math.inf)
        return self._read

    def bar(self, length: int, chance: float) -> float:
        """The mean of `length` points that one point of the noise puts past its level with at most `chance`
        (one side): that point past `length` x the bar, each with chance / length."""
        scale, dof = self._tail()
        if not (scale > 0 and math.isfinite(dof) and chance > 0):
            return 0.0
        return scale * ex.point_threshold(length, chance, dof) / max(length, 1)


def _decide(reading: Reading, bar: float, scan_z: float, sure_z: float) -> str:
    """The three-way decision with each claim at its own sureness: a finding (a departure picked as the
    largest of many) at `scan_z`, clean (a departure of `bar` ruled out, one reading's claim) at `sure_z`."""
    return CLEAN if reading.high(sure_z) < bar else reading.decide(bar, scan_z)


def _rise_start(values: np.ndarray, reference: float, within: float, a: int) -> int:
    """Where the way up to a departure that clears its bar at `a` began: after the last point before `a`
    `within` of the reference (half the bar, or its noise part where that is less), so that no point of the
    rise is read as the reference level (the smoothed curve clears the bar a point or two after the raw
    curve left: a noise-free excursion of 0.3 of the descent read its reference 0.04 high on the two points
    of its jump)."""
    back = np.flatnonzero(values[:a] - reference < within)
    return int(back[-1]) + 1 if len(back) else a


def _held_end(smooth: np.ndarray, reference: float, bar: float, a: int, b: int) -> int:
    """The last point of the departure [a, b] whose smoothed level is still over the bar: the end of the
    stretch it held (its way back, down to half the bar, is part of its length but not of its height)."""
    over = np.flatnonzero(smooth[a:b + 1] - reference >= bar)
    return a + int(over[-1]) if len(over) else b


def _held_reading(values: np.ndarray, reference: tuple[int, int], held: tuple[int, int],
                  quiet: np.ndarray) -> Reading:
    """A recovered departure's size: the mean of the points it held over its bar (`held`, from where it left
    its level to where its smoothed curve last stood over the bar) minus the reference's, with the standard
    error of that contrast under the noise of the points before the departure.  Not the mean of the whole
    departure: a jump that decays as exp(-t / tau) averages under its bar over its way back however far over
    it it held (0 of 36 excursions of 0.3 of the descent were found so on bench/calibrate.py).  Nor under
    the departure's own noise: a few points of a smooth decay read their curvature as noise (a noise-free
    excursion was too noisy to tell), and the bar is set against the noise the curve had shown until then.

    Read so (by _read) only where 8 points or more precede it (a noise to read), the held stretch spans the
    shortest stretch that counts, and the bar is the declared size, not the noise's multiple: the stretch is
    chosen where the curve stood over its bar, so its mean is read high by the noise that put it there, by
    a share of the bar where the bar is a few noise sds (a grad norm 4x for 80 steps, log sd 0.6, read over
    its 6x noise bar on 2 of 20 draws); else the whole departure's mean is read."""
    a, b = held
    estimate = float(np.mean(values[a:b]) - np.mean(values[reference[0]:reference[1]]))
    before = finite_values(quiet[:a])
    var = _mean_variance(before, b - a) + _mean_variance(before, reference[1] - reference[0])
    return Reading(estimate, math.sqrt(var) if math.isfinite(var) else math.inf)


def _departure_reading(values: np.ndarray, reference: tuple[int, int], departure: tuple[int, int],
                       walk_when_short: bool, quiet: np.ndarray) -> tuple[Reading, float]:
    """The departure's mean minus the reference's, with a standard error from each side's own noise (a
    Welch-type contrast of two stretches, with its Welch-Satterthwaite degrees of freedom): the reference
    window's mean under the noise of the points before the departure, the departure's mean under the noise
    of its own points.  A loss that diverges is far
    noisier than before it (4.0 +- 0.1, then 200-600), and its edges (4 -> 546 in one step) are no noise of
    either side: one noise for the whole curve read both as a wander that bounds nothing.  Independent
    sides: neighbouring stretches of a positively correlated noise differ less than that, so the error is on
    the safe side."""
    a, b = departure
    estimate = float(np.mean(values[a:b]) - np.mean(values[reference[0]:reference[1]]))
    # a side too short to read a noise from (under 8 points) takes the whole curve's, its departure shifted
    # back: second differences of a few points of a descent read its curvature as noise (made once: both
    # sides and the walk reading may ask for it)
    @functools.cache
    def whole() -> np.ndarray:
        shifted = values.astype(np.float64, copy=True)
        shifted[a:b] -= estimate
        return shifted

    before = finite_values(quiet[:a])       # the points before it, its sure recovered departures left out
    sides = [(side if len(side) >= _MIN_NOISE_POINTS else whole(), width)
             for side, width in ((values[a:b], b - a), (before, reference[1] - reference[0]))]
    parts = [_mean_variance(side, width) for side, width in sides]
    # the departure's own noise where it is larger (a divergence is noisier), never less than the noise the
    # curve showed before it, at the departure's width: a dozen points of a slow wander read as a smooth
    # stretch with little noise and no memory (bench/calibrate.py flat_loss: L3.loss-excursion warned on
    # 7.5% of 200 runs, 5 of them AR(0.9) wanders of 9-13 points read against their own noise; 4.5% after)
    if len(before) >= _MIN_NOISE_POINTS:
        parts[0] = max(parts[0], _mean_variance(before, b - a))
    var = sum(parts)
    # too few points before it to bound their noise's memory (stats/noise.memory_readable): where the bar is
    # the noise's multiple (`walk_when_short`), the contrast is read as well under the longest memory those
    # points allow, a random walk with the curve's one-step semivariance (at least AR(1) noise's contrast at
    # any memory short of a walk's).  bench/calibrate.py flat_loss: L3.loss-divergence failed 1.5% of 200 runs
    # (seed 43) and 1.0% of 400 (seed 7), AR(0.5-0.9) wanders of 20-100 points; 0.5% and 0% after
    if walk_when_short and not memory_readable(a) and len(values) >= 3:
        # the walk's one-step semivariance from the second differences of the whole curve, the departure
        # shifted back (a quarter of their variance; a straight descent cancels in them, and its steps would
        # read as the walk's; a robust sd leaves out the departure's edges)
        y = whole()
        walk = Noise(st.robust_sd(second_differences(y)) ** 2 / 4.0, 1.0, len(y))
        var = max(var, walk.contrast_variance(len(values), reference, departure))
    return Reading(estimate, math.sqrt(var) if math.isfinite(var) else math.inf), \
        _satterthwaite(parts, [len(side) for side, _ in sides])


def _satterthwaite(parts: list[float], points: list[int]) -> float:
    """Welch-Satterthwaite's degrees of freedom of a sum of variances each read from its own points (as
    points - 2: a noise read from 10 points is itself uncertain); inf where the sum is 0 or unbounded."""
    total = sum(parts)
    if not (total > 0 and math.isfinite(total)):
        return math.inf
    spread = sum(v * v / max(k - 2.0, 1.0) for v, k in zip(parts, points))
    return total * total / spread if spread > 0 else math.inf


def _mean_variance(segment: np.ndarray, window: int) -> float:
    """The variance of the mean of `window` consecutive points of a stretch whose noise is read from
    `segment` (stats/noise.py, its best-supported memory; a random walk's is unbounded): sill - 2/W^2
    sum_k (W - k) D(k).  A segment under 8 points is read as independent noise from its second differences
    (blind to a straight mean, Hall, Kay & Titterington 1990); under 3 points it bounds nothing."""
    noise = estimate_noise(segment, cautious=False)
    if noise is not None and noise.block == 1:
        sill = noise.sill
        if not math.isfinite(sill):
            return math.inf
        k = np.arange(1, window, dtype=np.float64)
        return max(sill - 2.0 / window ** 2 * float(np.sum((window - k) * noise.semivariogram(k))), 0.0)
    if noise is not None:                     # read on block means: a mean of W points as one of W / block
        blocks = max(window // noise.block, 1)
        k = np.arange(1, blocks, dtype=np.float64)
        return max(noise.sill - 2.0 / blocks ** 2 * float(np.sum((blocks - k) * noise.semivariogram(k))), 0.0)
    if len(segment) < 3:
        return math.inf
    d2 = second_differences(segment)
    return float(np.mean(d2 * d2)) / 6.0 / window


def _episodes(over: np.ndarray, smooth: np.ndarray, reference: np.ndarray, bar: np.ndarray) -> list[tuple[int, int]]:
    """Each departure as (first, last index): it starts where the smoothed curve first clears its bar over
    the reference there, and lasts until it is back within half that bar of the reference *as it stood at
    the start* (a reference that trails the curve would catch up with a level that stays, and call it
    recovered; a level that sits just over the bar would cross it back and forth with its noise).  It is dated
    after the last point before its peak that was back so."""
    out = []
    i, n = 0, len(over)
    while i < n:
        starts = np.flatnonzero(over[i:])
        if not len(starts):
            break
        a = i + int(starts[0])
        under = np.flatnonzero(smooth[a:] - reference[a] < _BACK_SHARE * bar[a])
        b = max(a + int(under[0]) - 1 if len(under) else n - 1, a)
        # it began after the curve was last back (within half the bar) before its peak: a noise point over
        # the bar a few steps before the departure (3 sds is no rare event) must not date it, nor lengthen it
        peak = a + int(np.argmax(smooth[a:b + 1]))
        below = np.flatnonzero(smooth[a:peak + 1] - reference[a] < _BACK_SHARE * bar[a])
        out.append((a + int(below[-1]) + 1 if len(below) else a, b))
        i = b + 1
    return out


def _reference_window(anchor: int, start: int, w: int, n: int) -> tuple[int, int]:
    """The points a departure starting at `start` is read against: the `w` points around `anchor` (the
    running best), or (anchor -1) the `w` points (at least 3) before the departure, never reaching into it."""
    if anchor >= 0:
        lo, hi = max(anchor - w // 2, 0), min(anchor + w // 2 + 1, start)
        return (lo, hi) if hi > lo else (max(start - 1, 0), max(start, 1))
    width = max(w, _MIN_REFERENCE_POINTS)
    return max(start - width, 0), max(start, 1)


def _reference_points(n: int, w: int) -> int:
    """Odd width of the running median a reference level is read on: at least the departure's smoothing and
    _REFERENCE_SHARE of the curve (at most _MAX_REFERENCE_POINTS).  The lowest of many short medians is
    biased low by the noise (a flat loss's best of a 3-point median over 100k points sits 2 sds under its
    level, and every later stretch would have climbed back 2 sds); a wider one is a level."""
    return max(w, _MIN_REFERENCE_POINTS, min(int(round(_REFERENCE_SHARE * n)), _MAX_REFERENCE_POINTS)) | 1


def _running_best(values: np.ndarray, wide: int) -> tuple[np.ndarray, np.ndarray]:
    """The lowest level so far of the running median over `wide` points, and where it was reached."""
    smooth = st.rolling_median(values, wide) if wide > 1 else values.astype(np.float64)
    best = np.minimum.accumulate(smooth)
    idx = np.arange(len(smooth))
    at = np.maximum.accumulate(np.where(smooth <= best, idx, 0))
    return best, at


def _start_level(values: np.ndarray, w: int) -> float:
    """The level a loss came down from: the median of its first points (a window, never one point)."""
    return float(st.median(values[:max(w, _MIN_REFERENCE_POINTS)]))


def read_climbs(curve: Curve, *, min_share: float, min_sd: float, sure_z: float, stretch_steps: float,
                walk_when_short: bool = True) -> _Read:
    """A loss's climbs from its running best by `min_share` of the way it came down (its start level minus
    that best) and `min_sd` noise sds, lasting `stretch_steps` steps (or to the log's end);
    `walk_when_short` False: a short curve's climb over a noise-set bar is not read under a random walk as
    well (_departure_reading)."""
    steps, values = _points(curve)
    w = _smoothing_points(steps, stretch_steps)
    start = _start_level(values, w)

    def bar_of(smooth, best):
        return min_share * np.maximum(start - best, 0.0)

    return _read(steps, values, stretch_steps=stretch_steps, sure_z=sure_z, min_sd=min_sd,
                 reference_of=_running_best, bar_of=bar_of, walk_when_short=walk_when_short)


def climb_values(read: _Read, d: _Departure, curve: Curve) -> dict:
    """The numbers a climb's finding quotes: start level, best (and its step), the climb's mean level and
    peak, its share of the way the curve came down, in noise sds, its length in steps and its reading."""
    start = _start_level(read.values, _smoothing_points(read.steps, read.stretch_steps))
    best = float(np.mean(read.values[d.reference[0]:d.reference[1]]))
    level = best + d.reading.estimate
    descent = start - best
    share = d.reading.estimate / descent if descent > 0 else math.inf
    peak = float(read.smooth[d.peak])
    past = level > start
    return {"signal": curve.signal, "key": curve.key, "early": start, "best": best,
            "best_step": int(read.steps[d.reference[0] + (d.reference[1] - d.reference[0]) // 2]),
            "level": level, "peak": peak, "share": share, "share_text": _share_text(share, past, descent),
            "sds": _in_sds(d.reading.estimate, read.noise_sd[d.began]),
            "sds_text": _sds_text(d.reading.estimate, read.noise_sd[d.began], best),
            "stretch": int(read.steps[d.end] - read.steps[d.began]), "sure": d.reading.text(d.z),
            "onset": int(read.steps[d.began])}


def _in_sds(change: float, sd: float) -> float:
    return change / sd if sd > 0 else math.inf


def _sds_text(change: float, sd: float, level: float) -> str:
    """"89 noise sds"; where the curve had no noise before it (an sd under a billionth of its level: rounding,
    not scatter), "with no noise before it" instead of a quotient of rounding errors (4e15 noise sds)."""
    if not sd > 1e-9 * max(abs(level), 1e-300):
        return "with no noise before it"
    return f"{change / sd:.0f} noise sds"


def _share_text(share: float, past: bool, descent: float) -> str:
    """"40% of the way it came down"; "121% of the way it came down; diverged past its start"; for a loss
    that had hardly come down, "past its start (it had come down 0.2)"."""
    if not math.isfinite(share) or share > _SHARE_SAID:
        return f"past its start (it had come down {max(descent, 0.0):.3g})"
    return f"{share:.0%} of the way it came down" + ("; diverged past its start" if past else "")


_MIN_BEFORE_CLIMB = 5         # points before an RL loss's climb that its spread is read from (see climb_from_best)


def climb_from_best(values: Curve, reward: Curve | None = None, kl: Curve | None = None, *, min_share, min_sd,
                    sure_z, stretch_steps, min_points, huge_ratio) -> Evidence | NotJudged | None:
    """`values` (a loss) climbs back from its running best (the lowest level of its running median over half
    of `stretch_steps`) by at least `min_share` of the way it came down (the median of its first points
    minus that best) and `min_sd` sds of its own noise, and holds to the log's end for `stretch_steps` steps
    or more: the mean of its points there minus the mean at its best is sure (`sure_z` standard errors
    clear of 0, from the curve's own noise) and at least that large.  Said "diverged past its start" where it
    ends above where it began.  A positive loss that stays at `huge_ratio` x the lowest of its first three
    points or more for `stretch_steps` steps to the log's end diverged whatever its noise (one that blew up
    from its first logged step has no noise before the climb to measure it in, nor a way down).  A climb the
    data can neither confirm nor rule out is too noisy to tell; fewer than `min_points` points are not
    judged.  In an RL run (a `reward` is logged) the loss is a surrogate objective whose level grows with
    beta x KL in healthy runs and whose policy-gradient part moves with the batch: read only beside a logged
    `kl`, and a held climb counts only where it is larger than beta x KL can make it for any beta up to 1
    (the largest KL logged) and than `huge_ratio` sds of the loss's points before the climb (at least 5; the
    sd's upper confidence bound at `sure_z`, stats/extremes.sd_upper_bound)."""
    kl_bound = None
    if reward is not None:
        kl_values = kl.finite().values if kl is not None else np.array([])
        if not len(kl_values):
            return NotJudged("an RL run's loss is a surrogate objective (it grows with beta x KL in healthy "
                             "runs): its level is read only beside a logged KL; grad norm, NaN and KL rules read "
                             "the update")
        kl_largest = kl_bound = max(float(np.max(kl_values)), 0.0)
    v = values.finite()
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; {min_points:g} are needed")
    read = read_climbs(v, min_share=min_share, min_sd=min_sd, sure_z=sure_z, stretch_steps=stretch_steps)
    d = held_climb(read)
    said = climb_values(read, d, v)
    climb = said["level"] - said["best"]
    if kl_bound is not None:
        # a surrogate's policy-gradient part wanders with the batch too: its climb counts only past beta x KL for
        # any beta up to 1 and `huge_ratio` sds of its points before the climb (their spread, not their steps:
        # a loss that wanders slowly, AR 0.97-0.99, steps little and drifts much - 7-10% of such healthy runs
        # failed when the sd was read from steps); the spread's upper bound at the rule's confidence, since a
        # few points read it low by chance
        before = v.values[: int(np.searchsorted(v.steps, said["onset"], side="left"))]
        if len(before) < _MIN_BEFORE_CLIMB:
            return NotJudged(f"an RL run's loss is a surrogate objective: {v.signal} climbs from step "
                             f"{said['onset']}, {len(before)} point(s) in: no spread before the climb to read it "
                             "against")
        kl_bound = max(kl_bound, huge_ratio * ex.sd_upper_bound(before, sure_z))
    if d.decision == FINDING and (kl_bound is None or climb > kl_bound):
        if kl_bound is not None:         # a surrogate near 0 has no way down to give back: say what rules KL out
            said["share_text"] = (f"more than beta x KL adds for any beta up to 1 (KL up to {kl_largest:.3g}) "
                                  f"and {huge_ratio:g} sds of its points before the climb")
        return Evidence(said["onset"], int(v.steps[-1]), said)
    if kl_bound is not None:
        # a surrogate whose climb beta x KL can explain, or one not sure: nothing said of its level either way
        why = (f"no larger than beta x KL can make it (KL up to {kl_largest:.3g}, beta up to 1) and "
               f"{huge_ratio:g} sds of its points before the climb" if climb <= kl_bound
               else "not a sure climb held to the log's end")
        return NotJudged(f"an RL run's loss is a surrogate objective: {v.signal} {said['best']:.4g} at its best -> "
                         f"{said['level']:.4g} at its end, {why}")
    huge = _held_far_above_start(read, huge_ratio, v)
    if huge is not None:
        return Evidence(huge["onset"], int(v.steps[-1]), huge)
    if d.decision == CLEAN:
        return None
    return NotJudged.too_noisy(f"{v.signal} {said['best']:.4g} at its best (step {said['best_step']}) -> "
                               f"{said['level']:.4g} over its last {said['stretch']} steps, a climb of "
                               f"{d.reading.text(d.z)} against the {d.bar:.3g} looked for")


def _held_far_above_start(read: _Read, huge_ratio: float, curve: Curve) -> dict | None:
    """The finding's numbers where the smoothed curve stays at `huge_ratio` x the lowest of its first three
    points (the old rule's early level: a divergence inside them does not become the baseline) from some
    point to the log's end, for `stretch_steps` steps or more; None otherwise."""
    early = float(np.min(read.values[:3]))
    if early <= 0:
        return None
    below = np.flatnonzero(read.smooth < huge_ratio * early)
    at = int(below[-1]) + 1 if len(below) else 1
    if at >= len(read.values) or read.steps[-1] - read.steps[at] < read.stretch_steps:
        return None
    level = float(np.mean(read.values[at:]))
    return {"signal": curve.signal, "key": curve.key, "early": early, "best": early,
            "best_step": int(read.steps[int(np.argmin(read.values[:3]))]), "level": level,
            "peak": float(np.max(read.smooth[at:])), "share": math.inf,
            "share_text": f"{level / early:.0f}x its first level, held: it never came down; diverged past its start",
            "sds": math.inf, "sds_text": "past any noise", "stretch": int(read.steps[-1] - read.steps[at]),
            "sure": f"stays over {huge_ratio:g}x its first level (past any noise)", "onset": int(read.steps[at])}


def held_climb(read: _Read) -> _Departure:
    """The climb the curve holds at the log's end: its last departure where that lasts to the end, else its
    last stretch (`stretch_steps`, at least the smoothing's points) read against its best all the same - so
    that a curve too noisy for its smoothed level to clear the bar is too noisy to tell, not clean (a small
    point estimate is never a clean bill by itself).  A curve whose lowest level so far is reached in that last
    stretch has climbed back from nothing: clean (an eval loss that falls to its last point, 3.34 -> 3.28 over
    its last three evals, read as 'too noisy to tell' against its best before them)."""
    held = [d for d in read.departures if not d.recovered]
    if held:
        return held[-1]
    n = len(read.values)
    w = _smoothing_points(read.steps, read.stretch_steps)
    start = min(int(np.searchsorted(read.steps, read.steps[-1] - read.stretch_steps, side="left")),
                n - max(w, _MIN_REFERENCE_POINTS))
    start = max(start, 1)
    wide = _reference_points(n, w)
    anchor = read.anchor                    # _running_best(read.values, wide)'s, as read_climbs read it
    ref = _reference_window(int(anchor[start - 1]), start, wide, n)
    reading, dof = _departure_reading(read.values, ref, (start, n), bool(read.noise_barred[start]), read.quiet)
    bar = float(read.bar[start])
    z = _scan_z(read.sure_z, n, n - start, start if anchor[start - 1] >= 0 else 0, wide, dof)
    peak = start + int(np.argmax(read.smooth[start:]))
    if anchor[-1] >= start:                 # still at its best at the end: no climb to tell
        return _Departure(start, n - 1, ref, reading, bar, CLEAN, False, peak, z=z)
    # a climb the smoothed curve did not hold for the stretch is not called held, however sure its mean:
    # in the log's last steps whether it holds is not known yet
    decision = _decide(reading, bar, z, read.sure_z)
    return _Departure(start, n - 1, ref, reading, bar, UNDECIDED if decision == FINDING else decision, False, peak,
                      z=z)


def recovered_climb(values: Curve, reward: Curve | None = None, *, min_share, min_sd, sure_z, stretch_steps,
                    min_points) -> Evidence | NotJudged | None:
    """`values` (a loss) leaves its running best (the lowest level of its running median over half of
    `stretch_steps`) by at least `min_share` of the way it came down and `min_sd` sds of its own noise, stays
    over that for `stretch_steps` steps or more, and comes back under it before the log ends: an excursion,
    sure (its mean minus the mean at the best `sure_z` standard errors clear of 0 and at least that large).
    The finding gives its size, length and how long the loss took to come back.  Fewer than `min_points`
    points are not judged; in an RL run (a `reward` is logged) the loss is a surrogate and is not read."""
    if reward is not None:
        return NotJudged("an RL run's loss is a surrogate objective: its excursions are not read (grad norm and "
                         "NaN rules read the update)")
    v = values.finite()
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; {min_points:g} are needed")
    read = read_climbs(v, min_share=min_share, min_sd=min_sd, sure_z=sure_z, stretch_steps=stretch_steps)
    return _excursion_evidence(read, v, [d for d in read.departures if d.recovered],
                               lambda d: climb_values(read, d, v))


def level_excursion(values: Curve, *, min_ratio, min_sd, sure_z, stretch_steps,
                    min_points) -> Evidence | NotJudged | None:
    """`values` (a grad norm, read on the log scale) leaves its level (the median of the stretch before) by at
    least `min_ratio` x and `min_sd` sds of its own noise, stays over that for `stretch_steps` steps or
    more, and comes back before the log ends: an excursion, sure (its mean log level minus the level before
    `sure_z` standard errors clear of 0 and at least that large).  The finding gives its size, length and how
    long it took to come back.  Fewer than `min_points` positive points are not judged."""
    v = values.finite()
    positive = v.values > 0
    if not positive.all():                  # every point positive (a grad norm): kept as it is, not copied
        v = Curve(v.signal, v.key, v.steps[positive], v.values[positive])
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} finite positive points; {min_points:g} are needed")
    log = Curve(v.signal, v.key, v.steps, np.log(v.values))
    steps, values = _points(log)

    def level_before(values, wide):
        width = max(wide, _MIN_REFERENCE_POINTS)
        ref = np.full(len(values), np.nan)
        if len(values) > width:
            ref[width:] = st.sliding_median(values, width)[:len(values) - width]
        return ref, np.full(len(values), -1)

    read = _read(steps, values, stretch_steps=stretch_steps, sure_z=sure_z, min_sd=min_sd,
                 reference_of=level_before, bar_of=lambda smooth, ref: np.full(len(smooth), math.log(min_ratio)))

    def said(d: _Departure) -> dict:
        before = float(np.mean(read.values[d.reference[0]:d.reference[1]]))
        return {"signal": v.signal, "key": v.key, "level": math.exp(before),
                "ratio": math.exp(d.reading.estimate), "peak": math.exp(float(read.smooth[d.peak])),
                "peak_ratio": math.exp(float(read.smooth[d.peak]) - before),
                "sds": _in_sds(d.reading.estimate, read.noise_sd[d.began]),
                "sds_text": _sds_text(d.reading.estimate, read.noise_sd[d.began], before),
                "stretch": int(read.steps[d.end] - read.steps[d.began]), "sure": d.reading.text(d.z),
                "onset": int(read.steps[d.began])}

    return _excursion_evidence(read, v, [d for d in read.departures if d.recovered], said)


def _excursion_evidence(read: _Read, curve: Curve, recovered: list[_Departure], said) -> Evidence | NotJudged | None:
    """The largest sure excursion (the others counted), too noisy to tell where one of the size looked for
    can be neither confirmed nor ruled out, else clean."""
    found = [d for d in recovered if d.decision == FINDING]
    if found:
        d = max(found, key=lambda x: x.reading.estimate / x.bar)
        values = said(d)
        back = _back_after(read, d)
        values.update(back=back, count=len(found),
                      recovery=f"back within half that of its level {back} steps after its peak" if back is not None
                      else "")
        return Evidence(values["onset"], int(read.steps[d.end]), values)
    undecided = [d for d in recovered if d.decision not in (FINDING, CLEAN)]
    if undecided:
        d = undecided[0]
        return NotJudged.too_noisy(f"{curve.signal} left its level at step {int(read.steps[d.began])} for "
                                   f"{int(read.steps[d.end] - read.steps[d.began])} steps and came back, by "
                                   f"{d.reading.text(d.z)} against the {d.bar:.3g} looked for")
    return None


def _back_after(read: _Read, d: _Departure) -> int | None:
    """Steps from the departure's peak to its first point back under the bar."""
    if d.end + 1 >= len(read.steps):
        return None
    return int(read.steps[d.end + 1] - read.steps[d.peak])
