"""Did a curve move?  One model-free estimand and one three-way decision for every rule that asks.

The estimand.  A change is the curve's level at the end of a stretch minus its level at the start: the
mean of its points in the last `edge_frac` of the stretch's steps minus the mean in the first (windows in
steps, not points, so that logging every 5th step reads the same windows).  No line or bend is fitted,
so no misfit can pass for noise; its standard error is the contrast's, from the curve's own noise
variogram (stats/noise.py), which is read apart from the mean and allows for autocorrelation and for a
wander that never settles.

The decision (Schuirmann 1987's two one-sided tests; the three-decision framing of Goeman, Solari &
Stijnen 2010): with `sure_z` standard errors either side of the estimate,

    finding    the lower end clears 0 and the estimate clears the size a rule declares (sure and large)
    clean      the upper end is under the size: a change that large is ruled out (equivalence)
    undecided  neither: "too noisy to tell", with the interval

so a small point estimate is never a clean bill by itself, and less noise never gives less evidence: a
curve without noise has a standard error of 0 and its reading is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .noise import Noise, estimate_noise, finite_values, second_differences

FINDING, CLEAN, UNDECIDED = "finding", "clean", "undecided"
Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Reading:
    """An estimated change and its standard error (0: exact, inf: the data cannot bound it)."""

    estimate: float
    se: float

    @property
    def z(self) -> float:
        """The estimate in standard errors; 0 for an exact 0, +-inf for an exact nonzero change."""
        if self.se > 0:
            return self.estimate / self.se if math.isfinite(self.se) else 0.0
        return 0.0 if self.estimate == 0 else math.copysign(math.inf, self.estimate)

    def low(self, sure_z: float) -> float:
        return self.estimate - sure_z * self.se if math.isfinite(self.se) else -math.inf

    def high(self, sure_z: float) -> float:
        return self.estimate + sure_z * self.se if math.isfinite(self.se) else math.inf

    def sure(self, sure_z: float) -> bool:
        """Surely above 0: the lower end of the `sure_z` interval clears it."""
        return self.low(sure_z) > 0

    def decide(self, size: float, sure_z: float) -> str:
        """FINDING (sure and at least `size`), CLEAN (a change of `size` ruled out) or UNDECIDED."""
        if self.sure(sure_z) and self.estimate >= size:
            return FINDING
        if self.high(sure_z) < size:
            return CLEAN
        return UNDECIDED

    def size_unsure_text(self, size: float, sure_z: float) -> str:
        """Why an UNDECIDED rise is: "a rise of 0.2 can be neither confirmed nor ruled out", or, where the
        rise itself is sure and only whether it reaches `size` is not, "the rise is sure, but whether it
        reaches 0.2 ..." (a rise at z 16 whose interval straddles the size is no noisy curve)."""
        if self.sure(sure_z):
            return f"the rise is sure, but whether it reaches {size:.3g} can be neither confirmed nor ruled out"
        return f"a rise of {size:.3g} can be neither confirmed nor ruled out"

    def interval_text(self, sure_z: float = Z95, fmt: str = ".3g", shift: float = 0.0) -> str:
        """"95% interval 0.22..0.40" (the level of `sure_z`), "exact" where the points have no noise, or
        "no interval: too few points" where they cannot bound it."""
        if self.se == 0:
            return "exact"
        if not math.isfinite(self.se):
            return "no interval: too few points"
        return f"{_confidence(sure_z)} interval {self.low(sure_z) + shift:{fmt}}..{self.high(sure_z) + shift:{fmt}}"

    def text(self, sure_z: float = Z95, fmt: str = ".3g") -> str:
        """"+0.31 (95% interval 0.22..0.40, z 6.1)"; "+0.6 (exact)"."""
        if self.se > 0 and math.isfinite(self.se):
            return f"{self.estimate:+{fmt}} ({self.interval_text(sure_z, fmt)}, z {self.z:.1f})"
        return f"{self.estimate:+{fmt}} ({self.interval_text(sure_z, fmt)})"


