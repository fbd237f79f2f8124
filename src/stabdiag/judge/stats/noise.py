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
squares with weights N_k / G(k)^2 (Cressie 1985), rho on a grid, c and b >= 0 at each rho.  The bounded
reading adds independent batch scatter (a nugget n0: G gains 6 n0) and reads the memory at an upper
confidence bound from a simulated table (`memory_bound`, bench/memory_bound_table.py).

Every "did it move?" is a contrast of the curve's points (end window minus start window), and a contrast's
variance needs only the variogram: Var(sum a_i e_i) = -sum_ij a_i a_j D(|i - j|) when sum a_i = 0.  That
holds for a random walk too, whose variance does not exist: a wander that never settles gives a wide
interval, an undecided reading, never a sure rise.  Long curves are read on means of blocks of points
(`MAX_POINTS`), which keeps every estimate O(n) and a million-point run as cheap as twenty thousand.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from ... import _stats as st
from . import _memory_table as _table

MAX_POINTS = 20_000       # longer curves are read on block means (cost bound, not a verdict parameter)
_RHO_GRID = np.concatenate([np.linspace(0.0, 0.9, 46), 1.0 - np.geomspace(0.1, 1e-4, 40), [1.0]])
_MIN_LAGS = 3
CHI2_1_95 = 3.841458820694124


