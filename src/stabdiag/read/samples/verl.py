"""verl's rollout dumps: with `trainer.rollout_data_dir` set, RayPPOTrainer._dump_generations writes
`<dir>/<global_step>.jsonl`, one line per sample: input, output, gts (newer versions), score, step, and every
reward extra info that has one value per sample (verl/trainer/ppo/ray_trainer.py)."""

from __future__ import annotations

import os
import re

from . import _rows
from .record import sample_from_row

KIND = "verl"
_NAME = re.compile(r"^(\d+)\.jsonl$")


def claims(path: str) -> bool:
    if _NAME.match(os.path.basename(path)) is None:
        return False
    head = _rows.first_object(path)
    return head is not None and {"input", "output", "score"} <= set(head)


def steps(path: str):
    yield int(_NAME.match(os.path.basename(path)).group(1)), None


def samples(path: str, locators, *, weights=None):
    for row, where in _rows.jsonl_rows(path):
        sample = sample_from_row(row, where=where)
        if sample is not None:
            yield sample
