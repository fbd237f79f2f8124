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

from ...run import STEP_MAX, Run
from .._common import Points, column_of_points
from . import _console
from ._loop_line import Line, is_metric_key, step_counter
from ._loop_templates import read_lines

__all__ = ["FORMAT", "is_metric_key", "read", "sniff", "step_counter"]

FORMAT = "training-loop console"
_MIN_RECORDS = 3
# what a restarted run prints before its first step again (see _counter_resets)
_RESTART = re.compile(r"resum|restor|restart|load(?:ing|ed)?\b[^\n]{0,40}checkpoint|checkpoint[^\n]{0,20}load|"
                      r"from checkpoint|Namespace\(", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _parse(text: str):
    """The text's lines as read_lines reads them, kept for the next call: a file is sniffed (its head,
    often the whole file) before it is read, and the result is never changed by its users."""
    return read_lines(text)


def _stepped(lines: list[Line]) -> list[Line]:
    return [ln for ln in lines if ln.counter.step is not None and any(map(is_metric_key, ln.pairs))]


def _epoch_lines(lines: list[Line]) -> list[Line]:
    return [ln for ln in lines if ln.counter.step is None and ln.counter.epoch_only is not None
            and any(map(is_metric_key, ln.pairs))]


def _stepless_shapes(lines: list[Line], minimum: int) -> set[tuple[str, ...]]:
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


def _continued(stepped: list[Line]) -> tuple[list[int], str | None]:
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


def _counter_resets(stepped: list[Line], steps: list[int], text: str) -> tuple[list[int], str | None]:
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


def _points_stepped(lines: list[Line], stepped: list[Line], text: str) -> tuple[list[tuple[int, Line]], str | None]:
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


def _points_counted(lines: list[Line]) -> list[tuple[int, Line]]:
    shapes = _stepless_shapes(lines, 2)
    seen: Counter = Counter()
    out = []
    for ln in lines:
        shape = tuple(sorted(ln.pairs))
        if ln.counter.step is None and ln.counter.epoch_only is None and shape in shapes:
            seen[shape] += 1
            out.append((seen[shape], ln))
    return out


def _iterations_over_steps(stepped: list[Line]) -> str | None:
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


def _micro_steps(chosen: list[tuple[int, Line]]) -> tuple[list[tuple[int, Line]], str | None]:
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
    merged: dict[int, Line] = {}
    for step, ln in chosen:
        merged.setdefault(step, Line(ln.number, ln.counter, {}, {}, ln.explicit))
        merged[step].printed.update(ln.printed)
    for (step, key), values in seen.items():
        merged[step].pairs[key] = sum(values) / len(values)
    return sorted(merged.items(), key=lambda item: item[0]), (
        f"each step is printed on {k} lines with other values and never goes back (micro-batches of one "
        "update): their values are averaged per step")


def _repeats_a_key(chosen: list[tuple[int, Line]]) -> bool:
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


def _points(chosen: list[tuple[int, Line]], keep: set[str]) -> tuple[Points, dict, dict[str, str]]:
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