@dataclass(frozen=True, slots=True)
class Noise:
    """A curve's noise: its variogram nugget + c (1 - rho^k) / (1 - rho) at lags k >= 1 of logged points."""

    c: float              # one-step semivariance of the wandering part (half the mean square of its step)
    rho: float            # its lag-1 correlation (0 white noise, 1 a random walk)
    points: int           # points read (after blocking)
    block: int = 1        # points per block the curve was read on
    nugget: float = 0.0   # variance of independent point noise beside it (batch-to-batch scatter)

    def semivariogram(self, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        white = np.where(k > 0, self.nugget, 0.0)
        if self.rho >= 1.0:
            return white + self.c * k
        if self.rho <= 0.0:
            return white + np.where(k > 0, self.c, 0.0)
        return white + self.c * (1.0 - self.rho ** k) / (1.0 - self.rho)

    @property
    def sill(self) -> float:
        """The noise's point variance (infinite for a random walk)."""
        if self.c > 0 and self.rho >= 1.0:
            return math.inf
        return self.nugget + (self.c / (1.0 - self.rho) if self.c > 0 else 0.0)

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
    return math.inf if math.isnan(var) else max(var, 0.0)     # NaN: a variogram past float range (inf - inf)


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
    work = np.empty(max(len(values) - 2, 0))
    for k in range(1, max_lag + 1):
        m = max(len(values) - 2 * k, 0)
        inc = work[:m]               # |y(t+2k) - 2 y(t+k) + y(t)|, the same operations in place (no temporaries)
        np.multiply(values[k:k + m], 2.0, out=inc)
        np.subtract(values[2 * k:2 * k + m], inc, out=inc)
        np.add(inc, values[:m], out=inc)
        np.sqrt(np.abs(inc, out=inc), out=inc)
        counts.append(m)
        g.append(float(np.mean(inc)) ** 4 / (0.457 + 0.494 / m) if m else 0.0)
    return np.asarray(g), np.asarray(counts, dtype=np.float64)


def max_lag_for(points: int) -> int:
    """Lags read: an eighth of the points, at most 100 (the near end, where a smooth mean's curvature adds
    least; by a hundred lags the fit's grid of rho already reaches a random walk)."""
    return int(min(max(points // 4, _MIN_LAGS), 100))


@st.per_array          # the rules of one judgement read the same curve's noise again and again: once each
def estimate_noise(values: np.ndarray, *, cautious: bool = True, bounded: bool = False,
                   max_lag: int | None = None) -> Noise | None:
    """The noise of a curve's finite values in logged order; None with fewer than 8 points (no variogram
    can be read).  A constant or straight curve has no noise (c = 0).

    `cautious`, for a curve whose own change is asserted, reads the memory on the safe side: the variogram
    without a nugget at the longest memory within an F-type band of the best fit.  With `bounded` as well,
    where the curve is long enough to bound its memory (`memory_readable`), it is the one of two readings
    that spreads more over the curve's span (its variogram at the longest lag): that one, and the
    variogram with a nugget at the memory's upper confidence bound (`memory_bound`).  The band alone reads
    a random walk as a slow AR(1) (|z| > 3 on 29% of random walks of 300 points; with both readings 0.7%),
    but the bound also reads a rise concentrated in a few dozen lags (a jump, an S) as a walk's steps, and
    a reward's rise that is plain to see became too noisy to tell (docs/methodology.md, "Known limits"):
    the rules read it where a false finding is the larger risk (an eval's drop from one start point).  A
    check read beside an asserted change takes the shortest memory within the band."""
    read = _read(values, max_lag)
    if read is None:
        return None
    v, block, increments, unit = read
    plain = _fit(*increments, nugget=False)
    if plain is None:
        return Noise(0.0, 0.0, len(v), block)
    top = 1e-12 * float(np.max(np.abs(v)))
    rounding = top * top                                    # of a straight or constant curve, not noise
    noise = plain.noise(plain.in_band(longest=cautious), len(v), block, rounding)
    if cautious and bounded and memory_readable(len(v)):
        with_nugget = _fit(*increments)
        wide = with_nugget.noise(with_nugget.cautious(len(v)), len(v), block, rounding)
        span = np.array([len(v) - 1])
        if wide.semivariogram(span)[0] > noise.semivariogram(span)[0]:
            noise = wide
    return noise if unit == 1.0 else replace(noise, c=noise.c * unit * unit, nugget=noise.nugget * unit * unit)


def fitted_memory(values: np.ndarray) -> float:
    """The memory the variogram fit reads best, as log(1 / (1 - rho)) (`_MEMORY_CAP` for a random walk):
    the statistic whose null quantiles bench/memory_bound_table.py tabulates; NaN where none is read."""
    read = _read(values, None)
    fit = _fit(*read[2]) if read is not None else None
    return fit.memory if fit is not None else math.nan


def _read(values: np.ndarray, max_lag: int | None
          ) -> tuple[np.ndarray, int, tuple[np.ndarray, np.ndarray], float] | None:
    """A curve's finite values (as block means where long, in units of `_unit`), the block length, their
    second increments with counts, and the unit; None with fewer than 8 finite values."""
    v = finite_values(values)
    if len(v) < 8:
        return None
    unit = _unit(v)
    if unit != 1.0:
        v = v / unit
    v, block = block_means(v)
    return v, block, second_increments(v, _lags(len(v), max_lag)), unit


_PLAIN_RANGE = (2.0 ** -64, 2.0 ** 64)     # magnitudes read as logged


def _unit(v: np.ndarray) -> float:
    """1 for a curve whose largest magnitude lies in _PLAIN_RANGE (every metric a run logs), else the power
    of 4 that brings it to 1..4: the fourth powers of its increments and the fit's squared weights then stay
    inside float range (a value logged as 1e200 overflowed them), and dividing by a power of 4 is exact, its
    square root too, so the reading is the same numbers in other units."""
    top = float(np.max(np.abs(v)))
    if top == 0.0 or _PLAIN_RANGE[0] <= top <= _PLAIN_RANGE[1]:
        return 1.0
    exponent = math.frexp(top)[1] - 1                   # top = m 2^exponent, 1 <= m < 2
    return math.ldexp(1.0, max(exponent - exponent % 2, -1022))


def memory_readable(points: int) -> bool:
    """Whether a curve of `points` points can bound its noise's memory at all: some memory shorter than a
    random walk's is ruled out by a short enough fitted one (the table's quantiles are not all 0: from
    about 32 points)."""
    return any(row[_column(points)] > 0 for row in _table.LOWER_QUANTILE[:-1])


def _column(points: int) -> int:
    return max(int(np.searchsorted(_table.POINTS, points, side="right")) - 1, 0)


def memory_bound(memory: float, points: int) -> float:
    """The longest true memory (rho of AR(1) noise, 1 a random walk) under which a fitted memory as short
    as `memory` is not unusual on a curve of `points` points: the largest tabulated rho whose ALPHA
    quantile of fitted memories is at or under it (Neyman's construction: an upper confidence bound on the
    noise's memory that falls short of the truth on ALPHA of curves).  Lengths between the tabulated ones
    take the next shorter one (its quantiles are lower: the bound is then longer, on the safe side)."""
    j = _column(points)
    bound = 0.0
    for rho, row in zip(_table.TRUE_RHO, _table.LOWER_QUANTILE):
        if row[j] <= memory + 1e-9:
            bound = rho
    return bound


_MEMORY_CAP = math.log(1e5)      # a random walk's memory, past the grid's longest AR(1) (1 - 1e-4)


def _memory(rho: float) -> float:
    return _MEMORY_CAP if rho >= 1.0 else -math.log(1.0 - rho)


def finite_values(values: np.ndarray) -> np.ndarray:
    """The finite values, in order, as float64 (a curve with NaN holes read as its points)."""
    v = np.asarray(values, dtype=np.float64)
    return v[np.isfinite(v)]


def second_differences(v: np.ndarray) -> np.ndarray:
    """y(t+2) - 2 y(t+1) + y(t): a straight mean cancels in them (Hall, Kay & Titterington 1990); 6 x the
    variance of independent noise, 4 x the one-step semivariance of a random walk."""
    return v[2:] - 2.0 * v[1:-1] + v[:-2]


def _lags(points: int, max_lag: int | None) -> int:
    return max(1, min(max_lag or max_lag_for(points), (points - 1) // 2))


def _shape(rho: float, k: np.ndarray) -> np.ndarray:
    """8 D(k) - 2 D(2k) for the unit variogram D(k) = (1 - rho^k) / (1 - rho)."""
    if rho >= 1.0:
        return 8.0 * k - 4.0 * k
    if rho <= 0.0:
        return np.full_like(k, 6.0)
    return (8.0 * (1.0 - rho ** k) - 2.0 * (1.0 - rho ** (2 * k))) / (1.0 - rho)


@functools.lru_cache(maxsize=128)
def _shapes(lags: int) -> np.ndarray:
    """_shape at every rho of the grid (one row per rho) for lags 1..`lags`: the same for every curve read
    with as many lags, so made once (read-only)."""
    k = np.arange(1, lags + 1, dtype=np.float64)
    shapes = np.stack([_shape(float(rho), k) for rho in _RHO_GRID])
    shapes.flags.writeable = False
    return shapes


@dataclass(frozen=True, slots=True)
class _Fit:
    """The variogram fit at every rho of the grid: c and the nugget per rho, the weighted misfit per rho,
    the best."""

    c: np.ndarray
    nugget: np.ndarray
    sse: np.ndarray
    best: int
    lags: int

    def noise(self, pick: int, points: int, block: int, rounding: float) -> Noise:
        """The noise at the fit's `pick` (coefficients under `rounding` are a straight curve's, not noise)."""
        c = float(self.c[pick]) if self.c[pick] > rounding else 0.0
        nugget = float(self.nugget[pick]) if self.nugget[pick] > rounding else 0.0
        return Noise(c, float(_RHO_GRID[pick]) if c > 0 else 0.0, points, block, nugget)

    @property
    def memory(self) -> float:
        """The best fit's memory, log(1 / (1 - rho)): the statistic the bound's table is made of."""
        return _memory(float(_RHO_GRID[self.best]))

    def in_band(self, longest: bool) -> int:
        """The shortest (or longest) memory whose misfit is within an F-type band of the best (chi2(1) 95%
        per residual degree of freedom).  The shortest for a check read beside an asserted change:
        independent evaluations unless the data show otherwise (three lags of 30 binomial scores fit a
        random walk about as well as white noise).  The longest for a curve whose change is asserted."""
        within = np.flatnonzero(self.sse <= self.sse[self.best] * (1.0 + CHI2_1_95 / max(self.lags - 2, 1)))
        return int(within[-1] if longest else within[0])

    def cautious(self, points: int) -> int:
        """The memory's upper confidence bound (`memory_bound`), never under the best fit's: short lags
        cannot tell a slow AR(1) from a random walk, and the best fit would call a wander that had not
        settled by the run's end a settled noise."""
        bound = memory_bound(self.memory, points)
        return max(self.best, int(np.searchsorted(_RHO_GRID, bound - 1e-12)))


def _fit(g: np.ndarray, counts: np.ndarray, nugget: bool = True) -> _Fit | None:
    """g(k) = 6 n0 + c (8 D(k) - 2 D(2k)) + b k^4, D(k) = (1 - rho^k) / (1 - rho), at every rho of the grid:
    independent point noise n0 (the nugget: batch-to-batch scatter), a wandering part of memory rho, and a
    smooth mean (its curvature mu'' gives (mu'' k^2)^2, which the noise cannot: the noise's grow at most
    linearly in k).  A training curve is both at once (batch noise around a slow drift; Harvey's local
    level model at rho = 1): without the nugget, a drift small beside the scatter was read as a short
    memory and its spread over the run was lost.  Weighted least squares with weights N_k / g(k)^2
    (Cressie 1985; the weights from a first unweighted fit, so that a low estimate does not pull the fit
    down), every coefficient >= 0; `nugget` False fits without one.  None for a curve without second
    increments (straight or constant)."""
    if not np.any(g > 0):
        return None
    k = np.arange(1, len(g) + 1, dtype=np.float64)
    fixed = np.stack([k ** 4, np.full_like(k, 6.0)] if nugget else [k ** 4], axis=1)   # smooth mean, nugget
    shapes = _shapes(len(g))
    weights = counts.copy()
    for _ in range(2):
        coef, sse = _nonnegative_ls(shapes, fixed, g, weights)
        best = int(np.argmin(sse))
        fitted = coef[best, 0] * shapes[best] + fixed @ coef[best, 1:]
        weights = counts / np.maximum(fitted, max(float(np.max(g)) * 1e-9, 1e-300)) ** 2
    return _Fit(coef[:, 0], coef[:, 2] if nugget else np.zeros(len(coef)), sse, best, len(g))


def _nonnegative_ls(shapes: np.ndarray, fixed: np.ndarray, y: np.ndarray, w: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """For each row s of `shapes`: min sum w (y - X beta)^2 over beta >= 0, X = [s, fixed], and its
    weighted misfit.  The nonnegative optimum is the least-squares solution on its own active set, and
    every feasible active-set solution is a candidate, so it is the best feasible one of the subsets'
    unconstrained fits (normal equations of unit-scaled columns solved for every row at once, with a ridge of
    1e-10 where a subset is collinear, as the white-noise shape is with the nugget)."""
    rows, lags = shapes.shape
    design = np.concatenate([shapes[:, :, None], np.broadcast_to(fixed, (rows, lags, fixed.shape[1]))], axis=2)
    columns = design.shape[2]
    gram = np.einsum("rli,l,rlj->rij", design, w, design)
    moment = np.einsum("rli,l->ri", design, w * y)
    total = float(np.sum(w * y * y))
    best_sse = np.full(rows, total)                                        # every coefficient 0
    best_coef = np.zeros((rows, columns))
    for size in range(1, columns + 1):
        for subset in combinations(range(columns), size):
            idx = np.array(subset)
            a = gram[:, idx[:, None], idx[None, :]]
            b = moment[:, idx]
            # columns scaled to unit norm first: k^4 runs to 1e8 beside the nugget's 6
            scale = 1.0 / np.sqrt(np.maximum(np.einsum("rii->ri", a), 1e-300))
            unit = a * scale[:, :, None] * scale[:, None, :] + 1e-10 * np.eye(size)
            beta = np.linalg.solve(unit, (b * scale)[:, :, None])[:, :, 0] * scale
            # sum w (y - X beta)^2 = y'Wy - 2 beta'X'Wy + beta'X'WX beta
            sse = total - 2.0 * np.sum(beta * b, axis=1) + np.einsum("ri,rij,rj->r", beta, a, beta)
            better = np.all(beta >= 0, axis=1) & (sse < best_sse)
            coef = np.zeros((rows, columns))
            coef[:, idx] = beta
            best_sse = np.where(better, sse, best_sse)
            best_coef = np.where(better[:, None], coef, best_coef)
    return best_coef, np.maximum(best_sse, 0.0)
