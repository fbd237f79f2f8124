"""How far a single point must stand from its level before a healthy run shows one like it less often than a
declared per-run budget: the run's own tail, read as a Student-t, and a bound that grows with the points.

Why.  A fixed bar ("15 robust sds", "5x its EMA") is crossed by chance more often the longer the run: i.i.d.
log-normal grad norms with sigma 0.5 crossed 5x their EMA on 78% of 4,000-step runs.  A bar that keeps the
chance that a healthy run raises any alarm at `alpha` must grow with the number of points n tested and with
the heaviness of the noise's tail: each point may cross it with chance alpha / n (Bonferroni; conservative when
neighbouring points share a baseline).  How heavy the tail is differs from run to run (a grad norm's log
scatter is near Gaussian in one run and Student-t(3) in another, whose 1-in-10^5 point stands 90 robust sds
out), so it is read from the run itself.

What.  The noise is read apart from the mean: each point's residual from the median of its eight neighbours
(four before, four after; `neighbour_residuals`), which a trend or a level shift barely moves (a step leaves a
few residuals beside it, a spike one; with four neighbours the median's own scatter made a Student-t(3) read as
t(4)), standardized by their robust spread in blocks of points
(`local_scale`: noise that shrinks or grows over a run is read where it is).  A Student-t location-scale
family, symmetric around 0, is fitted to those by maximum likelihood on a grid of degrees of freedom
(`fit_tail`), the points beyond the body's `body` quantile censored (they count as "beyond", their values
unread), so that the spikes being tested cannot make the tail they are tested against.  The lower end of the
profile likelihood's 80% interval for the degrees of freedom (chi2(1) 80% / 2 = 0.82 under its maximum; Venzon
& Moolgavkar 1988), a one-sided 90% bound, gives the heaviest tail the data allow, `dof_low` (at most as heavy
as t(2)); at 95% a Gaussian run of 100 points was read as t(2) and a 30-sd spike was within its noise.  The
bar is that t's 1 - alpha / n
quantile in robust sds (`point_threshold`).  Few points allow heavy tails, so a short run's bar is high; a
run too short to fit (fewer than 8 points) has none.

Student-t quantiles are computed here from the regularized incomplete beta function (continued fraction,
Numerical Recipes 6.4) rather than taken from scipy.stats, which costs seconds to import.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ... import _stats as st

# the heaviest tail considered is Student-t(2), whose variance is already infinite: heavier (Cauchy-like)
# noise would have no level to be a spike from, and a short run's interval always reaches it
DOF_GRID = (2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 25.0, 50.0, math.inf)
NEIGHBOURS = 4                            # neighbours on each side whose median a residual is taken from
_MIN_UNTIED = 3                           # nonzero residuals a block of mostly ties reads its sd on (local_scale)
CHI2_1_80_HALF = 0.8211872075832248      # chi2(1) 80% quantile / 2: the profile likelihood's 80% interval
_SCALE_GRID = np.geomspace(0.7, 1.4, 13)  # the scale profiled around the value that matches the median
_MAX_FIT_POINTS = 10_000                  # residuals read by the fit (a stride through longer curves): cost only
MIN_FIT_POINTS = 8
MAD_EFFICIENCY = 0.368                    # the MAD's asymptotic efficiency under Gaussian noise
_SERIES_DOF = 1000                        # chi2 quantiles by the series up to this many degrees of freedom
MIN_CENSORED = 4                          # the fewest points censored at the top of the body


@dataclass(frozen=True, slots=True)
class Tail:
    """A Student-t read from a curve's standardized residuals: the best-fitting degrees of freedom and the
    heaviest tail (fewest degrees of freedom) within its 80% profile interval; inf is Gaussian."""

    dof: float
    dof_low: float
    points: int


def neighbour_residuals(values: np.ndarray, side: int = NEIGHBOURS) -> np.ndarray:
    """Each point minus the median of its `side` neighbours on each side (the point itself left out), NaN at
    the `side` points at either end.  Computed in chunks, so a million points need no 8 x n array; for the
    default four a side by a sorting network (np.partition over the stacked rows cost a fifth of a
    million-point check), the same numbers."""
    y = np.asarray(values, dtype=np.float64)
    n = len(y)
    out = np.full(n, np.nan)
    if n < 2 * side + 1:
        return out
    offsets = [o for o in range(-side, side + 1) if o != 0]
    chunk = 1 << 13     # a chunk's dozens of temporaries stay in the CPU's cache: 1 << 16 was 7x slower
    for a in range(side, n - side, chunk):
        b = min(a + chunk, n - side)
        if side == 4 and not np.isnan(y[a - side:b + side]).any():
            out[a:b] = y[a:b] - _neighbours_middle_pair_mean(y[a - side:b + side])
            continue
        around = [y[a + o:b + o] for o in offsets]
        if side == 4:
            out[a:b] = y[a:b] - _middle_pair_mean_of_8(around)
            continue
        stacked = np.stack(around)
        stacked.partition((side - 1, side), axis=0)
        out[a:b] = y[a:b] - 0.5 * (stacked[side - 1] + stacked[side])
    return out


# Batcher's odd-even merge sort of 8 (19 compare-exchanges; it sorts all 256 inputs of 0s and 1s, so all)
_SORT_8 = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (1, 2), (5, 6), (0, 4), (3, 7),
           (1, 5), (2, 6), (1, 4), (3, 6), (2, 4), (3, 5), (3, 4))


def _neighbours_middle_pair_mean(seg: np.ndarray) -> np.ndarray:
    """_middle_pair_mean_of_8 of the four points before and the four after each of seg[4:-4] (seg without NaN),
    the same numbers with fewer operations: every run of four consecutive points is sorted once (5
    compare-exchanges over the whole segment), so a point's two sorted halves are the runs that end just
    before it and start just after it, and the 4th and 5th smallest of two sorted fours are
    min over i + j = k of max(a[i - 1], b[j - 1]) for k = 4, 5 (the largest of the k smallest taken as a prefix
    of each half, least over the splits).  Min and max only pick values, so the mean is of the same two."""
    m = len(seg)
    c = [seg[k:m - 3 + k] for k in range(4)]          # c[k][s] = seg[s + k]: the runs of four starting at s
    for i, j in ((0, 1), (2, 3), (0, 2), (1, 3), (1, 2)):
        c[i], c[j] = np.minimum(c[i], c[j]), np.maximum(c[i], c[j])
    count = m - 8
    a = [r[:count] for r in c]                          # the four before each point, sorted
    b = [r[5:5 + count] for r in c]                     # the four after it, sorted
    fourth = np.minimum(np.minimum(a[3], b[3]),
                        np.minimum(np.maximum(a[0], b[2]), np.minimum(np.maximum(a[1], b[1]), np.maximum(a[2], b[0]))))
    fifth = np.minimum(np.minimum(np.maximum(a[0], b[3]), np.maximum(a[1], b[2])),
                       np.minimum(np.maximum(a[2], b[1]), np.maximum(a[3], b[0])))
    return 0.5 * (fourth + fifth)


def _middle_pair_mean_of_8(rows: list[np.ndarray]) -> np.ndarray:
    """The mean of the 4th and 5th smallest of eight equal-length arrays, elementwise, as np.partition gives
    it: NaN sorts last, so it is NaN where four or more of the eight are NaN (neighbour_residuals reads a
    chunk without NaN by _neighbours_middle_pair_mean)."""
    missing = sum(np.isnan(r).astype(np.int8) for r in rows)
    v = [np.where(np.isnan(r), np.inf, r) for r in rows]
    for i, j in _SORT_8:
        v[i], v[j] = np.minimum(v[i], v[j]), np.maximum(v[i], v[j])
    return np.where(missing >= 4, np.nan, 0.5 * (v[3] + v[4]))


def local_scale(residuals: np.ndarray, block: int, floor: float = 0.0) -> np.ndarray:
    """Each point's noise sd: the robust sd (MAD) of the finite residuals in its block of `block` points (the
    last block takes the remainder, a short one joins the block before it), at least `floor`.  A MAD of 0
    says that more than half the block is ties (residuals of exactly 0: a stretch logged as one value), not
    that its other points have no noise: there the sd is read on the residuals that are not 0, as fit_tail
    reads them (a block half in a loss that collapsed to exactly 0 held the noisy points beside it to a
    floor of one printed step, and they stood "thousands of sds" from their neighbours).  Whole blocks
    without a non-finite residual are read all at once (one row each: a million points are 7,800 blocks,
    and one robust sd per block in Python cost a second); the others one by one."""
    n = len(residuals)
    out = np.full(n, floor, dtype=np.float64)
    block = max(int(block), 1)
    edges = block_edges(n, block)
    whole = sum(1 for a, b in zip(edges[:-1], edges[1:]) if b - a == block)    # the leading whole blocks
    rows = residuals[:whole * block].reshape(whole, block)
    clean = np.isfinite(rows).all(axis=1) if block >= 3 else np.zeros(whole, dtype=bool)
    if clean.any():
        part = rows[clean]
        centre = st.median_of_rows(part)
        sd = st.MAD_TO_SD * st.median_of_rows(np.abs(part - centre[:, None]))
        # mostly ties but with points that are not: read one by one below (a block all of one value, a
        # curve frozen at 0 for a million steps, keeps its floor here)
        untied = sd == 0
        if untied.any():
            untied[untied] = np.count_nonzero(part[untied], axis=1) >= _MIN_UNTIED
        clean[np.flatnonzero(clean)[untied]] = False
        out[:whole * block].reshape(whole, block)[clean] = np.maximum(sd[~untied], floor)[:, None]
    for i in [*np.flatnonzero(~clean), *range(whole, len(edges) - 1)]:      # the blocks left, one by one
        a, b = edges[i], edges[i + 1]
        part = residuals[a:b]
        part = part[np.isfinite(part)]
        if len(part) >= 3:
            sd = st.robust_sd(part)
            if sd == 0 and np.count_nonzero(part) >= _MIN_UNTIED:
                sd = st.robust_sd(part[part != 0])
            out[a:b] = max(sd, floor)
    return out


def block_edges(n: int, block: int) -> list[int]:
    """The starts of `n` points' blocks of `block` points, and n: the last block takes the remainder, and a
    remainder under half a block joins the block before it."""
    edges = list(range(0, n, block)) + [n]
    if len(edges) > 2 and edges[-1] - edges[-2] < block // 2:
        edges.pop(-2)
    return edges


def fit_tail(z: np.ndarray, *, body: float = 0.99) -> Tail | None:
    """The Student-t that best fits the standardized residuals `z` (symmetric about 0, its scale profiled),
    the points beyond the `body` quantile of |z| (at least the top MIN_CENSORED) censored; None with fewer
    than MIN_FIT_POINTS finite nonzero ones.  Grid of degrees of freedom: DOF_GRID."""
    x = _fit_points(z)
    if len(x) < MIN_FIT_POINTS:
        return None
    if len(x) > _MAX_FIT_POINTS:
        x = x[np.linspace(0, len(x) - 1, _MAX_FIT_POINTS).astype(np.intp)]
    x = np.sort(x)
    # the body: all but the top share `1 - body`, and at least the top MIN_CENSORED (a level step leaves a
    # residual on each side of it, an excursion that comes back four, a spike one: the events being tested
    # must not make the tail; more censored on a short curve throws away the evidence that its other large
    # residuals are small)
    keep = min(int(body * (len(x) - 1)), len(x) - 1 - MIN_CENSORED)
    cut = float(x[max(keep, 0)])
    inside = x[x <= cut]
    beyond = len(x) - len(inside)
    middle = float(st.median(x))
    if middle <= 0 or cut <= 0:
        return Tail(math.inf, math.inf, len(x))        # no spread: nothing to read a tail from
    logliks = []
    for dof in DOF_GRID:
        scales = middle / t_isf(0.25, dof) * _SCALE_GRID
        u = inside[None, :] / scales[:, None]
        body_ll = np.sum(_half_t_logpdf(u, dof, out=u), axis=1) - len(inside) * np.log(scales)
        tail_ll = np.array([beyond * math.log(max(2.0 * t_sf(cut / s, dof), 1e-300)) for s in scales])
        logliks.append(float(np.max(body_ll + tail_ll)))
    ll = np.asarray(logliks)
    best = int(np.argmax(ll))
    allowed = np.flatnonzero(ll >= ll[best] - CHI2_1_80_HALF)
    return Tail(DOF_GRID[best], DOF_GRID[int(allowed[0])], len(x))


def _fit_points(z: np.ndarray) -> np.ndarray:
    """The |z| fit_tail reads: finite and nonzero.  A residual of exactly 0 is a tie of printed values (a loss
    logged as 0.0000 for a stretch), not a draw of the noise: it would read as a spike of density at 0, which
    no t has."""
    x = np.abs(np.asarray(z, dtype=np.float64))
    return x[np.isfinite(x) & (x > 0)]


def tail_readable(z: np.ndarray) -> bool:
    """Whether fit_tail(z) reads a tail (not None), without fitting one."""
    return len(_fit_points(z)) >= MIN_FIT_POINTS


def studentized_dof(dof: float, scale_points: int) -> float:
    """The degrees of freedom of a noise point divided by a robust sd (MAD) read from `scale_points` points:
    a Student-t(`dof`) point over an estimated scale is heavier-tailed still.  The MAD of m Gaussian points
    is as precise as the sd of 0.37 m (its asymptotic efficiency, 0.368: Hampel, Ronchetti, Rousseeuw &
    Stahel 1986, 2.5), and a point over an sd of k points is t(k - 1); the two tails add as 1 / dof (the
    Welch-Satterthwaite way of pooling)."""
    scale_dof = MAD_EFFICIENCY * max(int(scale_points) - 1, 1)
    return 1.0 / (1.0 / dof + 1.0 / scale_dof) if math.isfinite(dof) else scale_dof


def point_threshold(points: int, alpha: float, dof: float) -> float:
    """The robust z (distance from the level in robust sds: MAD x 1.4826) that one of `points` points of
    Student-t(`dof`) noise exceeds upward with chance at most `alpha` / `points` each, so that any of them
    does with chance at most `alpha`."""
    p = alpha / max(int(points), 1)
    return t_isf(p, dof) / (st.MAD_TO_SD * t_isf(0.25, dof))


def _half_t_logpdf(u: np.ndarray, dof: float, out: np.ndarray | None = None) -> np.ndarray:
    """log of the density of |T| for a standard Student-t T (twice its density on u >= 0); into `out` (which
    may be `u` itself: fit_tail's 13 x 10,000 arrays, one per dof, cost more to allocate than to compute)
    by the same operations in the same order as `const - (dof + 1) / 2 * np.log1p(u * u / dof)`."""
    t = np.multiply(u, u, out=out)
    if math.isinf(dof):
        np.multiply(0.5, t, out=t)       # = (0.5 * u) * u: a halving is exact (bar subnormals, which vanish beside it)
        return np.subtract(math.log(2.0) - 0.5 * math.log(2.0 * math.pi), t, out=t)
    const = math.log(2.0) + math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    np.divide(t, dof, out=t)
    np.log1p(t, out=t)
    np.multiply((dof + 1) / 2, t, out=t)
    return np.subtract(const, t, out=t)


def normal_sf(x: float) -> float:
    """P(Z > x) for a standard normal, in its tail (erfc: no 1 - cdf that rounds to 0 past x = 8)."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def t_sf(x: float, dof: float) -> float:
    """P(T > x) for a standard Student-t with `dof` degrees of freedom (inf: the standard normal)."""
    if math.isinf(dof):
        return normal_sf(x)
    tail = 0.5 * _betainc(dof / 2.0, 0.5, dof / (dof + x * x))
    return tail if x >= 0 else 1.0 - tail


@functools.lru_cache(maxsize=4096)
def t_isf(p: float, dof: float) -> float:
    """The x with P(T > x) = p, 0 < p < 1 (bisection on the monotone survival function).  Remembered: every
    fit asks for the quartile of each dof of the grid, and a run's bars for a few (p, dof) again and again."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1); got {p}")
    if p == 0.5:
        return 0.0
    if p > 0.5:
        return -t_isf(1.0 - p, dof)
    if dof == 1.0:
        return math.tan(math.pi * (0.5 - p))
    lo, hi = 0.0, 1.0
    while t_sf(hi, dof) > p:
        lo, hi = hi, hi * 2.0
    return _bisect(lambda x: t_sf(x, dof) > p, lo, hi, 100)


def _bisect(below, lo: float, hi: float, steps: int) -> float:
    """The point in [lo, hi] where the monotone test `below` (True under the root) turns False, by bisection
    to a relative width of 1e-12 or `steps` halvings."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if below(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes 6.4: its continued fraction,
    on the side where it converges fast)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def chi2_lower_quantile(p: float, dof: float) -> float:
    """The x with P(chi2(dof) < x) = p, for 0 < p < 1/2: bisection on the regularized lower incomplete gamma
    function's series (Numerical Recipes 6.2; it converges fast below the mean, where a lower quantile is);
    past 1,000 degrees of freedom, where the series needs thousands of terms, the Wilson-Hilferty cube
    (relative error under 2e-5 there)."""
    if not 0.0 < p < 0.5:
        raise ValueError(f"p must lie in (0, 0.5); got {p}")
    if dof > _SERIES_DOF:
        c = 2.0 / (9.0 * dof)
        return dof * (1.0 - c - t_isf(p, math.inf) * math.sqrt(c)) ** 3
    return _bisect(lambda x: _gammainc_lower(dof / 2.0, x / 2.0) < p, 0.0, float(dof), 200)


def _gammainc_lower(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x) by its series (x below a + 1)."""
    if x <= 0.0:
        return 0.0
    term = total = 1.0 / a
    n = a
    for _ in range(1000):
        n += 1.0
        term *= x / n
        total += term
        if term < total * 1e-16:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def sd_upper_bound(values: np.ndarray, z: float) -> float:
    """An upper confidence bound on the sd of the (Gaussian, independent) points `values`, one-sided at the
    normal tail of `z` sds: s sqrt((n - 1) / chi2_{n-1}(p)), the sample sd s (n - 1 in its divisor).  A bar
    stated in sds and read against a few points' spread holds its rate however few they are: five points
    read a sd under half the true one about once in 30 draws."""
    n = len(values)
    s = float(np.std(values, ddof=1))
    return s * math.sqrt((n - 1) / chi2_lower_quantile(normal_sf(z), n - 1))
