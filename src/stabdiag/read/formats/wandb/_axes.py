"""Which x-axis each W&B metric is read against, and the Series that result.

wandb numbers rows with `_step`, but a run may declare another x-axis per metric with
`define_metric(name_or_glob, step_metric=...)`: the Hugging Face Trainer (and so TRL) logs train and
eval in separate rows and plots both against `train/global_step`.  Reading such a run against
`_step` would put an eval and the training step it belongs to at different steps.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase

import numpy as np

from ....errors import InputError
from ...run import STEP_MAX, Series, as_steps


def axis_chooser(step_col: str | None, columns, rules: list[tuple[str, bool, str]],
                 where: str) -> Callable[[str], str | None]:
    """Each key's x-axis key (None: `_step`): `step_col` when given, else the run's define_metric."""
    if step_col == "_step":
        return lambda key: None
    if step_col is not None:
        if step_col not in columns:
            raise InputError(where, f"no key '{step_col}' in this W&B run (passed with --step-col)")
        return lambda key: step_col
    return lambda key: step_metric_for(key, rules)


def step_metric_for(key: str, rules: list[tuple[str, bool, str]]) -> str | None:
    """The x-axis key `define_metric(..., step_metric=...)` gave this key, if any (exact name first,
    then the latest matching glob)."""
    for name, is_glob, step_key in reversed(rules):
        if not is_glob and name == key:
            return step_key
    for name, is_glob, step_key in reversed(rules):
        if is_glob and fnmatchcase(key, name):
            return step_key
    return None


def axis_lookup(rows: np.ndarray, axis_rows: np.ndarray, axis_values: np.ndarray) -> np.ndarray:
    """The axis value in force at each row: the last one written at or before it (NaN before any)."""
    at = np.searchsorted(axis_rows, rows, side="right") - 1
    out = np.full(len(rows), np.nan)
    ok = at >= 0
    out[ok] = axis_values[at[ok]]
    return out


def build_series(columns: dict, row_steps, row_walls, axis_of, notes: list[str]) -> dict[str, Series]:
    """Series from per-key (rows, values), each row's `_step` and wall time, and each key's x-axis.

    A key with an x-axis other than `_step` takes, at each of its rows, the axis key's latest value
    at or before that row (wandb's step_sync); points logged before the axis has a value are left
    out, and an axis with non-integer values falls back to `_step`.
    """
    row_steps = as_steps(row_steps)
    row_walls = np.asarray(row_walls, dtype=np.float64)
    axes = {}
    for key in columns:
        axis = axis_of(key)
        if axis and axis != key and axis in columns:
            axes[key] = axis
    axis_points: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}
    for axis in set(axes.values()):
        a_rows = np.asarray(columns[axis][0], dtype=np.int64)
        a_vals = np.asarray(columns[axis][1], dtype=np.float64)
        finite = np.isfinite(a_vals)
        outside = finite & (np.abs(a_vals) > float(STEP_MAX))
        if outside.any():
            notes.append(f"x-axis '{axis}' holds {int(outside.sum())} value(s) outside the step range "
                         "(-2**53 to 2**53); the points logged at them are left out")
            finite &= ~outside
        if np.any(np.floor(a_vals[finite]) != a_vals[finite]):
            notes.append(f"x-axis '{axis}' holds non-integer values; its metrics are read against _step")
            axis_points[axis] = None
        else:
            kept = finite | outside                # an axis value out of range is no value: NaN
            axis_points[axis] = (a_rows[kept], np.where(outside, np.nan, a_vals)[kept])
    series: dict[str, Series] = {}
    early: dict[str, int] = {}
    for key, (rows, values) in columns.items():
        if key in axis_points and axis_points[key] is not None:
            continue                               # an x-axis in use, not a metric
        rows = np.asarray(rows, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        steps = row_steps[rows]
        points = axis_points.get(axes.get(key, ""))
        if points is not None:
            on_axis = axis_lookup(rows, *points)
            ok = np.isfinite(on_axis)
            if not ok.all():
                early[axes[key]] = early.get(axes[key], 0) + int(np.count_nonzero(~ok))
            rows, values, steps = rows[ok], values[ok], on_axis[ok].astype(np.int64)
        if len(rows):
            series[key] = Series.from_points(key, steps, values, row_walls[rows])
    for axis, count in early.items():
        notes.append(f"left out {count} points logged before x-axis '{axis}' had a value")
    return series
