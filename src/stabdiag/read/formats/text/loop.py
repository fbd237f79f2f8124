"""Consoles of hand-written training loops (GRPO tutorials, research repos, nanoGPT-style scripts):

    Iteration 1/20 | Episodes: 98 | Mean Reward: 20.8 | KL: 0.0047 | clip%: 6.2%
    iter 2920: loss 3.9883, time 1099.34ms, mfu 15.34%
    step 250: train loss 1.5440, val loss 1.7220
    Iter 10: Train loss 0.000, Total rewards mean 0.875, KL 0.001, Learning Rate 1.000e-05, Peak mem 12.237 GB
    [GRAD-DBG] it=67 micro=7/10 loss=3.2387 toks=108 grad_l2=1.253e+01
    Epoch: [1]  [1480/1504]  lr: 0.000012  closs: 0.9233 (0.9531)  grad_norm: 0.2695 (0.3902)
    Percentage of correct examples:  0.06640625          (once per step, no step printed)

There is no schema, so the rules are strict, to keep ordinary program output out:

- A line is a metric line only when it has a step counter (`step N`, `Step N/M`, `it N`, `iter N`,
  `Iteration ... Step N`, `global_step N`, `N | ...`, or an epoch with a per-epoch `[i/N]`) and at least
  one key that names a training metric (loss, reward, kl, accuracy, grad norm, lr, ...), or when the
  file repeats a record of such keys with no step at all; then step = record number, and a note says so.
- A global step wins over a per-epoch step; a per-epoch counter that restarts each epoch is continued
  across epochs ((epoch - first) x steps per epoch + step when the total is printed).
- A metric line without a step among step lines (`Average Reward: ...` once per step) takes the step
  of the step line next to it; a log that counts only epochs gets step = epoch.
- Timestamps, dates, versions, `[INFO]`-style prefixes, ranks, progress bars and the `epoch` fraction
  are never metrics or steps (see _console); a name seen on one line only that names no metric is
  dropped (a sentence in a printed completion, not a metric).

`run.meta["step_axis"]` says where the steps came from: "printed", "epoch" or "counted".  Keys are
written in lower snake_case (`Mean Reward` -> `mean_reward`, `KL` -> `kl`) so that the signal aliases
find them, which the printed spelling would not; the printed names are kept in
`run.meta["printed_keys"]` and named in a note.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field, fields

from ...run import STEP_MAX, Run
from .. import _common
from .._common import Points, column_of_points
from . import _console

FORMAT = "training-loop console"
_N = r"\[?\s*(\d{1,12})(?:\s*/\s*(\d{1,12}))?\s*\]?(?![\d.])"
_GLOBAL = re.compile(r"(?<![\w/])global[ _]?step\s*[:=#]?\s*" + _N, re.IGNORECASE)
_STEP = re.compile(r"(?<![\w/])step\s*[:=#]?\s*" + _N, re.IGNORECASE)
_ITER = re.compile(r"(?<![\w/])(?:iteration|iter|it)\s*[:=#]?\s*" + _N, re.IGNORECASE)
_EPOCH = re.compile(r"(?<![\w/])epoch\s*[:=#]?\s*" + _N, re.IGNORECASE)
_IN_EPOCH = re.compile(r"^[\s\]|,:]*[\[(]?\s*(\d{1,12})\s*/\s*(\d{1,12})\s*[\])]?(?![\d.])")
_LEADING = re.compile(r"^\s*(\d{1,12})\s*[|:]\s")
_FIELDS = re.compile(r"\s*\|\s*|,\s+|;\s*|\s+-\s+|(?<![:=\s])\s{2,}|\t")
_EQ_PAIR = re.compile(r"([A-Za-z_][\w/.%@\-]*)(\s*)=(\s*)([^\s,;|=]+)")
_VALUE = re.compile(r"^([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity))"
                    r"([A-Za-z%/]+)?$", re.IGNORECASE)
_KEY = re.compile(r"^[A-Za-z][\w /.%@()\-]*$")
_UNITS = {"%", "ms", "s", "sec", "secs", "seconds", "min", "h", "gb", "gib", "mb", "mib", "kb", "tok/s",
          "tokens/s", "it/s", "s/it", "samples/s", "tflops", "x"}
_COUNTER_KEYS = {"epoch", "step", "global_step", "iter", "iteration", "it"}
# words that name what a training loop reports; four letters or more match inside a key ('closs')
_METRIC_PARTS = ("loss", "reward", "return", "entropy", "accura", "correct", "perplex", "score", "grad",
                 "norm", "advantage", "clip", "learning")
_METRIC_WORDS = {"kl", "lr", "acc", "ppl", "mfu"}
_MIN_RECORDS = 3
# what a restarted run prints before its first step again (see _counter_resets)
_RESTART = re.compile(r"resum|restor|restart|load(?:ing|ed)?\b[^\n]{0,40}checkpoint|checkpoint[^\n]{0,20}load|"
                      r"from checkpoint|Namespace\(", re.IGNORECASE)
_MAX_LINE = 4000                 # longer lines are config echoes and sample dumps, not records


@dataclass(slots=True)                   # slots: a planned line's objects are built at half the cost
class _Counter:
    """What a line says about its step: the counter used, its total, and an outer (epoch) counter."""

    step: int | None = None
    total: int | None = None
    outer: int | None = None
    outer_kind: str = ""           # "epoch", or "iteration" for an `iter N` beside `step M` (lit-gpt)
    epoch_only: int | None = None
    kind: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)


# _Counter's fields in its constructor's order, but the spans each line finds for itself
_COUNTER_FIELDS = tuple(f.name for f in fields(_Counter) if f.name != "spans")


@dataclass(slots=True)
class _Line:
    number: int
    counter: _Counter
    pairs: dict[str, float]
    printed: dict[str, str]
    explicit: bool = True          # the line is nothing but `key: value` / `key=value` pairs


@functools.lru_cache(maxsize=4096)       # a log has a few key names, asked about once per line
def is_metric_key(key: str) -> bool:
    """The key names something a training loop reports (what sets a record apart from program output)."""
    low = key.lower()
    return any(p in low for p in _METRIC_PARTS) or any(w in _METRIC_WORDS for w in re.split(r"[^a-z0-9]+", low))


def _counter(text: str) -> _Counter:
    """The step counter of a line; a global step wins, then `step`, then `it`/`iter`/`iteration`, then
    an epoch's per-epoch `[i/N]`, then a bare leading `N |`.  Another counter beside it is the outer one."""
    found = _Counter()
    glob, step, it, epoch = (p.search(text) for p in (_GLOBAL, _STEP, _ITER, _EPOCH))
    if glob:
        step = None                     # a bare `step N` beside a global step is the per-epoch one
    inner = glob or step or it
    if inner is None and epoch:
        per_epoch = _IN_EPOCH.match(text[epoch.end():])
        if per_epoch:
            found.step, found.total, found.kind = int(per_epoch.group(1)), int(per_epoch.group(2)), "epoch [i/N]"
            found.outer = int(epoch.group(1))
            found.spans += [epoch.span(), (epoch.end() + per_epoch.start(), epoch.end() + per_epoch.end())]
            return found
    if inner is not None:
        found.step = int(inner.group(1))
        found.total = int(inner.group(2)) if inner.group(2) else None
        found.kind = "global step" if glob else "step" if inner is step else "iteration"
        found.spans.append(inner.span())
        outer = epoch or (it if inner is step else None)
        if outer is not None and not glob:
            found.outer = int(outer.group(1))
            found.outer_kind = "epoch" if outer is epoch else "iteration"
            found.spans.append(outer.span())
        return found
    leading = _LEADING.match(text)
    if leading:
        found.step, found.kind = int(leading.group(1)), "leading number"
        found.spans.append(leading.span(1))
    elif epoch:
        found.epoch_only = int(epoch.group(1))
        found.spans.append(epoch.span())
    return found


