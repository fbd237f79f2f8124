"""JSON Lines metric logs, one object per line (verl's FileLogger nests the metrics: {"step": N, "data": {...}}),
read in blocks of lines straight into columns: a column of JSON numbers becomes float64 in one call, and only
a column holding something else (a string, a bool, a list, a number too large for float64) is read cell by
cell, so no Python object is kept per value.

A record's payload (a dict under `data`, `payload`, `metrics`, ...: verl's FileLogger, hand-written loops
that log typed records such as {"kind": "frame", "step": 3, "payload": {...}}) is lifted to the record's own
level (see _records.Lifter).  Other nested objects are flattened to `outer/inner` keys; a key missing from a
line, or null, was not written.
A line that writes one key both ways (`"train/reward"` flat and `{"train": {"reward": ...}}` nested) keeps
the value of the form met first in the line, and a note names the key and how many lines (as the W&B
reader does): never a silent drop, and never two points at one step that would read as a resume.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from contextlib import contextmanager
from itertools import repeat
from operator import is_not, itemgetter

import numpy as np

from ....errors import InputError
from ..._budget import KEYS_MAX, too_many_keys
from ..._textio import is_gzip, json_blocks
from ...run import in_step_range
from .._progress import ByteProgress
from ._columns import Column, ColumnParts, Table, joined, kind_of, lines_from, numbers_column, numbers_from_cells
from ._records import PAYLOADS, Lifter

_LINES_PER_BLOCK = 8192
_NUMBERS = {float, int}


def read(path: str, *, step_col: str | None = None, progress: bool = False) -> Table:
    notes: list[str] = []
    with ByteProgress(progress, os.path.getsize(path), os.path.basename(path)) as bar:
        blocks = json_blocks(path, notes, lines_per_block=_LINES_PER_BLOCK, on_bytes=bar.update)
        return read_blocks(path, blocks, notes, rows_guess=_rows_guess(path), step_col=step_col)


def read_blocks(path: str, blocks, notes: list[str], *, rows_guess: int, step_col: str | None = None,
                what: str = "line") -> Table:
    """A table of blocks of (line numbers, JSON values), each value a record (an object); `what` is how an
    error names a record's place (a line of JSON Lines, a record of a JSON array)."""
    parts = ColumnParts(rows_guess)
    kinds: dict[str, str] = {}
    lines: list[np.ndarray] = []
    collided: Counter = Counter()
    lifter = Lifter()
    with _no_cycle_collection():
        for linenos, values in blocks:
            rows = _records(path, linenos, values, lifter, what)
            try:
                parts.add(_block_columns(rows, kinds, step_col, collided), len(rows))
            except _TooManyKeys as exc:
                raise too_many_keys(path, exc.count) from None
            lines.append(np.asarray(linenos, dtype=np.int64))
    line_numbers = np.concatenate(lines) if lines else np.zeros(0, np.int64)
    notes += collision_notes(path, collided) + lifter.notes(path)
    return Table(parts.columns(), parts.rows, lines_from(line_numbers), notes)


def collision_notes(path: str, collided: Counter) -> list[str]:
    """A note per key that lines wrote both flat and nested (`_flatten`), with how many lines."""
    return [f"{os.path.basename(path)}: {name}: written both as one key and as nested parts in {count} "
            "line(s); the value of the form met first in the line was kept" for name, count in collided.items()]


def _rows_guess(path: str) -> int:
    """About how many lines the file has, from the length of the first ones (a compressed file: unknown)."""
    if is_gzip(path):
        return _LINES_PER_BLOCK
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    return int(os.path.getsize(path) * (head.count(b"\n") + 1) / max(len(head), 1) * 1.02) + 1024


