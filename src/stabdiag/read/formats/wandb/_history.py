"""History rows of a W&B transaction log, gathered into per-key columns of (row, value).

A big run has millions of history items, so rows are not decoded item by item in Python: their
payloads are buffered, and a chunk at a time is read by `_batch` (numpy over the wire format) into
the places of each item's key fields and JSON value; Arrow cuts those out, dictionary-encodes the
keys and parses the values to float64.  Rows the batch reader does not take whole (typed values, a
field of an unexpected type, a damaged field) go through wandb's own classes item by item instead;
both paths number rows alike, in file order, so a key's points merge back into write order.

Media (images, tables, histograms) arrive as several items under one prefix, one of them
`<prefix>/_type`; an image's width and size are numbers too, so every item under a prefix that has
a `_type` in the same row is dropped.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ...run import STEP_MAX, STEP_MIN, exact_step, in_step_range, off_step_range
from ._batch import HISTORY, as_text, int64s, item_keys, numpy_of, read_batch, slices

_INTERNAL = frozenset(("_step", "_timestamp", "_runtime"))


class NotText(ValueError):
    """A record whose keys or values are not UTF-8 text: the record is skipped, as a corrupt one is."""


_BOOLS = {"true": 1.0, "false": 0.0}


def is_internal(key: str) -> bool:
    """wandb's own bookkeeping keys, which are not metrics."""
    return key[:1] == "_" and (key in _INTERNAL or key.startswith("_wandb"))


def join_key(item) -> str:
    """A history or summary item's key: its nested_key path joined with '/', else its key."""
    path = item.nested_key
    if path:
        return path[0] if len(path) == 1 else "/".join(path)
    return item.key


def cell(text: str) -> float | None:
    """A JSON value as a number: numbers, NaN and ±Infinity, true/false; None for anything else."""
    try:
        return float(text)
    except ValueError:
        return _BOOLS.get(text)


def _typed_value(item) -> float | None:
    """A value written in HistoryItem's typed fields rather than as JSON text."""
    which = item.WhichOneof("value")
    if which in ("number", "integer", "boolean"):
        return float(getattr(item, which))
    if which == "json":
        try:
            value = json.loads(item.json)
        except (ValueError, RecursionError):
            return None
        return float(value) if isinstance(value, (int, float)) else None
    return None


