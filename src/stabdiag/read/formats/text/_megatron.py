"""Megatron-LM / Megatron-DeepSpeed console lines:

    iteration     7000/  159576 | consumed samples: 260912 | ... | lm loss: 6.444662E+00 | loss scale: 2048.0 |
        grad norm: 98258.265 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
    validation loss at iteration 7000 | lm loss value: 7.174200E+00 | lm loss PPL: 1.305315E+03 |

Keys keep Megatron's stdout spelling (`lm loss`, `grad norm`, `loss scale`); the validation loss becomes
`lm loss validation`, the TensorBoard name.  A line wrapped by a terminal or a pasted block (a record that
does not end in `|`) is joined with the following lines.  Megatron leaves `lm loss` out of a line when
no iteration of the interval produced a finite loss; that step's loss is recorded as NaN and noted.
A `grad norm: 0.000` is left out: Megatron-DeepSpeed printed 0 when the engine did not compute it.
DeepSpeed `OVERFLOW! ... Skipping step` messages are counted.
"""

from __future__ import annotations

import math
import os
import re

from ...run import Run
from .. import _common
from .._common import Points

RECORD = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_VALID = re.compile(r"\bvalid(?:ation)? loss at iteration\s+(\d+)\s*\|(.*)")
_OVERFLOW = re.compile(r"OVERFLOW!")
_MAX_WRAPPED = 4
LOSS_KEY = "lm loss"
GRAD_NORM_KEY = "grad norm"
# a terminal wrap can eat the space at the break ("number of nan\niterations"): names are compared
# without whitespace and given back in Megatron's spelling
_NAMES = {re.sub(r"\s+", "", n).lower(): n for n in (
    "lm loss", "grad norm", "loss scale", "learning rate", "num zeros", "params norm",
    "number of skipped iterations", "number of nan iterations", "global batch size", "consumed samples",
    "consumed tokens", "elapsed time per iteration (ms)", "elapsed time per iteration (s)",
    "samples per second", "TFLOPs", "skipped samples", "load_balancing_loss", "z_loss")}


def _records(text: str) -> tuple[list[str], int]:
    """Logical records (iteration and validation lines, wraps joined) and the count of other lines."""
    records: list[str] = []
    other = 0
    current: str | None = None
    wrapped = 0
    for line in text.splitlines():
        starts = RECORD.search(line) or _VALID.search(line)
        if current is not None and not starts and wrapped < _MAX_WRAPPED and not current.rstrip().endswith("|"):
            current += line
            wrapped += 1
            continue
        if current is not None:
            records.append(current)
            current = None
        if starts:
            current, wrapped = line, 0
        elif line.strip():
            other += 1
    if current is not None:
        records.append(current)
    return records, other


def _fields(body: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in body.split("|"):
        name, sep, raw = part.partition(":")
        if not sep:
            continue
        tokens = raw.split()
        value = _common.number(tokens[0]) if tokens else None
        if value is None:
            continue
        compact = re.sub(r"\s+", "", name).lower()
        out[_NAMES.get(compact, " ".join(name.split()))] = value
    return out


def read(path: str, text: str) -> Run:
    records, other = _records(text)
    points = Points(skip_repeats=True)   # every rank of a stage may print the same line
    train: list[tuple[int, dict[str, float]]] = []
    for record in records:
        valid = _VALID.search(record)
        if valid:
            step = int(valid.group(1))
            for name, value in _fields(valid.group(2)).items():
                key = name[: -len(" value")] + " validation" if name.endswith(" value") else (
                    name[: -len(" PPL")] + " validation ppl" if name.endswith(" PPL") else name + " validation")
                points.add(step, key, value)
            continue
        match = RECORD.search(record)
        train.append((int(match.group(1)), _fields(record[match.end():])))
    has_loss = any(LOSS_KEY in fields for _, fields in train)
    missing, zero_norms = [], 0
    for step, fields in train:
        if has_loss and LOSS_KEY not in fields:
            fields[LOSS_KEY] = math.nan
            missing.append(step)
        if fields.get(GRAD_NORM_KEY) == 0.0:
            # Megatron-DeepSpeed's pipeline engine printed 0.000 when it did not compute the norm
            del fields[GRAD_NORM_KEY]
            zero_norms += 1
        for key, value in fields.items():
            points.add(step, key, value)
    name = os.path.basename(path)
    notes = [f"{name}: read {len(records)} metric line(s) as Megatron console"
             + (f"; skipped {other} other line(s)" if other else "")]
    if missing:
        notes.append(f"{name}: no lm loss at iteration(s) {', '.join(map(str, missing[:5]))}: Megatron leaves it "
                     "out when the interval had no finite loss (NaN/Inf or skipped); recorded as NaN")
    if zero_norms:
        notes.append(f"{name}: grad norm printed as 0.000 on {zero_norms} line(s): not computed by that "
                     "engine (a real grad norm is never exactly 0); left out")
    overflows = len(_OVERFLOW.findall(text))
    if overflows:
        notes.append(f"{name}: {overflows} fp16 OVERFLOW / skipped-step message(s) from the loss scaler")
    nan_iters = sum(f.get("number of nan iterations", 0) > 0 for _, f in train)
    if nan_iters:
        notes.append(f"{name}: {nan_iters} line(s) report nan iterations")
    return points.to_run(path, framework="Megatron-LM", fmt="Megatron console", notes=notes)
