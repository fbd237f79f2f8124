"""The columns of a metric table, each held in the cheapest form that still says what the file held.

- numbers  float64 per row (NaN where nothing was written), with what reading the cells one by one found:
           how many were numbers, the first that was not (its row and text) and the values too large for
           float64 (read as Inf); this is the form of every metric column
- ints     exact int64, for a column named like a step whose every written cell is an integer in the step range
- keys     codes into a list of names, for the key column of a long table
- cells    the cells as read (text, JSON or Parquet values), for anything else, read one by one when asked

Readers fill the forms in bulk where they can and cell by cell where they cannot, and the forms keep what
the cell-by-cell reading would say (the first bad cell, the overflows), so every reader gives the same
series, notes and errors (with the line) whichever way it went.  A cell that was never written (a sparse
row: eval every 20 steps) is absent; a cell that holds NaN was logged as NaN, a finding: never confused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ....errors import InputError
from ...run import STEP_RANGE, as_float, exact_step, off_step_range, shown_number

# step-like counters, the preferred first: a file that writes two (lit-gpt's `iter` and `step`) is read
# on the one that increases (see stabdiag.read.formats.tabular._axis)
STEP_COLUMNS = ("step", "_step", "global_step", "iteration", "Step", "trainer/global_step",
                "train/global_step", "training/global_step", "iter", "it", "update", "global_update",
                "num_updates", "global_iteration")
ROW_STEP = "@row"                  # step_col for "the row number is the step" (0, 1, 2, ... as pandas numbers rows)
KEY_COLUMNS = ("key", "tag", "metric")
_STEP_NAMES = {name.lower() for name in STEP_COLUMNS}
_KEY_NAMES = {name.lower() for name in KEY_COLUMNS}
NAN_WORDS = ("nan", "+nan", "-nan")       # a step written as one of these marks a row without a step


def kind_of(name: str, step_col: str | None) -> str:
    """How a column is kept, from its name: "step" (exact integers), "key" (names) or "metric" (numbers)."""
    low = name.lower()
    if name == step_col or low in _STEP_NAMES:
        return "step"
    return "key" if low in _KEY_NAMES else "metric"


@dataclass(slots=True)
class Column:
    """One column in one of the forms of the module docstring; `written` says which rows hold a cell."""

    written: np.ndarray
    values: np.ndarray | None = None
    parsed: int = 0                                # numbers: written cells that are numbers
    junk: tuple[int, str] | None = None            # numbers: the first written cell that is not (row, text)
    overflow: tuple[int, int] | None = None        # numbers: (how many, first row) read as Inf from 1e400
    ints: np.ndarray | None = None
    codes: np.ndarray | None = None                # keys: -1 where nothing was written
    names: list[str] | None = None
    cells: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.written)

    def cell_array(self) -> np.ndarray:
        """The cells one by one (None where nothing was written), for the ints, keys and cells forms."""
        if self.cells is not None:
            return self.cells
        if self.codes is not None:
            return np.array(self.names + [None], dtype=object)[self.codes]     # code -1: nothing written
        out = self.ints.astype(object)
        out[~self.written] = None
        return out


def numbers_column(values: np.ndarray, written: np.ndarray) -> Column:
    """A column of numbers every written cell of which was a number as written (nothing to report)."""
    return Column(written, values=values, parsed=int(np.count_nonzero(written)))


def cells_column(cells: np.ndarray) -> Column:
    """A column of cells as read; written: not None and, for text, not blank."""
    return Column(np.fromiter(map(_is_written, cells), bool, len(cells)), cells=cells)


def _is_written(cell) -> bool:
    return cell is not None and (not isinstance(cell, str) or cell.strip() != "")


def numbers_from_cells(cells, written: np.ndarray) -> Column:
    """Read the written cells one by one into the numbers form."""
    values = np.full(len(written), np.nan)
    parsed, junk, overflows = 0, None, []
    for i in np.flatnonzero(written):
        number, overflow = parse_cell(cells[i])
        if number is None:
            if junk is None:
                junk = (int(i), str(cells[i])[:40])
            continue
        values[i] = number
        parsed += 1
        if overflow:
            overflows.append(int(i))
    return Column(written, values=values, parsed=parsed, junk=junk,
                  overflow=(len(overflows), overflows[0]) if overflows else None)


def parse_cell(cell) -> tuple[float | None, bool]:
    """A cell as a number (None: not a scalar number), and whether it was too large for float64."""
    if isinstance(cell, (bool, np.bool_)):
        return float(cell), False
    if isinstance(cell, (int, float, np.floating, np.integer)):
        return as_float(cell)
    if isinstance(cell, str):
        text = cell.strip()
        try:
            number = float(text)
        except ValueError:
            return None, False           # float() reads nan, inf and infinity itself, in any case
        return number, math.isinf(number) and "inf" not in text.lower()     # 1e400
    return None, False   # lists, dicts (media, tables): not a scalar


@dataclass(slots=True)
class Table:
    """Columns by name in file order; `line_of(row)` is the row's line in the file (1-based), for errors;
    `notes` say what was left out or read as Inf on the way."""

    columns: dict[str, Column]
    rows: int
    line_of: Callable[[int], int]
    notes: list[str] = field(default_factory=list)


def lines_from(lines) -> Callable[[int], int]:
    """`line_of` for rows whose lines are listed."""
    return lambda row: int(lines[row])


# --- reading a column ------------------------------------------------------------------------------------

def numbers_of(table: Table, name: str, path: str) -> np.ndarray | None:
    """The column as float64 (absent cells NaN), or None for a text column (run name, tags).
    Junk inside an otherwise numeric column is an input error naming its line."""
    col = table.columns[name]
    if col.ints is not None:           # int64 and uint64 convert to float64 whole: nothing to parse cell by cell
        col = numbers_column(np.where(col.written, col.ints, np.nan), col.written)
    elif col.values is None:
        col = numbers_from_cells(col.cell_array(), col.written)
    if not col.parsed:
        return None
    if col.junk is not None:
        row, text = col.junk
        raise InputError(path, f"non-numeric value {text!r} in metric column '{name}'", line=table.line_of(row))
    if col.overflow is not None:
        count, row = col.overflow
        table.notes.append(f"{os.path.basename(path)}:{table.line_of(row)}: {count} "
                           f"value(s) of '{name}' too large for float64 read as Inf")
    return col.values


def steps_of(table: Table, name: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    """The step column as exact int64 steps, and which rows have one.  A step written as NaN marks a
    row without a step; any other cell that is not an integer in the step range is an error naming
    its line: a step is never truncated, rounded or wrapped round."""
    col = table.columns[name]
    if col.ints is not None:
        steps, has = _steps_of_ints(table, name, path, col), col.written
    elif col.values is not None:
        steps, has = _steps_of_numbers(table, name, path, col)
    else:
        steps, has = _steps_of_cells(table, name, path, col)
    if not has.any():
        raise InputError(path, f"step column '{name}' holds no numbers")
    return steps, has


def _steps_of_ints(table: Table, name: str, path: str, col: Column) -> np.ndarray:
    """Steps from a column of integers (text and JSON readers keep only steps in range; Parquet any)."""
    ints = col.ints
    _refuse_off_range(table, name, path, ints, col.written)
    return ints.astype(np.int64, copy=False)


def _steps_of_numbers(table: Table, name: str, path: str, col: Column) -> tuple[np.ndarray, np.ndarray]:
    """Steps from a column of numbers (a Parquet float column): the values are the cells."""
    values = col.values
    has = col.written & ~np.isnan(values)
    _refuse_off_range(table, name, path, values, has)
    return np.where(has, values, 0).astype(np.int64), has


def _refuse_off_range(table: Table, name: str, path: str, numbers: np.ndarray, has: np.ndarray) -> None:
    """An InputError at the first row of `has` whose number is not an integer in the step range."""
    bad = has & off_step_range(numbers)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(path, f"step column '{name}' holds {shown_number(numbers[i])}: {_not_a_step(numbers[i])}",
                         line=table.line_of(i))


def _steps_of_cells(table: Table, name: str, path: str, col: Column) -> tuple[np.ndarray, np.ndarray]:
    cells = col.cell_array()
    steps = np.zeros(len(cells), dtype=np.int64)
    has = np.zeros(len(cells), dtype=bool)
    for i in np.flatnonzero(col.written):
        cell = cells[i]
        if _is_nan_cell(cell):
            continue
        step = exact_step(cell)
        if step is None:
            raise InputError(path, f"step column '{name}' holds {shown_number(cell)}: {_not_a_step(cell)}",
                             line=table.line_of(int(i)))
        steps[i], has[i] = step, True
    return steps, has


def _is_nan_cell(cell) -> bool:
    if isinstance(cell, str):
        return cell.strip().lower() in NAN_WORDS
    return isinstance(cell, (float, np.floating)) and math.isnan(cell)


def _not_a_step(cell) -> str:
    number, _ = parse_cell(cell)
    if number is None:
        return "not a number"
    if math.isfinite(number) and number != math.floor(number):
        return "a non-integer step"
    return f"not {STEP_RANGE}"


def keys_of(table: Table, name: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The key column of a long table: names, a code per row (-1: none) and which rows hold a key."""
    col = table.columns[name]
    if col.codes is not None:
        return col.names, col.codes, col.written
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(str(k), len(index)) for k in col.cell_array()], dtype=np.int64)
    return list(index), codes, col.written


