"""What the three MLflow readers share: one MLflow run as stabdiag reads it, and how it becomes a Run.

MLflow keeps, per run: metrics as (key, value, timestamp in ms, step) points, every write kept; params
and tags as strings; a status (RUNNING, FINISHED, FAILED, KILLED) and a name.  The params and tags are
the run's configuration (params win where a tag has the same key); the status is how the run ended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....errors import InputError
from ...ending import Ending
from ...run import Run, series_from_codes, series_from_long

FORMAT = "MLflow"
# the SQL store writes +-Inf as the largest double (and NaN as 0 with is_nan set)
_DOUBLE_MAX = 1.7976931348623157e308
_STATUS_ENDINGS = {"FINISHED": ("finished", "MLflow recorded the run as FINISHED"),
                   "FAILED": ("exception", "MLflow recorded the run as FAILED"),
                   "KILLED": ("killed", "MLflow recorded the run as KILLED")}


@dataclass(frozen=True, slots=True)
class Selector:
    """Which runs of a store to read: `#experiment=NAME` (a name or an id), `#run=NAME` (a name or an id)."""

    experiment: str | None = None
    run: str | None = None

    def wants(self, experiment_id: str, experiment_name: str, run_id: str, run_name: str) -> bool:
        return ((self.experiment is None or self.experiment in (experiment_id, experiment_name))
                and (self.run is None or self.run in (run_id, run_name)))

    def describe(self) -> str:
        parts = [f"experiment={self.experiment}" if self.experiment is not None else "",
                 f"run={self.run}" if self.run is not None else ""]
        return "&".join(p for p in parts if p)


def parse_selector(text: str, where: str) -> Selector:
    """`experiment=nightly&run=lr3e-4` (or `,` between parts) as a Selector; InputError for another key."""
    found: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.replace(",", "&").split("&"))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("experiment", "run") or not value.strip():
            raise InputError(where, f"#{text}: expected experiment=NAME and/or run=NAME after '#'")
        found[key.strip()] = value.strip()
    return Selector(found.get("experiment"), found.get("run"))


def typed(value: str):
    """A param or tag as its value: numbers, booleans and None as such, anything else as the text."""
    text = value.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return value
    return number if math.isfinite(number) or low in ("nan", "inf", "-inf") else value


def unpacked(values: np.ndarray, is_nan: np.ndarray | None = None) -> np.ndarray:
    """Metric values as float64 with the SQL store's NaN and Inf encodings undone."""
    values = np.asarray(values, dtype=np.float64).copy()
    if is_nan is not None:
        values[np.asarray(is_nan, dtype=bool)] = np.nan
    values[values >= _DOUBLE_MAX] = np.inf
    values[values <= -_DOUBLE_MAX] = -np.inf
    return values


def ending_of_status(status: str | None, source: str) -> Ending:
    kind, message = _STATUS_ENDINGS.get(str(status or "").upper(), (
        "unfinished", f"MLflow recorded the run as {status or 'RUNNING'}: still running, or stopped before "
                      "mlflow.end_run()"))
    return Ending(kind, message, source)


def build_run(where: str, *, name: str, run_id: str, experiment: str, status: str | None, keys, steps, values,
              timestamps, params: dict[str, str], tags: dict[str, str], store: str,
              names: list[str] | None = None) -> Run:
    """The Run of one MLflow run, keyed by its metric names: `keys` are the names of the points, or, with
    `names`, codes into them."""
    if len(keys) == 0:
        raise InputError(where, f"MLflow run {name} ({run_id}) logged no metrics")
    walls = np.asarray(timestamps, dtype=np.float64) / 1000.0
    series = (series_from_codes(names, keys, steps, values, walls) if names is not None
              else series_from_long(keys, steps, values, walls))
    config = {k: typed(v) for k, v in tags.items() if not k.startswith("mlflow.")}
    config.update({k: typed(v) for k, v in params.items()})
    meta = {"format": f"{FORMAT} {store}", "config": config, "mlflow_run_id": run_id,
            "mlflow_experiment": experiment, "run_name": name,
            "ending": ending_of_status(status, f"{where} (run {run_id})")}
    notes = (f"{FORMAT} {store}: run {name} ({run_id}) of experiment {experiment}, {len(series)} metric(s), "
             f"{len(params)} param(s)",)
    return Run(name, series, (where,), meta, notes)
