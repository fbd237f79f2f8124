"""The Tinker cookbook's rollout summaries: `<log_path>/iteration_<N:06d>/train_rollout_summaries.jsonl`, one
record per trajectory (tinker_cookbook/rl/rollout_logging.py: iteration, group_idx, traj_idx, total_reward,
final_reward, trajectory_metrics, steps[] with ob_len, ac_len, reward, stop_reason, metrics).  They hold no
text (the transcripts are in the logtree JSON beside them), so only lengths, truncation, the reward and its
metrics are read.  Eval summaries (`eval_<name>_rollout_summaries.jsonl`) are claimed so that no metric
reader takes them, and not read: samples are the training rollouts."""

from __future__ import annotations

import os
import re

from . import _rows
from .record import sample_from_row

KIND = "tinker"
_SUFFIX = "_rollout_summaries.jsonl"
_ITERATION = re.compile(r"iteration_(\d+)$")


def claims(path: str) -> bool:
    return os.path.basename(path).endswith((_SUFFIX, _SUFFIX + ".gz"))


def is_training(path: str) -> bool:
    return os.path.basename(path).startswith("train_")


def steps(path: str):
    if not is_training(path):
        return
    match = _ITERATION.search(os.path.basename(os.path.dirname(path)))
    if match is not None:
        yield int(match.group(1)), None
        return
    for step, _ in _rows.steps_in_jsonl(path):
        yield step, None
        return


def flat(record: dict) -> dict:
    """A summary record as a sample row: its reward, the tokens it generated and why it stopped."""
    turns = [t for t in record.get("steps") or () if isinstance(t, dict)]
    metrics: dict = {}
    for turn in turns:
        if isinstance(turn.get("metrics"), dict):
            metrics.update(turn["metrics"])
    if isinstance(record.get("trajectory_metrics"), dict):
        metrics.update(record["trajectory_metrics"])
    ac = [t.get("ac_len") for t in turns if isinstance(t.get("ac_len"), int)]
    stops = [str(t.get("stop_reason")).lower() for t in turns if t.get("stop_reason") is not None]
    return {"step": record.get("iteration"), "reward": record.get("total_reward"),
            "response_length": sum(ac) if ac else None,
            "truncated": ("length" in stops) if stops else None, "group": record.get("group_idx"),
            "rewards": {k: v for k, v in metrics.items() if isinstance(v, (int, float))}}


def samples(path: str, locators, *, weights=None):
    if not is_training(path):
        return
    for row, where in _rows.jsonl_rows(path):
        sample = sample_from_row(flat(row), where=where, extra_components=False)
        if sample is not None:
            yield sample