# --- building a table from blocks of rows ------------------------------------------------------------------

class ColumnParts:
    """Columns read block by block (consecutive rows of a file), joined at the end.  Numbers and steps go
    straight into arrays for the whole column, allocated for `capacity` rows (a guess; grown when short),
    so that no block's memory is held twice."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = max(capacity, 1)
        self.found: dict[str, _Gathered] = {}
        self.rows = 0

    def add(self, columns: dict[str, Column], rows: int) -> None:
        for name, col in columns.items():
            gathered = self.found.get(name)
            if gathered is None:
                gathered = self.found[name] = _Gathered(self.capacity)
            gathered.add(self.rows, col)
        self.rows += rows
        self.capacity = max(self.capacity, self.rows)

    def columns(self) -> dict[str, Column]:
        """The joined columns in the order they first appeared; the parts are let go one by one."""
        return {name: self.found.pop(name).column(self.rows) for name in list(self.found)}


class _Gathered:
    """One column's blocks: numbers or steps copied into arrays for the whole column; other forms (or a
    column whose form changes) kept as parts and joined at the end."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.form, self.filled = capacity, None, 0
        self.data = self.written = None
        self.parsed, self.junk, self.overflow = 0, None, None
        self.parts: list[tuple[slice, Column]] = []

    def add(self, start: int, col: Column) -> None:
        form = _form(col)
        if self.form is None and not self.parts and form in ("values", "ints"):
            self.form = form
            self.data = np.empty(self.capacity, np.float64 if form == "values" else np.int64)
            self.written = np.empty(self.capacity, dtype=bool)
        if form != self.form:
            if self.form is not None:                  # the form changed: what was gathered becomes a part
                self.parts.append((slice(0, self.filled), self._gathered(self.filled)))
                self.form = self.data = self.written = None
            self.parts.append((slice(start, start + len(col)), col))
            return
        stop = start + len(col)
        if stop > len(self.data):
            self.data, self.written = _grown(self.data, stop), _grown(self.written, stop)
        self.data[self.filled:start] = np.nan if form == "values" else 0
        self.written[self.filled:start] = False
        self.data[start:stop] = col.values if form == "values" else col.ints
        self.written[start:stop] = col.written
        self.filled = stop
        if form == "values":
            self.parsed += col.parsed
            if self.junk is None and col.junk is not None:
                self.junk = (start + col.junk[0], col.junk[1])
            if col.overflow is not None:
                count, first = self.overflow or (0, start + col.overflow[1])
                self.overflow = (count + col.overflow[0], first)

    def column(self, rows: int) -> Column:
        if not self.parts:
            return self._gathered(rows)
        if self.form is not None:
            self.parts.append((slice(0, self.filled), self._gathered(self.filled)))
        return joined(self.parts, rows)

    def _gathered(self, rows: int) -> Column:
        if rows > len(self.data):
            self.data, self.written = _grown(self.data, rows), _grown(self.written, rows)
        if rows > self.filled:
            self.data[self.filled:rows] = np.nan if self.form == "values" else 0
            self.written[self.filled:rows] = False
        data, written = self.data[:rows], self.written[:rows]
        if len(self.data) > rows + rows // 16 + 1024:   # the guess was long: do not keep the slack
            data, written = data.copy(), written.copy()
        if self.form == "ints":
            return Column(written, ints=data)
        return Column(written, values=data, parsed=self.parsed, junk=self.junk, overflow=self.overflow)