@contextmanager
def _no_cycle_collection():
    """The collector would walk every record of a block again and again while the next is parsed (a tenth
    of the read); records hold no cycles, so it waits until the read is over."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _records(path: str, linenos: list[int], values: list, lifter: Lifter | None = None,
             what: str = "line") -> list[dict]:
    """The records' objects, each payload lifted to the record's level (Lifter: one for a whole file keeps
    the names the same from block to block; stabdiag watch's follower passes none, a new one per chunk)."""
    if set(map(type, values)) != {dict}:
        lineno = next(n for n, obj in zip(linenos, values) if type(obj) is not dict)
        raise InputError(path, f"each {what} must be a JSON object", line=lineno)
    # a C loop per wrapper name finds the blocks that hold none (most logs): they are read as they are
    wrappers = [name for name in PAYLOADS if dict in set(map(type, map(dict.get, values, repeat(name, len(values)))))]
    if not wrappers:
        return values
    lifter = lifter if lifter is not None else Lifter()
    plain = lifter.plain(values, wrappers)
    if plain is not None:
        return plain
    lifter.decide_main(values)
    return [lifter.lift(obj, wrappers) for obj in values]


def _names(rows: list[dict]) -> list[str]:
    """The keys of some rows in the order they first appear, row by row."""
    seen = dict.fromkeys(rows[0])
    for row in rows:
        if not row.keys() <= seen.keys():
            seen.update(dict.fromkeys(row))
    return list(seen)


class _TooManyKeys(Exception):
    def __init__(self, count: int) -> None:
        self.count = count


def _block_columns(rows: list[dict], kinds: dict[str, str], step_col: str | None,
                   collided: Counter | None = None) -> dict[str, Column]:
    """A block of records as columns.  Records of one shape (same keys: a train line, an eval line) are
    taken apart together, each value fetched by a C loop, and each shape's columns placed at its rows.
    More than KEYS_MAX distinct keys (counted before any column is built: each costs a pass over the
    block) is _TooManyKeys.  `collided` counts, per key, the lines that wrote it both flat and nested."""
    groups = _shapes(rows)
    if groups is not None and len(kinds) + sum(len(names) for _, names, _ in groups) > KEYS_MAX:
        count = len(kinds.keys() | {name for _, names, _ in groups for name in names})
        if count > KEYS_MAX:
            raise _TooManyKeys(count)
    if groups is None:                                  # shapes that do not hold together: key by key
        names = _names(rows)
        if len(kinds.keys() | set(names)) > KEYS_MAX:
            raise _TooManyKeys(len(kinds.keys() | set(names)))
        groups = [(slice(0, len(rows)), names, [list(map(dict.get, rows, repeat(name, len(rows)))) for name in names])]
    parts: dict[str, list] = {}
    for where, names, cells in groups:
        for name, column in zip(names, cells):
            types = set(map(type, column))
            if dict in types:                      # nested objects: flatten the block, then read it again
                return _block_columns([_flat(row, collided) for row in rows], kinds, step_col)
            kind = kinds.get(name) or kinds.setdefault(name, kind_of(name, step_col))
            parts.setdefault(name, []).append((where, json_column(column, types, kind)))
    return {name: joined(found, len(rows)) for name, found in parts.items()}


def _shapes(rows: list[dict]):
    """[(rows, keys, cells per key)] per shape of record, in the order the shapes first appear; None when
    two records of one size hold different keys."""
    sizes = np.fromiter(map(len, rows), np.int64, len(rows))
    firsts = np.unique(sizes, return_index=True)[1]
    groups = []
    for first in sorted(firsts.tolist()):
        where = slice(0, len(rows)) if len(firsts) == 1 else np.flatnonzero(sizes == sizes[first])
        members = rows if len(firsts) == 1 else [rows[i] for i in where]
        names = list(rows[first])
        try:
            values = list(map(itemgetter(*names), members)) if len(names) > 1 else None
        except KeyError:
            return None
        if values is None:
            cells = [list(map(dict.get, members, repeat(names[0], len(members))))] if names else []
            if names and any(names[0] not in row for row in members):
                return None
        else:
            cells = list(zip(*values))
        groups.append((where, names, cells))
    return groups


def _flat(row: dict, collided: Counter | None = None) -> dict:
    out: dict = {}
    _flatten(row, "", out, collided)
    return out


def _flatten(obj: dict, prefix: str, out: dict, collided: Counter | None) -> None:
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _flatten(value, name + "/", out, collided)
        elif out.get(name) is None:                # new, or written as null (not written) the other way
            out[name] = value
        elif value is not None:                    # one key flat and nested in one line: the first kept
            if collided is not None:
                collided[name] += 1


def json_column(cells: list, types: set, kind: str) -> Column:
    """A block of JSON values as a column: numbers in one call where every value is one, exact integers
    for a step, names for the key of a long table, cell by cell otherwise."""
    none = type(None) in types
    written = np.fromiter(map(is_not, cells, repeat(None)), bool, len(cells)) if none else np.ones(len(cells), bool)
    kinds = types - {type(None)}
    if kind == "metric" and kinds <= _NUMBERS:
        try:
            return numbers_column(np.array(cells, dtype=np.float64), written)
        except OverflowError:                  # an integer beyond float64: read as Inf, with a note
            pass
    if kind == "step" and kinds <= {int}:
        try:
            ints = np.array([0 if v is None else v for v in cells] if none else cells, dtype=np.int64)
        except OverflowError:
            ints = None
        if ints is not None and in_step_range(ints).all():
            return Column(written, ints=ints)
    if kind == "key" and kinds <= {str}:
        index: dict[str, int] = {}
        codes = np.array([-1 if v is None else index.setdefault(v, len(index)) for v in cells], dtype=np.int64)
        return Column(written, codes=codes, names=list(index))
    objects = np.fromiter(cells, object, len(cells))
    if kind == "metric":
        return numbers_from_cells(objects, written)
    return Column(written, cells=objects)
