"""History rows of a W&B transaction log, gathered into per-key columns of (row, value).

A big run has millions of history items, so the usual row is not decoded item by item in Python:
its keys and JSON values arrive from the lite protobuf view (`_wandb_lite`) as two lists, are
joined into newline-separated text, and a chunk of rows at a time is split, dictionary-encoded and
parsed to float64 by Arrow.  Rows the lite view cannot represent faithfully (typed values, a logged
nested dict whose items cannot be measured) go through wandb's own classes item by item instead,
and so does a whole chunk in which some key or value holds a newline (found when the chunk's text
splits into more lines than it has items); both paths number rows alike, so a key's points merge
back into write order.

Media (images, tables, histograms) arrive as several items under one prefix, one of them
`<prefix>/_type`; an image's width and size are numbers too, so every item under a prefix that has
a `_type` in the same row is dropped.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ...run import STEP_MAX, STEP_MIN, exact_step

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


def _int64s(numbers: np.ndarray):
    """An Arrow int64 array over a numpy array's buffer.  `pa.array(ndarray)` would first ask
    whether the object is a pandas Series, which imports pandas (about 0.1 s, once per process)."""
    import pyarrow as pa

    numbers = np.ascontiguousarray(numbers, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(numbers), [None, pa.py_buffer(numbers)])


def _numpy(array) -> np.ndarray:
    """An Arrow integer or float64 array as numpy, zero-copy where it has no nulls: its
    `to_numpy` would import pandas for that, like `pa.array` above."""
    dtype = _NUMPY_TYPES.get(str(array.type))
    if dtype is None or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                         offset=array.offset * np.dtype(dtype).itemsize)


_NUMPY_TYPES = {"int32": np.int32, "int64": np.int64, "double": np.float64}


def _lines(text: str, count: int):
    """An Arrow string array of the `count` newline-terminated lines of `text`; ValueError when
    `text` has another number of lines (some line held a newline of its own)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    blob = text.encode("utf-8")
    if not blob.endswith(b"\n"):
        raise ValueError("the text does not end with a newline")
    whole = pa.LargeStringArray.from_buffers(                # pa.array would import pandas
        1, pa.py_buffer(np.array([0, len(blob) - 1], dtype=np.int64)), pa.py_buffer(blob))
    lines = pc.split_pattern(whole, "\n").flatten()
    if len(lines) != count:
        raise ValueError(f"expected {count} lines, found {len(lines)}")
    return lines


def _as_floats(strings) -> np.ndarray | None:
    """Arrow strings as float64, or None when some string is not a number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return _numpy(pc.cast(strings, pa.float64()))
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


def _varint_size(n: np.ndarray) -> np.ndarray:
    return 1 + sum((n >= (1 << shift)).astype(np.int64) for shift in (7, 14, 21, 28))


def _join_nested(parts, values, items: np.ndarray, history: History):
    """Each item's key: its key parts joined with '/', the parts of an item found by byte count.

    An item of a nested row is its key parts (tag, length, text) and then its JSON value (a
    two-byte tag, length, text), so its raw length less the value's share is the length of its
    parts; running sums of the parts' and the items' key lengths meet exactly at item ends.
    Flat rows' items have one part each.  None when the counts do not meet (a field this reader
    does not know): the caller re-reads those rows with wandb's classes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    part_len = _numpy(pc.binary_length(parts)).astype(np.int64)
    value_len = _numpy(pc.binary_length(values)).astype(np.int64)
    part_cost = 1 + _varint_size(part_len) + part_len
    value_cost = 2 + _varint_size(value_len) + value_len
    nested = np.repeat(np.asarray(history._nested), items)
    part_start = np.concatenate([[0], np.cumsum(history._parts)[:-1]])
    item_start = np.concatenate([[0], np.cumsum(items)[:-1]])
    flat_part = np.repeat(part_start - item_start, items) + np.arange(len(nested))
    key_cost = np.empty(len(nested), dtype=np.int64)
    key_cost[~nested] = part_cost[flat_part[~nested]]
    key_cost[nested] = np.asarray(history._raw_lens, dtype=np.int64) - value_cost[nested]
    part_ends, item_ends = np.cumsum(part_cost), np.cumsum(key_cost)
    last = np.minimum(np.searchsorted(part_ends, item_ends), len(part_ends) - 1)
    if not np.array_equal(part_ends[last], item_ends) or last[-1] != len(part_ends) - 1:
        return None
    offsets = _int64s(np.concatenate([[0], last + 1]))
    if parts.type == pa.large_string():             # pa.scalar would import pandas
        slash = pa.LargeStringArray.from_buffers(1, pa.py_buffer(np.array([0, 1], dtype=np.int64)),
                                                 pa.py_buffer(b"/"))[0]
    else:
        slash = pa.scalar("/", parts.type)
    return pc.binary_join(pa.LargeListArray.from_arrays(offsets, parts), slash)


