"""Samples logged as W&B tables: `wandb.log({"completions": wandb.Table(...)})` (TRL's log_completions,
prime-rl, hand-written loops) leaves `<run dir>/files/media/table/<key>_<_step>_<hash>.table.json` in an
offline or synced run folder.  A table is samples when one of its columns holds completions.  The step is
the table's `step` column where it has one (the trainer's step); otherwise W&B's own `_step` from the file
name, which counts every log call (a note says so).

Online runs: only when the user names a `wandb://entity/project/run` URI does `online_source` list the
run's table files through the W&B API, and only the tables of the requested steps are downloaded."""

from __future__ import annotations

import os
import re

from . import _rows, trl
from .record import COMPLETION_FIELDS, STEP_FIELDS, sample_from_row

KIND = "wandb-table"
_NAME = re.compile(r"^(?P<key>.+)_(?P<step>\d+)_[0-9a-f]{8,}\.table\.json$")


def claims(path: str) -> bool:
    norm = path.replace(os.sep, "/")
    if "/media/table/" not in norm or not norm.endswith(".table.json"):
        return False
    return bool(set(_rows.table_columns(path)) & set(COMPLETION_FIELDS))


def logged_step(path: str) -> int | None:
    match = _NAME.match(os.path.basename(path))
    return int(match.group("step")) if match else None


def steps(path: str):
    """The trainer's steps in the table (its `step` column), else W&B's _step from the name."""
    columns = _rows.table_columns(path)
    if set(columns) & set(STEP_FIELDS):
        seen = set()
        for row, _ in _rows.table_rows(path):
            sample = sample_from_row(row, where="")
            if sample is not None and sample.step not in seen:
                seen.add(sample.step)
                yield sample.step, None
        return
    step = logged_step(path)
    if step is not None:
        yield step, None


def distinct(paths: list[str]) -> list[str]:
    """One file per content: W&B names a table by its digest, and a table logged twice (TRL logs the last
    step's again at the end of training) is the same samples, not twice as many."""
    seen, out = set(), []
    for path in sorted(paths, key=lambda p: (logged_step(p) or 0, p)):
        digest = os.path.basename(path).rsplit("_", 1)[-1]
        if digest not in seen:
            seen.add(digest)
            out.append(path)
    return out


def samples(path: str, locators, *, weights=None):
    fallback = logged_step(path)
    trl_like = {"step", "prompt", "completion", "advantage"} <= set(_rows.table_columns(path))
    for row, where in _rows.table_rows(path):
        row = trl.as_row(row) if trl_like else row
        sample = sample_from_row(row, where=where, weights=weights)
        if sample is None and fallback is not None:
            sample = sample_from_row(row, where=where, step=fallback, weights=weights)
        if sample is not None:
            yield sample


def online_files(api_run, *, cache_dir: str) -> list[str]:
    """Download the table files of an online run (a `wandb.Api().run(...)` object) that hold samples, into
    `cache_dir`; their paths.  Only called for a wandb:// URI the user gave."""
    out = []
    for remote in api_run.files():
        name = getattr(remote, "name", "")
        if not (name.startswith("media/table/") and name.endswith(".table.json")):
            continue
        local = os.path.join(cache_dir, name)
        if not os.path.exists(local):
            remote.download(root=cache_dir, replace=True)
        if claims(local):
            out.append(local)
    return out
