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

from ...run import Run
from .. import _common
from .._common import Points, column_of_points, in_step_range_text

FORMAT = "DeepSpeed-Chat SFT/reward/DPO console"
_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|(?i:nan|inf))"
HEADER = re.compile(r"(?m)^\*{5} Evaluating (perplexity|rewards?), Epoch (\d{1,9})/(\d{1,9}) \*{5}")
# one pass over the text; every alternative starts with a literal, and line starts are a literal newline
# (the text gets one in front), so the engine skips from candidate to candidate (see _pairs)
_EVENTS = re.compile(
    r"\n\*{5} Evaluating (perplexity|rewards?), Epoch (\d{1,9})/\d{1,9} \*{5}"                 # 1 2
    r"|/global_step=(\d{1,18}), RunningAvgSamplesPerSec=\S+, CurrSamplesPerSec=(" + _NUM + r"), "
    r"MemAllocated=(" + _NUM + r")GB, MaxMemAllocated=(" + _NUM + r")GB"                        # 3 4 5 6
    r"|\] step=(\d{1,18}), skipped=(\d{1,18}), lr=\[(" + _NUM + r")"                           # 7 8 9
    r"|\nEpoch \d{1,9}/\d{1,9} with loss (" + _NUM + r")[ \t]*(?=\n)"                            # 10
    r"|\nEpoch: (\d{1,9}), Step: (\d{1,18}), Rank: 0, loss = (?:tensor\()?(" + _NUM + r")"     # 11 12 13
    r"|\nBeginning of Epoch \d{1,9}/\d{1,9}, Total Micro Batches (\d{1,18})"                    # 14
    r"|\n((?:ppl|chosen_last_scores|chosen): [^\n]*|chosen_last_scores \(higher[^\n]*)(?=\n)")  # 15
_EVAL_PAIR = re.compile(r"([a-z_]+)(?: \([a-z ]+ is better\))? ?: (" + _NUM + r")")
_EVAL_NAMES = {"ppl": "eval_ppl", "loss": "eval_loss", "acc": "eval_accuracy",
               "chosen_last_scores": "eval_chosen_score", "rejected_last_scores": "eval_rejected_score",
               "chosen": "eval_chosen_reward", "rejected": "eval_rejected_reward"}
_OVERFLOW = re.compile(r"OVERFLOW!|Overflow detected")
_MICRO = re.compile(r"micro_step=(\d{1,18})/global_step=([1-9]\d{0,17})\b")
_PPL_WITH_LOSS = re.compile(r"\nppl: [^\n]*loss")     # `^ppl: ...loss` (MULTILINE) with a literal first
_TIMER_KEYS = ("samples_per_second", "mem_allocated_gb", "max_mem_allocated_gb")
_COLUMN_KEYS = _TIMER_KEYS + ("lr",)         # no other line writes them


def sniff(text: str) -> bool:
    return HEADER.search(text) is not None


def read(path: str, text: str) -> Run:
    points = Points(skip_repeats=True)         # every rank prints the same timer line
    step, pending, evals, records = 0, None, 0, 0
    per_epoch, ratio = None, _ratio(text)
    losses: dict[int, list[float]] = defaultdict(list)
    events = _EVENTS.findall("\n" + text + "\n")
    # the timer and lr lines (most of the points) are gathered per key and converted at the end, when
    # every step they print is in the step range (else each goes through Points, which notes the others)
    columns: dict[str, tuple[list[int], list[str]]] | None = {key: ([], []) for key in _COLUMN_KEYS}
    if not all(in_step_range_text(e[2] or e[6]) for e in events if e[2] or e[6]):
        columns = None
    for (kind, _epoch, g_step, curr, mem, max_mem, l_step, _skipped, lr, epoch_loss,
         p_epoch, p_step, p_loss, micro_batches, result) in events:
        if kind:
            pending = kind
        elif g_step:
            step = int(g_step)
            for key, raw in zip(_TIMER_KEYS, (curr, mem, max_mem)):
                if columns is None:
                    points.add(step, key, _common.number(raw))
                else:
                    columns[key][0].append(step)
                    columns[key][1].append(raw)
            records += 1
        elif l_step:
            step = max(step, int(l_step))
            if columns is None:
                points.add(int(l_step), "lr", _common.number(lr))
            else:
                columns["lr"][0].append(int(l_step))
                columns["lr"][1].append(lr)
            records += 1
        elif epoch_loss:
            points.add(step, "train_loss", _common.number(epoch_loss))
            records += 1
        elif p_step:
            # a micro-batch's loss: its optimizer step from the epoch's batch count (1 update per batch
            # unless the timer lines show gradient accumulation)
            micro = int(p_epoch) * (per_epoch or 0) + int(p_step) + 1
            losses[-(-micro // ratio)].append(_common.number(p_loss))
            records += 1
        elif micro_batches:
            per_epoch = int(micro_batches)
        elif result and pending:
            values = {_EVAL_NAMES.get(k, "eval_" + k): _common.number(v) for k, v in _EVAL_PAIR.findall(result)}
            if "eval_ppl" in values and "eval_loss" not in values and values["eval_ppl"] > 0:
                values["eval_loss"] = math.log(values["eval_ppl"])
            for key, value in values.items():
                points.add(step, key, value)
            evals += 1
            pending = None
    for at, values in losses.items():
        points.add(at, "loss", sum(values) / len(values))
    name = os.path.basename(path)
    notes = [f"{name}: read {evals} evaluation(s) and {records} training line(s) as a {FORMAT}; an evaluation "
             "is placed at the last global step before it"]
    if any(len(v) > 1 for v in losses.values()):
        notes.append(f"{name}: the printed micro-batch losses are averaged per optimizer step")
    if "eval_ppl" in points.keys and not _PPL_WITH_LOSS.search("\n" + text):
        notes.append(f"{name}: eval_loss = ln(ppl): the log prints only the perplexity")
    overflows = len(_OVERFLOW.findall(text))
    if overflows:
        notes.append(f"{name}: {overflows} fp16 loss-scale overflow message(s) (DeepSpeed skips those steps; "
                     "early in training this is normal)")
    meta = {}
    total = HEADER.search(text)
    if total:
        meta["planned_epochs"] = int(total.group(3))
    whole = {}
    for key, (steps, raws) in (columns or {}).items():
        # _NUM's text is what float() reads; every NaN is the one _common.number gives (not float's -nan)
        numbers = np.fromiter(map(float, raws), np.float64, len(raws))
        numbers[np.isnan(numbers)] = np.nan
        series = column_of_points(key, steps, numbers, skip_repeats=True)
        if series is not None:
            whole[key] = series
    return points.to_run(path, framework="DeepSpeed-Chat", fmt=FORMAT, notes=notes, meta=meta, series=whole)


def _ratio(text: str) -> int:
    """Micro-batches per optimizer step (gradient accumulation), from the first timer line past step 0."""
    match = _MICRO.search(text)
    return max(1, int(match.group(1)) // int(match.group(2))) if match else 1
