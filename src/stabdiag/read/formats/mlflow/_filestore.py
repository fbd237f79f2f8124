"""MLflow's file store (`mlruns/`, MLflow 2's default): `mlruns/<experiment id>/meta.yaml` names the
experiment; `mlruns/<experiment id>/<run id>/` holds the run's `meta.yaml` (run_name, status, ...),
`metrics/<key>` files of "timestamp value step" lines (a key with `/` is a sub-folder), `params/<key>`
and `tags/<key>` files holding one value each.  Read without mlflow; the meta files are flat YAML.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

from ....errors import InputError
from ...run import Run
from .._common import is_regular_file, number
from ._common import Selector, build_run

_PARTS = ("metrics", "params", "tags")
# RunStatus as the file store writes it (an int) and as the SQL store does (a name)
_STATUS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED"}


def _flat_yaml(path: str) -> dict[str, str]:
    """The top-level `key: value` pairs of a meta.yaml (the only shape MLflow writes there)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line[:1].isspace() or ":" not in line:
                    continue
                key, _, value = line.partition(":")
                out[key.strip()] = value.strip().strip("'\"")
    except OSError:
        return {}
    return out


@lru_cache(maxsize=4096)
def _is_run_folder(folder: str) -> bool:
    meta = os.path.join(folder, "meta.yaml")
    if not os.path.isfile(meta) or not os.path.isdir(os.path.join(folder, "metrics")):
        return False
    fields = _flat_yaml(meta)
    return "run_uuid" in fields or "run_id" in fields


def run_folder(path: str) -> str | None:
    """The run folder a file of the store belongs to (its meta.yaml, or a metrics/params/tags file)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "meta.yaml" and _is_run_folder(folder):
        return folder
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        if os.path.basename(folder) in _PARTS and _is_run_folder(parent):
            return parent
        folder = parent


def members(path: str, selector: Selector) -> list[tuple[str, str, str]]:
    """The run a run folder's meta.yaml speaks for, if the selector wants it and it is not deleted; none
    for the store's other files (they are read with their meta.yaml)."""
    folder = run_folder(path)
    if folder is None or os.path.basename(path) != "meta.yaml" or os.path.dirname(os.path.abspath(path)) != folder:
        return []
    meta = _flat_yaml(path)
    if meta.get("lifecycle_stage") == "deleted":
        return []
    run_id = meta.get("run_id") or meta.get("run_uuid") or os.path.basename(folder)
    exp_id = meta.get("experiment_id") or os.path.basename(os.path.dirname(folder))
    exp_meta = _flat_yaml(os.path.join(os.path.dirname(folder), "meta.yaml"))
    if exp_meta.get("lifecycle_stage") == "deleted":
        return []
    experiment = exp_meta.get("name") or exp_id
    name = meta.get("run_name") or _one_value(os.path.join(folder, "tags", "mlflow.runName")) or run_id
    return [(run_id, name, experiment)] if selector.wants(exp_id, experiment, run_id, name) else []


def _one_value(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _files(folder: str) -> list[tuple[str, str]]:
    """(key, path) of every file below a metrics/params/tags folder; the key is its path below it."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            if not is_regular_file(path):       # a pipe would block the read; a link may leave the store
                continue
            out.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
    return sorted(out)


def load_member(path: str, run_id: str) -> Run:
    folder = run_folder(path)
    if folder is None:
        raise InputError(path, "not a run folder of an MLflow file store")
    meta = _flat_yaml(os.path.join(folder, "meta.yaml"))
    keys, steps, values, stamps = [], [], [], []
    skipped = 0
    for key, file in _files(os.path.join(folder, "metrics")):
        text = _one_value(file) or ""
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            value = number(parts[1])
            try:
                stamp, step = int(parts[0]), int(parts[2]) if len(parts) > 2 else 0
            except ValueError:
                skipped += 1
                continue
            if value is None:
                skipped += 1
                continue
            keys.append(key)
            steps.append(step)
            values.append(value)
            stamps.append(stamp)
    params = {k: _one_value(f) or "" for k, f in _files(os.path.join(folder, "params"))}
    tags = {k: _one_value(f) or "" for k, f in _files(os.path.join(folder, "tags"))}
    exp_id = meta.get("experiment_id") or os.path.basename(os.path.dirname(folder))
    experiment = _flat_yaml(os.path.join(os.path.dirname(folder), "meta.yaml")).get("name") or exp_id
    status = meta.get("status", "")
    run = build_run(folder, name=meta.get("run_name") or tags.get("mlflow.runName") or run_id, run_id=run_id,
                    experiment=experiment, status=_STATUS.get(status, status), keys=keys, steps=steps,
                    values=np.array(values, dtype=np.float64), timestamps=stamps, params=params, tags=tags,
                    store="file store")
    if skipped:
        run = Run(run.name, run.series, run.sources, run.meta,
                  run.notes + (f"{folder}: {skipped} metric line(s) not of the form 'timestamp value step' skipped",))
    return run