def step_counter(text: str) -> int | None:
    """The step printed in a piece of text (the HF console reads the text before a dict with it)."""
    return _counter(text).step


def _number(token: str) -> float | None:
    match = _VALUE.match(token.strip().rstrip(",;"))
    if not match or (match.group(2) and match.group(2).lower() not in _UNITS):
        return None
    return _common.number(match.group(1))


def _key(words: list[str]) -> str | None:
    name = " ".join(words).strip(" :=-")
    if not name or len(name) > 48 or len(words) > 5 or not _KEY.match(name):
        return None
    return name


def _stream_pairs(field_text: str) -> dict[str, tuple[float, bool]] | None:
    """`name[:] value [unit] [(avg)]` repeated -> {name: (value, written with a colon)}; None when
    anything in the field is not such a pair."""
    out: dict[str, tuple[float, bool]] = {}
    words: list[str] = []
    tokens = field_text.split()
    i = 0
    while i < len(tokens):
        value = _number(tokens[i]) if words else None
        if value is None:
            words.append(tokens[i])
            i += 1
            continue
        key = _key(words)
        if key is None:
            return None
        out[key] = (value, words[-1].endswith(":"))
        words = []
        i += 1
        if i < len(tokens) and tokens[i].lower() in _UNITS:
            i += 1
        while i < len(tokens) and tokens[i].startswith("(") and (tokens[i].endswith(")") or ")" not in tokens[i]):
            closing = tokens[i].endswith(")")
            i += 1
            if closing:
                break
    return out if out and not words else None