def _grown(arr: np.ndarray, needed: int) -> np.ndarray:
    out = np.empty(max(needed, len(arr) + len(arr) // 2), dtype=arr.dtype)
    out[:len(arr)] = arr
    return out


def joined(parts: list[tuple[slice | np.ndarray, Column]], rows: int) -> Column:
    """One column of `rows` rows from parts, each at some of its rows (a slice or row numbers in order);
    rows without a part hold nothing."""
    if len(parts) == 1 and len(parts[0][1]) == rows:
        return parts[0][1]
    forms = {_form(col) for _, col in parts}
    written = np.zeros(rows, dtype=bool)
    for where, col in parts:
        written[where] = col.written
    if forms == {"values"}:
        return _joined_numbers(parts, rows, written)
    if forms == {"ints"}:
        ints = np.zeros(rows, dtype=np.int64)
        for where, col in parts:
            ints[where] = col.ints
        return Column(written, ints=ints)
    if forms == {"keys"}:
        index: dict[str, int] = {}
        codes = np.full(rows, -1, dtype=np.int64)
        for where, col in parts:
            remap = np.array([index.setdefault(n, len(index)) for n in col.names] + [-1], dtype=np.int64)
            codes[where] = remap[col.codes]
        return Column(written, codes=codes, names=list(index))
    if "values" in forms:
        raise ValueError("a column of numbers cannot join a column of cells")   # readers keep kinds apart
    cells = np.full(rows, None, dtype=object)
    for where, col in parts:
        cells[where] = col.cell_array()
    return Column(written, cells=cells)


def _joined_numbers(parts, rows: int, written: np.ndarray) -> Column:
    values = np.full(rows, np.nan)
    parsed, junk, count, first = 0, None, 0, None
    for where, col in parts:
        values[where] = col.values
        parsed += col.parsed
        if col.junk is not None:
            row = _row_at(where, col.junk[0])
            junk = (row, col.junk[1]) if junk is None or row < junk[0] else junk
        if col.overflow is not None:
            count += col.overflow[0]
            row = _row_at(where, col.overflow[1])
            first = row if first is None else min(first, row)
    return Column(written, values=values, parsed=parsed, junk=junk,
                  overflow=(count, first) if count else None)


def _row_at(where: slice | np.ndarray, row: int) -> int:
    return where.start + row if isinstance(where, slice) else int(where[row])


def _form(col: Column) -> str:
    if col.values is not None:
        return "values"
    return "ints" if col.ints is not None else "keys" if col.codes is not None else "cells"
