"""Robust statistics shared by the detectors: training curves are noisy and heavy-tailed, so levels are
medians, spreads are MADs, trends are Theil–Sen slopes, and "recent level" is an EMA."""

from __future__ import annotations

import functools
import heapq
import inspect
import math
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

MAD_TO_SD = 1.4826   # makes the MAD of a normal sample estimate its standard deviation

# the readings of one judgement (`remembered`): (function, id(array), its other arguments) -> (a weak reference
# to the array, the reading)
_REMEMBERED: ContextVar[dict | None] = ContextVar("stabdiag_remembered", default=None)


@contextmanager
def remembered() -> Iterator[None]:
    """Within it, a function marked `per_array` reads each array once for each set of its other arguments: the
    rules of one judgement read the same curves again and again (a million-point reward's noise three times, a
    grad norm's EMA twice).  The arrays are never modified while a run is judged; one that is freed is never
    mistaken for one made after it at the same address (the weak reference to it is dead)."""
    token = _REMEMBERED.set({})
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def per_array(fn):
    """`fn(array, ...)`, a pure function of a 1-D array and hashable arguments, remembered inside `remembered`
    (an array it returns is made read-only there: it may be handed out again)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(values, *args, **kwargs):
        memo = _REMEMBERED.get()
        if memo is None or type(values) is not np.ndarray:
            return fn(values, *args, **kwargs)
        bound = signature.bind(values, *args, **kwargs)
        bound.apply_defaults()
        key = (fn, id(values), tuple(bound.arguments.values())[1:])
        held = memo.get(key)
        if held is not None and held[0]() is values:
            return held[1]
        out = fn(values, *args, **kwargs)
        if isinstance(out, np.ndarray):
            out.flags.writeable = False
        memo[key] = (weakref.ref(values), out)
        return out

    return wrapper


def robust_sd(x: np.ndarray) -> float:
    if len(x) == 0:
        return 0.0
    return _mad_sd(np.array(x, dtype=np.float64))


def noise_sd(x: np.ndarray) -> float:
    """Point-to-point noise of a curve, insensitive to its trend: robust sd of first differences / √2."""
    if len(x) < 3:
        return 0.0
    return _mad_sd(np.diff(np.asarray(x, dtype=np.float64))) / np.sqrt(2.0)


def noise_sd_by_steps(steps: np.ndarray, x: np.ndarray, lag_frac: float = 0.02) -> float:
    """Noise of a curve between points `lag_frac` of its step span apart (at least one point apart):
    robust sd of x(t + lag) - x(t) / √2.  With independent noise it is noise_sd; with noise that wanders
    over tens of steps (rewards of batches drawn in data order) differences of neighbouring points see
    only part of it, a part that grows with the logging gap, so noise_sd read the same run 2x quieter
    logged every step than every 5th.  A lag in steps reads it the same at every gap under the lag."""
    if len(x) < 3:
        return 0.0
    steps = np.asarray(steps, dtype=np.float64)
    later = np.searchsorted(steps, steps + lag_frac * float(steps[-1] - steps[0]), side="left")
    later = np.maximum(later, np.arange(1, len(steps) + 1))
    ok = later < len(steps)
    if ok.sum() < 3:
        return noise_sd(x)
    x = np.asarray(x, dtype=np.float64)
    return _mad_sd(x[later[ok]] - x[ok]) / np.sqrt(2.0)


def _mad_sd(owned: np.ndarray) -> float:
    """MAD_TO_SD * np.median(|x - np.median(x)|), the same number, reordering and overwriting `owned` (a
    fresh array) instead of copying it twice: these run on every point of the longest curves."""
    if np.isnan(owned).any():
        return math.nan
    np.subtract(owned, _median_in_place(owned), out=owned)
    if np.isnan(owned).any():                    # Inf - Inf: an infinite median
        return math.nan
    return float(MAD_TO_SD * _median_in_place(np.abs(owned, out=owned)))


def median(x) -> float:
    """np.median of a 1-D array (NaN if any value is NaN, NaN for none), by partition: np.median and
    np.percentile import numpy.ma on their first call, a fifteenth of a cold `stabdiag check`."""
    a = np.array(x, dtype=np.float64).ravel()
    if len(a) == 0 or np.isnan(a).any():
        return math.nan
    return float(_median_in_place(a))


def distinct(x: np.ndarray) -> np.ndarray:
    """np.unique of a 1-D array without NaN (sorted distinct values), by sort, for the same reason as
    median: np.unique imports numpy.ma too."""
    a = np.sort(np.asarray(x).ravel())
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def median_of_rows(rows: np.ndarray) -> np.ndarray:
    """np.median(rows, axis=1) (NaN for a row holding NaN), by partition, for the same reason as median."""
    width = rows.shape[1]
    upper = width // 2
    if width % 2 == 0 and width and not np.isnan(rows).any():
        # the lower middle value is the largest left of the upper one: one selection, not two (3x faster)
        part = np.partition(rows, upper, axis=1)
        return (part[:, :upper].max(axis=1) + part[:, upper]) / 2
    part = np.partition(rows, [upper - 1, upper] if width % 2 == 0 else upper, axis=1)
    out = part[:, upper] if width % 2 else (part[:, upper - 1] + part[:, upper]) / 2
    return np.where(np.isnan(part[:, -1]), np.nan, out)


def quantile(x, q):
    """np.quantile's default (linear) of a 1-D array without NaN, for a scalar or a sequence of q."""
    a = np.sort(np.asarray(x, dtype=np.float64).ravel())
    pos = np.asarray(q, dtype=np.float64) * (len(a) - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, len(a) - 1)
    out = a[lo] + (a[hi] - a[lo]) * (pos - lo)
    return float(out) if out.ndim == 0 else out


