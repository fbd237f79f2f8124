"""Consoles of the nanoGPT family, read only from their own record lines:

- modded-nanogpt record logs: the training script pasted at the top, `nvidia-smi`, then
    step:1/1770 train_loss:10.8258 train_time:70ms step_avg:70.50ms       (newer records: no train_loss)
    step:125/1770 val_loss:4.6201 train_time:12904ms step_avg:103.23ms
- llm.c's console:
    step    1/18865 | train loss 11.010050 | norm 15.3887 | lr 8.57e-07 | 2815.17 ms | 186236 tok/s
    val loss 11.009205                          (printed before the step line of the same update)

A record line must start its line (`step:N/M`, `step N/M |`), so the pasted
source (`print(f'step:{step}/{args.num_iterations} val_loss:...')`), its config and nvidia-smi's table
are never read as metrics.  Validation lines become `val_loss` at their own steps (the eval_loss
signal); a timing's unit joins its key (`train_time_ms`, `step_avg_ms`).  modded-nanogpt prints the
elapsed time on its validation lines too: there it is left to the training line of that step.  The
total in `step:N/M` is kept as `meta["planned_steps"]`.  Karpathy's nanoGPT (`iter 2920: loss 3.9883,
time 1099.34ms`, `step 250: train loss 1.5440, val loss 1.7220`) is a training-loop console (see loop).
"""

from __future__ import annotations

import itertools
import os
import re

import numpy as np

from ...run import Run, Series, run_name_for
from ._pairs import column_series, lines_text, series_by_shape, series_of_rows, shaped_series

MODDED, LLMC = "modded-nanogpt log", "llm.c console"

# every record pattern starts with a literal newline (see _pairs): run on _pairs.lines_text(text)
_MODDED_HEAD = r"\nstep:(\d{1,18})/\d{1,18}[ \t]+"
_MODDED_TRAIN = re.compile(_MODDED_HEAD + r"(?!val_)([^\n]*)")
_MODDED_VAL = re.compile(r"\nstep:(\d{1,18})/\d{1,18}[ \t]+(val_[^\n]*)")
_VAL_WORD = re.compile("val_")
_MODDED_TOTAL = re.compile(r"\nstep:\d{1,18}/(\d{1,18})[ \t]+\w+:")
_LLMC_ROW = re.compile(r"\nstep +(\d{1,18})/(\d{1,18}) \| (train loss [^\n|]*(?: \| [a-z][a-z ]* [^\s|]+)*)"
                       r" \| ([-+\d.]+) ms(?: \| ([-+\d.]+)% bf16 MFU)?(?: \| ([-+\d.]+) tok/s)?")
_LLMC_VAL_LINE = re.compile(r"\nval loss ([^\s]+)[ \t]*(?=\n|$)")
_LLMC_STEP_LINE = re.compile(r"\nstep +(\d{1,18})/\d")
_LLMC_KEY = re.compile(r"[a-z][a-z ]*")       # a key after the first, as _LLMC_ROW reads it


def sniff(text: str) -> str | None:
    """Which of the two consoles `text` is, from at least two record lines; None for neither."""
    text = lines_text(text)
    for fmt, pattern in ((MODDED, _MODDED_TOTAL), (LLMC, _LLMC_ROW)):
        found = pattern.finditer(text)
        if next(found, None) is not None and next(found, None) is not None:
            return fmt
    return None


def read(path: str, text: str) -> Run:
    fmt = sniff(text)
    reader = _modded if fmt == MODDED else _llmc
    series, records, meta = reader(lines_text(text))
    name = os.path.basename(path)
    notes = [f"{name}: read {records} record line(s) as a {fmt}; the lines before and between them "
             "(source code, config, nvidia-smi) were not read"]
    framework = "modded-nanogpt" if fmt == MODDED else "llm.c"
    return Run(run_name_for(path), series, (path,), {"format": fmt, "framework": framework, **meta}, tuple(notes))


def _modded(text: str) -> tuple[dict[str, Series], int, dict]:
    val = _val_rows(text)
    # every `step:` line a training or a validation row: the training rows are read by their shapes
    # from a sample, without a findall of all their bodies first
    candidates = text.count("\nstep:") - len(val)
    sample = _first_and_last_train_rows(text)
    series = None if sample is None else \
        shaped_series(text, sample, candidates, _MODDED_HEAD + "(?!val_)", None, keep_unit=True)
    if series is None:
        train = _MODDED_TRAIN.findall(text)
        series, records = series_by_shape(text, train, _MODDED_HEAD + "(?!val_)", None, keep_unit=True), len(train)
    else:
        records = candidates
    series.update(series_of_rows(val, None, only=lambda key: key.startswith("val_")))
    total = _MODDED_TOTAL.search(text)
    return series, records + len(val), {"planned_steps": int(total.group(1))} if total else {}


