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
from dataclasses import dataclass, replace

import numpy as np

from ...run import STEP_MAX, Run
from .._common import Points, column_of_points
from . import _console
from ._loop_line import Line, is_metric_key, step_counter
from ._loop_table import KIND, KINDS, NONE, OUTER_KIND, LinesBuilder, LoopLines
from ._loop_templates import read_lines

__all__ = ["FORMAT", "is_metric_key", "read", "sniff", "step_counter"]

FORMAT = "training-loop console"
_MIN_RECORDS = 3
# what a restarted run prints before its first step again (see _counter_resets)
_RESTART = re.compile(r"resum|restor|restart|load(?:ing|ed)?\b[^\n]{0,40}checkpoint|checkpoint[^\n]{0,20}load|"
                      r"from checkpoint|Namespace\(", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _parse(text: str) -> tuple[LoopLines, list[int]]:
    """The text's lines as read_lines reads them, kept for the next call: a file is sniffed (its head,
    often the whole file) before it is read, and the result is never changed by its users."""
    return read_lines(text)


@dataclass(frozen=True, eq=False)
class _Chosen:
    """The lines a run's points come from, in write order, and each one's step (int64, or Python ints
    where a continued step passes int64's range)."""

    lines: LoopLines
    rows: np.ndarray
    steps: np.ndarray

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(position among the chosen lines, pair index) of the chosen lines' pairs, in write order."""
        return self.lines.pairs_of(self.rows)


def _stepped(lines: LoopLines) -> np.ndarray:
    return (lines.step != NONE) & lines.metric[lines.shape]


def _epoch_lines(lines: LoopLines) -> np.ndarray:
    return (lines.step == NONE) & (lines.epoch_only != NONE) & lines.metric[lines.shape]


def _stepless_shapes(lines: LoopLines, minimum: int) -> set[tuple[str, ...]]:
    """Key sets repeated at least `minimum` times on lines without a counter that hold nothing but
    `key: value` pairs (`return 0.5` and `lr = 1e-3` are code, not records), with a metric among the keys."""
    stepless = (lines.step == NONE) & (lines.epoch_only == NONE) & lines.explicit[lines.shape]
    shapes: Counter = Counter()
    for shape, count in zip(lines.shapes, np.bincount(lines.shape[stepless], minlength=len(lines.shapes))):
        if count:
            shapes[shape.sorted_keys] += int(count)
    return {s for s, n in shapes.items() if n >= minimum and any(map(is_metric_key, s))}


def sniff(text: str) -> bool:
    """At least three step-counted lines that report a training metric, or a metric record repeated
    at least three times with no step."""
    lines, _ = _parse(text)
    return (np.count_nonzero(_stepped(lines)) >= _MIN_RECORDS
            or np.count_nonzero(_epoch_lines(lines)) >= _MIN_RECORDS or bool(_stepless_shapes(lines, _MIN_RECORDS)))


def _ints(values: list[int]) -> np.ndarray:
    """Steps worked out in Python ints, as int64 unless one passes its range: then as Python ints, which
    _points leaves out or hands to Points (a step past the step range is counted in a note)."""
    try:
        return np.array(values, np.int64)
    except OverflowError:
        return np.array(values, object)


def _carried(outer: np.ndarray) -> np.ndarray:
    """Each line's outer counter, or the last one printed before it (NONE before any)."""
    last = np.maximum.accumulate(np.where(outer != NONE, np.arange(len(outer)), -1))
    return np.where(last >= 0, outer[np.maximum(last, 0)], NONE)


def _continued(lines: LoopLines, rows: np.ndarray) -> tuple[np.ndarray, str | None]:
    """Global steps for step-counted lines: as printed, unless the counter restarts when the outer
    (epoch) counter moves on; then it is continued across epochs."""
    raw, outer = lines.step[rows], _carried(lines.outer[rows])
    restarts = np.any((outer[:-1] != NONE) & (outer[1:] > outer[:-1]) & (raw[1:] < raw[:-1]))
    if not restarts:
        return raw, None
    total, kind = lines.total[rows], lines.kind[rows]
    totals = set(total[(total > 0) & (kind != KIND["global step"])].tolist())
    base = 0 if outer[outer != NONE].min() == 0 else 1
    outer_list, raw_list = outer.tolist(), raw.tolist()
    if len(totals) == 1:
        per = totals.pop()
        return (_ints([(o - base) * per + s if o != NONE else s for o, s in zip(outer_list, raw_list)]),
                f"the per-epoch step restarts each epoch: step = (epoch - {base}) x {per} + printed step")
    steps, offset, top, prev = [], 0, 0, outer_list[0]
    zero_based = min(raw_list) == 0
    for o, s in zip(outer_list, raw_list):
        if o != prev:
            offset, top, prev = offset + top + (1 if zero_based else 0), 0, o
        top = max(top, s)
        steps.append(offset + s)
    return _ints(steps), ("the per-epoch step restarts each epoch: continued after the last step printed in the "
                          "epoch before")


def _counter_resets(numbers: np.ndarray, steps: np.ndarray, text: str) -> tuple[np.ndarray, str | None]:
    """Steps with a counter that starts over continued, where nothing says the run restarted.  A restart
    needs a step that goes back and a sign of one between the two lines (a resumed-from or checkpoint-load
    line, the log's first line printed again: a new header) or a step that goes back to the middle of what
    was logged (a resume from a checkpoint rewrites steps it had logged).  A counter that goes back to its
    first value with no such sign counts again from there (an epoch or a dataloader pass the loop does not
    print): it is continued after the last step before it.  `numbers` are the lines' line numbers."""
    if len(steps) < 2 or np.all(steps[1:] >= steps[:-1]):
        return steps, None
    raw = text.split("\n")
    header = next((line.strip() for line in raw if line.strip()), "")
    steps_list, numbers_list = steps.tolist(), numbers.tolist()
    first, out, offset, top, resets = steps_list[0], [steps_list[0]], 0, steps_list[0], 0
    for i in range(1, len(steps_list)):
        step = steps_list[i]
        if step + offset < top and step <= first:
            between = raw[numbers_list[i - 1]:numbers_list[i] - 1]
            if not any(_RESTART.search(line) or (header and line.strip() == header) for line in between):
                offset, resets = top + 1 - first, resets + 1
        out.append(step + offset)
        top = max(top, step + offset)
    if not resets:
        return steps, None
    return _ints(out), (f"the step counter starts over {resets} time(s) with no sign of a restart (no resumed-from "
                        "or checkpoint line, no header printed again): continued after the last step before it")


def _points_stepped(lines: LoopLines, stepped: np.ndarray, text: str) -> tuple[_Chosen, str | None]:
    """The step-counted lines, plus recurring metric lines without a step that report keys the step
    lines do not (`Average Reward: ...` printed once per step).  Those belong to the step line after
    them when the first of them comes before any step line (printed while the step runs), else to the
    step line before them (printed when it is done)."""
    rows = np.flatnonzero(stepped)
    steps, how = _continued(lines, rows)
    steps, reset = _counter_resets(lines.number[rows], steps, text)
    how = "; ".join(h for h in (how, reset) if h) or None
    extra = _stepless_shapes(lines, 2)
    if extra:
        stepped_keys = {k for s in np.unique(lines.shape[rows]) for k in lines.shapes[s].keys}
        rides = np.array([s.sorted_keys in extra and stepped_keys.isdisjoint(s.keys) for s in lines.shapes], bool)
        riders = np.flatnonzero(~stepped & rides[lines.shape])
    if not extra or not len(riders):          # no line rides on a step line: the step lines, in order
        return _Chosen(lines, rows, steps), how
    forward = riders[0] < rows[0]
    if forward:
        at = np.searchsorted(rows, riders)
        taken = at < len(rows)
    else:
        at = np.searchsorted(rows, riders, side="right") - 1
        taken = at >= 0
    order = np.argsort(np.concatenate([rows, riders[taken]]), kind="stable")
    where = "the step line after it" if forward else "the step line before it"
    how = (how + "; " if how else "") + f"a metric line without a step takes the step of {where}"
    return _Chosen(lines, np.concatenate([rows, riders[taken]])[order],
                   np.concatenate([steps, steps[at[taken]]])[order]), how


def _points_counted(lines: LoopLines) -> _Chosen:
    """Lines without a counter whose key set recurs, each numbered within its key set."""
    shapes = _stepless_shapes(lines, 2)
    record_of = {keys: i for i, keys in enumerate(shapes)}
    record = np.array([record_of.get(s.sorted_keys, -1) for s in lines.shapes] or [-1], np.int64)[lines.shape]
    rows = np.flatnonzero((lines.step == NONE) & (lines.epoch_only == NONE) & (record >= 0))
    records = record[rows]
    order = np.argsort(records, kind="stable")
    ranked = np.arange(len(rows)) - np.searchsorted(records[order], records[order])   # place within its key set
    count = np.empty(len(rows), np.int64)
    count[order] = ranked + 1
    return _Chosen(lines, rows, count)


def _iterations_over_steps(lines: LoopLines, stepped: np.ndarray) -> tuple[LoopLines, str | None]:
    """Lines that print `iter N step M` whose step stays put over several lines while the iteration
    increases (lit-gpt: M counts optimizer steps, N micro-batches) are counted by the iteration: their
    step becomes N (lit-gpt prints its validation as `step {iter_num}: val loss`, on that axis too).
    The lines so counted, and a note; the lines as they were and None when nothing changed."""
    pairs = stepped & (lines.outer_kind == OUTER_KIND["iteration"]) & (lines.kind == KIND["step"])
    if np.count_nonzero(pairs) < _MIN_RECORDS:
        return lines, None
    steps, iters = lines.step[pairs], lines.outer[pairs]
    rising = np.all(iters[1:] > iters[:-1])
    steady = np.all(steps[1:] >= steps[:-1]) and np.any(steps[1:] == steps[:-1])
    if not (rising and steady):
        return lines, None
    counted = replace(lines, step=np.where(pairs, lines.outer, lines.step), outer=np.where(pairs, NONE, lines.outer),
                      outer_kind=np.where(pairs, OUTER_KIND[""], lines.outer_kind),
                      kind=np.where(pairs, KIND["iteration"], lines.kind), total=np.where(pairs, NONE, lines.total))
    return counted, ("`step` stays put over several iterations while `iter` increases (optimizer steps over "
                     "micro-batches, a gradient accumulation): step = the iteration")


def _micro_steps(chosen: _Chosen) -> tuple[_Chosen, str | None]:
    """A step printed on several lines with the same keys and other values, the step never going back:
    micro-batches of one update (a step counter that repeats in runs over a gradient accumulation), not a
    restart.  Their values are averaged per step; a note says so.  Otherwise the points as they are."""
    steps, lines = chosen.steps, chosen.lines
    if len(steps) < 2 or np.any(steps[1:] < steps[:-1]) or not _repeats_a_key(chosen):
        return chosen, None
    at, pair = chosen.pairs()
    step_of, row_of = steps.tolist(), chosen.rows.tolist()
    seen: dict[tuple[int, str], list[float]] = {}
    names = lines.printed_names(pair)
    for i, key, value in zip(at.tolist(), lines.pair_key[pair].tolist(), lines.pair_value[pair].tolist()):
        seen.setdefault((step_of[i], lines.keys[key]), []).append(value)
    repeated = [v for v in seen.values() if len(v) > 1 and _differ(v)]
    if not repeated:
        return chosen, None
    # an accumulation prints every step the same number of times; a key written twice at a few steps only
    # (an eval line that reuses the train line's name) is not one
    runs = Counter(len(v) for v in seen.values())
    k, steps_with_k = runs.most_common(1)[0]
    if k < 2 or steps_with_k < 0.8 * len(seen):
        return chosen, None
    merged: dict[int, Line] = {}                  # each step's first line, its pairs averaged
    for i, step in enumerate(step_of):
        if step not in merged:
            first = lines.line(row_of[i])
            merged[step] = Line(first.number, first.counter, {}, {}, first.explicit)
    for i, key, name in zip(at.tolist(), lines.pair_key[pair].tolist(), names):
        merged[step_of[i]].printed[lines.keys[key]] = name
    for (step, key), values in seen.items():
        merged[step].pairs[key] = sum(values) / len(values)
    builder = LinesBuilder()
    for order, (_, ln) in enumerate(sorted(merged.items(), key=lambda item: item[0])):
        builder.add_line(order, ln)
    return _Chosen(builder.build(), np.arange(len(merged)), _ints(sorted(merged))), (
        f"each step is printed on {k} lines with other values and never goes back (micro-batches of one "
        "update): their values are averaged per step")


def _differ(values: list[float]) -> bool:
    """Two of the values differ; nan is equal to nan, as every nan read (one object, math.nan) is in a
    set of the values read."""
    return len({"nan" if value != value else value for value in values}) > 1


def _repeats_a_key(chosen: _Chosen) -> bool:
    """Some step's lines (adjacent: the steps never go back) write one key twice.  Most logs print each
    step once, so only the lines that repeat the step before them are looked at."""
    same = np.asarray(chosen.steps[1:] == chosen.steps[:-1], bool)
    if not same.any():
        return False
    run = np.concatenate([[0], np.cumsum(~same)])                  # lines of one step share a run
    repeating = np.concatenate([same, [False]]) | np.concatenate([[False], same])
    at, pair = chosen.lines.pairs_of(chosen.rows[repeating])
    written = run[repeating][at] * len(chosen.lines.keys) + chosen.lines.pair_key[pair]
    return len(np.unique(written)) < len(written)


def read(path: str, text: str) -> Run:
    """The loop's metrics; raises InputError (naming the file) only when no metric line is found."""
    lines, unreadable = _parse(text)
    stepped, by_epoch = _stepped(lines), _epoch_lines(lines)
    how = None
    if stepped.any():
        axis = "printed"
        lines, swapped = _iterations_over_steps(lines, stepped)
        chosen, how = _points_stepped(lines, stepped, text)
        chosen, micro = _micro_steps(chosen)
        how = "; ".join(h for h in (swapped, how, micro) if h) or None
    elif by_epoch.any():
        rows = np.flatnonzero(by_epoch)
        axis, chosen = "epoch", _Chosen(lines, rows, lines.epoch_only[rows])
    else:
        axis, chosen = "counted", _points_counted(lines)
    # a name on one line only that is no metric name is a sentence in a printed sample
    keys = chosen.lines.keys
    uses = np.bincount(chosen.lines.pair_key[chosen.pairs()[1]], minlength=len(keys))
    keep = np.array([n >= 2 or len(chosen.rows) < 2 or is_metric_key(k) for k, n in zip(keys, uses)], bool)
    points, series, printed = _points(chosen, keep)
    renamed = {k: v for k, v in printed.items() if k != v}
    meta = {"step_axis": axis, "printed_keys": renamed} if renamed else {"step_axis": axis}
    dropped = sorted(k for k, n, kept in zip(keys, uses, keep) if n and not kept)
    notes = _notes(path, text, chosen, unreadable, axis, how, renamed, dropped)
    _parse.cache_clear()                      # a whole log's parsed lines are large: not kept past its read
    return points.to_run(path, framework=None, fmt=FORMAT, notes=notes, meta=meta, series=series)


def _points(chosen: _Chosen, keep: np.ndarray) -> tuple[Points, dict, dict[str, str]]:
    """The kept keys' points of the chosen lines, as Series built a column at a time (a Points.add per
    value costs more than the rest of the read), and each key's printed name (as first written).  A step
    past the step range is left to Points, which counts it for its note in write order over all keys."""
    points = Points(skip_repeats=True)          # several ranks may print the same line
    lines, steps = chosen.lines, chosen.steps
    at, pair = chosen.pairs()
    valid = np.asarray((steps >= 0) & (steps < 2 ** 62), bool)
    taken = keep[lines.pair_key[pair]] & valid[at]
    at, pair = at[taken], pair[taken]
    key = lines.pair_key[pair]
    _, first = np.unique(key, return_index=True)
    written = np.sort(first)                               # each key's first pair, in write order
    printed = dict(zip((lines.keys[k] for k in key[written]), lines.printed_names(pair[written])))
    if not np.all(steps <= STEP_MAX):
        for step, k, value in zip(steps[at].tolist(), key.tolist(), lines.pair_value[pair].tolist()):
            points.add(step, lines.keys[k], value)
        return points, {}, printed
    order = np.argsort(key, kind="stable")                 # each key's pairs together, in write order
    bounds = np.searchsorted(key[order], key[written])
    ends = np.searchsorted(key[order], key[written], side="right")
    series = {}
    for i, start, end in zip(written, bounds, ends):
        mine = order[start:end]
        name = lines.keys[key[i]]
        series[name] = column_of_points(name, steps[at[mine]].tolist(), lines.pair_value[pair[mine]].tolist(),
                                        skip_repeats=True)
    return points, series, printed


def _notes(path: str, text: str, chosen: _Chosen, unreadable: list[int], axis: str, how: str | None,
           renamed: dict[str, str], dropped: list[str]) -> list[str]:
    name = os.path.basename(path)
    kinds = sorted({KINDS[k] for k in np.unique(chosen.lines.kind[chosen.rows]) if KINDS[k]})
    read_lines_count = len(chosen.rows)
    notes = [f"{name}: read {read_lines_count} metric line(s) as a {FORMAT}; skipped "
             f"{max(_console.physical_lines(text) - read_lines_count, 0)} other line(s)"]
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