def _confidence(sure_z: float) -> str:
    """The two-sided confidence of +-sure_z, as a percentage ("95%", "99.7%")."""
    level = math.erf(sure_z / math.sqrt(2.0))
    if level < 0.999:
        return f"{level:.1%}".replace(".0%", "%")
    if level < 0.9999:
        return f"{level:.2%}"
    if sure_z < 6.0:
        # past 99.99% as many decimals as the level needs not to read 100% (a run-wide bar: 99.9996%)
        return f"{level:.{math.ceil(-math.log10(1.0 - level)) - 2}%}"
    return f"+-{sure_z:.3g} standard error"     # a level past 99.9999998% says nothing more


@dataclass(frozen=True, slots=True)
class Change:
    """End level minus start level of a stretch of a curve, with what it was read from."""

    reading: Reading
    start_level: float
    end_level: float
    start_points: int
    end_points: int
    noise: Noise | None

    @property
    def estimate(self) -> float:
        return self.reading.estimate


def windows(steps: np.ndarray, edge_frac: float, start: float | None = None,
            end: float | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The index ranges of the points in the first and in the last `edge_frac` of the step span
    [start, end] (default: the curve's own), each holding at least one point: the nearest one where the
    window holds none."""
    lo = float(steps[0]) if start is None else start
    hi = float(steps[-1]) if end is None else end
    span = hi - lo
    a0 = int(np.searchsorted(steps, lo, side="left"))
    a1 = int(np.searchsorted(steps, lo + edge_frac * span, side="right"))
    b0 = int(np.searchsorted(steps, hi - edge_frac * span, side="left"))
    b1 = int(np.searchsorted(steps, hi, side="right"))
    n = len(steps)
    if a1 <= a0:                # none in the first window: the last point at or before its end, else the first
        a0 = max(a1 - 1, 0)
        a1 = a0 + 1
    if b1 <= b0:                # none in the last: the first point at or after its start, else the last
        b0 = min(b0, n - 1)
        b1 = b0 + 1
    return (a0, a1), (b0, b1)


def end_minus_start(steps: np.ndarray, values: np.ndarray, edge_frac: float, *, start: float | None = None,
                    end: float | None = None, cautious: bool = True) -> Change:
    """The level over the last `edge_frac` of [start, end] minus the level over its first, with the
    standard error of that contrast under the curve's noise (read from all of its points; `cautious`:
    see estimate_noise)."""
    first, last = windows(np.asarray(steps), edge_frac, start, end)
    return change_between(values, first, last, cautious=cautious)


def change_between(values: np.ndarray, first: tuple[int, int], last: tuple[int, int], *,
                   cautious: bool = True, bounded: bool = False) -> Change:
    """The mean of `values` over the index range `last` minus the mean over `first`, with the standard
    error of that contrast under the curve's noise (`cautious`, `bounded`: see estimate_noise)."""
    values = np.asarray(values, dtype=np.float64)
    start_level = float(np.mean(values[first[0]:first[1]]))
    end_level = float(np.mean(values[last[0]:last[1]]))
    noise = estimate_noise(values, cautious=cautious, bounded=bounded)
    se = _contrast_se(noise, values, first, last)
    return Change(Reading(end_level - start_level, se), start_level, end_level, first[1] - first[0],
                  last[1] - last[0], noise)


def thirds(points: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The first and last third of `points` points (each at least one): the contrast of a sparse curve
    that uses most of its points, where its edges would hold one or two."""
    width = max(points // 3, 1)
    return (0, width), (points - width, points)


def _contrast_se(noise: Noise | None, values: np.ndarray, first: tuple[int, int], last: tuple[int, int]) -> float:
    """The contrast's standard error: from the variogram where one could be read (8 points or more),
    else from second differences as independent noise (Hall, Kay & Titterington 1990: blind to a straight
    mean), and unbounded with fewer than three points."""
    if first == last:
        return 0.0
    if noise is not None:
        if noise.block == 1:
            return math.sqrt(noise.contrast_variance(len(values), first, last))
        # read on block means: the windows in blocks (each at least one), the variance of their means
        b = noise.block
        f = (first[0] // b, max(first[1] // b, first[0] // b + 1))
        s = (last[0] // b, max(last[1] // b, last[0] // b + 1))
        return math.sqrt(noise.contrast_variance(noise.points, f, s))
    v = finite_values(values)
    if len(v) < 3:
        return 0.0 if len(v) == 2 and v[0] == v[1] else math.inf
    var = float(np.mean(second_differences(v) ** 2)) / 6.0
    return math.sqrt(var * (1.0 / (first[1] - first[0]) + 1.0 / (last[1] - last[0])))
