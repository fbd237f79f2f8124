"""The lines a training loop's console reader took, as columns.

A console of 100,000 metric lines is given its step axis and turned into series with numpy over these
columns: done with Python over 100,000 line objects, that costs more than reading the lines.  A row is
one line with pairs.  What a template's lines share (their keys, printed names, `explicit`) is its
Shape, kept once; a row's pairs are kept in two long columns (the rows' pairs one after the other, in
printed order), so a key's values are found without a table per key.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._loop_line import Line, StepCounter, is_metric_key

NONE = -1                      # a counter the line does not print (a printed counter is 0 or more)
KINDS = ("", "global step", "step", "iteration", "epoch [i/N]", "leading number")
OUTER_KINDS = ("", "epoch", "iteration")
KIND = {name: code for code, name in enumerate(KINDS)}
OUTER_KIND = {name: code for code, name in enumerate(OUTER_KINDS)}
COUNTERS = ("step", "total", "outer", "epoch_only")


@dataclass(frozen=True, slots=True)
class Shape:
    """What every line of a template has alike: its keys in printed order, their printed names, and
    whether the line holds nothing but `key: value` pairs."""

    keys: tuple[str, ...]
    printed: tuple[str, ...]
    explicit: bool

    @property
    def sorted_keys(self) -> tuple[str, ...]:
        return tuple(sorted(self.keys))


@dataclass(frozen=True, eq=False)
class LoopLines:
    """Rows in the order the lines were printed; counters are int64 with NONE where not printed."""

    number: np.ndarray
    step: np.ndarray
    total: np.ndarray
    outer: np.ndarray
    epoch_only: np.ndarray
    kind: np.ndarray              # index into KINDS
    outer_kind: np.ndarray        # index into OUTER_KINDS
    shape: np.ndarray             # index into shapes
    shapes: tuple[Shape, ...]
    pair_start: np.ndarray        # row r's pairs are pair_key/pair_value[pair_start[r]:pair_start[r + 1]]
    pair_key: np.ndarray          # index into keys
    pair_value: np.ndarray
    keys: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.number)

    @functools.cached_property
    def metric(self) -> np.ndarray:
        """Per shape: a key names a training metric."""
        return np.array([any(map(is_metric_key, s.keys)) for s in self.shapes], bool)

    @functools.cached_property
    def explicit(self) -> np.ndarray:
        return np.array([s.explicit for s in self.shapes], bool)

    def pairs_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of `rows`, in their order and each row's printed order: (position in rows, index
        into pair_key / pair_value)."""
        starts, ends = self.pair_start[rows], self.pair_start[rows + 1]
        counts = ends - starts
        at = np.repeat(np.arange(len(rows)), counts)
        # each pair's index: its row's first pair plus its place among the row's pairs
        first = np.cumsum(counts) - counts
        return at, np.arange(len(at)) - np.repeat(first - starts, counts)

    def printed_names(self, pairs: np.ndarray) -> list[str]:
        """The printed name of each pair's key (its line's, which a key read in snake_case may not share
        with another line's)."""
        rows = np.searchsorted(self.pair_start, pairs, side="right") - 1
        return [self.shapes[shape].printed[inline]
                for shape, inline in zip(self.shape[rows].tolist(), (pairs - self.pair_start[rows]).tolist())]

    def line(self, row: int) -> Line:
        """One row as the Line that reading it from scratch gives (less the counter's text spans)."""
        shape = self.shapes[self.shape[row]]
        printed = {name: int(getattr(self, name)[row]) for name in COUNTERS}
        counter = StepCounter(**{name: None if value == NONE else value for name, value in printed.items()},
                              outer_kind=OUTER_KINDS[self.outer_kind[row]], kind=KINDS[self.kind[row]])
        values = self.pair_value[self.pair_start[row]:self.pair_start[row + 1]].tolist()
        return Line(int(self.number[row]), counter, dict(zip(shape.keys, values)),
                    dict(zip(shape.keys, shape.printed)), shape.explicit)


