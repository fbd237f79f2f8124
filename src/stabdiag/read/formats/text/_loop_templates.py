"""A training loop's console lines read by template: a loop prints the same few templates over and over,
so each template's first lines are read from scratch (_loop_line) and the rest by where its numbers sit."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import _common
from . import _console
from ._loop_line import COUNTER_FIELDS, Line, StepCounter, parse_line
from ._loop_table import LinesBuilder, LoopLines

_MAX_LINE = 4000                 # longer lines are config echoes and sample dumps, not records


def read_lines(text: str) -> tuple[LoopLines, list[int]]:
    """Every line with readable pairs, and the numbers of lines that had a step counter and named a
    metric but gave no readable metric value.  A loop prints the same few templates over and over, so
    each template's first lines are read from scratch and the rest by where its numbers sit
    (_Templates)."""
    lines, unreadable = LinesBuilder(), []
    templates = _Templates()
    for order, (number, segment) in enumerate(_console.segments(text)):
        if len(segment) > _MAX_LINE:
            continue                          # a sample dump or a config echo: no record
        line, no_value = templates.read(number, segment)
        if line is not None:
            lines.add_line(order, line)
        if no_value:
            unreadable.append(number)
    return lines.build(), unreadable


# a number where a line's template has a slot: not inside a name (`top5_acc`, `math500`), signed, with a
# fraction and an exponent; a thousands comma splits it in two, which no plan maps (read from scratch).
# The lookahead names the characters a number starts with, which lets the regex engine skip the others
# before it tries the lookbehind (a fifth less time per line; the same matches)
_SLOT = re.compile(r"(?=[-+.\d])(?<![\w.])([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_DIGIT = re.compile(r"\d")
_SLOW = "slow"                    # a template whose lines are always read from scratch
_VERIFY_EVERY = 256               # a planned template's lines are also read from scratch this often
_TRIES = 3                        # pairs of lines a template's plan is looked for in before it is read slowly


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
    seen: int = 0
    # StepCounter's positional arguments with the constants in place, and where each counter slot goes
    counter_args: list = field(init=False)
    counter_slots: tuple[tuple[int, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        self.counter_args = [self.constants.get(name) for name in COUNTER_FIELDS]
        self.counter_slots = tuple((COUNTER_FIELDS.index(name), slot) for name, slot in self.counter.items())


class _Templates:
    """Lines read by template: a line's numbers are cut out (_SLOT), the rest is its template.  The first
    two lines of a template are read from scratch; where every number the reading found sits in one slot
    on both, later lines take their numbers from those slots, and every _VERIFY_EVERY-th is read from
    scratch again and compared.  A template whose numbers cannot be placed, or whose check fails, is
    read from scratch for the rest of the file: the plan only ever saves time, never changes a reading."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], object] = {}

    def read(self, number: int, segment: str) -> tuple[Line | None, bool]:
        parts = _SLOT.split(segment)
        if len(parts) == 1:
            if not _DIGIT.search(segment):
                return None, False            # prose: no record
            return parse_line(number, segment)
        key = tuple(parts[0::2])
        slots = parts[1::2]
        state = self._known.get(key)
        if state is _SLOW:
            return parse_line(number, segment)
        if isinstance(state, _Plan):
            state.seen += 1
            if state.seen % _VERIFY_EVERY:
                planned = _apply(state, number, slots)
                return planned if planned is not None else parse_line(number, segment)
            done = parse_line(number, segment)
            planned = _apply(state, number, slots)
            if planned is not None and not _same(done, planned):
                self._known[key] = _SLOW
            return done
        done = parse_line(number, segment)
        if state is None:
            self._known[key] = (done, slots, 0)       # the first line: wait for a second
        else:
            first, first_slots, tries = state
            plan = _plan(first, first_slots, done, slots)
            if plan is not None:
                self._known[key] = plan
            else:                                     # two values that happened to be equal: try the next
                self._known[key] = (done, slots, tries + 1) if tries < _TRIES else _SLOW
        return done


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
    for name in ("step", "total", "outer", "epoch_only"):
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


def _apply(plan: _Plan, number: int, slots: list[str]) -> tuple[Line | None, bool] | None:
    """The line as the plan reads it; None where a counter's slot holds no counter this time (`1.5`, a
    sign, more digits than a counter has): that line is read from scratch."""
    if plan.empty:
        return None, plan.unreadable
    args = plan.counter_args.copy()
    for index, slot in plan.counter_slots:
        text = slots[slot]
        if not (text.isdigit() and len(text) <= 12):
            return None
        args[index] = int(text)
    counter = StepCounter(*args)
    # a slot is a plain decimal number, which float() reads as _common.number would
    pairs = {name: float(slots[where]) if type(where) is int else where for name, where in plan.values}
    # the plan's printed names are shared: no user of a line changes them
    return Line(number, counter, pairs, plan.printed, plan.explicit), plan.unreadable


def _same(a: tuple[Line | None, bool], b: tuple[Line | None, bool]) -> bool:
    (la, ua), (lb, ub) = a, b
    if ua != ub or (la is None) != (lb is None):
        return False
    if la is None:
        return True
    fields = ("step", "total", "outer", "outer_kind", "epoch_only", "kind")
    return (all(getattr(la.counter, f) == getattr(lb.counter, f) for f in fields)
            and la.printed == lb.printed and la.explicit == lb.explicit and list(la.pairs) == list(lb.pairs)
            and all(x == y or (x != x and y != y) for x, y in zip(la.pairs.values(), lb.pairs.values())))