def _median_in_place(a: np.ndarray) -> float:
    """np.median of `a` (no NaN in it), partitioning `a` itself: the middle value, or the mean of the two."""
    upper = len(a) // 2
    a.partition(upper)
    if len(a) % 2:
        return a[upper]
    return (a[:upper].max() + a[upper]) / 2


def edge_masks(steps: np.ndarray, frac: float) -> tuple[np.ndarray, np.ndarray]:
    """The points in the first and in the last `frac` of the step span (by steps, not by count, so that
    irregular logging does not tilt an edge toward the densely logged part)."""
    span = float(steps[-1] - steps[0])
    return steps <= steps[0] + frac * span, steps >= steps[-1] - frac * span


def edge_level_by_steps(steps: np.ndarray, x: np.ndarray, frac: float, *, end: bool = False,
                        min_points: int = 3) -> float:
    """Median of the points in the first (or last) `frac` of the step span (edge_masks; at least
    `min_points`)."""
    if len(x) == 0:
        return float("nan")
    inside = edge_masks(steps, frac)[1 if end else 0]
    if inside.sum() < min_points:
        return float(median(x[-min_points:] if end else x[:min_points]))     # the first (last) few
    return float(median(x[inside]))


def rolling_median(x: np.ndarray, window: int) -> np.ndarray:
    """Centred running median (edges use the shrunken window, NaN points are skipped); window is forced
    odd.  Exact: the same numbers as np.nanmedian over each window."""
    window = max(1, int(window)) | 1
    if window == 1 or len(x) < window:
        return x.astype(np.float64, copy=True) if window == 1 or len(x) == 0 else \
            np.full(len(x), float(median(x)))
    x = np.asarray(x, dtype=np.float64)
    half = window // 2
    if np.isnan(x).any():
        return _rolling_nanmedian(x, window)
    out = np.empty(len(x))
    out[half:len(x) - half] = sliding_median(x, window)
    # the edges' windows are the first (last) half+1 .. window-1 points
    out[:half] = expanding_median(x[:window - 1])[half:]
    out[len(x) - half:] = expanding_median(x[::-1][:window - 1])[half:][::-1]
    return out


