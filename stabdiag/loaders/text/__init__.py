"""Console logs that frameworks print, recognised by content (the first 512 KB), not by name:

- Megatron-LM / Megatron-DeepSpeed  `iteration 100/ 1000 | ... | lm loss: 2.3E+00 | grad norm: ... |`
  and `validation loss at iteration N | lm loss value: ... |` (see _megatron)
- DeepSpeed-Chat PPO                `epoch: 0|step: 42|ppo_ep: 1|act_loss: ...|cri_loss: ...` followed by
  `average reward score: ...`
- llm.c main.log                    `s:0 trl:11.0 lr:0.0006 norm:1.2` and `s:250 tel:6.17`
- verl console                      `step:83 - actor/entropy:0.53 - actor/kl_loss:nan - ...`, with or
  without a `(main_task pid=...)` prefix
- HF Trainer / TRL console          `{'loss': 1.14, 'grad_norm': 2.7, 'learning_rate': ..., 'epoch': 0.91}`

A log that mixes console noise with metric lines is normal: the noise is skipped and counted, and a
note says how many metric lines were read.
"""

from __future__ import annotations

import math
import os
import re

from ...errors import InputError
from ...run import Run
from .. import _common
from . import _megatron
from .._common import Points

_DSCHAT = re.compile(r"epoch:\s*(\d+)\s*\|\s*step:\s*(\d+)\s*\|(.*)")
_DSCHAT_REWARD = re.compile(r"average reward score:\s*(\S+)")
_LLMC = re.compile(r"^s:(\d+)\s+((?:\w+:\S+\s*)+)$")
_VERL = re.compile(r"(?:^|[\s)])step:(\d+)\s+-\s+(.*)$")
_HF_DICT = re.compile(r"\{'[^']+':\s*[^{}]*\}")
_HF_PAIR = re.compile(r"'([^']+)':\s*([^,}]+)")
_OVERFLOW = re.compile(r"OVERFLOW!|Skipping step", re.IGNORECASE)
_HF_EPOCHS = re.compile(r"Num Epochs\s*=\s*([\d,]+)")
_HF_TOTAL = re.compile(r"Total optimization steps\s*=\s*([\d,]+)")
_HF_LOGGING_STEPS = re.compile(r"\blogging_steps\s*[=:]\s*(\d+)")
_SNIFF_BYTES = 512 * 1024   # a launcher's argument and config dump can run to a few hundred KB
_HF_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos",
               "train_loss"}


def _format_of(text: str) -> str | None:
    lines = text.splitlines()
    if _megatron.RECORD.search(text):
        return "megatron"
    if any(_DSCHAT.search(line) for line in lines):
        return "dschat"
    if sum(1 for line in lines if _LLMC.match(line.strip())) >= 2:
        return "llmc"
    if any(_VERL.search(line) and ":" in _VERL.search(line).group(2) for line in lines):
        return "verl"
    if any(_HF_DICT.search(line) and ("'loss'" in line or "'eval_" in line) for line in lines):
        return "hf"
    return None


def can_load(path: str) -> bool:
    if _common.extension(path) in _common.NOT_LOGS:
        return False
    text = _common.head(path, _SNIFF_BYTES)
    if text is None:
        return False
    fmt = _format_of(text)
    if fmt == "hf" and os.path.isfile(os.path.join(os.path.dirname(path), "trainer_state.json")):
        # the Trainer's own trainer_state.json beside it has the same records with exact steps
        return False
    return fmt is not None


def load(path: str, **options) -> Run:
    text = _common.read_text(path)
    fmt = _format_of(text[:_SNIFF_BYTES]) or _format_of(text)
    if fmt is None:
        raise InputError(path, "no metric lines of a known console format found")
    reader = {"megatron": _megatron.read, "dschat": _read_dschat, "llmc": _read_llmc,
              "verl": _read_verl, "hf": _read_hf}[fmt]
    return reader(path, text)


def _summary_note(path: str, fmt: str, metric_lines: int, total: int) -> str:
    skipped = total - metric_lines
    return (f"{os.path.basename(path)}: read {metric_lines} metric line(s) as {fmt}"
            + (f"; skipped {skipped} other line(s)" if skipped else ""))