class LinesBuilder:
    """Rows gathered in any order - a line read from scratch at a time, a template's lines a block at a
    time - and put in the order they were printed by build()."""

    def __init__(self) -> None:
        self._shapes: dict[Shape, int] = {}
        self._keys: dict[str, int] = {}
        self._blocks: list[tuple[np.ndarray, ...]] = []
        # the lines added one at a time: their columns as rows (order, number, COUNTERS, kind,
        # outer kind, shape) and their values; a line's shape found by plain tuples, which hash fast
        self._rows: list[tuple] = []
        self._values: list[float] = []
        self._line_shapes: dict[tuple, int] = {}

    def shape_of(self, shape: Shape) -> int:
        for key in shape.keys:
            self._keys.setdefault(key, len(self._keys))
        return self._shapes.setdefault(shape, len(self._shapes))

    def add_line(self, order: int, line: Line) -> None:
        c, names = line.counter, line.printed
        spelled = (tuple(line.pairs), tuple(map(names.__getitem__, line.pairs)), line.explicit)
        shape = self._line_shapes.get(spelled)
        if shape is None:
            shape = self._line_shapes[spelled] = self.shape_of(Shape(*spelled))
        self._rows.append((order, line.number, c.step, c.total, c.outer, c.epoch_only, KIND[c.kind],
                           OUTER_KIND[c.outer_kind], shape))
        self._values.extend(line.pairs.values())

    def add_block(self, order: np.ndarray, number: np.ndarray, counters: dict[str, np.ndarray | int],
                  kind: str, outer_kind: str, shape: Shape, values: np.ndarray) -> None:
        """Rows of one template: `counters` maps each of COUNTERS to a column or a constant (NONE where
        the template prints none), `values` is rows x keys."""
        size = len(order)
        filled = [np.broadcast_to(np.asarray(counters[name], np.int64), (size,)) for name in COUNTERS]
        self._blocks.append((np.asarray(order, np.int64), np.asarray(number, np.int64), *filled,
                             np.full(size, KIND[kind], np.int8), np.full(size, OUTER_KIND[outer_kind], np.int8),
                             np.full(size, self.shape_of(shape), np.int32), np.asarray(values, np.float64).ravel()))

    def _lines_block(self) -> tuple[np.ndarray, ...]:
        """The lines added one at a time as one block of columns.  float64 holds every column exactly (a
        counter has at most 12 digits) and reads None as NaN, which becomes NONE."""
        rows = np.array(self._rows, np.float64).reshape(len(self._rows), 9)
        columns = [np.where(np.isnan(column), NONE, column).astype(np.int64) for column in rows.T]
        return (*columns[:6], columns[6].astype(np.int8), columns[7].astype(np.int8), columns[8].astype(np.int32),
                np.array(self._values, np.float64))

    def build(self) -> LoopLines:
        blocks = self._blocks + [self._lines_block()]
        order, number, step, total, outer, epoch_only, kind, outer_kind, shape, values = (
            np.concatenate(column) for column in zip(*blocks))
        keys = tuple(self._keys)
        shapes = tuple(self._shapes)
        width = np.array([len(s.keys) for s in shapes] or [0], np.int64)
        shape_keys = [np.array([self._keys[k] for k in s.keys], np.int32) for s in shapes]
        # the pairs, which follow the rows in the order they were added, put in the rows' new order
        counts = width[shape]
        perm = np.argsort(order, kind="stable")
        start = np.concatenate([[0], np.cumsum(counts[perm])])
        old_start = np.cumsum(counts) - counts
        shift = np.repeat(old_start[perm] - start[:-1], counts[perm])
        taken = np.arange(len(shift)) + shift
        key_start = np.cumsum([0] + [len(k) for k in shape_keys])
        flat_keys = np.concatenate(shape_keys + [np.zeros(0, np.int32)])
        inline = np.arange(len(shift)) - np.repeat(start[:-1], counts[perm])
        pair_key = flat_keys[key_start[np.repeat(shape[perm], counts[perm])] + inline]
        return LoopLines(number[perm], step[perm], total[perm], outer[perm], epoch_only[perm], kind[perm],
                         outer_kind[perm], shape[perm], shapes, start, pair_key, values[taken], keys)
