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

import os
import re

from ...run import Run, Series, run_name_for
from ._pairs import lines_text, series_by_shape, series_of_rows

MODDED, LLMC = "modded-nanogpt log", "llm.c console"

# every record pattern starts with a literal newline (see _pairs): run on _pairs.lines_text(text)
_MODDED_HEAD = r"\nstep:(\d{1,18})/\d{1,18}[ \t]+"
_MODDED_TRAIN = re.compile(_MODDED_HEAD + r"(?!val_)([^\n]*)")
_MODDED_VAL = re.compile(r"\nstep:(\d{1,18})/\d{1,18}[ \t]+(val_[^\n]*)")
_MODDED_TOTAL = re.compile(r"\nstep:\d{1,18}/(\d{1,18})[ \t]+\w+:")
_LLMC_ROW = re.compile(r"\nstep +(\d{1,18})/(\d{1,18}) \| (train loss [^\n|]*(?: \| [a-z][a-z ]* [^\s|]+)*)"
                       r" \| ([-+\d.]+) ms(?: \| ([-+\d.]+)% bf16 MFU)?(?: \| ([-+\d.]+) tok/s)?")
_LLMC_VAL = re.compile(r"\n(?:step +(\d{1,18})/\d|val loss ([^\s]+)[ \t]*(?=\n|$))")


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
    train = _MODDED_TRAIN.findall(text)
    val = _MODDED_VAL.findall(text)
    series = series_by_shape(text, train, _MODDED_HEAD + "(?!val_)", None, keep_unit=True)
    series.update(series_of_rows(val, None, only=lambda key: key.startswith("val_")))
    total = _MODDED_TOTAL.search(text)
    return series, len(train) + len(val), {"planned_steps": int(total.group(1))} if total else {}


def _llmc(text: str) -> tuple[dict[str, Series], int, dict]:
    rows = _LLMC_ROW.findall(text)
    series = {k.replace(" ", "_"): s for k, s in
              series_of_rows([(r[0], r[2]) for r in rows], " | ", kv=" ", last_kv=True).items()}
    for index, name in ((3, "step_time_ms"), (4, "mfu"), (5, "tokens_per_second")):
        timed = [(r[0], f"{name}:{r[index]}") for r in rows if r[index]]
        series.update(series_of_rows(timed, None))
    # `val loss` is printed before the step line of the same update: it takes the step printed before it
    val_rows, step = [], "0"
    for printed, value in _LLMC_VAL.findall(text):
        if printed:
            step = printed
        else:
            val_rows.append((step, value))
    series.update(series_of_rows([(s, "val_loss:" + v) for s, v in val_rows], None))
    planned = {"planned_steps": int(rows[-1][1])} if rows else {}
    return series, len(rows) + len(val_rows), planned
