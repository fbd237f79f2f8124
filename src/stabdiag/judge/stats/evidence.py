"""Evidence that grows with data: trend tests under autocorrelated noise, a noise floor for means of few
binary samples, scale-free effect sizes, and one change-point model for onsets.

Every detector that asks "did this curve move?" asks it here, in two numbers a rule declares: how sure
(a z after the autocorrelation correction) and how large (a share of the curve's own range, or of the
headroom to a known bound, never a per-point sd).  A per-point sd does not shrink with the number of
points, so a steady rise of a GRPO reward averaged over 8 completions stayed under a "5 noise sds" bar
however long it lasted; a trend's standard error does shrink, by the square root of the number of
*independent* points.

Why these tests:
- Trends: least squares over the window, its standard error from the residuals, corrected for lag-1
  autocorrelation by an effective sample size n_eff = n (1 - r1) / (1 + r1) (Santer et al. 2000, J.
  Geophys. Res. 105(D6): the adjusted standard error of a trend; the same correction as the modified
  Mann-Kendall tests of Hamed & Rao 1998 in its AR(1) form).  Training curves are autocorrelated (lag-1
  0.5-0.95: batches drawn in data order, a policy that drifts between updates); a test that assumes
  independent points fires on random walks.  r1 is read from the residuals and bias-corrected for short
  series (Kendall 1954: E[r1] ~ rho - (1 + 3 rho) / n), since the plain estimate is low exactly where
  the correction matters.  The interval uses Student's t with n_eff - 2 degrees of freedom.
- Noise floor: a reward that is the mean of n binary completions cannot be less noisy than
  sqrt(p (1 - p) / n); near a ceiling the residuals of a run that scores 1.0 on most batches are ~0, and
  a rise of 0.01 became "thousands of noise sds".  n is read from the values' granularity (means of n
  0/1 values are multiples of 1/n) and p is kept half a sample from the bounds.
- Onsets: one hinge (continuous piecewise-linear fit, flat or sloped before, another slope after) fitted
  by profile least squares over every candidate step, O(n) with cumulative sums; its interval is the set of
  hinges whose profile likelihood is within chi2(1, 0.95) = 3.84 of the best, counted in effective
  points (Hinkley 1969 / Hudson 1966 on two-phase regression).  A curve that creeps for a while and then
  jumps is dated at the jump, with an interval that says how sure that is.

What is not asked here, and why: a spike (detectors/spikes.py) is one point, so its yardstick is the
noise of one point, a robust sd of the recent window (MAD), which rightly does not shrink with the number
of points; a NaN, a frozen value or an ending (numeric.py, ending.py) is an event, not an estimate; a
level held over a threshold (levels.py, policy.floor_breach) is read on a running median over a stretch
declared in steps and as a share of the run, so a noisy point never makes a breach and a longer run
needs a longer one.  Those detectors use the robust point statistics of stabdiag/_stats.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ... import _stats as st
from .extremes import normal_sf

Z95 = 1.959963984540054
CHI2_1_95 = 3.841458820694124
_MAX_FIT_POINTS = 20_000   # longer curves are fitted on block means
_MAX_HINGES = 512          # candidate hinge steps scanned (the profile is smooth; a grid keeps 1M points cheap)


@dataclass(frozen=True, slots=True)
class Change:
    """A linear change over a window: the estimate, its autocorrelation-corrected uncertainty, and the
    numbers behind it (as scipy's result objects name them)."""

    estimate: float       # fitted change from the window's first to its last step
    se: float             # its standard error, corrected for lag-1 autocorrelation
    low: float            # 95% interval
    high: float
    n: int                # points in the window
    n_eff: float          # effective number of independent points
    rho: float            # lag-1 autocorrelation of the residuals (bias-corrected, clipped to 0..0.99)
    noise_sd: float       # residual sd used (never under the noise floor given)
    knots: tuple[tuple[float, float], ...] = ()   # the fitted curve's (step, level) corners (hinge_change only)

    @property
    def fitted_range(self) -> float:
        """The range the fitted curve covers over the window (NaN without a fitted curve)."""
        levels = [level for _, level in self.knots]
        return max(levels) - min(levels) if levels else math.nan

    @property
    def z(self) -> float:
        if self.se <= 0 or not math.isfinite(self.se):
            return 0.0 if not math.isfinite(self.se) else math.copysign(math.inf, self.estimate)
        return self.estimate / self.se

    def sure(self, min_z: float) -> bool:
        """A sure rise: `min_z` standard errors clear of 0 *and* its 95% interval above 0.  With few
        effective points the interval's t quantile is wider than any fixed z (n_eff 3: 12.7 standard
        errors), and a z of 3 there is no evidence."""
        return self.z >= min_z and self.low > 0

    def interval_text(self, fmt: str = ".3g", shift: float = 0.0) -> str:
        """"95% interval 0.22..0.40" (moved by `shift`, for a change read from another origin), or "no
        interval: n_eff 2, too few independent points" where the points, for their autocorrelation, are
        too few to bound it."""
        if not math.isfinite(self.se):
            return f"no interval: n_eff {self.n_eff:.0f}, too few independent points"
        return f"95% interval {self.low + shift:{fmt}}..{self.high + shift:{fmt}}"

    def text(self, fmt: str = ".3g") -> str:
        """"+0.31 (95% interval 0.22..0.40, z 6.1, n_eff 41)"; "+498 (no interval: n_eff 2, too few
        independent points)"."""
        if not math.isfinite(self.se):
            return f"{self.estimate:+{fmt}} ({self.interval_text(fmt)})"
        return (f"{self.estimate:+{fmt}} ({self.interval_text(fmt)}, z {self.z:.1f}, "
                f"n_eff {self.n_eff:.0f})")


_UNKNOWN = Change(0.0, math.inf, -math.inf, math.inf, 0, 0.0, 0.0, 0.0)


# Student's t 97.5% quantile by degrees of freedom (any statistics table); between them, linear in 1/df,
# which is within 0.3% of the exact quantile from df 1 up (scipy.stats costs seconds to import)
_T975 = ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365), (8, 2.306),
         (9, 2.262), (10, 2.228), (12, 2.179), (15, 2.131), (20, 2.086), (25, 2.060), (30, 2.042),
         (40, 2.021), (60, 2.000), (120, 1.980))