def median_passes(x: np.ndarray, window: int, passes) -> np.ndarray:
    """passes(rolling_median(x, window)) for a threshold test `passes` (x > c, x <= c, ...) of a finite `x`:
    all False, without the running median, where no point of `x` passes, since a median of values none of
    which passes a threshold does not pass it either (the usual healthy case: no level crossed)."""
    hit = passes(x)
    return passes(rolling_median(x, window)) if hit.any() else hit


def rolling_median_at(x: np.ndarray, window: int, at: np.ndarray) -> np.ndarray:
    """rolling_median(x, window)[at], the same numbers, computing only the windows asked for: a detector
    that reads a running median on a grid of 201 steps need not run it over a million points."""
    x = np.asarray(x, dtype=np.float64)
    window = max(1, int(window)) | 1
    at = np.asarray(at, dtype=np.intp)
    if window == 1 or len(x) < window:
        return rolling_median(x, window)[at]
    half = window // 2
    out = np.empty(len(at))
    for j, i in enumerate(at.tolist()):
        points = x[max(i - half, 0):i + half + 1]
        out[j] = median(points[~np.isnan(points)])         # NaN left out, as rolling_median does
    return out


def _rolling_nanmedian(x: np.ndarray, window: int) -> np.ndarray:
    """rolling_median of a curve with NaN in it (no detector passes one): np.nanmedian over each window,
    a block of windows at a time so that no n x window array is held."""
    half = window // 2
    padded = np.concatenate([np.full(half, np.nan), x, np.full(half, np.nan)])
    return _per_row(sliding_window_view(padded, window), np.nanmedian)


_BLOCK_CELLS = 1 << 18          # windows x width materialised at a time (2 MB of float64)
_GROUPED_MAX_WIDTH = 128        # odd widths up to this share sorted cores 4 windows at a time; wider ones 8 or 16
_GROUPED_WIDE = 600             # ... (16 from here: a 401-point running median over 20k points 3.5x faster than
                                # selecting per window, a 1001-point one 3.8x)


def sliding_median(x: np.ndarray, width: int) -> np.ndarray:
    """The median of every `width` consecutive points, x[s:s+width] for s = 0 .. len(x)-width, exactly as
    np.median computes it (the middle value, or the mean of the two middle values).  x holds no NaN."""
    count = len(x) - width + 1
    if count <= 0:
        return np.empty(0)
    if width in (1, 3, 5):
        return _small_sliding_median(x, width)
    if count * width <= _BLOCK_CELLS or width % 2 == 0:
        return _select_rows(sliding_window_view(x, width))
    group = 4 if width <= _GROUPED_MAX_WIDTH else 8 if width <= _GROUPED_WIDE else 16
    return _grouped_median(x, width, group)


def _small_sliding_median(x: np.ndarray, width: int) -> np.ndarray:
    """sliding_median for a width of 1, 3 or 5 by min/max alone (a selection network), in place."""
    if width == 1:
        return x.astype(np.float64, copy=True)
    count = len(x) - width + 1
    a, b, c = x[:count], x[1:count + 1], x[2:count + 2]
    if width == 3:
        low, high = np.minimum(a, b), np.maximum(a, b)
        np.minimum(high, c, out=high)
        return np.maximum(low, high, out=low)
    # five: the middle two of the first four are the larger of the pairs' minima and the smaller of
    # their maxima; the median is the fifth point clamped between them
    d, e = x[3:count + 3], x[4:count + 4]
    low, other = np.minimum(a, b), np.minimum(c, d)
    np.maximum(low, other, out=low)
    high = np.maximum(a, b)
    np.maximum(c, d, out=other)
    np.minimum(high, other, out=high)
    np.minimum(low, high, out=other)
    np.maximum(low, high, out=high)
    np.maximum(e, other, out=other)
    return np.minimum(other, high, out=other)


