"""A training loop's console lines read by template.

A loop prints the same few templates over and over; a line's template is what is left when its
numbers (_SLOT) are cut out.  A template's first lines are read from scratch (_loop_line.parse_line);
where two of them agree on which slot holds each number (a _Plan), its other lines are read by taking
the numbers from their slots, all of the template's lines at once (_digit_runs), and every
_VERIFY_EVERY-th of them is read from scratch again and compared.  A template whose numbers cannot be
placed, or whose check fails, is read from scratch for the rest of the file: the plan only ever saves
time, never changes a reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import _common
from . import _console
from ._digit_runs import COUNTER_DIGITS, Runs, SlotForm
from ._loop_line import Line, StepCounter, parse_line
from ._loop_table import COUNTERS, NONE, LinesBuilder, LoopLines, Shape

_MAX_LINE = 4000                 # longer lines are config echoes and sample dumps, not records
# a number where a line's template has a slot: not inside a name (`top5_acc`, `math500`), signed, with a
# fraction and an exponent; a thousands comma splits it in two, which no plan maps (read from scratch).
# The lookahead names the characters a number starts with, which lets the regex engine skip the others
# before it tries the lookbehind (a fifth less time per line; the same matches)
_SLOT = re.compile(r"(?=[-+.\d])(?<![\w.])([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_DIGIT = re.compile(r"\d")
_VERIFY_EVERY = 256               # a planned template's lines are also read from scratch this often
_TRIES = 3                        # pairs of lines a template's plan is looked for in before it is read slowly


def read_lines(text: str) -> tuple[LoopLines, list[int]]:
    """Every line with readable pairs, and the numbers of lines that had a step counter and named a
    metric but gave no readable metric value."""
    reading = _Reading(*_console.segment_lines(text))
    for rows in reading.templates():
        reading.template(rows)
    return reading.lines.build(), [number for _, number in sorted(reading.unreadable)]


@dataclass
class _Plan:
    """Where a template's numbers go: each counter field and pair value as the index of a slot (or, for a
    value no slot holds - nan, inf - a constant), and what is the same on every line of it."""

    counter: dict[str, int]                          # step / total / outer / epoch_only -> slot
    constants: dict[str, object]                     # kind, outer_kind (and None fields)
    values: list[tuple[str, int | float]]           # (key, slot) or (key, constant), in printed order
    printed: dict[str, str]
    explicit: bool
    unreadable: bool
    empty: bool                                      # the template's lines hold no pairs

    @property
    def shape(self) -> Shape:
        return Shape(tuple(key for key, _ in self.values), tuple(self.printed[key] for key, _ in self.values),
                     self.explicit)


@dataclass
class _Planned:
    """A plan's reading of a template's lines: the counters (a column each, or NONE where the template
    prints none), whether a line's counter slots held counters (`1.5`, a sign or more digits than a
    counter has: that line is read from scratch), and the values, lines x keys."""

    counters: dict[str, np.ndarray | int]
    read: np.ndarray
    values: np.ndarray

    def line(self, plan: _Plan, at: int, number: int) -> tuple[Line | None, bool]:
        """Line `at` as the plan reads it, as parse_line gives a line."""
        if plan.empty:
            return None, plan.unreadable
        counter = StepCounter(**{name: None if isinstance(column, int) else int(column[at])
                                 for name, column in self.counters.items()},
                              kind=plan.constants["kind"], outer_kind=plan.constants["outer_kind"])
        pairs = dict(zip((key for key, _ in plan.values), self.values[at].tolist()))
        return Line(number, counter, pairs, plan.printed, plan.explicit), plan.unreadable

    def rows(self, taken: np.ndarray) -> tuple[dict[str, np.ndarray | int], np.ndarray]:
        """The counters and values of the lines `taken`."""
        return ({name: column if isinstance(column, int) else column[taken] for name, column in self.counters.items()},
                self.values[taken])


class _Reading:
    """One text's lines being read: the lines (the text split at `\\n`, each one's line number), where
    their digits are, and what has been read (rows, and (order, line number) of unreadable lines)."""

    def __init__(self, text: str, numbers: list[int] | None) -> None:
        self.raw = text.split("\n")
        self.number = np.arange(1, len(self.raw) + 1) if numbers is None else np.array(numbers, np.int64)
        self.runs = Runs.of(text)
        self.skeleton = np.full(len(self.raw), -1)       # the skeleton a line's numbers are placed by
        self._first: dict[int, tuple[int, int, str]] = {}   # a skeleton's first line
        self._forms: dict[int, list[SlotForm]] = {}
        self.lines = LinesBuilder()
        self.unreadable: list[tuple[int, int]] = []

    def scratch(self, row: int, segment: str | None = None) -> tuple[Line | None, bool]:
        """Line `row` read from scratch, kept."""
        number = int(self.number[row])
        line, unreadable = parse_line(number, self.raw[row].strip() if segment is None else segment)
        if line is not None:
            self.lines.add_line(row, line)
        if unreadable:
            self.unreadable.append((row, number))
        return line, unreadable

    def templates(self) -> list[np.ndarray]:
        """Each template's lines, in order.  Lines alike but for their digits (one skeleton) have one
        template, found on the first of them; a line in no skeleton (not ASCII) is split alone.  A line
        with digits but no slot is read from scratch here; blank lines, lines past _MAX_LINE and lines
        without digits are no record."""
        template = np.full(len(self.raw), -1)
        keys: dict[tuple[str, ...], int] = {}
        alone = [] if self.runs is not None else list(range(len(self.raw)))
        for skeleton, members in enumerate(self.runs.members if self.runs is not None else ()):
            if not self.raw[members[0]].isascii():
                alone += members.tolist()
                continue
            members, parts = self._skeleton_lines(skeleton, members)
            if parts is not None:
                template[members] = keys.setdefault(tuple(parts[0::2]), len(keys))
                self.skeleton[members] = skeleton
        for row in alone:
            segment = self.raw[row].strip()
            if not segment or len(segment) > _MAX_LINE:
                continue
            parts = _SLOT.split(segment)
            if len(parts) > 1:
                template[row] = keys.setdefault(tuple(parts[0::2]), len(keys))
            elif _DIGIT.search(segment):
                self.scratch(row, segment)
        rows = np.argsort(template, kind="stable")
        bounds = np.searchsorted(template[rows], np.arange(len(keys) + 1))
        return [rows[bounds[t]:bounds[t + 1]] for t in range(len(keys))]

    def _skeleton_lines(self, skeleton: int, members: np.ndarray) -> tuple[np.ndarray, list[str] | None]:
        """A skeleton's lines that are records and their first line's parts (numbers and what is between
        them); None for lines with no slot (read from scratch here) and lines that are no record."""
        first = self.raw[members[0]]
        segment = first.strip()
        if not segment or not self.runs.has_digits(members[0]):
            return members, None
        self._first[skeleton] = (int(members[0]), len(first) - len(first.lstrip()), segment)
        members = members[self.runs.line_length(members) - (len(first) - len(segment)) <= _MAX_LINE]
        parts = _SLOT.split(segment)
        if len(parts) > 1:
            return members, parts
        for row in members.tolist():
            self.scratch(row)
        return members, None

    def template(self, rows: np.ndarray) -> None:
        """A template's lines read: from scratch until two of them give a plan (a few tries), then by it."""
        state = None
        for at, row in enumerate(rows.tolist()):
            segment = self.raw[row].strip()
            slots = _SLOT.split(segment)[1::2]
            done = self.scratch(row, segment)
            if state is not None:
                first, first_slots, tries = state
                plan = _plan(first, first_slots, done, slots)
                if plan is not None:
                    self._planned(plan, rows[at + 1:])
                    return
                if tries == _TRIES:                   # no plan: the template is read from scratch
                    for rest in rows[at + 1:].tolist():
                        self.scratch(rest)
                    return
            state = (done, slots, 0 if state is None else state[2] + 1)

    def _planned(self, plan: _Plan, rows: np.ndarray) -> None:
        """A template's lines after its plan read by the plan, every _VERIFY_EVERY-th from scratch as
        well; from the first whose two readings differ on, from scratch."""
        planned = self._reading(plan, rows)
        checked = np.arange(_VERIFY_EVERY - 1, len(rows), _VERIFY_EVERY)
        end = len(rows)
        for at in checked.tolist():
            done = self.scratch(int(rows[at]))
            if planned.read[at] and not _same(done, planned.line(plan, at, int(self.number[rows[at]]))):
                end = at + 1
                break
        taken = np.arange(len(rows)) < end
        taken[checked] = False
        by_plan = taken & planned.read
        if not plan.empty:
            counters, values = planned.rows(by_plan)
            self.lines.add_block(rows[by_plan], self.number[rows[by_plan]], counters, plan.constants["kind"],
                                 plan.constants["outer_kind"], plan.shape, values)
        if plan.unreadable:
            self.unreadable += zip(rows[by_plan].tolist(), self.number[rows[by_plan]].tolist())
        for row in np.concatenate([rows[taken & ~planned.read], rows[end:]]).tolist():
            self.scratch(row)

    def _reading(self, plan: _Plan, rows: np.ndarray) -> _Planned:
        if plan.empty:
            return _Planned({}, np.ones(len(rows), bool), np.zeros((len(rows), 0)))
        skeletons = self._skeletons_of(rows)
        counters: dict[str, np.ndarray | int] = {}
        read = np.ones(len(rows), bool)
        for name in COUNTERS:
            if name not in plan.counter:
                counters[name] = NONE
                continue
            counters[name], readable = self._counters(rows, skeletons, plan.counter[name])
            read &= readable
        values = np.empty((len(rows), len(plan.values)))
        for column, (_, where) in enumerate(plan.values):
            values[:, column] = self._floats(rows, skeletons, where) if type(where) is int else where
        return _Planned(counters, read, values)

    def _skeletons_of(self, rows: np.ndarray) -> list[tuple[np.ndarray, int]]:
        """(positions in rows, skeleton) for the lines of each skeleton among `rows`; skeleton -1 for
        the lines read alone."""
        skeletons = self.skeleton[rows]
        order = np.argsort(skeletons, kind="stable")
        found, starts = np.unique(skeletons[order], return_index=True)
        return [(order[a:b], int(k)) for k, a, b in zip(found, starts, np.append(starts[1:], len(rows)))]

    def _counters(self, rows: np.ndarray, skeletons: list, slot: int) -> tuple[np.ndarray, np.ndarray]:
        value, read = np.zeros(len(rows), np.int64), np.zeros(len(rows), bool)
        for at, skeleton in skeletons:
            if skeleton >= 0:
                value[at], read[at] = self.runs.counters(rows[at], self._forms_of(skeleton)[slot])
                continue
            for i in at.tolist():
                text = self._slot_texts(int(rows[i]))[slot]
                if text.isdigit() and len(text) <= COUNTER_DIGITS:
                    value[i], read[i] = int(text), True
        return value, read

    def _floats(self, rows: np.ndarray, skeletons: list, slot: int) -> np.ndarray:
        out = np.empty(len(rows))
        for at, skeleton in skeletons:
            if skeleton >= 0:
                out[at] = self.runs.floats(rows[at], self._forms_of(skeleton)[slot])
            else:
                out[at] = [float(self._slot_texts(row)[slot]) for row in rows[at].tolist()]
        return out

    def _slot_texts(self, row: int) -> list[str]:
        return _SLOT.split(self.raw[row].strip())[1::2]

    def _forms_of(self, skeleton: int) -> list[SlotForm]:
        """Where the numbers of a skeleton's lines sit, placed on its first line."""
        if skeleton not in self._forms:
            row, lead, segment = self._first[skeleton]
            spans = [found.span() for found in _SLOT.finditer(segment)]
            self._forms[skeleton] = self.runs.slot_forms(row, lead, segment, spans)
        return self._forms[skeleton]


