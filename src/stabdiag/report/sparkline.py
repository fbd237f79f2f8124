"""Sparklines: each signal of a run squeezed into one line of unicode blocks for the layer table.

A Diagnosis holds conclusions, not series, so the signals are binned once (`trends`) and attached to
it with `with_trends`; the reporters then draw them at whatever width the terminal leaves.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..judge.diagnosis import Diagnosis, Trend
from ..read.run import Run

BLOCKS = "▁▂▃▄▅▆▇█"
NONFINITE = "×"
TREND_BINS = 64


def _signal_layer(name: str, table) -> int:
    if name.startswith("eval:"):
        return 1
    sig = table.signals.get(name)
    return sig.layer if sig is not None and 1 <= sig.layer <= 4 else 0


def trends(run: Run, span: tuple[int, int] | None, *, mapping: dict[str, str] | None = None,
           bins: int = TREND_BINS, guess: bool = True) -> tuple[Trend, ...]:
    """Every resolved signal of `run`, binned into `bins` equal step ranges over `span`."""
    from ..signals.resolve import default_alias_table, resolve

    if span is None:
        return ()
    table = default_alias_table()
    signals = resolve(run, mapping, guess=guess)
    lo, hi = span
    edges = np.linspace(lo, hi + 1, bins + 1)
    out: list[Trend] = []
    for name, series in signals.series.items():
        layer = _signal_layer(name, table)
        if not layer or not len(series):
            continue
        finite = np.isfinite(series.values)
        values = _bin_means(series.values, finite, series.steps, edges)     # empty bins stay None: gaps
        finite = series.values[finite]
        first = float(finite[0]) if len(finite) else None
        last = float(finite[-1]) if len(finite) else None
        out.append(Trend(name, series.key, layer, tuple(values), first, last, len(series)))
    return tuple(sorted(out, key=lambda t: t.layer))


def _bin_means(values: np.ndarray, finite: np.ndarray, steps: np.ndarray, edges: np.ndarray) -> list[float | None]:
    """Per bin of `edges`: None without points, NaN with a non-finite one, else the mean.  The steps are
    sorted, so a bin's points are one slice (found once by searchsorted, not by a mask per bin), summed
    as `chunk.mean()` sums it, to the last bit."""
    bins = len(edges) - 1
    index = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, bins - 1)
    bounds = np.searchsorted(index, np.arange(bins + 1)).tolist()
    broken = (np.bincount(index, weights=~finite, minlength=bins) > 0).tolist()
    add = np.add.reduce
    out: list[float | None] = []
    for b in range(bins):
        start, end = bounds[b], bounds[b + 1]
        out.append(None if start == end else math.nan if broken[b] else float(add(values[start:end]) / (end - start)))
    return out


def bridged(values: list[float | None], *, most: int = 2) -> list[float | None]:
    """The values with the short interior holes of a sparse signal (an eval every 20 steps) held at the
    last value before them: a hole of at most `most` cells and at most 3x the signal's own usual spacing.
    A longer one stays open (a run that logged nothing for 1,000 steps), and a signal of a few points
    is drawn as those points, not stretched over the line."""
    seen = [i for i, v in enumerate(values) if v is not None]
    if len(seen) < 3:
        return list(values)
    spacing = sorted(b - a for a, b in zip(seen, seen[1:]))[(len(seen) - 1) // 2]
    out = list(values)
    for a, b in zip(seen, seen[1:]):
        if 1 < b - a <= min(most + 1, 3 * spacing):
            out[a + 1:b] = [values[a]] * (b - a - 1)
    return out


def gaps(values: list[float | None]) -> list[tuple[int, int]]:
    """(last index before, first index after) of each hole of a signal longer than 3x its usual spacing
    and 2 bins: where a drawn line is broken rather than carried across."""
    seen = [i for i, v in enumerate(values) if v is not None]
    if len(seen) < 2:
        return []
    spacing = sorted(b - a for a, b in zip(seen, seen[1:]))[(len(seen) - 1) // 2]
    return [(a, b) for a, b in zip(seen, seen[1:]) if b - a > max(2, 3 * spacing)]


def short(value: float) -> str:
    """A number in at most 8 characters: 0.296, 4.1e+03, 4.9e-04; never `-0`."""
    if value == 0 or 1e-2 <= abs(value) < 1e4:
        text = f"{value:.3g}"
        return "0" if text in ("-0", "0") else text
    return f"{value:.1e}"


def with_trends(diag: Diagnosis, run: Run, *, mapping: dict[str, str] | None = None) -> Diagnosis:
    """The diagnosis with its run's binned signals attached for display."""
    # guessing adds signals and never changes the others: the diagnosis guessed iff it has guesses
    return dataclasses.replace(diag, trends=trends(run, diag.steps, mapping=mapping, guess=bool(diag.guessed)))


def rebin(values: tuple[float | None, ...], width: int) -> list[float | None]:
    """`values` squeezed into `width` cells: the mean of each cell's bins; NaN wins, empty stays None."""
    n = len(values)
    if n <= width:
        return list(values)
    cells: list[float | None] = []
    for j in range(width):
        part = [v for v in values[j * n // width:(j + 1) * n // width] if v is not None]
        if not part:
            cells.append(None)
        elif any(math.isnan(v) for v in part):
            cells.append(math.nan)
        else:
            cells.append(sum(part) / len(part))
    return cells


def cells(trend: Trend, width: int) -> list[float | None]:
    """A trend squeezed into `width` display cells, its short holes bridged (`bridged`)."""
    return bridged(rebin(trend.values, width))


def sparkline(values: list[float | None]) -> str:
    """Blocks scaled between the finite min and max; a blank for no data, × for NaN/Inf."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    # a constant curve's cells are means of equal values, apart only by their rounding (1e-4 averaged over
    # 7 points is not always 1e-4): flat, not a jagged line scaled to the last bits
    flat = hi - lo <= 1e-9 * max(abs(hi), abs(lo))
    chars = []
    for v in values:
        if v is None:
            chars.append(" ")
        elif not math.isfinite(v):
            chars.append(NONFINITE)
        elif flat:
            chars.append(BLOCKS[0])
        else:
            chars.append(BLOCKS[min(len(BLOCKS) - 1, int((v - lo) / (hi - lo) * len(BLOCKS)))])
    return "".join(chars)


def cell_steps(span: tuple[int, int], width: int, cell: int) -> tuple[float, float]:
    """The step range one of `width` display cells covers over `span`."""
    lo, hi = span
    size = (hi + 1 - lo) / width
    return lo + cell * size, lo + (cell + 1) * size