def _grouped_median(x: np.ndarray, width: int, group: int = 4) -> np.ndarray:
    """sliding_median for an odd width from 7 up: `group` consecutive windows share a core of width-group+1
    points, sorted once.  A window's median is then the median of the core's `group` middle values and
    its group-1 other points (the core's points further out cannot be the middle one), found by inserting
    those points one at a time into the sorted middle values with min/max, keeping only the places that
    can still end up in the middle."""
    half = width // 2
    count = len(x) - width + 1
    groups = -(-count // group)
    # padded so that every group has all its windows' points; a window past the end is dropped at return
    padded = np.concatenate([x, np.full(group * (groups + width // group + 2) - len(x), x[-1])])
    size = width - group + 1
    cores = sliding_window_view(padded[group - 1:], size)[::group][:groups]
    middles = np.empty((group, groups))
    step = max(1, _BLOCK_CELLS // size)
    for s in range(0, groups, step):
        middles[:, s:s + step] = np.sort(cores[s:s + step], axis=1)[:, half - group + 1:half + 1].T
    columns = padded.reshape(-1, group).T.copy()     # columns[r][g] = x[group*g + r]
    out = np.empty((group, groups))
    for j in range(group):                           # the window starting at group*g + j
        others = [columns[r][:groups] for r in range(j, group - 1)]
        others += [columns[(width + i) % group][(width + i) // group:][:groups] for i in range(j)]
        kept = list(middles)
        for point in others:
            kept = [np.minimum(kept[p], np.maximum(kept[p - 1], point)) for p in range(1, len(kept))]
        out[j] = kept[0]
    return out.T.ravel()[:count]


def _select_rows(rows: np.ndarray) -> np.ndarray:
    """np.median of each row of a (strided) 2-D view holding no NaN, by one partition per block of rows
    (O(width) per row, memory for one block; np.median's own two-point partition is 5x slower)."""
    width = rows.shape[1]
    upper = width // 2                              # the middle value, or the upper of the two
    out = np.empty(len(rows))
    step = max(1, _BLOCK_CELLS // width)
    for s in range(0, len(rows), step):
        block = rows[s:s + step].copy()
        block.partition(upper, axis=1)
        if width % 2:
            out[s:s + step] = block[:, upper]
        else:
            out[s:s + step] = (block[:, :upper].max(axis=1) + block[:, upper]) / 2
    return out


def _per_row(rows: np.ndarray, median) -> np.ndarray:
    """median(row) of each row of a (strided) 2-D view, a block of rows at a time."""
    out = np.empty(len(rows))
    step = max(1, _BLOCK_CELLS // max(1, rows.shape[1]))
    for s in range(0, len(rows), step):
        out[s:s + step] = median(rows[s:s + step], axis=1)
    return out


def expanding_median(x: np.ndarray) -> np.ndarray:
    """median(x[:i+1]) for every i, with two heaps: O(n log n).  x holds no NaN."""
    out = np.empty(len(x))
    low: list[float] = []     # the lower half, negated (a max-heap); holds the extra point when odd
    high: list[float] = []
    for i, v in enumerate(x.tolist()):
        if low and v > -low[0]:
            heapq.heappush(high, v)
        else:
            heapq.heappush(low, -v)
        if len(low) > len(high) + 1:
            heapq.heappush(high, -heapq.heappop(low))
        elif len(high) > len(low):
            heapq.heappush(low, -heapq.heappop(high))
        out[i] = -low[0] if len(low) > len(high) else (-low[0] + high[0]) / 2
    return out


def recent_median_floor(x: np.ndarray, window: int) -> np.ndarray:
    """For each point, a value at or under the median of the `window` points before it (all points before
    it while there are fewer; NaN at the first point): exact over the first `window` points, a cheap
    O(n) bound after.  A test `x - median >= d` then needs the median only where `x - floor >= d`.

    The bound: cut the points into blocks of `size`; each whole block's order statistic r is at or under
    `size - r` of its points, so the least of them over F whole blocks inside the window is at or under
    F * (size - r) of the window's points: enough to be at or under its median once that is more than
    half the window.  x holds no NaN."""
    n = len(x)
    out = np.full(n, np.nan)
    head = min(window, n)
    if head > 1:
        out[1:head] = expanding_median(x[:head - 1])
    if n <= window:
        return out
    size = max(1, window // 8)
    whole = window // size - 1                       # whole blocks every window holds, at least
    rank = size - -(-(window - (window - 1) // 2) // whole) if whole >= 1 else -1
    if rank < 0:
        out[window:] = -np.inf
        return out
    count = n // size
    stats = np.partition(x[:count * size].reshape(count, size), rank, axis=1)[:, rank]
    least = np.min(sliding_window_view(stats, whole), axis=1)
    first = (np.arange(window, n) - window + size - 1) // size
    out[window:] = least[first]
    return out


def recent_median_mad(x: np.ndarray, window: int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD-sd of the `window` points before each index in `at` (all points before it while
    there are fewer; NaN where there are none)."""
    at = np.asarray(at, dtype=np.intp)
    med = np.full(len(at), np.nan)
    sd = np.full(len(at), np.nan)
    for j in np.flatnonzero((at < window) & (at > 0)):
        med[j] = median(x[:at[j]])
        sd[j] = robust_sd(x[:at[j]])
    full = np.flatnonzero(at >= window)
    if not len(full):
        return med, sd
    rows = sliding_window_view(x, window)
    step = max(1, _BLOCK_CELLS // window)
    for s in range(0, len(full), step):
        part = full[s:s + step]
        views = rows[at[part] - window]
        m = median_of_rows(views)
        med[part] = m
        sd[part] = MAD_TO_SD * median_of_rows(np.abs(views - m[:, None]))
    return med, sd


@per_array
def ema_before(x: np.ndarray, span: float) -> np.ndarray:
    """EMA of the points before each point (the current point excluded); first entry is NaN.  span >= 1.

    The recursion e_t = (1-a) e_(t-1) + a x_t as a closed form per chunk (see _ema), the numbers of a
    first-order IIR filter (scipy.signal.lfilter) within 1e-12 relative.  As there, a NaN or Inf point
    makes its EMA non-finite and every later one NaN (an Inf first point stays Inf until the next
    non-finite point)."""
    out = np.full(len(x), np.nan)
    if len(x) < 2:
        return out
    alpha = 2.0 / (span + 1.0)
    y = np.asarray(x[:-1], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    first = int(bad[0]) if len(bad) else len(y)
    ema = np.full(len(y), np.nan)
    if first > 0:
        ema[:first] = _ema(y[:first], alpha)
    else:                                         # the filter's state is Inf (or NaN) from the start
        first = int(bad[1]) if len(bad) > 1 else len(y)
        ema[:first] = alpha * y[:first] + (1.0 - alpha) * y[0]
        ema[0] = y[0]
    if first < len(y):
        ema[first] = alpha * y[first] + (1.0 - alpha) * ema[first - 1]
    out[1:] = ema
    return out


def _ema(y: np.ndarray, alpha: float) -> np.ndarray:
    """e_0 = y_0, e_t = (1-a) e_(t-1) + a y_t, for finite y, in O(n) numpy.

    Within a chunk of L points starting from state c, e_j = d^(j+1) c + a d^j sum_(k<=j) y_k / d^k
    (d = 1-a): a cumulative sum, no loop.  L keeps d^L >= 2**-200, so 1/d^k never overflows for y
    scaled to |y| <= 1 (by a power of two: exact) and d^k never underflows; the rounding error then
    stays near the recursion's own (about eps/a relative).  Only the chunks' end states are carried in
    Python, one float per chunk."""
    decay = 1.0 - alpha
    if decay <= 0.0:
        return y.copy()
    scale = 2.0 ** -np.frexp(np.max(np.abs(y)))[1] if np.any(y) else 1.0
    z = y[1:] * scale
    size = int(min(4096, max(1, 200 * math.log(2) / -math.log(decay)))) if decay < 1.0 else 4096
    chunks = -(-len(z) // size)
    powers = decay ** np.arange(size + 1)            # d^0 .. d^L
    local = np.zeros((chunks, size))
    local.ravel()[:len(z)] = z
    local /= powers[:-1]
    np.cumsum(local, axis=1, out=local)
    local *= alpha * powers[:-1]                     # each chunk's EMA from a state of 0
    state = float(y[0] * scale)
    starts = []
    last = powers[-1]
    for end in local[:, -1].tolist():                # the state each chunk starts from
        starts.append(state)
        state = end + last * state
    local += np.multiply.outer(starts, powers[1:])
    out = np.empty(len(y))
    out[0] = y[0]
    np.divide(local.ravel()[:len(z)], scale, out=out[1:])
    return out


def theil_sen_slope(steps: np.ndarray, values: np.ndarray, max_points: int = 300) -> float:
    """Median of pairwise slopes (on an even subsample of at most `max_points` points)."""
    slopes = _pairwise_slopes(steps, values, max_points)
    return float(median(slopes)) if len(slopes) else 0.0


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Every (start, end) inclusive stretch of True, in order."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]


def first_long_run(steps: np.ndarray, mask: np.ndarray, need: float,
                   need_at_end: float | None = None) -> tuple[int, int] | None:
    """The first (start, end) inclusive stretch of True that spans at least `need` steps (one that runs to
    the last point, `need_at_end` steps where given: the curve's state when the log ends), or None."""
    last = len(mask) - 1
    at_end = need if need_at_end is None else need_at_end
    return next(((a, b) for a, b in true_runs(mask) if steps[b] - steps[a] >= (at_end if b == last else need)),
                None)


def persistent_nonfinite_index(values: np.ndarray, recover_points: int = 3) -> int | None:
    """Index of the first non-finite value the curve does not come back from, or None.

    A non-finite point followed by `recover_points` finite points is transient (a loss-scale overflow,
    a skipped step); one the run ends on, or that more non-finite points follow closely, persists."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)
    seen = np.cumsum(bad)                              # non-finite points up to and including each one
    ahead = np.minimum(idx + recover_points, len(values) - 1)
    persists = (idx + recover_points >= len(values)) | (seen[ahead] > seen[idx])
    return int(idx[np.argmax(persists)]) if persists.any() else None


def logged_quantum(x: np.ndarray) -> float:
    """The smallest step between distinct logged values: the precision a log printed them with (1e-4
    for a loss rounded to 4 decimals; next to nothing for full floats).  A jump of one quantum is
    rounding, never a spike."""
    values = distinct(x[np.isfinite(x)])
    return float(np.min(np.diff(values))) if len(values) > 1 else 0.0


def logged_quantum_bound(x: np.ndarray, points: int = 8192) -> float:
    """A value at or over logged_quantum(x), from its first `points` values alone (inf where they hold fewer
    than two distinct ones): the least gap between distinct values of a subset is never under the whole
    curve's, and a sort of a few thousand values costs a hundredth of a million's."""
    values = distinct(x[:points][np.isfinite(x[:points])])
    return float(np.min(np.diff(values))) if len(values) > 1 else math.inf


def slope_quantiles(steps: np.ndarray, values: np.ndarray, quantiles: tuple[float, ...],
                    max_points: int = 200) -> np.ndarray:
    """Quantiles of the pairwise slopes (Theil-Sen's median is the 0.5 one): how sure the trend is."""
    slopes = _pairwise_slopes(steps, values, max_points)
    return quantile(slopes, quantiles) if len(slopes) else np.zeros(len(quantiles))


def _pairwise_slopes(steps: np.ndarray, values: np.ndarray, max_points: int) -> np.ndarray:
    """The slopes between every two points of distinct steps, on an even subsample of at most `max_points`."""
    if len(steps) > max_points:
        idx = np.linspace(0, len(steps) - 1, max_points).astype(int)
        steps, values = steps[idx], values[idx]
    i, j = np.triu_indices(len(steps), k=1)
    dx = steps[j] - steps[i]
    ok = dx != 0
    return (values[j] - values[i])[ok] / dx[ok]


def cusum_change(values: np.ndarray, baseline_points: int, *, drift_sd: float = 1.0,
                 threshold_sd: float = 10.0) -> int | None:
    """Index where a sustained shift away from the first `baseline_points` began (two-sided CUSUM on
    values standardised by the baseline's median and robust sd, clipped at 3 sds), or None when there
    is none.  Defaults: drift 1 sd, alarm at 10 sds of accumulated excess (no alarm in 200 runs of
    1,000 normal or Student-t(3) points)."""
    if len(values) <= baseline_points + 2 or baseline_points < 3:
        return None
    base = values[:baseline_points]
    sd = max(robust_sd(base), noise_sd(values)) or 1e-12
    # clipped: a heavy-tailed curve's single outliers must not add up to a "shift"
    z = np.clip((values[baseline_points:] - float(median(base))) / sd, -3.0, 3.0)
    high = _first_alarm(z, drift_sd, threshold_sd)
    low = _first_alarm(-z, drift_sd, threshold_sd)
    alarms = [a for a in (high, low) if a is not None]      # the upper side wins a tie, as it is read first
    if not alarms:
        return None
    at, start = min(alarms, key=lambda a: a[0])
    return baseline_points + min(start, at)


def _first_alarm(z: np.ndarray, drift: float, threshold: float) -> tuple[int, int] | None:
    """The first index where the one-sided CUSUM s = max(0, s + z - drift) exceeds `threshold`, and the
    index after its last reset to 0, exactly as that loop computes them (a NaN resets it).

    Vectorised by Lindley's identity, s_t = S_t - min(0, min_(u<=t) S_u) with S the cumulative sum of
    z - drift: only near an alarm (within the cumulative sum's rounding bound `slack`) does the loop
    itself run, from the last point where s surely reset to 0, so the answer is the loop's to the bit."""
    if len(z) == 0:
        return None
    step = z - drift
    finite = np.isfinite(step)
    if not finite.all():
        # a NaN or -Inf surely resets the sum, +Inf surely raises the alarm: stand-ins that do the same
        jump = threshold + 2.0 * (float(np.max(np.abs(step[finite]))) if finite.any() else 0.0) + 1.0
        step = np.where(finite, step, np.where(step > 0, jump, -jump))
    total = np.cumsum(step)
    low = np.minimum.accumulate(np.minimum(total, 0.0))
    before = np.concatenate([[0.0], low[:-1]])
    slack = 8 * np.finfo(float).eps * len(z) * (float(np.max(np.abs(total))) + threshold + 1.0) + 1e-9
    reset = total - before < -slack                  # s is 0 here whatever the rounding
    near = np.flatnonzero(total - low > threshold - slack)
    pos = 0
    while True:
        later = near[near >= pos]
        if not len(later):
            return None
        first = int(later[0])
        resets = np.flatnonzero(reset[:first])
        alarm, pos = _cusum_loop(z, reset, drift, threshold, int(resets[-1]) + 1 if len(resets) else 0, first)
        if alarm is not None:
            return alarm


def _cusum_loop(z: np.ndarray, reset: np.ndarray, drift: float, threshold: float, begin: int,
                first: int) -> tuple[tuple[int, int] | None, int]:
    """The CUSUM loop itself from `begin` (where s is 0): its alarm (index, start), or None and the
    index after the first sure reset at or after `first` (len(z) + 1 at the end)."""
    s, start = 0.0, begin
    for lo in range(begin, len(z), _LOOP_CHUNK):
        chunk = zip(z[lo:lo + _LOOP_CHUNK].tolist(), reset[lo:lo + _LOOP_CHUNK].tolist())
        for i, (value, surely_reset) in enumerate(chunk, lo):
            s = max(0.0, s + value - drift)
            if s == 0.0:
                start = i + 1
            if s > threshold:
                return (i, start), i + 1
            if i >= first and surely_reset:
                return None, i + 1
    return None, len(z) + 1


_LOOP_CHUNK = 4096       # points converted to Python floats at a time by the exact CUSUM loop
