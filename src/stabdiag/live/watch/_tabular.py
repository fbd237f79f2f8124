"""Following a CSV, TSV or JSONL metric log: each poll's complete new lines are read by the tabular
reader's own parsers (the csv module path of loaders/_csv, the block reader of loaders/_jsonl) and
turned into points by its table -> Run step, as a file of those lines under the same header."""

from __future__ import annotations

import csv
import json
from collections import Counter

from ...errors import InputError
from ...read.formats import tabular
from ...read.formats._progress import ByteProgress
from ...read.formats.tabular import _csv, _jsonl
from ...read.formats.tabular._columns import Table, lines_from
from ...read.run import Run, run_name_for
from ._follower_base import Follower
from ._store import PointStore
from ._tail import Tail, complete_lines


class TableFollower(Follower):
    kind = "tabular"

    @staticmethod
    def takes(path: str) -> bool:
        return tabular._kind(path) in ("csv", "tsv", "jsonl") and not path.lower().endswith(".gz")

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.path = self.paths[0]
        self.fmt = tabular._kind(self.path)
        self.tail = Tail(self.path)
        self._reset()

    def _reset(self) -> None:
        self.store = PointStore()
        self.header: str | None = None        # CSV/TSV: the header line, put above each chunk
        self.kinds: dict[str, str] = {}       # JSONL: each key's kind, as the block reader keeps it
        self.lines = 0
        self.meta: dict = {}
        self.notes: list[str] = []
        self.collided: Counter = Counter()    # JSONL: keys written flat and nested in one line, as load says

    def poll(self) -> bool:
        if not self.tail.grew():
            return False
        if self.tail.take_reset():
            self._reset()
        text = complete_lines(self.tail).decode("utf-8", errors="replace")
        if not text:
            return False
        first = self.lines + 1
        self.lines += text.count("\n")
        try:
            chunk = self._jsonl(text, first) if self.fmt == "jsonl" else self._delimited(text)
        except InputError as exc:
            self.problem = str(exc)                # one bad chunk is said, never the end of the watch
            return False
        if chunk is None:
            return False
        self.problem = None
        self.store.add_run(chunk)
        self.meta = chunk.meta
        return True

    def _delimited(self, text: str) -> Run | None:
        if self.header is None:
            lines = text.splitlines(keepends=True)
            at = next((i for i, line in enumerate(lines) if line.strip()), None)
            if at is None:
                return None
            self.header = lines[at].lstrip("\ufeff")
            text = "".join(lines[at + 1:])
        if not text.strip():
            return None
        lines = _csv._Lines(self.header + text)
        reader = csv.reader(lines, delimiter="\t" if self.fmt == "tsv" else ",")
        try:
            table = _csv._read_rows(self.path, reader, lines, ByteProgress(False, 0, ""),
                                    self.options.get("step_col"), self.notes)
        except csv.Error as exc:
            raise InputError(self.path, f"cannot read as CSV: {exc}") from None
        return self._to_run(table)

    def _jsonl(self, text: str, first: int) -> Run | None:
        linenos, values = [], []
        for n, line in enumerate(text.splitlines(), start=first):
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                self.notes.append(f"{self.path}: line {n} is not JSON; skipped")
                continue
            linenos.append(n)
        if not values:
            return None
        rows = _jsonl._records(self.path, linenos, values)
        columns = _jsonl._block_columns(rows, self.kinds, self.options.get("step_col"), self.collided)
        return self._to_run(Table(columns, len(rows), lines_from(linenos), self.notes))

    def _to_run(self, table: Table) -> Run | None:
        if not table.columns or table.rows == 0:
            return None
        return tabular._to_run(table, self.path, self.fmt, self.options.get("step_col"))

    def run(self) -> Run | None:
        if not len(self.store):
            return None
        notes = self.notes + _jsonl.collision_notes(self.path, self.collided)
        return Run(run_name_for(self.path), self.store.series(), (self.path,), dict(self.meta),
                   tuple(dict.fromkeys(notes)))