def _val_rows(text: str) -> list[tuple[str, str]]:
    """_MODDED_VAL.findall(text), tried only on the lines that hold `val_` (a match is one whole line):
    _MODDED_VAL tried at each of the thousands of `step:` lines costs more than splitting the log."""
    rows, tried = [], -1
    for word in _VAL_WORD.finditer(text):
        start = text.rfind("\n", 0, word.start())       # the line's own newline (lines_text puts one first)
        if start != tried:
            tried = start
            row = _MODDED_VAL.match(text, start)
            if row is not None:
                rows.append(row.groups())
    return rows


def _first_and_last_train_rows(text: str, n: int = 32) -> list[tuple[str, str]] | None:
    """The first n and the last n training rows (as `rows[:n] + rows[-n:]` of all of them); None when the
    last n are not among the rows of the last 4n `step:` lines."""
    first = [m.groups() for m in itertools.islice(_MODDED_TRAIN.finditer(text), n)]
    start = len(text)
    for _ in range(4 * n):
        start = text.rfind("\nstep:", 0, start)
        if start <= 0:
            start = 0
            break
    last = _MODDED_TRAIN.findall(text, start)
    if len(last) < n and start > 0:
        return None
    return first + last[-n:]


def _llmc(text: str) -> tuple[dict[str, Series], int, dict]:
    found = _llmc_by_shape(text)
    if found is None:
        rows = _LLMC_ROW.findall(text)
        series = {k.replace(" ", "_"): s for k, s in
                  series_of_rows([(r[0], r[2]) for r in rows], " | ", kv=" ", last_kv=True).items()}
        for index, name in ((3, "step_time_ms"), (4, "mfu"), (5, "tokens_per_second")):
            timed = [(r[0], f"{name}:{r[index]}") for r in rows if r[index]]
            series.update(series_of_rows(timed, None))
        count, last_total = len(rows), rows[-1][1] if rows else None
    else:
        series, count, last_total = found
    val_rows = _llmc_val_rows(text)
    series.update(series_of_rows([(s, "val_loss:" + v) for s, v in val_rows], None))
    planned = {"planned_steps": int(last_total)} if last_total is not None else {}
    return series, count + len(val_rows), planned


def _llmc_by_shape(text: str) -> tuple[dict[str, Series], int, str] | None:
    """(series, rows, the last row's total) as the row-by-row reading in _llmc gives them, from one
    regex of the first row's shape (its keys, and which of MFU and tok/s it prints) whose groups are
    the columns; None unless that regex matches every line that starts with `step ` (a row of
    another shape, or a `step` line that is no row), which is then read row by row.  Each key's value
    is a run of characters without blanks or `|`, as splitting at ` | ` and the last blank reads it."""
    first = _LLMC_ROW.search(text)
    if first is None:
        return None
    keys = [part.rpartition(" ")[0] for part in first.group(3).split(" | ")]
    if keys[0] != "train loss" or not all(_LLMC_KEY.fullmatch(k) and k == k.strip() for k in keys[1:]) \
            or len(set(keys)) != len(keys):
        return None                      # a key printed twice on a row, or one with blanks around it
    timed = [(index, name) for index, name in ((4, "step_time_ms"), (5, "mfu"), (6, "tokens_per_second"))
             if index == 4 or first.group(index)]
    pattern = (r"\nstep +(\d{1,18})/(\d{1,18}) \| train loss ([^\s|]*)"
               + "".join(r" \| " + re.escape(k) + r" ([^\s|]+)" for k in keys[1:]) + r" \| ([-+\d.]+) ms"
               + (r" \| ([-+\d.]+)% bf16 MFU" if first.group(5) else "")
               + (r" \| ([-+\d.]+) tok/s" if first.group(6) else ""))
    found = re.findall(pattern, text)
    if len(found) != text.count("\nstep "):
        return None
    columns = list(zip(*found))
    steps = np.fromiter(map(int, columns[0]), np.int64, len(found))
    parsed: dict[str, Series] = {}
    for key, raws in zip(keys, columns[2:2 + len(keys)]):
        parsed.update(column_series(key, steps, raws, False))
    series = {k.replace(" ", "_"): s for k, s in sorted(parsed.items())}
    for column, (_, name) in enumerate(timed, start=2 + len(keys)):
        series.update(column_series(name, steps, columns[column], False))
    return series, len(found), columns[1][-1]


def _llmc_val_rows(text: str) -> list[tuple[str, str]]:
    """(step, value) of the `val loss` lines: `val loss` is printed before the step line of the same
    update, so it takes the step of the last `step N/M` line before it ("0" before any)."""
    val_rows = []
    for match in _LLMC_VAL_LINE.finditer(text):
        step, end = "0", match.start()
        while (start := text.rfind("\nstep ", 0, end)) >= 0:
            printed = _LLMC_STEP_LINE.match(text, start)
            if printed:
                step = printed.group(1)
                break
            end = start
        val_rows.append((step, match.group(1)))
    return val_rows