def _pairs(text: str) -> tuple[dict[str, tuple[float, bool]], bool]:
    """{name: (value, explicit)} for the `key: value`, `key=value` and `key value` pairs of a line, and
    whether the pairs are all the line holds.  explicit is False for `key value` and `key = value`,
    which code and prose also produce."""
    out: dict[str, tuple[float, bool]] = {}
    whole = True
    for field_text in _FIELDS.split(text):
        field_text = field_text.strip().strip("[](){}").strip(" :")
        if not field_text:
            continue
        eq = _EQ_PAIR.findall(field_text) if "=" in field_text else []
        if eq:
            for key, before, after, raw in eq:
                value = _number(raw)
                if value is not None:
                    out[key] = (value, not before and not after)
                whole &= value is not None
            whole &= not _EQ_PAIR.sub("", field_text).strip()
            continue
        stream = _stream_pairs(field_text)
        if stream:
            out.update(stream)
        else:
            whole = False
    return out, whole


def _names_a_metric(text: str) -> bool:
    return any(map(is_metric_key, re.findall(r"[A-Za-z][A-Za-z_/]*", text)))


def _snake(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def _parse_line(number: int, segment: str) -> tuple[_Line | None, bool]:
    """One line read from scratch: its pairs (None when it has none) and whether it had a step counter
    and named a metric but gave no readable metric value."""
    body = _console.strip_prefix(segment)
    counter = _counter(body)
    rest = body
    for start, end in sorted(set(counter.spans), reverse=True):
        rest = rest[:start] + " | " + rest[end:]
    try:
        printed, explicit = _pairs(rest)
    except (ValueError, OverflowError):
        printed, explicit = {}, False
    pairs, names = {}, {}
    for name, (value, written) in printed.items():
        key = _snake(name)
        if key not in _COUNTER_KEYS:
            pairs[key], names[key] = value, name
            explicit &= written
    line = _Line(number, counter, pairs, names, explicit) if pairs else None
    # `step 10 ... lr=[0.0003]`, `loss: tensor(2.5, ...)`
    unreadable = counter.step is not None and not any(map(is_metric_key, pairs)) and _names_a_metric(rest)
    return line, unreadable


@functools.lru_cache(maxsize=1)
def _parse(text: str) -> tuple[list[_Line], list[int]]:
    """Every line with readable pairs, and the numbers of lines that had a step counter and named a
    metric but gave no readable metric value.  A loop prints the same few templates over and over, so
    each template's first lines are read from scratch and the rest by where its numbers sit
    (_Templates).  Kept for the next call: a file is sniffed (its head, often the whole file) before it
    is read, and the result is never changed by its users."""
    lines, unreadable = [], []
    templates = _Templates()
    for number, segment in _console.segments(text):
        if len(segment) > _MAX_LINE:
            continue                          # a sample dump or a config echo: no record
        line, no_value = templates.read(number, segment)
        if line is not None:
            lines.append(line)
        if no_value:
            unreadable.append(number)
    return lines, unreadable


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
    # _Counter's positional arguments with the constants in place, and where each counter slot goes
    counter_args: list = field(init=False)
    counter_slots: tuple[tuple[int, int], ...] = field(init=False)

    def __post_init__(self) -> None:
        self.counter_args = [self.constants.get(name) for name in _COUNTER_FIELDS]
        self.counter_slots = tuple((_COUNTER_FIELDS.index(name), slot) for name, slot in self.counter.items())


class _Templates:
    """Lines read by template: a line's numbers are cut out (_SLOT), the rest is its template.  The first
    two lines of a template are read from scratch; where every number the reading found sits in one slot
    on both, later lines take their numbers from those slots, and every _VERIFY_EVERY-th is read from
    scratch again and compared.  A template whose numbers cannot be placed, or whose check fails, is
    read from scratch for the rest of the file: the plan only ever saves time, never changes a reading."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], object] = {}

    def read(self, number: int, segment: str) -> tuple[_Line | None, bool]:
        parts = _SLOT.split(segment)
        if len(parts) == 1:
            if not _DIGIT.search(segment):
                return None, False            # prose: no record
            return _parse_line(number, segment)
        key = tuple(parts[0::2])
        slots = parts[1::2]
        state = self._known.get(key)
        if state is _SLOW:
            return _parse_line(number, segment)
        if isinstance(state, _Plan):
            state.seen += 1
            if state.seen % _VERIFY_EVERY:
                planned = _apply(state, number, slots)
                return planned if planned is not None else _parse_line(number, segment)
            done = _parse_line(number, segment)
            planned = _apply(state, number, slots)
            if planned is not None and not _same(done, planned):
                self._known[key] = _SLOW
            return done
        done = _parse_line(number, segment)
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


def _plan(first: tuple[_Line | None, bool], first_slots: list[str],
          second: tuple[_Line | None, bool], second_slots: list[str]) -> _Plan | None:
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


def _apply(plan: _Plan, number: int, slots: list[str]) -> tuple[_Line | None, bool] | None:
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
    counter = _Counter(*args)
    # a slot is a plain decimal number, which float() reads as _common.number would
    pairs = {name: float(slots[where]) if type(where) is int else where for name, where in plan.values}
    # the plan's printed names are shared: no user of a line changes them
    return _Line(number, counter, pairs, plan.printed, plan.explicit), plan.unreadable


def _same(a: tuple[_Line | None, bool], b: tuple[_Line | None, bool]) -> bool:
    (la, ua), (lb, ub) = a, b
    if ua != ub or (la is None) != (lb is None):
        return False
    if la is None:
        return True
    fields = ("step", "total", "outer", "outer_kind", "epoch_only", "kind")
    return (all(getattr(la.counter, f) == getattr(lb.counter, f) for f in fields)
            and la.printed == lb.printed and la.explicit == lb.explicit and list(la.pairs) == list(lb.pairs)
            and all(x == y or (x != x and y != y) for x, y in zip(la.pairs.values(), lb.pairs.values())))


def _stepped(lines: list[_Line]) -> list[_Line]:
    return [ln for ln in lines if ln.counter.step is not None and any(map(is_metric_key, ln.pairs))]


def _epoch_lines(lines: list[_Line]) -> list[_Line]:
    return [ln for ln in lines if ln.counter.step is None and ln.counter.epoch_only is not None
            and any(map(is_metric_key, ln.pairs))]


def _stepless_shapes(lines: list[_Line], minimum: int) -> set[tuple[str, ...]]:
    """Key sets repeated at least `minimum` times on lines without a counter that hold nothing but
    `key: value` pairs (`return 0.5` and `lr = 1e-3` are code, not records), with a metric among the keys."""
    shapes = Counter(tuple(sorted(ln.pairs)) for ln in lines if ln.counter.step is None
                     and ln.counter.epoch_only is None and ln.explicit)
    return {s for s, n in shapes.items() if n >= minimum and any(map(is_metric_key, s))}


def sniff(text: str) -> bool:
    """At least three step-counted lines that report a training metric, or a metric record repeated
    at least three times with no step."""
    lines, _ = _parse(text)
    return (len(_stepped(lines)) >= _MIN_RECORDS or len(_epoch_lines(lines)) >= _MIN_RECORDS
            or bool(_stepless_shapes(lines, _MIN_RECORDS)))


def _continued(stepped: list[_Line]) -> tuple[list[int], str | None]:
    """Global steps for step-counted lines: as printed, unless the counter restarts when the outer
    (epoch) counter moves on; then it is continued across epochs."""
    outer, raw = [], []
    last_outer = None
    for ln in stepped:
        last_outer = ln.counter.outer if ln.counter.outer is not None else last_outer
        outer.append(last_outer)
        raw.append(ln.counter.step)
    restarts = any(o2 is not None and o1 is not None and o2 > o1 and s2 < s1
                   for o1, o2, s1, s2 in zip(outer, outer[1:], raw, raw[1:]))
    if not restarts:
        return raw, None
    totals = {ln.counter.total for ln in stepped if ln.counter.total and ln.counter.kind != "global step"}
    base = 0 if min(o for o in outer if o is not None) == 0 else 1
    if len(totals) == 1:
        per = totals.pop()
        return ([(o - base) * per + s if o is not None else s for o, s in zip(outer, raw)],
                f"the per-epoch step restarts each epoch: step = (epoch - {base}) x {per} + printed step")
    steps, offset, top, prev = [], 0, 0, outer[0]
    zero_based = min(raw) == 0
    for o, s in zip(outer, raw):
        if o != prev:
            offset, top, prev = offset + top + (1 if zero_based else 0), 0, o
        top = max(top, s)
        steps.append(offset + s)
    return steps, "the per-epoch step restarts each epoch: continued after the last step printed in the epoch before"


def _counter_resets(stepped: list[_Line], steps: list[int], text: str) -> tuple[list[int], str | None]:
    """Steps with a counter that starts over continued, where nothing says the run restarted.  A restart
    needs a step that goes back and a sign of one between the two lines (a resumed-from or checkpoint-load
    line, the log's first line printed again: a new header) or a step that goes back to the middle of what
    was logged (a resume from a checkpoint rewrites steps it had logged).  A counter that goes back to its
    first value with no such sign counts again from there (an epoch or a dataloader pass the loop does not
    print): it is continued after the last step before it."""
    if len(steps) < 2 or all(b >= a for a, b in zip(steps, steps[1:])):
        return steps, None
    raw = text.split("\n")
    header = next((line.strip() for line in raw if line.strip()), "")
    first, out, offset, top, resets = steps[0], [steps[0]], 0, steps[0], 0
    for i in range(1, len(steps)):
        step = steps[i]
        if step + offset < top and step <= first:
            between = raw[stepped[i - 1].number:stepped[i].number - 1]
            if not any(_RESTART.search(line) or (header and line.strip() == header) for line in between):
                offset, resets = top + 1 - first, resets + 1
        out.append(step + offset)
        top = max(top, step + offset)
    if not resets:
        return steps, None
    return out, (f"the step counter starts over {resets} time(s) with no sign of a restart (no resumed-from or "
                 "checkpoint line, no header printed again): continued after the last step before it")


def _points_stepped(lines: list[_Line], stepped: list[_Line], text: str) -> tuple[list[tuple[int, _Line]], str | None]:
    """(step, line) for step-counted lines, plus recurring metric lines without a step that report keys
    the step lines do not (`Average Reward: ...` printed once per step).  Those belong to the step line
    after them when the first of them comes before any step line (printed while the step runs), else
    to the step line before them (printed when it is done)."""
    steps, how = _continued(stepped)
    steps, reset = _counter_resets(stepped, steps, text)
    how = "; ".join(h for h in (how, reset) if h) or None
    extra = _stepless_shapes(lines, 2)
    if not extra:                             # no line rides on a step line: the step lines, in order
        return list(zip(steps, stepped)), how
    at = {id(ln): s for ln, s in zip(stepped, steps)}
    stepped_keys = {k for ln in stepped for k in ln.pairs}
    riders = [ln for ln in lines if id(ln) not in at and tuple(sorted(ln.pairs)) in extra
              and not stepped_keys & ln.pairs.keys()]
    position = {id(ln): i for i, ln in enumerate(lines)}
    forward = bool(riders) and position[id(riders[0])] < position[id(stepped[0])]
    rider_ids = {id(ln) for ln in riders}
    out, current = [], None
    for ln in (reversed(lines) if forward else lines):
        if id(ln) in at:
            current = at[id(ln)]
            out.append((current, ln))
        elif current is not None and id(ln) in rider_ids:
            out.append((current, ln))
    if forward:
        out.reverse()
    if riders:
        where = "the step line after it" if forward else "the step line before it"
        how = (how + "; " if how else "") + f"a metric line without a step takes the step of {where}"
    return out, how


def _points_counted(lines: list[_Line]) -> list[tuple[int, _Line]]:
    shapes = _stepless_shapes(lines, 2)
    seen: Counter = Counter()
    out = []
    for ln in lines:
        shape = tuple(sorted(ln.pairs))
        if ln.counter.step is None and ln.counter.epoch_only is None and shape in shapes:
            seen[shape] += 1
            out.append((seen[shape], ln))
    return out


def _iterations_over_steps(stepped: list[_Line]) -> str | None:
    """Lines that print `iter N step M` whose step stays put over several lines while the iteration
    increases (lit-gpt: M counts optimizer steps, N micro-batches) are counted by the iteration: their
    step becomes N (lit-gpt prints its validation as `step {iter_num}: val loss`, on that axis too).
    The lines are changed in place; the note says so, None when nothing changed."""
    pairs = [ln for ln in stepped if ln.counter.outer_kind == "iteration" and ln.counter.kind == "step"]
    if len(pairs) < _MIN_RECORDS:
        return None
    steps = [ln.counter.step for ln in pairs]
    iters = [ln.counter.outer for ln in pairs]
    rising = all(b > a for a, b in zip(iters, iters[1:]))
    steady = all(b >= a for a, b in zip(steps, steps[1:])) and any(b == a for a, b in zip(steps, steps[1:]))
    if not (rising and steady):
        return None
    for ln in pairs:
        ln.counter.step, ln.counter.outer, ln.counter.outer_kind = ln.counter.outer, None, ""
        ln.counter.kind, ln.counter.total = "iteration", None
    return ("`step` stays put over several iterations while `iter` increases (optimizer steps over "
            "micro-batches, a gradient accumulation): step = the iteration")


def _micro_steps(chosen: list[tuple[int, _Line]]) -> tuple[list[tuple[int, _Line]], str | None]:
    """A step printed on several lines with the same keys and other values, the step never going back:
    micro-batches of one update (a step counter that repeats in runs over a gradient accumulation), not a
    restart.  Their values are averaged per step; a note says so.  Otherwise the points as they are."""
    steps = [step for step, _ in chosen]
    if len(steps) < 2 or any(b < a for a, b in zip(steps, steps[1:])) or not _repeats_a_key(chosen):
        return chosen, None
    seen: dict[tuple[int, str], list[float]] = {}
    for step, ln in chosen:
        for key, value in ln.pairs.items():
            seen.setdefault((step, key), []).append(value)
    repeated = [v for v in seen.values() if len(v) > 1 and len(set(v)) > 1]
    if not repeated:
        return chosen, None
    # an accumulation prints every step the same number of times; a key written twice at a few steps only
    # (an eval line that reuses the train line's name) is not one
    runs = Counter(len(v) for v in seen.values())
    k, steps_with_k = runs.most_common(1)[0]
    if k < 2 or steps_with_k < 0.8 * len(seen):
        return chosen, None
    merged: dict[int, _Line] = {}
    for step, ln in chosen:
        merged.setdefault(step, _Line(ln.number, ln.counter, {}, {}, ln.explicit))
        merged[step].printed.update(ln.printed)
    for (step, key), values in seen.items():
        merged[step].pairs[key] = sum(values) / len(values)
    return sorted(merged.items(), key=lambda item: item[0]), (
        f"each step is printed on {k} lines with other values and never goes back (micro-batches of one "
        "update): their values are averaged per step")


def _repeats_a_key(chosen: list[tuple[int, _Line]]) -> bool:
    """Some step's lines (adjacent: the steps never go back) write one key twice.  Most logs print each
    step once, so only the lines that repeat the step before them are looked at."""
    keys: set[str] = set()
    previous = -1
    for i in [i for i, (a, b) in enumerate(zip(chosen, chosen[1:]), 1) if a[0] == b[0]]:
        if i - 1 != previous:                 # the first repeat of this step: its first line's keys
            keys = set(chosen[i - 1][1].pairs)
        pairs = chosen[i][1].pairs
        if not keys.isdisjoint(pairs):
            return True
        keys.update(pairs)
        previous = i
    return False


def read(path: str, text: str) -> Run:
    """The loop's metrics; raises InputError (naming the file) only when no metric line is found."""
    lines, unreadable = _parse(text)
    stepped, by_epoch = _stepped(lines), _epoch_lines(lines)
    how = None
    if stepped:
        axis = "printed"
        swapped = _iterations_over_steps(stepped)
        chosen, how = _points_stepped(lines, stepped, text)
        chosen, micro = _micro_steps(chosen)
        how = "; ".join(h for h in (swapped, how, micro) if h) or None
    elif by_epoch:
        axis, chosen = "epoch", [(ln.counter.epoch_only, ln) for ln in by_epoch]
    else:
        axis, chosen = "counted", _points_counted(lines)
    # a name on one line only that is no metric name is a sentence in a printed sample
    uses = Counter(k for _, ln in chosen for k in ln.pairs)
    keep = {k for k, n in uses.items() if n >= 2 or len(chosen) < 2 or is_metric_key(k)}
    points, series, printed = _points(chosen, keep)
    renamed = {k: v for k, v in printed.items() if k != v}
    meta = {"step_axis": axis, "printed_keys": renamed} if renamed else {"step_axis": axis}
    notes = _notes(path, text, chosen, unreadable, axis, how, renamed, sorted(set(uses) - keep))
    _parse.cache_clear()                      # a whole log's parsed lines are large: not kept past its read
    return points.to_run(path, framework=None, fmt=FORMAT, notes=notes, meta=meta, series=series)


def _points(chosen: list[tuple[int, _Line]], keep: set[str]) -> tuple[Points, dict, dict[str, str]]:
    """The kept keys' points of the chosen lines, as Series built a column at a time (a Points.add per
    value costs more than the rest of the read), and each key's printed name.  A step past the step
    range is left to Points, which counts it for its note in write order over all keys."""
    points = Points(skip_repeats=True)          # several ranks may print the same line
    columns: dict[str, tuple[list[int], list[float]]] = {}
    printed: dict[str, str] = {}
    in_range = all(step <= STEP_MAX for step, _ in chosen)
    for step, ln in chosen:
        if not 0 <= step < 2 ** 62:
            continue
        for key, value in ln.pairs.items():
            if key not in keep:
                continue
            if key not in printed:
                printed[key] = ln.printed[key]
                columns[key] = ([], [])
            if in_range:
                steps, values = columns[key]
                steps.append(step)
                values.append(value)
            else:
                points.add(step, key, value)
    series = {key: column_of_points(key, steps, values, skip_repeats=True)
              for key, (steps, values) in columns.items() if steps} if in_range else {}
    return points, series, printed


def _notes(path: str, text: str, chosen: list, unreadable: list[int], axis: str, how: str | None,
           renamed: dict[str, str], dropped: list[str]) -> list[str]:
    name = os.path.basename(path)
    kinds = sorted({ln.counter.kind for _, ln in chosen if ln.counter.kind})
    notes = [f"{name}: read {len(chosen)} metric line(s) as a {FORMAT}; skipped "
             f"{max(_console.physical_lines(text) - len(chosen), 0)} other line(s)"]
    notes.append(f"{name}: " + {"printed": f"step = the printed counter ({', '.join(kinds)})",
                                "epoch": "the log counts epochs, not steps: step = epoch",
                                "counted": "step = record number (no step printed)"}[axis])
    if how:
        notes.append(f"{name}: {how}")
    if unreadable:
        notes.append(f"{name}: {len(unreadable)} line(s) with a step and a metric name but no readable value "
                     f"were skipped (line {', '.join(map(str, unreadable[:5]))})")
    if renamed:
        shown = ", ".join(f"'{v}' -> {k}" for k, v in list(renamed.items())[:6])
        more = f" and {len(renamed) - 6} more" if len(renamed) > 6 else ""
        notes.append(f"{name}: keys written in lower snake_case: {shown}{more}")
    if dropped:
        notes.append(f"{name}: name(s) on one line only and not named like a metric, not read: "
                     f"{', '.join(dropped[:5])}")
    return notes
