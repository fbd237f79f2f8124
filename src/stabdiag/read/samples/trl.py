"""TRL's logged completions: GRPOTrainer (and RLOO) with `log_completions=True` write
`<output_dir>/completions/completions_<step:05d>.parquet` at every logging step: step, prompt, completion,
one column per reward function, extra columns, advantage.  The total reward is not a column: it is the
weighted sum of the reward columns (`reward_weights` of the run's config, when known); within a prompt's
group the advantage orders the samples as the total reward does."""

from __future__ import annotations

import os
import re

from . import _rows
from .record import sample_from_row

KIND = "trl"
_NAME = re.compile(r"^completions_(\d+)\.parquet$")


def claims(path: str) -> bool:
    return _NAME.match(os.path.basename(path)) is not None


def steps(path: str):
    yield int(_NAME.match(os.path.basename(path)).group(1)), None


_FIXED = {"step", "prompt", "completion", "advantage", "image"}


def as_row(row: dict) -> dict:
    """TRL's columns as a sample row: every column but step, prompt, completion and advantage is a reward
    function's (or an extra logged number), whatever its name (a reward function may be called `length`)."""
    fixed = {k: row.get(k) for k in _FIXED if k in row}
    return {**fixed, "rewards": {k: v for k, v in row.items() if k not in _FIXED}}


def samples(path: str, locators, *, weights=None):
    for row, where in _rows.parquet_rows(path):
        sample = sample_from_row(as_row(row), where=where, weights=weights, extra_components=False)
        if sample is not None:
            yield sample


def reward_columns(path: str) -> list[str]:
    """The numeric columns of a completions parquet other than the fixed ones: the reward functions', in the
    order TRL wrote them (the order of `reward_weights`)."""
    try:
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
    except Exception:               # noqa: BLE001 - unreadable: no weights, the advantage still ranks
        return []
    return [f.name for f in schema if f.name not in _FIXED and str(f.type) in ("double", "float", "int64")]


def weights_from(config: dict | None, names: list[str]) -> dict[str, float] | None:
    """`reward_weights` of a TRL config, by reward function name (in the order of the reward columns)."""
    if not isinstance(config, dict):
        return None
    raw = config.get("reward_weights")
    if not isinstance(raw, (list, tuple)) or len(raw) != len(names):
        return None
    try:
        return {name: float(w) for name, w in zip(names, raw)}
    except (TypeError, ValueError):
        return None

