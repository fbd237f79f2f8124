"""Noise apart from the mean: how much a curve wanders on its own, read from differences at short lags,
never from the residuals of a mean model fitted to it.

Why.  The residuals of a fitted line or bend carry whatever the fit missed: a smooth sigmoid read through
one straight line leaves a smooth misfit whose "autocorrelation" is near 1, so the cleaner a change, the
fewer "independent points" it seemed to have and the less evidence it gave.  Differences at short lags
see the noise and almost none of a smooth mean: y(t+k) - y(t) = mu(t+k) - mu(t) + e(t+k) - e(t), and the
mean's part is ~ mu' k, small at small k.

What.  The second-order increments y(t+2k) - 2 y(t+k) + y(t) over lags k = 1..K (a straight mean cancels in
them, a smooth one nearly does at small k), their mean square estimated robustly (Cressie & Hawkins 1980,
J. Int. Assoc. Math. Geol. 12: the fourth power of the mean root absolute increment, so that a few
outlier batches do not inflate it), are fitted with

    G(k) = c (8 D(k) - 2 D(2k)) + b k^4,    D(k) = (1 - rho^k) / (1 - rho)

D the semivariogram of AR(1)-type noise (c its one-step semivariance, rho its lag-1 correlation; rho = 1 is
a random walk, whose variogram grows without bound) and b k^4 what a smooth mean's curvature adds, as Hall
& Van Keilegom (2003, JRSS-B 65: using difference-based methods for inference in nonparametric regression
with time-series errors) separate correlated errors from a smooth trend.  The fit is weighted least
squares with weights N_k / G(k)^2 (Cressie 1985), rho on a grid, c and b >= 0 at each rho.

Every "did it move?" is a contrast of the curve's points (end window minus start window), and a contrast's
variance needs only the variogram: Var(sum a_i e_i) = -sum_ij a_i a_j D(|i - j|) when sum a_i = 0.  That
holds for a random walk too, whose variance does not exist: a wander that never settles gives a wide
interval, an undecided reading, never a sure rise.  Long curves are read on means of blocks of points
(`MAX_POINTS`), which keeps every estimate O(n) and a million-point run as cheap as twenty thousand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_POINTS = 20_000       # longer curves are read on block means (cost bound, not a verdict parameter)
_RHO_GRID = np.concatenate([np.linspace(0.0, 0.9, 46), 1.0 - np.geomspace(0.1, 1e-4, 40), [1.0]])
_MIN_LAGS = 3
CHI2_1_95 = 3.841458820694124


@dataclass(frozen=True, slots=True)
class Noise:
    """A curve's noise: its variogram c (1 - rho^k) / (1 - rho) in lags of logged points."""

    c: float              # one-step semivariance of the noise (half the mean square of a step's change)
    rho: float            # lag-1 correlation (0 white noise, 1 a random walk)
    points: int           # points read (after blocking)
    block: int = 1        # points per block the curve was read on

    def semivariogram(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        if self.rho >= 1.0:
            return self.c * k
        if self.rho <= 0.0:
            return np.where(k > 0, self.c, 0.0)
        return self.c * (1.0 - self.rho ** k) / (1.0 - self.rho)

    @property
    def sill(self) -> float:
        """The noise's point variance (infinite for a random walk)."""
        return math.inf if self.rho >= 1.0 else self.c / (1.0 - self.rho)

    def sd_over(self, lags: int) -> float:
        """The noise's sd as seen between points `lags` apart (the root of the variogram there): the point
        sd once the lag is past the noise's memory; a random walk has no point sd, only a spread per
        stretch, which this is."""
        return math.sqrt(float(self.semivariogram(np.array([max(lags, 1)]))[0]))

    def contrast_variance(self, n: int, first: tuple[int, int], second: tuple[int, int]) -> float:
        """Var(mean of points [second) - mean of points [first)) for half-open index ranges of a curve of
        `n` points: -sum_ij a_i a_j D(|i - j|) with a = -1/len on `first`, +1/len on `second`."""
        return _contrast_variance(self.semivariogram, first, second)


def _contrast_variance(semivariogram, first: tuple[int, int], second: tuple[int, int]) -> float:
    (a0, a1), (b0, b1) = first, second
    wa, wb = a1 - a0, b1 - b0
    if wa <= 0 or wb <= 0:
        return math.inf

    def within(w: int) -> float:        # sum over ordered pairs of one window at lag k >= 1: 2 (w - k)
        k = np.arange(1, w, dtype=np.float64)
        return float(np.sum(2.0 * (w - k) * semivariogram(k))) if w > 1 else 0.0

    def across() -> float:              # pairs (i in second, j in first): lags b0 - a1 + 1 .. b1 - 1 - a0
        lo, hi = b0 - (a1 - 1), (b1 - 1) - a0
        counts = np.convolve(np.ones(wb), np.ones(wa))            # pair counts by lag, from lo to hi
        lags = np.abs(np.arange(lo, hi + 1, dtype=np.float64))
        return float(np.sum(counts * semivariogram(lags)))

    # -sum a_i a_j D = -(within_A / wa^2 + within_B / wb^2) + 2 across / (wa wb)
    var = -within(wa) / wa ** 2 - within(wb) / wb ** 2 + 2.0 * across() / (wa * wb)
    return max(var, 0.0)


def block_means(values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, int]:
    """The curve as means of consecutive blocks of points when it is longer than `max_points`, and the
    block length (1 when it is read as it is)."""
    n = len(values)
    if n <= max_points:
        return values, 1
    block = -(-n // max_points)
    whole = (n // block) * block
    return values[:whole].reshape(-1, block).mean(axis=1), block


def second_increments(values: np.ndarray, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """E[(y(t+2k) - 2 y(t+k) + y(t))^2], k = 1..max_lag, estimated robustly (Cressie & Hawkins 1980: the
    fourth power of the mean root absolute increment, over its value for Gaussian increments, so that a few
    outlier batches or a level shift do not take the estimate with them), and the counts N_k.  A
    second-order increment is blind to a straight mean and nearly blind to a smooth one at small k; for the
    noise it is 8 D(k) - 2 D(2k) (D the noise's semivariogram)."""
    g = []
    counts = []
    for k in range(1, max_lag + 1):
        inc = np.abs(values[2 * k:] - 2.0 * values[k:-k] + values[:-2 * k])
        m = len(inc)
        counts.append(m)
        g.append(float(np.mean(np.sqrt(inc))) ** 4 / (0.457 + 0.494 / m) if m else 0.0)
    return np.asarray(g), np.asarray(counts, dtype=np.float64)


def max_lag_for(points: int) -> int:
    """Lags read: an eighth of the points, at most 100 (the near end, where a smooth mean's curvature adds
    least; by a hundred lags the fit's grid of rho already reaches a random walk)."""
    return int(min(max(points // 4, _MIN_LAGS), 100))


def estimate_noise(values: np.ndarray, *, cautious: bool = True, max_lag: int | None = None) -> Noise | None:
    """The noise of a curve's finite values in logged order; None with fewer than 8 points (no variogram
    can be read).  A constant or straight curve has no noise (c = 0).  `cautious` reads its memory on the
    safe side (the longest the data allow, see _fit): for a curve whose own change is asserted; a check
    read beside it takes the best fit."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 8:
        return None
    v, block = block_means(v)
    lags = max(1, min(max_lag or max_lag_for(len(v)), (len(v) - 1) // 2))
    g, counts = second_increments(v, lags)
    c, rho = _fit(g, counts, longest=cautious)
    if c <= (1e-12 * float(np.max(np.abs(v)))) ** 2:
        c = 0.0                         # rounding of a straight or constant curve, not noise
    return Noise(c, rho if c > 0 else 0.0, len(v), block)


def _shape(rho: float, k: np.ndarray) -> np.ndarray:
    """8 D(k) - 2 D(2k) for the unit variogram D(k) = (1 - rho^k) / (1 - rho)."""
    if rho >= 1.0:
        return 8.0 * k - 4.0 * k
    if rho <= 0.0:
        return np.full_like(k, 6.0)
    return (8.0 * (1.0 - rho ** k) - 2.0 * (1.0 - rho ** (2 * k))) / (1.0 - rho)


def _fit(g: np.ndarray, counts: np.ndarray, longest: bool) -> tuple[float, float]:
    """(c, rho) of g(k) = c (8 D(k) - 2 D(2k)) + b k^4, D(k) = (1 - rho^k) / (1 - rho): the noise's second
    increments plus a smooth mean's (its curvature mu'' gives (mu'' k^2)^2, which the noise cannot: the
    noise's grow at most linearly in k).  Weighted least squares with weights N_k / g(k)^2 (Cressie
    1985; the weights from a first unweighted fit, so that a low estimate does not pull the fit down),
    c and b >= 0.  Few lags pin the memory poorly, so it is read from the fits within an F-type band of
    the best one (chi2(1) 95% per residual degree of freedom): the `longest` memory there for a curve
    whose own change is asserted (short lags cannot tell a slow AR(1) from a random walk, and the best
    fit would call a wander that had not settled by the run's end a settled noise), the shortest for a
    check read beside it (independent evaluations unless the data show otherwise: three lags of 30
    binomial scores fit a random walk about as well as white noise)."""
    if not np.any(g > 0):
        return 0.0, 0.0
    k = np.arange(1, len(g) + 1, dtype=np.float64)
    quartic = k ** 4
    shapes = np.stack([_shape(float(rho), k) for rho in _RHO_GRID])         # one row per rho
    weights = counts.copy()
    for _ in range(2):
        c, b = _nonnegative_ls(shapes, quartic, g, weights)
        sse = np.sum(weights * (g - c[:, None] * shapes - b[:, None] * quartic) ** 2, axis=1)
        best = int(np.argmin(sse))
        fitted = c[best] * shapes[best] + b[best] * quartic
        weights = counts / np.maximum(fitted, max(float(np.max(g)) * 1e-9, 1e-300)) ** 2
    within = np.flatnonzero(sse <= sse[best] * (1.0 + CHI2_1_95 / max(len(g) - 2, 1)))
    pick = int(within[-1] if longest else within[0])          # _RHO_GRID ascends
    return float(c[pick]), float(_RHO_GRID[pick])


def _nonnegative_ls(x1: np.ndarray, x2: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `x1`: min sum w (y - a x1 - b x2)^2 over a, b >= 0 - the unconstrained solution where
    it is nonnegative, else the better of the two one-column fits."""
    a11, a12 = np.sum(w * x1 * x1, axis=1), np.sum(w * x1 * x2, axis=1)
    a22, r1, r2 = float(np.sum(w * x2 * x2)), np.sum(w * x1 * y, axis=1), float(np.sum(w * x2 * y))
    det = a11 * a22 - a12 * a12
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(det > 1e-12 * a11 * a22, (r1 * a22 - r2 * a12) / det, -1.0)
        b = np.where(det > 1e-12 * a11 * a22, (a11 * r2 - a12 * r1) / det, -1.0)
        only_a = np.where(a11 > 0, np.maximum(r1 / a11, 0.0), 0.0)
    only_b = max(r2 / a22, 0.0) if a22 > 0 else 0.0

    def sse(ca, cb):
        return np.sum(w * (y - ca[:, None] * x1 - np.asarray(cb)[..., None] * x2) ** 2, axis=1)

    joint = (a >= 0) & (b >= 0)
    take_a = sse(only_a, np.zeros_like(only_a)) <= sse(np.zeros_like(only_a), np.full_like(only_a, only_b))
    c = np.where(joint, a, np.where(take_a, only_a, 0.0))
    q = np.where(joint, b, np.where(take_a, 0.0, only_b))
    return c, q
