"""HF Trainer / TRL `trainer_state.json`: the `log_history` list of train and eval records.

Keys are kept as the Trainer wrote them (`loss`, `grad_norm`, `eval_loss`, `reward`, ...).  The file is
JSON with bare `NaN` / `Infinity` tokens, which Python's json reads.  The HF trap: with
`logging_nan_inf_filter` on (the default) a diverged step logs `loss: 0.0` beside `grad_norm: nan`; that
loss is recorded as NaN, because it is a non-finite finding, not a healthy zero loss.
"""

from __future__ import annotations

import json
import math
import re

from ...errors import InputError
from ..ending import Planned
from ..run import STEP_RANGE, Run, as_float, exact_step, shown_number
from . import _common
from ._common import Points

FORMAT = "HF trainer_state.json"
_SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos",
                 "train_loss"}
_BARE_NAN = re.compile(r"(?<=[:\[,\s])(-?)(nan|inf|infinity)(?=[,\]\}\s])", re.IGNORECASE)


def can_load(path: str) -> bool:
    if _common.extension(path) != ".json":
        return False
    text = _common.head(path)
    return text is not None and '"log_history"' in text


def _parse(path: str) -> dict:
    text = _common.read_text(path)
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError(path, "not valid JSON: nested too deeply to read") from None
    except ValueError:
        pass
    # lowercase nan / inf written by hand or by other JSON writers
    fixed = _BARE_NAN.sub(lambda m: ("-Infinity" if m.group(1) else "Infinity")
                          if m.group(2).lower().startswith("inf") else "NaN", text)
    try:
        return json.loads(fixed)
    except RecursionError:
        raise InputError(path, "not valid JSON: nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None


def _value(raw) -> float | None:
    if isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, (int, float)):
        return raw          # Points reads a 400-digit integer as Inf, with a note
    if isinstance(raw, str):
        return _common.number(raw)
    return None


def load(path: str, **options) -> Run:
    data = _parse(path)
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise InputError(path, "no log_history list; is this a trainer_state.json?")
    points = Points(skip_repeats=True)   # eval records repeat the step's epoch
    no_step = 0
    filtered: list[int] = []
    summary: dict[str, float] = {}
    bad_steps: list[tuple[int, object]] = []
    for index, entry in enumerate(history):
        if not isinstance(entry, dict):
            continue
        raw_step = entry.get("step")
        if not isinstance(raw_step, (int, float)) or isinstance(raw_step, bool):
            no_step += 1
            continue
        step = exact_step(raw_step)
        if step is None:
            bad_steps.append((index, raw_step))
            continue
        values = {k: v for k, v in ((k, _value(raw)) for k, raw in entry.items() if k != "step")
                  if v is not None}
        if _SUMMARY_KEYS & values.keys() and "loss" not in values:
            summary.update({k: as_float(v)[0] for k, v in values.items() if k in _SUMMARY_KEYS})
            continue
        if values.get("loss") == 0.0 and not math.isfinite(as_float(values.get("grad_norm", 0.0))[0]):
            values["loss"] = math.nan
            filtered.append(step)
        for key, value in values.items():
            points.add(step, key, value)
    notes = []
    if filtered:
        notes.append(f"{path}: loss 0.0 logged beside a non-finite grad_norm at step(s) "
                     f"{', '.join(map(str, filtered[:5]))}{' ...' if len(filtered) > 5 else ''}: HF "
                     "logging_nan_inf_filter hides a NaN loss this way; recorded as NaN")
    if no_step:
        notes.append(f"{path}: {no_step} log_history record(s) without a step skipped (e.g. predict_*)")
    if bad_steps:
        index, raw = bad_steps[0]
        if not points:
            raise InputError(path, f"step {shown_number(raw)} is not {STEP_RANGE}",
                             key=f"log_history[{index}]")
        notes.append(f"{path}: {len(bad_steps)} log_history record(s) skipped: their step is not "
                     f"{STEP_RANGE} (first: log_history[{index}] step {shown_number(raw)})")
    run = points.to_run(path, framework="HF Trainer", fmt=FORMAT, notes=notes)
    if summary:
        run.meta["summary"] = summary
    max_steps = data.get("max_steps")
    if isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0:
        run.meta["planned"] = Planned(max_steps, "the max_steps", path)
    global_step = data.get("global_step")
    if isinstance(global_step, int) and exact_step(global_step) is not None:
        run.meta["global_step"] = global_step      # orders checkpoint copies against the final one
    return run