def _plan(first: tuple[Line | None, bool], first_slots: list[str],
          second: tuple[Line | None, bool], second_slots: list[str]) -> _Plan | None:
    """The plan two lines of one template agree on, or None where a number has no single slot."""
    (line1, bad1), (line2, bad2) = first, second
    if bad1 != bad2 or (line1 is None) != (line2 is None):
        return None
    if line1 is None:
        return _Plan({}, {}, [], {}, False, bad1, True)
    c1, c2 = line1.counter, line2.counter
    if any(_SLOT.search(name) for name in line1.printed.values()):
        return None                                     # a number inside a name: names would move with it
    if (c1.kind, c1.outer_kind, line1.explicit, list(line1.pairs), line1.printed) != \
            (c2.kind, c2.outer_kind, line2.explicit, list(line2.pairs), line2.printed):
        return None
    counter, constants = {}, {"kind": c1.kind, "outer_kind": c1.outer_kind}
    for name in COUNTERS:
        v1, v2 = getattr(c1, name), getattr(c2, name)
        if v1 is None or v2 is None:
            if v1 is not None or v2 is not None:
                return None
            constants[name] = None
            continue
        slot = _one_slot(first_slots, second_slots, v1, v2, _slot_int)
        if slot is None:
            return None
        counter[name] = slot
    values: list[tuple[str, int | float]] = []
    for name, v1 in line1.pairs.items():
        v2 = line2.pairs[name]
        if v1 != v1 or abs(v1) == float("inf"):                  # nan, inf: written, not a slot
            if not (v2 != v2 and v1 != v1) and v2 != v1:
                return None
            # the line's own value: read from scratch a nan is always math.nan (_common.number), so a
            # step's nan from a planned line and from a line read from scratch are one value in
            # _micro_steps' set() of the step's values, as they are when no line is planned
            values.append((name, v1))
            continue
        slot = _one_slot(first_slots, second_slots, v1, v2, _common.number)
        if slot is None:
            return None
        values.append((name, slot))
    return _Plan(counter, constants, values, line1.printed, line1.explicit, bad1, False)


def _slot_int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _one_slot(first: list[str], second: list[str], v1, v2, read) -> int | None:
    hits = [i for i, (a, b) in enumerate(zip(first, second)) if read(a) == v1 and read(b) == v2]
    return hits[0] if len(hits) == 1 else None


def _same(a: tuple[Line | None, bool], b: tuple[Line | None, bool]) -> bool:
    (la, ua), (lb, ub) = a, b
    if ua != ub or (la is None) != (lb is None):
        return False
    if la is None:
        return True
    return (all(getattr(la.counter, f) == getattr(lb.counter, f) for f in (*COUNTERS, "kind", "outer_kind"))
            and la.printed == lb.printed and la.explicit == lb.explicit and list(la.pairs) == list(lb.pairs)
            and all(x == y or (x != x and y != y) for x, y in zip(la.pairs.values(), lb.pairs.values())))

