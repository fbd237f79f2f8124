"""The points a follower has read so far, by key, in write order, in arrays that grow by doubling: taking
k new points costs O(k), and so does handing the whole history to the engine again while the steps keep
increasing (what was already found in order, with valid steps and wall times, is not looked at again)."""

from __future__ import annotations

import numpy as np

from ...read.run import Run, Series, as_steps


class _Column:
    __slots__ = ("steps", "values", "walls", "size", "pending", "seen", "ordered", "has_walls")

    def __init__(self) -> None:
        self.steps = np.empty(64, np.int64)
        self.values = np.empty(64, np.float64)
        self.walls = np.empty(64, np.float64)
        self.size = 0
        self.pending: list[tuple[int, float]] = []      # single points (a loop's log calls), kept until read
        self.seen = 0                 # the first `seen` points were looked at by series(): in order so far?
        self.ordered = True           # each step of the first `seen` once and increasing
        self.has_walls = False        # a finite wall time among the first `seen`

    def settle(self) -> None:
        if self.pending:
            steps, values = zip(*self.pending)
            self.pending = []
            self.extend(np.fromiter(steps, np.int64, len(steps)), np.fromiter(values, np.float64, len(values)), None)

    def extend(self, steps: np.ndarray, values: np.ndarray, walls: np.ndarray | None) -> None:
        if self.pending:
            self.settle()
        need = self.size + len(steps)
        if need > len(self.steps):
            room = max(need, 2 * len(self.steps))
            for name in ("steps", "values", "walls"):
                old = getattr(self, name)
                grown = np.empty(room, old.dtype)
                grown[:self.size] = old[:self.size]
                setattr(self, name, grown)
        end = self.size + len(steps)
        self.steps[self.size:end] = steps
        self.values[self.size:end] = values
        self.walls[self.size:end] = np.nan if walls is None else walls
        self.size = end


class PointStore:
    """Points by key in write order; `series()` gives them as the loaders do (the last write of a step
    wins, earlier writes kept as superseded)."""

    def __init__(self) -> None:
        self._columns: dict[str, _Column] = {}

    def __len__(self) -> int:
        return sum(c.size + len(c.pending) for c in self._columns.values())

    def append(self, key: str, step: int, value: float) -> None:
        """One point: a list append, so that a loop logging every step pays about a microsecond a metric."""
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = _Column()
        column.pending.append((step, value))

    def extend(self, key: str, steps, values, walls=None) -> None:
        if len(steps):
            column = self._columns.get(key)
            if column is None:
                column = self._columns[key] = _Column()
            column.extend(np.asarray(steps, np.int64), np.asarray(values, np.float64),
                          None if walls is None else np.asarray(walls, np.float64))

    def add_run(self, run: Run) -> None:
        """A reader's Run of a chunk of new records: each key's superseded writes go first, so that the
        kept (last) write of a step still wins when the history is put together."""
        for key, s in run.series.items():
            if len(s.superseded_steps):
                self.extend(key, s.superseded_steps, s.superseded_values)
            self.extend(key, s.steps, s.values, s.wall_time)

    def raw(self) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each key's (steps, values, wall times) in write order: views, valid until the next extend."""
        for c in self._columns.values():
            c.settle()
        return {key: (c.steps[:c.size], c.values[:c.size], c.walls[:c.size]) for key, c in self._columns.items()}

    def series(self, rename=None) -> dict[str, Series]:
        out = {}
        for key, c in self._columns.items():
            c.settle()
            name = rename(key) if rename else key
            steps, values, walls = c.steps[:c.size], c.values[:c.size], c.walls[:c.size]
            if c.ordered and c.seen < c.size:
                # only the points after the last look: their steps valid and increasing from the one before
                as_steps(steps[c.seen:])  # raises StepError on a step out of range, as from_points would
                start = max(c.seen - 1, 0)
                c.ordered = bool(np.all(steps[start + 1:] > steps[start:-1]))
                c.has_walls = c.has_walls or bool(np.isfinite(walls[c.seen:]).any())
                c.seen = c.size
            if c.ordered:                 # in order, each step once: kept as given, as Series.from_points does
                out[name] = Series(key=name, steps=steps, values=values, wall_time=walls if c.has_walls else None)
            else:
                out[name] = Series.from_points(name, steps, values, walls if np.isfinite(walls).any() else None)
        return out