def _read_dschat(path: str, text: str) -> Run:
    records: dict[int, dict[str, float]] = {}
    offset, last_epoch, current, metric_lines, overflows = 0, None, None, 0, 0
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _DSCHAT.search(line)
        if match:
            epoch, step = int(match.group(1)), int(match.group(2))
            if last_epoch is not None and epoch != last_epoch:
                offset = max(records, default=-1) + 1
            last_epoch, current = epoch, offset + step
            fields = records.setdefault(current, {})   # a later ppo_ep of the same step overwrites
            for part in match.group(3).split("|"):
                key, sep, raw = part.partition(":")
                value = _common.number(raw) if sep else None
                if value is not None and key.strip() != "ppo_ep":
                    fields[key.strip()] = value
            metric_lines += 1
            continue
        reward = _DSCHAT_REWARD.search(line)
        if reward and current is not None and _common.number(reward.group(1)) is not None:
            records[current]["average reward score"] = _common.number(reward.group(1))
            metric_lines += 1
        elif _OVERFLOW.search(line):
            overflows += 1
    points = Points()
    for step, fields in records.items():
        for key, value in fields.items():
            points.add(step, key, value)
    notes = [_summary_note(path, "DeepSpeed-Chat console", metric_lines, len(lines))]
    if overflows:
        notes.append(f"{os.path.basename(path)}: {overflows} fp16 loss-scale overflow message(s) "
                     "(DeepSpeed skips those steps; early in training this is normal)")
    return points.to_run(path, framework="DeepSpeed-Chat", fmt="DeepSpeed-Chat console", notes=notes)


def _read_llmc(path: str, text: str) -> Run:
    points, metric_lines = Points(skip_repeats=True), 0
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _LLMC.match(line.strip())
        if not match:
            continue
        step = int(match.group(1))
        for token in match.group(2).split():
            key, _, raw = token.partition(":")
            value = _common.number(raw)
            if value is not None:
                points.add(step, key, value)
        metric_lines += 1
    notes = [_summary_note(path, "llm.c main.log", metric_lines, len(lines))]
    return points.to_run(path, framework="llm.c", fmt="llm.c main.log", notes=notes)


def _read_verl(path: str, text: str) -> Run:
    points, metric_lines = Points(skip_repeats=True), 0
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _VERL.search(line)
        if not match:
            continue
        step = int(match.group(1))
        read = 0
        for part in match.group(2).split(" - "):
            key, sep, raw = part.strip().partition(":")
            value = _common.number(raw) if sep else None
            if value is not None and key:
                points.add(step, key, value)
                read += 1
        metric_lines += read > 0
    notes = [_summary_note(path, "verl console", metric_lines, len(lines))]
    return points.to_run(path, framework="verl", fmt="verl console", notes=notes)


def _hf_steps_per_epoch(text: str) -> float | None:
    epochs, total = _HF_EPOCHS.search(text), _HF_TOTAL.search(text)
    if not epochs or not total:
        return None
    n_epochs, n_total = int(epochs.group(1).replace(",", "")), int(total.group(1).replace(",", ""))
    return n_total / n_epochs if n_epochs else None


def _hf_step(raw: float, per_epoch: float, every: int | None) -> int:
    """The step of a console line from its epoch (printed to 2 decimals, so up to per_epoch/200 off);
    a training line snaps to the nearest multiple of logging_steps when that is within the rounding."""
    if every:
        snapped = round(raw / every) * every
        if abs(snapped - raw) <= per_epoch * 0.005 + 1:
            return int(snapped)
    return int(round(raw))


def _read_hf(path: str, text: str) -> Run:
    per_epoch = _hf_steps_per_epoch(text)
    logging = _HF_LOGGING_STEPS.search(text)
    every = int(logging.group(1)) if logging and int(logging.group(1)) > 0 else None
    points, metric_lines, filtered = Points(skip_repeats=True), 0, []   # eval lines repeat the epoch
    lines = [line for line in text.splitlines() if line.strip()]
    train_records = 0
    for line in lines:
        match = _HF_DICT.search(line)
        if not match:
            continue
        values = {k: v for k, v in ((k, _common.number(raw)) for k, raw in _HF_PAIR.findall(match.group(0)))
                  if v is not None}
        if not values or _HF_SUMMARY & values.keys():
            continue
        if "loss" in values:
            train_records += 1
        if per_epoch is not None and "epoch" in values:
            step = _hf_step(values["epoch"] * per_epoch, per_epoch, every if "loss" in values else None)
        else:
            step = max(train_records, 1)
        if values.get("loss") == 0.0 and not math.isfinite(values.get("grad_norm", 0.0)):
            values["loss"] = math.nan
            filtered.append(step)
        for key, value in values.items():
            points.add(step, key, value)
        metric_lines += 1
    notes = [_summary_note(path, "HF Trainer console", metric_lines, len(lines))]
    notes.append(f"{os.path.basename(path)}: console lines carry no step; "
                 + ("step = epoch x steps per epoch from the Trainer banner" if per_epoch is not None
                    else "step = number of the training log line"))
    if filtered:
        notes.append(f"{os.path.basename(path)}: loss 0.0 beside a non-finite grad_norm at step(s) "
                     f"{', '.join(map(str, filtered[:5]))}: HF logging_nan_inf_filter hides a NaN loss "
                     "this way; recorded as NaN")
    return points.to_run(path, framework="HF Trainer", fmt="HF Trainer console", notes=notes)