class History:
    """Metric points by key: for each key the history rows it appears in and its values."""

    chunk_items = 1 << 20

    def __init__(self, raw_class=None, decode=None) -> None:
        self.row_steps: list[int] = []
        self.row_walls: list[float] = []
        self.bad_steps = 0                      # rows whose `_step` is not an int64 (kept at their own step)
        self.undecodable = 0                    # buffered rows that wandb's classes could not decode
        self._raw_class = raw_class             # the raw view, for rows with nested keys
        self._decode = decode                   # payload -> wandb's HistoryRecord, to fall back
        self._slow: dict[str, tuple[list[int], list[float]]] = {}
        self._pieces: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._reset()

    def _reset(self) -> None:
        self._part_text: list[str] = []
        self._value_text: list[str] = []
        self._rows: list[int] = []
        self._items: list[int] = []
        self._parts: list[int] = []
        self._nested: list[bool] = []
        self._raw_lens: list[int] = []
        self._payloads: list = []
        self._pending = 0

    def add_lite(self, record, payload=None) -> bool:
        """Buffer a row from the lite view; False when the row needs the item-by-item path."""
        items = record.item
        values = items.value_json
        count = len(values)
        parts = items.nested_key
        if items.key:                                  # an old writer's plain keys
            if parts or len(items.key) != count:
                return False
            parts = items.key
        raw_lens = None
        if len(parts) != count:                        # a logged nested dict: measure its items
            if len(parts) < count or self._raw_class is None or payload is None:
                return False
            raw_lens = list(map(len, self._raw_class.FromString(payload).history.item))
            if len(raw_lens) != count:
                return False
        if count:                                      # a newline inside a text: see _flush
            try:
                part_text, value_text = "\n".join(parts), "\n".join(values)
            except TypeError:                          # the lite view gives bytes for a non-UTF-8 string
                raise NotText("a history row holds a key or value that is not UTF-8 text") from None
            self._part_text.append(part_text)
            self._value_text.append(value_text)
            self._rows.append(len(self.row_steps))
            self._items.append(count)
            self._parts.append(len(parts))
            self._nested.append(raw_lens is not None)
            if raw_lens is not None:
                self._raw_lens.extend(raw_lens)
            self._payloads.append(payload)
            self._pending += count
        self.row_steps.append(self._own_step(record.step.num, count=False))   # the row's _step replaces it
        self.row_walls.append(math.nan)
        if self._pending >= self.chunk_items:
            self._flush()
        return True

    def add(self, record, row: int | None = None) -> None:
        """Add a row decoded by wandb's own classes, item by item (at `row` when re-reading one)."""
        again = row is not None
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
        if not self._pending:
            return
        count = self._pending
        items = np.asarray(self._items, dtype=np.int64)
        rows = np.repeat(np.asarray(self._rows, dtype=np.int64), items)
        try:
            parts = _lines("\n".join(self._part_text) + "\n", int(sum(self._parts)))
            values = _lines("\n".join(self._value_text) + "\n", count)
        except ValueError:                             # a key or value held a newline
            keys = None
        else:
            keys = parts if not any(self._nested) else _join_nested(parts, values, items, self)
        if keys is None:                               # cannot split or count bytes: re-read
            buffered = list(zip(self._rows, self._payloads))
            self._reset()
            for row, payload in buffered:
                try:
                    record = self._decode(payload)
                except Exception:                      # protobuf's DecodeError: wandb's classes refuse it
                    self.undecodable += 1
                    continue
                self.add(record, row=row)
            return
        keys = keys.dictionary_encode()
        self._reset()
        names = keys.dictionary.to_pylist()
        codes = _numpy(keys.indices)
        if len(names) <= 0xFFFF:
            codes = codes.astype(np.uint16)           # numpy sorts 16-bit keys by radix sort
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        where = {name: order[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}
        for name in names:
            if name.endswith("/_type"):                # every field of a media value, in its rows
                media_rows = rows[where[name]]
                for other in names:
                    if other.startswith(name[:-5]):
                        idx = where[other]
                        where[other] = idx[~np.isin(rows[idx], media_rows)]
        numbers = _as_floats(values)               # one cast, unless some value is not a number
        for name in names:
            idx = where[name]
            if not len(idx):
                continue
            if numbers is not None:
                col, ok = numbers[idx], None
            else:
                col, ok = _numbers(values.take(_int64s(idx)))
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

    def _own_step(self, num: int, count: bool = True) -> int:
        """The record's own step number (an int64 written by wandb); 0, counted, when out of range."""
        if STEP_MIN <= num <= STEP_MAX:
            return num
        self.bad_steps += count
        return 0

    def _set_row_facts(self, name: str, rows: np.ndarray, numbers: np.ndarray) -> None:
        if name == "_step":
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(numbers) & (np.floor(numbers) == numbers) & (np.abs(numbers) <= float(STEP_MAX))
            self.bad_steps += int(np.count_nonzero(~ok & ~np.isnan(numbers)))
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
