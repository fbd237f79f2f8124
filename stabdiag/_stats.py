"""Robust statistics shared by the detectors: training curves are noisy and heavy-tailed, so levels are
medians, spreads are MADs, trends are Theil–Sen slopes, and "recent level" is an EMA."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

MAD_TO_SD = 1.4826   # makes the MAD of a normal sample estimate its standard deviation


def robust_sd(x: np.ndarray) -> float:
    if len(x) == 0:
        return 0.0
    return float(MAD_TO_SD * np.median(np.abs(x - np.median(x))))


def noise_sd(x: np.ndarray) -> float:
    """Point-to-point noise of a curve, insensitive to its trend: robust sd of first differences / √2."""
    if len(x) < 3:
        return 0.0
    return robust_sd(np.diff(x)) / np.sqrt(2.0)


def edge_level(x: np.ndarray, frac: float, *, end: bool = False, min_points: int = 3) -> float:
    """Median of the first (or last) `frac` of the points."""
    k = min(len(x), max(min_points, int(round(len(x) * frac))))
    part = x[-k:] if end else x[:k]
    return float(np.median(part))


def edge_level_by_steps(steps: np.ndarray, x: np.ndarray, frac: float, *, end: bool = False,
                        min_points: int = 3) -> float:
    """Median of the points in the first (or last) `frac` of the step span (at least `min_points`),
    so that irregular logging does not tilt the level toward the densely logged part."""
    if len(x) == 0:
        return float("nan")
    span = float(steps[-1] - steps[0])
    inside = steps >= steps[-1] - frac * span if end else steps <= steps[0] + frac * span
    if inside.sum() < min_points:
        return edge_level(x, 0.0, end=end, min_points=min_points)
    return float(np.median(x[inside]))


def rolling_median(x: np.ndarray, window: int) -> np.ndarray:
    """Centred running median (edges use the shrunken window); window is forced odd."""
    window = max(1, int(window)) | 1
    if window == 1 or len(x) < window:
        return x.astype(np.float64, copy=True) if window == 1 or len(x) == 0 else \
            np.full(len(x), float(np.median(x)))
    half = window // 2
    padded = np.concatenate([np.full(half, np.nan), x, np.full(half, np.nan)])
    return np.nanmedian(sliding_window_view(padded, window), axis=1)


def trailing_median_mad(x: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD-sd of the `window` points *before* each point (NaN where there are none)."""
    med = np.full(len(x), np.nan)
    sd = np.full(len(x), np.nan)
    if len(x) <= window:
        return med, sd
    views = sliding_window_view(x[:-1], window)           # views[i] = x[i : i+window] precedes x[i+window]
    m = np.median(views, axis=1)
    med[window:] = m
    sd[window:] = MAD_TO_SD * np.median(np.abs(views - m[:, None]), axis=1)
    return med, sd


def ema_before(x: np.ndarray, span: float) -> np.ndarray:
    """EMA of the points before each point (the current point excluded); first entry is NaN."""
    from scipy.signal import lfilter

    out = np.full(len(x), np.nan)
    if len(x) < 2:
        return out
    alpha = 2.0 / (span + 1.0)
    ema, _ = lfilter([alpha], [1.0, alpha - 1.0], x[1:], zi=[(1.0 - alpha) * x[0]])
    out[1] = x[0]
    out[2:] = ema[:-1]
    return out


def theil_sen_slope(steps: np.ndarray, values: np.ndarray, max_points: int = 300) -> float:
    """Median of pairwise slopes (on an even subsample of at most `max_points` points)."""
    n = len(steps)
    if n < 2:
        return 0.0
    if n > max_points:
        idx = np.linspace(0, n - 1, max_points).astype(int)
        steps, values = steps[idx], values[idx]
    i, j = np.triu_indices(len(steps), k=1)
    dx = steps[j] - steps[i]
    ok = dx != 0
    if not ok.any():
        return 0.0
    return float(np.median((values[j] - values[i])[ok] / dx[ok]))


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Every (start, end) inclusive stretch of True, in order."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2])]


def persistent_nonfinite_index(values: np.ndarray, recover_points: int = 3) -> int | None:
    """Index of the first non-finite value the curve does not come back from, or None.

    A non-finite point followed by `recover_points` finite points is transient (a loss-scale overflow,
    a skipped step); one the run ends on, or that more non-finite points follow closely, persists."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    for i in np.flatnonzero(bad):
        after = bad[i + 1:i + 1 + recover_points]
        if len(after) < recover_points or after.any():
            return int(i)
    return None


def logged_quantum(x: np.ndarray) -> float:
    """The smallest step between distinct logged values: the precision a log printed them with (1e-4
    for a loss rounded to 4 decimals; next to nothing for full floats).  A jump of one quantum is
    rounding, never a spike."""
    values = np.unique(x[np.isfinite(x)])
    return float(np.min(np.diff(values))) if len(values) > 1 else 0.0


def slope_quantiles(steps: np.ndarray, values: np.ndarray, quantiles: tuple[float, ...],
                    max_points: int = 200) -> np.ndarray:
    """Quantiles of the pairwise slopes (Theil-Sen's median is the 0.5 one): how sure the trend is."""
    n = len(steps)
    if n > max_points:
        idx = np.linspace(0, n - 1, max_points).astype(int)
        steps, values = steps[idx], values[idx]
    i, j = np.triu_indices(len(steps), k=1)
    dx = steps[j] - steps[i]
    ok = dx != 0
    if not ok.any():
        return np.zeros(len(quantiles))
    return np.quantile((values[j] - values[i])[ok] / dx[ok], quantiles)


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
    z = np.clip((values - float(np.median(base))) / sd, -3.0, 3.0)
    high = low = 0.0
    start_high = start_low = baseline_points
    for i in range(baseline_points, len(z)):
        high = max(0.0, high + z[i] - drift_sd)
        low = max(0.0, low - z[i] - drift_sd)
        if high == 0.0:
            start_high = i + 1
        if low == 0.0:
            start_low = i + 1
        if high > threshold_sd:
            return min(start_high, i)
        if low > threshold_sd:
            return min(start_low, i)
    return None
