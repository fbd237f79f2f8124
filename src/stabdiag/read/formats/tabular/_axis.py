"""The step axis of a metric table: which column counts the steps, or the row number.

- `--step-col NAME` names the column; `--step-col @row` numbers the rows 0, 1, 2, ... (as pandas numbers
  them), for any table.
- Otherwise the step-like columns (STEP_COLUMNS: step, global_step, iteration, iter, it, update, ...) are
  candidates, the preferred first.  A counter that repeats in runs while the same metric is written again
  at each repeat counts optimizer steps over micro-batches (lit-gpt writes `iter` and `step`, `step`
  staying put for a gradient accumulation's k iterations): another candidate that increases with every
  row is the axis then, and a note says so.  A counter that never goes back is never a restart.
- A table with no step-like column whose first column is pandas' unnamed index (`DataFrame.to_csv()`
  writes `,loss,...` and `0,`, `1,`, ...) counting 0..n-1 is read with that row number as the step, and a
  note says so; anything else is an error that names both ways out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ....errors import InputError
from ._columns import ROW_STEP, STEP_COLUMNS, Table, steps_of

_PANDAS_INDEX = ("Unnamed: 0", "")


@dataclass(slots=True)
class Axis:
    """The steps of every row, which rows have one, the column they came from (None: the row number)
    and the notes that say how they were chosen."""

    steps: np.ndarray
    has_step: np.ndarray
    column: str | None
    notes: list[str] = field(default_factory=list)


def step_axis(table: Table, path: str, step_col: str | None) -> Axis:
    columns = list(table.columns)
    name = os.path.basename(path)
    if step_col == ROW_STEP:
        return Axis(np.arange(table.rows, dtype=np.int64), np.ones(table.rows, bool), None,
                    [f"{name}: step = the row number (0, 1, 2, ...; --step-col {ROW_STEP})"])
    if step_col is not None:
        if step_col not in columns:
            raise InputError(path, f"no column '{step_col}' (passed with --step-col)")
        return Axis(*steps_of(table, step_col, path), step_col)
    candidates = _candidates(columns)
    if candidates:
        return _counter_axis(table, path, candidates)
    index = _pandas_index(table, columns)
    if index is not None:
        return Axis(np.arange(table.rows, dtype=np.int64), np.ones(table.rows, bool), index,
                    [f"{name}: no step column; the first column '{index}' counts the rows 0..{table.rows - 1} "
                     "(the index DataFrame.to_csv() writes) and is read as the step"])
    unnamed = next((c for c in columns[:1] if c.startswith("Unnamed: ")), None)
    hint = f" ('{unnamed}' is pandas' index)" if unnamed else ""
    raise InputError(path, f"no step column (looked for {', '.join(STEP_COLUMNS[:4])}, iter, it, update, ...); "
                           f"pass --step-col NAME{hint}, or --step-col {ROW_STEP} to number the rows")


def _candidates(columns: list[str]) -> list[str]:
    """The step-like columns present, the preferred first (an exact name before a case-folded one)."""
    lowered = {c.lower(): c for c in columns}
    found: list[str] = []
    for wanted in STEP_COLUMNS:
        hit = wanted if wanted in columns else lowered.get(wanted.lower())
        if hit is not None and hit not in found:
            found.append(hit)
    return found


def _counter_axis(table: Table, path: str, candidates: list[str]) -> Axis:
    first = candidates[0]
    steps, has = steps_of(table, first, path)
    if len(candidates) == 1 or not _repeats_in_runs(table, steps, has, set(candidates)):
        return Axis(steps, has, first)
    for other in candidates[1:]:
        try:
            other_steps, other_has = steps_of(table, other, path)
        except InputError:
            continue                      # not integers: no counter
        both = has & other_has
        if both.sum() == has.sum() and _increases(other_steps[both]):
            return Axis(other_steps, other_has, other,
                        [f"{os.path.basename(path)}: '{first}' repeats while '{other}' increases (a counter "
                         f"of optimizer steps over micro-batches): step = '{other}'"])
    return Axis(steps, has, first)


def _repeats_in_runs(table: Table, steps: np.ndarray, has: np.ndarray, counters: set[str]) -> bool:
    """The counter never goes back, and some metric is written at two rows of one of its values."""
    ordered = steps[has]
    if len(ordered) < 2 or not np.all(ordered[1:] >= ordered[:-1]) or np.all(ordered[1:] > ordered[:-1]):
        return False
    for name, col in table.columns.items():
        if name in counters:
            continue
        rows = has & col.written
        if rows.sum() > len(np.unique(steps[rows])):
            return True
    return False


def _increases(steps: np.ndarray) -> bool:
    return len(steps) > 1 and bool(np.all(steps[1:] > steps[:-1]))


def _pandas_index(table: Table, columns: list[str]) -> str | None:
    """The first column's name when it is pandas' unnamed index counting the rows 0..n-1."""
    if not columns or columns[0] not in _PANDAS_INDEX:
        return None
    try:
        steps, has = steps_of(table, columns[0], "")
    except InputError:
        return None
    if has.all() and np.array_equal(steps, np.arange(table.rows)):
        return columns[0]
    return None
