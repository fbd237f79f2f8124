"""DeepSpeed-Chat step 1 (SFT) and step 2 (reward model, DPO) consoles (the PPO step 3 is read in
text/__init__).  What they print:

    ***** Evaluating perplexity, Epoch 1/16 *****          SFT: `ppl: 2.01` (newer: `ppl: 2.01, loss: 0.70`)
    ***** Evaluating reward, Epoch 1/1 *****               RM: `chosen_last_scores (higher is better) : 2.24,
                                                           acc (higher is better) : 0.70`
    ***** Evaluating rewards, Epoch 1/1 *****              DPO: `chosen: -31.9, rejected: -33.9, loss: 0.66`
    [INFO] [timer.py:199:stop] epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=173.4,
        CurrSamplesPerSec=171.9, MemAllocated=3.96GB, MaxMemAllocated=22.95GB
    [INFO] [logging.py:96:log_dist] [Rank 0] step=2310, skipped=20, lr=[9.1e-08, 9.1e-08], mom=[...]
    Epoch 1/1 with loss 0.5754789632299672                 RM: the epoch's mean training loss
    Epoch: 0, Step: 12, Rank: 0, loss = 2.31               --print_loss (rank 0 is read; a tensor repr too)

The step axis is DeepSpeed's global (optimizer) step.  An evaluation belongs to the step where its
epoch ended: the last global step printed before its header (0 before training).  Evaluations are
`eval_*` keys (`eval_loss`, `eval_accuracy`, `eval_chosen_score`, `eval_chosen_reward`, ...); an SFT
log that prints only the perplexity gets `eval_loss` = ln(ppl) too, which is how DS-Chat computed the
perplexity (exp of the mean eval loss).  Only the evaluation headers identify the format: DeepSpeed's
timer lines are in every DeepSpeed console.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict

import numpy as np

from ...run import STEP_MAX, STEP_MIN, Run
from .. import _common
from .._common import Points, column_of_points

FORMAT = "DeepSpeed-Chat SFT/reward/DPO console"
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|(?i:nan|inf))"
HEADER = re.compile(r"(?m)^\*{5} Evaluating (perplexity|rewards?), Epoch (\d{1,9})/(\d{1,9}) \*{5}")
# The timer and lr lines (most of the text) are found by a pattern each and converted per key at the
# end; the other events by one pass whose alternatives all start with a line's newline (the text gets
# one in front), so the engine skips from line start to line start (see _pairs).  An event that needs
# the step (an evaluation, an epoch's loss) reads it from the timer and lr lines before it.
_TIMER = re.compile(r"/global_step=(\d{1,18}), RunningAvgSamplesPerSec=\S+, CurrSamplesPerSec=(" + _NUM + r"), "
                    r"MemAllocated=(" + _NUM + r")GB, MaxMemAllocated=(" + _NUM + r")GB")
_LR = re.compile(r"\] step=(\d{1,18}), skipped=\d{1,18}, lr=\[(" + _NUM + r")")
_EVENTS = re.compile(
    r"\n(?:\*{5} Evaluating (perplexity|rewards?), Epoch \d{1,9}/\d{1,9} \*{5}"                   # 1
    r"|Epoch \d{1,9}/\d{1,9} with loss (" + _NUM + r")[ \t]*(?=\n)"                                # 2
    r"|Epoch: (\d{1,9}), Step: (\d{1,18}), Rank: 0, loss = (?:tensor\()?(" + _NUM + r")"         # 3 4 5
    r"|Beginning of Epoch \d{1,9}/\d{1,9}, Total Micro Batches (\d{1,18})"                        # 6
    r"|((?:ppl|chosen_last_scores|chosen): [^\n]*|chosen_last_scores \(higher[^\n]*)(?=\n))")     # 7
_EVAL_PAIR = re.compile(r"([a-z_]+)(?: \([a-z ]+ is better\))? ?: (" + _NUM + r")")
_EVAL_NAMES = {"ppl": "eval_ppl", "loss": "eval_loss", "acc": "eval_accuracy",
               "chosen_last_scores": "eval_chosen_score", "rejected_last_scores": "eval_rejected_score",
               "chosen": "eval_chosen_reward", "rejected": "eval_rejected_reward"}
_OVERFLOWS = ("OVERFLOW!", "Overflow detected")      # DeepSpeed's two wordings (they cannot overlap)
_MICRO = re.compile(r"micro_step=(\d{1,18})/global_step=([1-9]\d{0,17})\b")
_PPL_WITH_LOSS = re.compile(r"\nppl: [^\n]*loss")     # `^ppl: ...loss` (MULTILINE) with a literal first
_TIMER_KEYS = ("samples_per_second", "mem_allocated_gb", "max_mem_allocated_gb")


def sniff(text: str) -> bool:
    return HEADER.search(text) is not None


def read(path: str, text: str) -> Run:
    points = Points(skip_repeats=True)         # every rank prints the same timer line
    step, pending, evals, others = 0, None, 0, 0
    per_epoch, ratio = None, _ratio(text)
    bases: dict[int, int] = {}                 # the first micro-batch of each epoch, where no count says it
    last_micro = 0
    losses: dict[int, list[float]] = defaultdict(list)
    timer_rows: list[tuple[str, str, str, str]] = []      # (global step, samples/s, mem, max mem) as text
    lr_rows: list[tuple[str, str]] = []                   # (step, lr) as text
    padded = "\n" + text + "\n"
    scanned = 0                                # the timer and lr lines before here are in the rows
    for match in _EVENTS.finditer(padded):
        kind, epoch_loss, p_epoch, p_step, p_loss, micro_batches, result = match.groups()
        if p_step:
            # a micro-batch's loss: its optimizer step from the epoch's batch count (1 update per batch
            # unless the timer lines show gradient accumulation); `Step` restarts every epoch, so without the
            # count (a log cut before `Beginning of Epoch`) an epoch continues after the last batch before it
            if per_epoch:
                micro = int(p_epoch) * per_epoch + int(p_step) + 1
            else:
                micro = bases.setdefault(int(p_epoch), last_micro) + int(p_step) + 1
            last_micro = max(last_micro, micro)
            losses[-(-micro // ratio)].append(_common.number(p_loss))
            others += 1
            continue
        if kind:
            pending = kind
            continue
        if micro_batches:
            per_epoch = int(micro_batches)
            continue
        step = _step_after(padded, scanned, match.start(), step, timer_rows, lr_rows)
        scanned = match.start()
        if epoch_loss:
            points.add(step, "train_loss", _common.number(epoch_loss))
            others += 1
        elif result and pending:
            values = {_EVAL_NAMES.get(k, "eval_" + k): _common.number(v) for k, v in _EVAL_PAIR.findall(result)}
            if "eval_ppl" in values and "eval_loss" not in values and values["eval_ppl"] > 0:
                values["eval_loss"] = math.log(values["eval_ppl"])
            for key, value in values.items():
                points.add(step, key, value)
            evals += 1
            pending = None
    _step_after(padded, scanned, len(padded), step, timer_rows, lr_rows)
    records = len(timer_rows) + len(lr_rows) + others
    for at, values in losses.items():
        points.add(at, "loss", sum(values) / len(values))
    name = os.path.basename(path)
    notes = [f"{name}: read {evals} evaluation(s) and {records} training line(s) as a {FORMAT}; an evaluation "
             "is placed at the last global step before it"]
    if any(len(v) > 1 for v in losses.values()):
        notes.append(f"{name}: the printed micro-batch losses are averaged per optimizer step")
    if "eval_ppl" in points.keys and not _PPL_WITH_LOSS.search(padded):
        notes.append(f"{name}: eval_loss = ln(ppl): the log prints only the perplexity")
    overflows = sum(map(text.count, _OVERFLOWS))
    if overflows:
        notes.append(f"{name}: {overflows} fp16 loss-scale overflow message(s) (DeepSpeed skips those steps; "
                     "early in training this is normal)")
    meta = {}
    total = HEADER.search(text)
    if total:
        meta["planned_epochs"] = int(total.group(3))
    timer_steps = [int(row[0]) for row in timer_rows]
    columns = [(key, timer_steps, [row[i] for row in timer_rows]) for i, key in enumerate(_TIMER_KEYS, 1)]
    columns.append(("lr", [int(row[0]) for row in lr_rows], [row[1] for row in lr_rows]))
    whole = {}
    if _in_step_range(columns):
        for key, steps, raws in columns:
            # _NUM's text is what float() reads; every NaN is the one _common.number gives (not float's -nan)
            numbers = np.fromiter(map(float, raws), np.float64, len(raws))
            numbers[np.isnan(numbers)] = np.nan
            series = column_of_points(key, steps, numbers, skip_repeats=True)
            if series is not None:
                whole[key] = series
    else:                                      # a step off the range: Points leaves it out, with a note
        for key, steps, raws in columns:
            for at, raw in zip(steps, raws):
                points.add(at, key, _common.number(raw))
    return points.to_run(path, framework="DeepSpeed-Chat", fmt=FORMAT, notes=notes, meta=meta, series=whole)


def _step_after(text: str, start: int, end: int, step: int, timer_rows: list, lr_rows: list) -> int:
    """The step after text[start:end]'s timer and lr lines, whose rows are added to the lists: a timer
    line sets it (its global step), an lr line raises it to its step."""
    timers = _TIMER.findall(text, start, end)
    lrs = _LR.findall(text, start, end)
    timer_rows += timers
    lr_rows += lrs
    if timers:
        step = int(timers[-1][0])
        last = text.rfind(f"/global_step={timers[-1][0]}, RunningAvgSamplesPerSec=", start, end)
        lrs = _LR.findall(text, last, end)
    return max([step] + [int(lr_step) for lr_step, _ in lrs])


def _in_step_range(columns: list[tuple[str, list[int], list[str]]]) -> bool:
    """Whether every step of the gathered columns is in the step range (and so can be one array)."""
    return all(STEP_MIN <= min(steps, default=0) and max(steps, default=0) <= STEP_MAX for _, steps, _ in columns)


def _ratio(text: str) -> int:
    """Micro-batches per optimizer step (gradient accumulation), from the first timer line past step 0."""
    match = _MICRO.search(text)
    return max(1, int(match.group(1)) // int(match.group(2))) if match else 1
