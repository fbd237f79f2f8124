"""Megatron-LM functional-test golden values: the JSON its CI compares every run against,

    {"lm loss": {"start_step": 1, "end_step": 50, "step_interval": 1, "values": {"1": 10.60965, ...}},
     "num-zeros": {...}, "iteration-time": {...}, "mem-allocated-bytes": {...}}

(older files, and NeMo's, give `values` as a list: at start_step + i * step_interval),
usually `golden_values_<env>_<platform>.json` beside the test's `model_config.yaml`.  Keys keep
Megatron's TensorBoard names (`lm loss` feeds the loss signal, `num-zeros` grad_zeros; `iteration-time`
is the step time, in seconds); a value written as "nan" (a step the test did not time) stays NaN.  A
file without a loss series (a throughput test) is read with the metrics it has, and a note says the
loss is missing.  From `model_config.yaml` the `MODEL_ARGS` become the run's configuration (without
their leading dashes) and `--train-iters` the planned length (`meta["planned_steps"]`).
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from ...errors import InputError
from ..run import Run, Series, in_step_range
from . import _common
from ._common import Points

FORMAT = "Megatron golden values"
_FIELDS = ('"start_step"', '"values"')
_LOSS_KEY = "lm loss"
_TRAIN_ITERS = re.compile(r"^\s*--train-iters:\s*(\d{1,18})\s*$", re.MULTILINE)
_MAX_CONFIG_BYTES = 1 << 20
_NUMBER_TYPES = frozenset((float, int))


def can_load(path: str) -> bool:
    if _common.extension(path) != ".json":
        return False
    text = _common.head(path, 4096)
    return text is not None and text.lstrip().startswith("{") and all(f in text for f in _FIELDS)


def load(path: str, **options) -> Run:
    try:
        data = json.loads(_common.read_text(path))
    except RecursionError:
        raise InputError(path, "not valid JSON: nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "not Megatron golden values: the top level is not an object of metrics")
    points = Points()
    whole: dict[str, Series] = {}
    skipped: list[str] = []
    for key, entry in data.items():
        values = entry.get("values") if isinstance(entry, dict) else None
        if isinstance(values, list):        # the older form: steps from start_step and step_interval
            values = _listed_steps(entry, values)
        if not isinstance(values, dict):
            skipped.append(key)
            continue
        series = _whole_series(key, values)
        if series is not None:
            whole[key] = series
            continue
        for step, raw in values.items():
            value = _common.number(raw) if isinstance(raw, str) else raw
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                points.add(step, key, value)
    name = os.path.basename(path)
    notes = [f"{name}: read {len(data) - len(skipped)} metric(s) of Megatron golden values"]
    if skipped:
        notes.append(f"{name}: {', '.join(skipped[:5])}: no values object (or list without its step grid), not read")
    if not any("loss" in key for key in data if key not in skipped):
        notes.append(f"{name}: no loss series such as '{_LOSS_KEY}' (a throughput or memory test): read only "
                     f"{', '.join(k for k in data if k not in skipped)}, on which no layer is judged")
    meta: dict = {}
    config = _model_config(os.path.join(os.path.dirname(path), "model_config.yaml"), notes)
    if config:
        meta["config"] = config
        iters = config.get("train-iters")
        if isinstance(iters, int) and not isinstance(iters, bool):
            meta["planned_steps"] = iters
    return points.to_run(path, framework="Megatron-LM", fmt=FORMAT, notes=notes, meta=meta, series=whole)


def _whole_series(key: str, values: dict) -> Series | None:
    """One metric's {step: value} object as a Series, converted column by column, when every step is
    an integer in the step range (int() of the text, as exact_step reads it) and every value a JSON
    number that fits float64; None for anything else (an empty object, a "nan" string, a step that
    is no integer, a 400-digit value), which is read point by point for its notes."""
    if not values or not _NUMBER_TYPES.issuperset(map(type, values.values())):   # bool is not int here
        return None
    try:
        steps = np.fromiter(map(int, values), np.int64, len(values))
        # JSON numbers (int or float, checked above) straight into float64: what float() of each gives
        numbers = np.fromiter(values.values(), np.float64, len(values))
    except (ValueError, OverflowError):
        return None
    if not in_step_range(steps).all():
        return None
    return Series.from_points(key, steps, numbers)


def _listed_steps(entry: dict, values: list) -> dict | None:
    """{step: value} of a values list, at start_step + i * step_interval; None without those two."""
    start, interval = entry.get("start_step"), entry.get("step_interval")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, interval)) or interval <= 0:
        return None
    return {start + i * interval: value for i, value in enumerate(values)}


def _model_config(path: str, notes: list[str]) -> dict:
    """The test's MODEL_ARGS, keys without their leading dashes; {} when there is no readable file."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > _MAX_CONFIG_BYTES:
            return {}
        text = _common.read_text(path)
    except (OSError, InputError):
        return {}
    try:
        import yaml

        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))   # libyaml when built
    except Exception as exc:       # noqa: BLE001  (yaml missing or the file is not YAML: the values still count)
        iters = _TRAIN_ITERS.search(text)
        notes.append(f"model_config.yaml: not read as YAML ({type(exc).__name__})")
        return {"train-iters": int(iters.group(1))} if iters else {}
    args = data.get("MODEL_ARGS") if isinstance(data, dict) else None
    if not isinstance(args, dict):
        return {}
    return {str(k).lstrip("-"): v for k, v in args.items()}