def _as_floats(strings) -> np.ndarray | None:
    """Arrow strings as float64, or None when some string is not a number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return numpy_of(pc.cast(strings, pa.float64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _numbers(strings) -> tuple[np.ndarray, np.ndarray | None]:
    """Arrow strings as float64, and which were numbers (None: all of them)."""
    values = _as_floats(strings)
    if values is not None:
        return values, None
    cells = [cell(text) for text in strings.to_pylist()]
    written = np.fromiter((c is not None for c in cells), dtype=bool, count=len(cells))
    values = np.fromiter((math.nan if c is None else c for c in cells), dtype=np.float64,
                         count=len(cells))
    return values, written


_NOT_TEXT = "a history row holds a key or value that is not UTF-8 text"
_ITEM_BYTES = 40                       # about the payload bytes of one scalar item


class History:
    """Metric points by key: for each key the history rows it appears in and its values."""

    chunk_items = 1 << 19               # items per chunk read at once, counted as _ITEM_BYTES each

    def __init__(self, decode=None, notes: list[str] | None = None) -> None:
        self.row_steps: list[int] = []
        self.row_walls: list[float] = []
        self.bad_steps = 0                      # rows whose `_step` is not an int64 (kept at their own step)
        self._decode = decode                   # payload -> wandb's HistoryRecord, for rows read item by item
        self._notes = notes if notes is not None else []
        self._collided: set[str] = set()         # keys written both flat and nested in one row (noted once)
        self._slow: dict[str, tuple[list[int], list[float]]] = {}
        self._pieces: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._payloads: list = []
        self._places: list[tuple[int, int]] = []   # per payload: its byte offset, and len(notes) then
        self._pending = 0
        self._unplaced: set[int] = set()        # rows at step 0 (own step out of range) until a `_step` places them

    def add_lite(self, payload, offset: int = 0) -> bool:
        """Buffer a history record's payload for the batch reader (the lite path); True: taken.

        Its notes, if it turns out damaged, go where they would have gone had it been read now."""
        self._payloads.append(payload)
        self._places.append((offset, len(self._notes)))
        self._pending += len(payload)
        if self._pending >= self.chunk_items * _ITEM_BYTES:
            self._flush()
        return True

    def add(self, record, row: int | None = None) -> None:
        """Add a row decoded by wandb's own classes, item by item (at `row` when re-reading one)."""
        again = row is not None
        if not again:
            self._flush()                          # buffered rows come first
        row = row if again else len(self.row_steps)
        step = None
        wall = math.nan
        media: list[str] = []
        columns = self._slow
        for item in record.item:
            path = item.nested_key
            key = ("/".join(path) if len(path) > 1 else path[0]) if path else item.key
            text = item.value_json
            if text:
                try:
                    value = float(text)
                except ValueError:
                    value = _BOOLS.get(text)
            else:
                value = _typed_value(item)
            if value is None:                          # text, lists, media fields: not a scalar
                if key.endswith("/_type"):
                    media.append(key[:-5])
                continue
            if key[:1] == "_" and is_internal(key):
                if key == "_step":
                    step = self._checked_step(value)
                elif key == "_timestamp":
                    wall = value
                continue
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            column[0].append(row)
            column[1].append(value)
        if media:
            prefixes = tuple(media)
            for key, (rows, values) in columns.items():
                if key.startswith(prefixes) and rows and rows[-1] == row:
                    rows.pop()
                    values.pop()
        if again:
            self.row_steps[row] = self._own_step(record.step.num) if step is None else step
            self.row_walls[row] = wall
        else:
            self.row_steps.append(self._own_step(record.step.num) if step is None else step)
            self.row_walls.append(wall)

    def flush(self) -> None:
        """Fold the buffered rows into the columns now (`columns` does it too)."""
        self._flush()

    def _flush(self) -> None:
        if not self._payloads:
            return
        payloads, places = self._payloads, self._places
        self._payloads, self._places, self._pending = [], [], 0
        batch = read_batch(payloads, HISTORY)
        names, codes, bad_items = item_keys(batch)
        values, bad_values = as_text(slices(batch.data, batch.value_start, batch.value_end))
        fast = batch.ok.copy()
        not_text = np.zeros(len(payloads), dtype=bool)
        if names is None:                              # keys this reader cannot name: all item by item
            fast[:] = False
            names = []
        else:
            if bad_values is not None:
                bad_items |= bad_values
            not_text[batch.item_record[bad_items]] = True
            fast &= ~not_text
        item_record = batch.item_record
        if bad_values is not None:
            codes, item_record = codes[~bad_values], item_record[~bad_values]
        notes: list[tuple[int, str]] = []
        decoded = {}
        for i in np.flatnonzero(~fast).tolist():
            offset, at = places[i]
            if not_text[i]:
                notes.append((at, f"skipped a record at byte offset {offset}: {_NOT_TEXT}"))
                continue
            try:
                decoded[i] = self._decode(payloads[i])
            except Exception:                          # protobuf's DecodeError: wandb's classes refuse it
                notes.append((at, f"skipped an undecodable record at byte offset {offset}"))
        kept = fast.copy()
        kept[list(decoded)] = True
        row_of = len(self.row_steps) + np.cumsum(kept) - 1
        in_range = in_step_range(batch.step)
        self.row_steps.extend(np.where(in_range, batch.step, 0)[kept].tolist())   # a `_step` item replaces it
        self._unplaced = set(row_of[np.flatnonzero(fast & ~in_range)].tolist())
        self.row_walls.extend([math.nan] * int(np.count_nonzero(kept)))
        for i, record in decoded.items():
            self.add(record, row=int(row_of[i]))
        for at, text in reversed(notes):
            self._notes.insert(at, text)
        item_fast = fast[item_record]
        if not item_fast.all():
            taken = np.flatnonzero(item_fast)
            codes, values, item_record = codes[taken], values.take(int64s(taken)), item_record[taken]
        self._fold(row_of[item_record], codes, names, values)
        self.bad_steps += len(self._unplaced)          # counted as _own_step counts a decoded row's

    def _apart(self, name: str, rows: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """The items of one key written two ways (`train/reward` flat and `{"train": {"reward"}}` nested),
        together; where both ways wrote one row, the first way's value is kept and a note names the key
        and how many rows (never a silent drop)."""
        both = np.isin(rows[second], rows[first])
        if both.any() and name not in self._collided:
            self._collided.add(name)
            self._notes.append(f"{name}: written both as one key and as nested parts in "
                               f"{int(np.count_nonzero(both))} row(s); the value of the form met first was kept")
            second = second[~both]
        return np.sort(np.concatenate([first, second]))

    def _fold(self, rows: np.ndarray, codes: np.ndarray, names: list, values) -> None:
        """Append a chunk's points to the columns: each item's row, key code, the keys, JSON values."""
        if not len(rows):
            return
        if len(names) <= 0xFFFF:
            codes = codes.astype(np.uint16)           # numpy sorts 16-bit keys by radix sort
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        where: dict[str, np.ndarray] = {}
        for i, name in enumerate(names):
            idx = order[bounds[i]:bounds[i + 1]]
            if name is None or not len(idx):
                continue
            if name in where:                          # one key written two ways (a key, or nested parts)
                idx = self._apart(name, rows, where[name], idx)
            where[name] = idx
        for name in list(where):
            if name.endswith("/_type"):                # every field of a media value, in its rows
                media_rows = rows[where[name]]
                for other in where:
                    if other.startswith(name[:-5]):
                        idx = where[other]
                        where[other] = idx[~np.isin(rows[idx], media_rows)]
        numbers = _as_floats(values)               # one cast, unless some value is not a number
        for name, idx in where.items():
            if not len(idx):
                continue
            if numbers is not None:
                col, ok = numbers[idx], None
            else:
                col, ok = _numbers(values.take(int64s(idx)))
            col_rows = rows[idx]
            if ok is not None:
                col_rows, col = col_rows[ok], col[ok]
            if is_internal(name):
                self._set_row_facts(name, col_rows, col)
            elif len(col):
                self._pieces.setdefault(name, []).append((col_rows, col))

    def _checked_step(self, value: float) -> int | None:
        """A row's `_step`, or None (the record's own step stands) when it is not an integer in the step
        range; those are counted for a note."""
        step = exact_step(value)
        if step is None and not math.isnan(value):
            self.bad_steps += 1
        return step

    def _own_step(self, num: int) -> int:
        """The record's own step number (an int64 written by wandb); 0, counted, when out of range."""
        if STEP_MIN <= num <= STEP_MAX:
            return num
        self.bad_steps += 1
        return 0

    def _set_row_facts(self, name: str, rows: np.ndarray, numbers: np.ndarray) -> None:
        if name == "_step":
            ok = ~off_step_range(numbers)
            self.bad_steps += int(np.count_nonzero(~ok & ~np.isnan(numbers)))
            self._unplaced.difference_update(rows[ok].tolist())
            target = self.row_steps
            for row, step in zip(rows[ok].tolist(), numbers[ok].astype(np.int64).tolist()):
                target[row] = step
        elif name == "_timestamp":
            target = self.row_walls
            for row, wall in zip(rows.tolist(), numbers.tolist()):
                target[row] = wall

    def columns(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every key's (rows, values), in the order the rows were written."""
        self._flush()
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name in list(self._pieces) + [k for k in self._slow if k not in self._pieces]:
            parts = list(self._pieces.get(name, ()))
            rows, values = self._slow.get(name, ((), ()))
            if rows:
                parts.append((np.asarray(rows, dtype=np.int64), np.asarray(values, dtype=np.float64)))
            if not parts:
                continue
            rows = np.concatenate([p[0] for p in parts])
            values = np.concatenate([p[1] for p in parts])
            if len(parts) > 1 or np.any(rows[1:] < rows[:-1]):
                order = np.argsort(rows, kind="stable")
                rows, values = rows[order], values[order]
            out[name] = (rows, values)
        return out