def t975(df: float) -> float:
    """Student's t 97.5% quantile for `df` degrees of freedom (fractional df allowed, at least 1)."""
    df = max(float(df), 1.0)
    if df >= 120:
        return Z95 + (1.980 - Z95) * 120.0 / df
    inv = np.array([1.0 / d for d, _ in _T975])[::-1]
    q = np.array([v for _, v in _T975])[::-1]
    return float(np.interp(1.0 / df, inv, q))


def lag1_autocorrelation(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals, bias-corrected for a short series and clipped to 0..0.99
    (negative autocorrelation would inflate n_eff above n: it is read as 0)."""
    n = len(resid)
    if n < 4:
        return 0.0
    r = resid - resid.mean()
    denom = float(np.dot(r, r))
    if denom <= 0:
        return 0.0
    r1 = float(np.dot(r[:-1], r[1:]) / denom)
    r1 = r1 + (1.0 + 3.0 * r1) / n        # Kendall's bias correction
    return min(max(r1, 0.0), 0.99)


def family_z(z: float, count: int) -> float:
    """The one-sided threshold that keeps the chance that any of `count` independent readings clears it at
    the chance that one reading clears `z` (Sidak's correction): with three evals, "one of them improved
    at 2 standard errors" happens by chance about 7% of the time, not 2.3%."""
    if count <= 1:
        return z
    # stdlib, imported only where a rule reads several evals
    from statistics import NormalDist

    return -NormalDist().inv_cdf(sidak_tail(z, count))


def sidak_tail(z: float, count: int) -> float:
    """The one-sided chance each of `count` independent readings may take so that any of them clears by
    chance as often as one reading clears `z`; in tails, not in 1 - tails (a z of 12, a threshold pair's, has
    a tail 1 - cdf rounds to 0)."""
    return -math.expm1(math.log1p(-normal_sf(z)) / max(count, 1))


def effective_n(n: int, rho: float) -> float:
    return n * (1.0 - rho) / (1.0 + rho)


def effective_n_of(resid: np.ndarray) -> tuple[float, float]:
    """Effective number of independent points in a residual series, and the lag-1 autocorrelation
    equivalent to it: n / (1 + 2 sum rho_k), the sum over Geyer's initial positive sequence (pairs of
    autocorrelations summed while positive; Geyer 1992, the estimator MCMC effective sample sizes use).
    A lag-1 correction alone misses noise that is a mix of batch noise and a slow wander (the lag-1
    autocorrelation of the mix is diluted by the batch noise, its persistence is not); the whole positive
    sequence sees both.  The lag-1 estimate (bias-corrected) is a floor on the correction."""
    n = len(resid)
    if n < 4:
        return float(n), 0.0
    r = resid - resid.mean()
    denom = float(np.dot(r, r))
    if denom <= 0:
        return float(n), 0.0
    size = 1 << int(2 * n - 1).bit_length()
    f = np.fft.rfft(r, size)
    acf = np.fft.irfft(f * np.conj(f), size)[:n] / denom
    odd = acf[1:n:2]
    even = np.append(acf[2:n:2], 0.0)[:len(odd)]
    pairs = odd + even
    stop = np.flatnonzero(pairs <= 0)
    total = float(pairs[:stop[0] if len(stop) else len(pairs)].sum())
    # 1 + 2 sum_{k>=1} rho_k, from pairs that start at lag 1: tau = 1 + 2 * total, never under the lag-1 one
    rho1 = lag1_autocorrelation(resid)
    tau = max(1.0 + 2.0 * total, (1.0 + rho1) / (1.0 - rho1))
    tau = min(tau, float(n))
    n_eff = n / tau
    return n_eff, (tau - 1.0) / (tau + 1.0)


def linear_change(steps: np.ndarray, values: np.ndarray, *, noise_floor: float = 0.0) -> Change:
    """Least-squares change over the points given (from the first step to the last), with its standard
    error corrected for autocorrelation (module docstring).  `noise_floor` bounds the residual sd from
    below (binomial_floor).  Fewer than 4 points or an effective n under 3: an infinite se.  Curves over
    _MAX_FIT_POINTS points are read as block means (_block_means)."""
    x, y = _block_means(np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64))
    n = len(x)
    if n < 4:
        return _UNKNOWN
    dx = x - x.mean()
    sxx = float(np.dot(dx, dx))
    if sxx <= 0:
        return _UNKNOWN
    slope = float(np.dot(dx, y - y.mean()) / sxx)
    resid = y - y.mean() - slope * dx
    n_eff, rho = effective_n_of(resid)
    sd = max(math.sqrt(float(np.dot(resid, resid)) / (n - 2)), float(noise_floor))
    width = float(x[-1] - x[0])
    estimate = slope * width
    if n_eff <= 3:
        return Change(estimate, math.inf, -math.inf, math.inf, n, n_eff, rho, sd)
    # the plain slope se, inflated by n/n_eff in variance and with n_eff - 2 degrees of freedom
    se = sd / math.sqrt(sxx) * math.sqrt((n - 2) / (n_eff - 2)) * width
    t = t975(n_eff - 2)
    return Change(estimate, se, estimate - t * se, estimate + t * se, n, n_eff, rho, sd)


def window_change(steps: np.ndarray, values: np.ndarray, start: float, end: float, *,
                  noise_floor: float = 0.0) -> Change:
    inside = (steps >= start) & (steps <= end)
    return linear_change(steps[inside], values[inside], noise_floor=noise_floor)


def level_gain(values: np.ndarray, head_points: int = 1, noise_floor: float = 0.0) -> Change:
    """The change from a curve's first `head_points` points (where the window began) to the level
    of its second half, or of the points after the head where that is later (medians), with a standard
    error from the robust point-to-point noise of the points (first differences / sqrt 2: a jump among
    them does not count as noise), at least `noise_floor`, corrected for the tail's autocorrelation.  A
    sparse eval that jumped early and then held is a sure gain, which a straight line through the jump
    and the plateau reads poorly."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    k = min(max(int(head_points), 1), n)
    if n < 4 or n - max(k, n // 2) < 2:
        return _UNKNOWN
    head = v[:k]
    tail = v[max(k, n // 2):]
    estimate = float(st.median(tail) - st.median(head))
    # the noise from every point's neighbour differences (robust: one jump among them does not count),
    # not from the few points of the tail alone
    sd = max(st.noise_sd(v), noise_floor)
    if sd <= 0:
        sd = st.robust_sd(tail)
    rho = lag1_autocorrelation(tail - st.median(tail))
    tail_eff = max(effective_n(len(tail), rho), 1.0)
    # a median's variance is ~pi/2 a mean's for normal noise
    se = sd * math.sqrt(math.pi / 2 * (1.0 / len(head) + 1.0 / tail_eff))
    if se <= 0:
        return Change(estimate, 0.0, estimate, estimate, n, tail_eff, rho, sd)
    t = t975(max(tail_eff - 1, 1.0))
    return Change(estimate, se, estimate - t * se, estimate + t * se, n, tail_eff, rho, sd)


def binomial_floor(values: np.ndarray, max_samples: int = 4096) -> float:
    """The least sd a mean of n binary samples can have at this curve's level: sqrt(p (1 - p) / n), n from
    the values' granularity (every value a multiple of 1/n, n <= max_samples), p the median kept half a
    sample inside 0..1.  0 when the values are not on 0..1 or show no such granularity (a reward model's
    logits, a mean over a varying batch): then the residuals alone set the noise."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 4 or v.min() < 0 or v.max() > 1:
        return 0.0
    n = _granularity(v, max_samples)
    if n is None:
        return 0.0
    p = min(max(float(st.median(v)), 0.5 / n), 1.0 - 0.5 / n)
    return math.sqrt(p * (1.0 - p) / n)


def _granularity(v: np.ndarray, max_samples: int) -> int | None:
    """The smallest n with every value within float32 rounding of a multiple of 1/n (loggers write
    float32), or None.  Tried on the distinct values only, and only when they are few enough for a
    multiple of 1/n to mean something (at most n + 1 distinct values)."""
    distinct = st.distinct(v)
    if len(distinct) < 2:
        return None
    ns = np.arange(max(len(distinct) - 1, 1), max_samples + 1, dtype=np.float64)
    # every candidate n at once against a spread of 16 distinct values, then the few n that fit those
    # against all of them (all n against all values cost ~7 ms on a 0..1 curve with no granularity)
    probe = distinct[np.linspace(0, len(distinct) - 1, min(len(distinct), 16)).astype(np.int64)]
    ns = ns[_fits(ns, probe)]
    if len(probe) < len(distinct):
        for first in range(0, len(ns), _GRANULARITY_BLOCK):
            block = ns[first:first + _GRANULARITY_BLOCK]
            fits = _fits(block, distinct)
            if fits.any():
                return int(block[int(np.argmax(fits))])
        return None
    return int(ns[0]) if len(ns) else None


def _fits(ns: np.ndarray, values: np.ndarray, tol: float = 2e-6) -> np.ndarray:
    """For each n, whether every value lies within float32 rounding (tol * n) of a multiple of 1/n."""
    scaled = ns[:, None] * values[None, :]
    return np.all(np.abs(scaled - np.round(scaled)) <= tol * ns[:, None], axis=1)


_GRANULARITY_BLOCK = 256


def share(change: float, scale: float) -> float:
    """A change as a share of a scale (a range, a headroom, a level), 0 for an empty scale."""
    return change / scale if scale > 0 else 0.0


def smoothed_range(values: np.ndarray, points: int = 3) -> float:
    """The range a curve covers once single-point noise is taken out (a running median of `points`)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return 0.0
    smooth = st.rolling_median(v, points)
    return float(smooth.max() - smooth.min())


def headroom(level: float, values: np.ndarray, *, up: bool = True) -> float | None:
    """Room left to a known bound: 1 - level (0 - level going down) for a curve whose every value lies
    on 0..1 (a success rate, a 0/1 reward); None when no bound is known."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0 or v.min() < 0 or v.max() > 1:
        return None
    return (1.0 - level) if up else level


@dataclass(frozen=True, slots=True)
class Onset:
    """Where a curve's slope changed (the hinge of the best two-phase fit) and its 95% interval."""

    step: int
    low: int
    high: int

    def text(self) -> str:
        return f"step {self.step} (95% interval {self.low}-{self.high})" if self.low != self.high \
            else f"step {self.step}"

    def overlaps(self, other: "Onset") -> bool:
        return self.low <= other.high and other.low <= self.high


def hinge_onset(steps: np.ndarray, values: np.ndarray, *, min_side_points: int = 3) -> Onset | None:
    """Where the curve changed: the hinge of y = a + b t + c max(t - tau, 0) that fits best by least
    squares, or, where it fits decisively better (by the likelihood ratio below), the level shift
    y = a + b t + d [t > tau] of a jump between two logged points: logged every few hundred steps, a move
    within one interval is a step, which no continuous hinge fits (the best one bent hundreds of steps
    early, its interval excluding the jump).  Candidate taus are at the logged steps (at most _MAX_HINGES
    of them, evenly spread); the interval is the taus whose profile likelihood is within CHI2_1_95 of the
    best in effective points, and a shift's reaches the first point after it (the jump happened somewhere
    in between).  None for fewer than 2 * min_side_points + 1 points or a curve that does not move."""
    t = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(y)
    t, y = t[ok], y[ok]
    t, y = _block_means(t, y)
    n = len(t)
    if n < 2 * min_side_points + 1:
        return None
    t0, scale_t = t[0], max(float(t[-1] - t[0]), 1e-12)
    u = (t - t0) / scale_t
    z = _standardized(y)
    if z is None:
        return None
    cand, sse = _best_hinge(u, z, min_side_points)
    # a shift is read at every point (its fit costs O(1) a candidate from suffix sums): on a grid, a jump
    # between two points off it was read as a bend
    every = np.arange(min_side_points - 1, n - min_side_points)
    shift_sse = _shift_sse(u, z, u[every])
    shift_sse = np.where(np.isfinite(shift_sse), shift_sse, np.inf)
    hinge_min = float(np.nanmin(sse)) if np.isfinite(sse).any() else math.inf
    best = int(np.nanargmin(shift_sse))
    at = int(every[best])
    fitted = _fitted(_shift_design(u, float(u[at])), z)
    spread = float(np.ptp(fitted))
    # the points' own step from `at` to the next, as a share of the fitted curve's range
    jump_share = abs(float(z[at + 1] - z[at])) / spread if spread > 0 else 0.0
    n_eff = _n_eff_around(z, fitted)
    # the shift only for a jump (half the fitted change or more between two logged points) that fits
    # decisively better, by the likelihood ratio the interval uses: where the points resolve the change
    # (a creep, a curved ramp, an exponential blow-up) its onset is where it bends, not where it is
    # steepest
    shifted = jump_share >= 0.5 and math.isfinite(float(shift_sse[best])) and \
        n_eff * math.log(max(hinge_min, 1e-300) / max(float(shift_sse[best]), 1e-300)) > CHI2_1_95
    if shifted:
        cand, sse = every, shift_sse
    elif not np.isfinite(sse).any():
        return None
    else:
        best = int(np.nanargmin(sse))
        n_eff = _n_eff_around(z, _fitted(_hinge_design(u, float(u[cand[best]])), z))
    sse_min = max(float(sse[best]), 1e-300)
    within = np.flatnonzero(n_eff * np.log(np.maximum(sse, 1e-300) / sse_min) <= CHI2_1_95)
    # the candidates are a grid where the curve has more points than _MAX_HINGES: the change may lie
    # anywhere between a candidate and its neighbours, so the interval reaches them (bench/onset_coverage.py:
    # a jump at n = 1,000 was covered 77-82% of the time, its interval ending one grid step short)
    lo_i, hi_i = int(within.min()), int(within.max())
    if len(cand) < n - 2 * min_side_points + 1:
        lo_i, hi_i = max(lo_i - 1, 0), min(hi_i + 1, len(cand) - 1)
    high = min(int(cand[hi_i]) + 1, n - 1) if shifted else int(cand[hi_i])
    return Onset(int(t[cand[best]]), int(t[cand[lo_i]]), int(t[high]))


def _standardized(y: np.ndarray) -> np.ndarray | None:
    """(y - mean) / sd, or None for a curve that does not move (sd under 1e-12 of its largest value).
    Divided by the largest |y| first: values near 1e308 (a float64 logged from an overflow) made the sd
    itself overflow, every hinge's fit NaN and the onset's interval an empty set."""
    peak = float(np.max(np.abs(y))) if len(y) else 0.0
    if not peak > 0 or not math.isfinite(peak):
        return None
    w = y / peak
    sd = float(np.std(w))
    if not sd > 1e-12:
        return None
    return (w - w.mean()) / sd


def _block_means(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Curves longer than _MAX_FIT_POINTS as block means (steps and values): a change point or a fitted
    change is read to 1/_MAX_FIT_POINTS of the span, at a fixed cost per curve."""
    if len(t) <= _MAX_FIT_POINTS:
        return t, y
    size = -(-len(t) // _MAX_FIT_POINTS)
    cut = len(t) // size * size

    def blocks(a: np.ndarray) -> np.ndarray:
        head = a[:cut].reshape(-1, size).mean(axis=1)
        return np.concatenate([head, a[cut:].mean(keepdims=True)]) if cut < len(a) else head
    return blocks(t), blocks(y)


def _best_hinge(u: np.ndarray, z: np.ndarray, min_side_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate hinge indices (at most _MAX_HINGES, evenly spread) and the fit's residual sum of squares
    at each."""
    n = len(u)
    cand = np.arange(min_side_points - 1, n - min_side_points)
    if len(cand) > _MAX_HINGES:
        cand = st.distinct(np.linspace(cand[0], cand[-1], _MAX_HINGES).round().astype(np.int64))
    return cand, _hinge_sse(u, z, u[cand])


def hinge_change(steps: np.ndarray, values: np.ndarray, *, noise_floor: float = 0.0,
                 min_side_points: int = 3) -> Change:
    """How far a curve rose from its start, read on its best two-phase (hinge) fit: the fitted level at
    the higher of the hinge and the last step, minus the fitted level at the first step, with a standard
    error from the fit's covariance, the residual sd (never under `noise_floor`) and the effective number
    of points of its residuals (effective_n_of).  Residuals of one straight line through a curve that is
    flat and then climbs (or climbs and then holds) are autocorrelated by the misfit, not by the noise,
    and a correction read from them would call a clear late rise "too noisy"; the hinge takes the bend
    and leaves the noise.  The whole run is read, so no window chosen where the curve is highest biases
    it (a wandering null)."""
    t = np.asarray(steps, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    t, y = _block_means(t, y)
    n = len(t)
    if n < max(2 * min_side_points + 1, 8):
        return linear_change(t, y, noise_floor=noise_floor)
    t0, scale_t = t[0], max(float(t[-1] - t[0]), 1e-12)
    u = (t - t0) / scale_t
    z = _standardized(y)
    if z is None:
        return linear_change(t, y, noise_floor=noise_floor)
    cand, sse = _best_hinge(u, z, min_side_points)
    if not np.isfinite(sse).any():
        return _UNKNOWN
    tau = float(u[cand[int(np.nanargmin(sse))]])
    x = _hinge_design(u, tau)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    n_eff, rho = effective_n_of(resid)
    sd = max(math.sqrt(float(np.dot(resid, resid)) / max(n - 3, 1)), float(noise_floor))
    at = [np.array([1.0, 0.0, 0.0]), np.array([1.0, tau, 0.0]), np.array([1.0, 1.0, 1.0 - tau])]
    fitted = [float(a @ beta) for a in at]
    top = 1 if fitted[1] > fitted[2] else 2
    d = at[top] - at[0]
    estimate = fitted[top] - fitted[0]
    knots = tuple((float(t0 + a[1] * scale_t), level) for a, level in zip(at, fitted))
    if n_eff <= 4:
        return Change(estimate, math.inf, -math.inf, math.inf, n, n_eff, rho, sd, knots)
    cov = np.linalg.pinv(x.T @ x)
    se = sd * math.sqrt(max(float(d @ cov @ d), 0.0)) * math.sqrt((n - 3) / (n_eff - 3))
    q = t975(n_eff - 3)
    return Change(estimate, se, estimate - q * se, estimate + q * se, n, n_eff, rho, sd, knots)


def _hinge_sse(u: np.ndarray, z: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Residual sum of squares of the 3-parameter hinge fit at each tau, from suffix sums (O(n + taus))."""
    # suffix sums over points with u > tau: count, sum u, sum u^2, sum z, sum u z
    count, s1, s2, sz, suz = _suffix_sums(u, taus, u, u * u, z, u * z)
    h1 = s1 - taus * count                                # sum h
    h2 = s2 - 2 * taus * s1 + taus * taus * count         # sum h^2
    uh = s2 - taus * s1                                   # sum u h
    hz = suz - taus * sz                                  # sum h z
    return _sse_beside_line(u, z, h1, uh, h2, hz)


def _suffix_sums(u: np.ndarray, taus: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """For each tau: the number of points with u > tau, and each column's sum over them."""
    after = np.searchsorted(u, taus, side="right")
    return [(len(u) - after).astype(np.float64)] + \
        [np.concatenate([np.cumsum(a[::-1])[::-1], [0.0]])[after] for a in columns]


def _sse_beside_line(u: np.ndarray, z: np.ndarray, h: np.ndarray, uh: np.ndarray, hh: np.ndarray,
                     hz: np.ndarray) -> np.ndarray:
    """Residual sum of squares of z on (1, u, h), for a batch of third regressors h given by their sums
    (sum h, sum u h, sum h^2, sum h z): the normal equations, one 3 x 3 solve each."""
    su, suu, szz, sumz, suz = float(u.sum()), float(np.dot(u, u)), float(np.dot(z, z)), float(z.sum()), \
        float(np.dot(u, z))
    xtx = np.empty((len(h), 3, 3))
    xtx[:, 0, 0], xtx[:, 0, 1], xtx[:, 0, 2] = float(len(u)), su, h
    xtx[:, 1, 0], xtx[:, 1, 1], xtx[:, 1, 2] = su, suu, uh
    xtx[:, 2, 0], xtx[:, 2, 1], xtx[:, 2, 2] = h, uh, hh
    xty = np.stack([np.full(len(h), sumz), np.full(len(h), suz), hz], axis=1)
    # a tiny ridge keeps a third regressor with (nearly) no points behind it solvable
    xtx[:, 2, 2] += 1e-12
    beta = np.linalg.solve(xtx, xty[..., None])[..., 0]
    return szz - np.einsum("ij,ij->i", beta, xty)


def _hinge_design(u: np.ndarray, tau: float) -> np.ndarray:
    """The hinge model's regressors: 1, u, max(u - tau, 0)."""
    return np.stack([np.ones_like(u), u, np.maximum(u - tau, 0.0)], axis=1)


def _shift_sse(u: np.ndarray, z: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Residual sum of squares of the 3-parameter level-shift fit (1, u, [u > tau]) at each tau, from
    suffix sums as _hinge_sse; inf where the shift leaves no point after it."""
    count, s1, sz = _suffix_sums(u, taus, u, z)
    # the indicator h: sum h = sum h^2 = the count after tau, sum u h and sum h z the suffix sums
    return np.where(count > 0, _sse_beside_line(u, z, count, s1, count, sz), np.inf)


def _shift_design(u: np.ndarray, tau: float) -> np.ndarray:
    """The level-shift model's regressors: 1, u, [u > tau]."""
    return np.stack([np.ones_like(u), u, (u > tau).astype(np.float64)], axis=1)


def _fitted(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The least-squares fit of z on the regressors x, at the points."""
    beta, *_ = np.linalg.lstsq(x, z, rcond=None)
    return x @ beta


def _n_eff_around(z: np.ndarray, fitted: np.ndarray) -> float:
    """Effective points of a fit's residuals: the likelihood counts independent points."""
    return max(effective_n_of(z - fitted)[0], 1.0)


@dataclass(frozen=True, slots=True)
class Improvement:
    """An independent eval that improved over a window: which, by how much, and how sure."""

    signal: str
    first: float
    last: float
    change: Change
    gain_share: float         # the change as a share of the eval's scale (its level, or headroom to 1)
    room: float | None = None  # headroom to 1 left at its later level, on a 0..1 eval

    def saturated(self) -> bool:
        """It gained more than the room it has left: most of the way to its ceiling."""
        return self.room is not None and self.change.estimate >= self.room

    def text(self) -> str:
        return (f"{self.signal} {self.first:.3g} -> {self.last:.3g} ({self.gain_share:+.0%} of its scale, "
                f"z {self.change.z:.1f})")


def eval_improvement(evals, start: float, end: float, *, min_z: float = 2.0,
                     min_gain_share: float = 0.05) -> Improvement | None:
    """The eval that improved most surely over [start, end] (its last point at or before `start` counts
    as the baseline, since evals are logged sparsely): a trend `min_z` corrected standard errors above 0
    (beside other evals, `min_z` for their number: family_z) and at least `min_gain_share` of its scale.
    None when no eval did."""
    best: Improvement | None = None
    min_z = family_z(min_z, len(evals or ()))        # the best of several evals improving by chance
    for curve in evals or ():
        c = curve.finite()
        if len(c.steps) == 0:
            continue
        before = np.flatnonzero(c.steps <= start)
        first = int(before[-1]) if len(before) else 0
        keep = slice(first, int(np.searchsorted(c.steps, end, side="right")))
        values = c.values[keep]
        # the eval's noise is its own, whatever the window: read on all of its points as well, so that a
        # window of five evals whose four differences happen to be small does not make a dip and a
        # rebound between two of them a sure gain
        change = level_gain(values, noise_floor=st.noise_sd(c.values))
        if not math.isfinite(change.se) or not change.sure(min_z):
            continue
        level = max(float(st.median(np.abs(values))), 1e-12)
        room = headroom(level, c.values)
        scale = min(level, room) if room is not None and room > 0 else level
        last = float(st.median(values[len(values) // 2:]))
        found = Improvement(c.signal, float(values[0]), last, change, change.estimate / scale,
                            1.0 - last if room is not None else None)
        if found.gain_share >= min_gain_share and (best is None or change.z > best.change.z):
            best = found
    return best
