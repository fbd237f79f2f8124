"""Weights & Biases runs: local run directories and online runs.

Local: every wandb run, online or offline, leaves a directory `wandb/run-<time>-<id>/` (or
`offline-run-...`) whose `run-<id>.wandb` transaction log holds the full-resolution history; current
wandb ships no reader for it, so stabdiag decodes it directly (`_records`, `_log`).  Runs
from old wandb releases also have `files/wandb-history.jsonl`, which is read when there is no
transaction log.  Online: `wandb://ENTITY/PROJECT/RUN_ID` and W&B run URLs are fetched through the
public API at full resolution and cached as Parquet (`_online`).

A series is keyed by the name the run logged, nested dicts joined with '/'.  Its step is `_step`,
unless the run declared another x-axis with `define_metric(..., step_metric=...)` (as the Hugging
Face Trainer does with `train/global_step`), or `step_col` names one.  Media, tables and histograms
are not scalars and are left out.
"""

from __future__ import annotations

import json
import math
import os
from typing import TYPE_CHECKING

from ....errors import InputError
from ..._budget import YAML_MAX, yaml_load
from ...run import STEP_RANGE, Run, as_float, exact_step, merge_runs, run_name_for, shown_number
from .._common import is_regular_file

if TYPE_CHECKING:
    from ._log import LogContents

_HISTORY_JSONL = "wandb-history.jsonl"
# old runs' system metrics (no step axis): claimed so that no other loader misreads them, then left out
_EVENTS_JSONL = "wandb-events.jsonl"
_CONSOLE_LOG = "output.log"
_INTERNAL = frozenset(("_step", "_timestamp", "_runtime"))


def _kind(path: str) -> str | None:
    base = os.path.basename(path)
    if base.startswith("run-") and base.endswith(".wandb"):
        return "log"
    files_dir = os.path.dirname(os.path.abspath(path))
    if os.path.basename(files_dir) != "files":
        return None
    if base in (_HISTORY_JSONL, _EVENTS_JSONL):
        return "history" if base == _HISTORY_JSONL else "events"
    if base == _CONSOLE_LOG and _has_history(os.path.dirname(files_dir)):
        return "console"     # the run's console copy: the .wandb log already holds these metrics
    return None


def _has_history(run_dir: str) -> bool:
    try:
        names = os.listdir(run_dir)
    except OSError:
        return False
    return any(n.startswith("run-") and n.endswith(".wandb") for n in names) or \
        os.path.isfile(os.path.join(run_dir, "files", _HISTORY_JSONL))


def can_load(path: str) -> bool:
    """A `run-<id>.wandb` transaction log, or an old run's `files/wandb-history.jsonl`."""
    return _kind(path) is not None and os.path.isfile(path)


def run_root(path: str) -> str:
    """The run directory a file belongs to (`wandb/run-<time>-<id>`)."""
    parent = os.path.dirname(path)
    return os.path.dirname(parent) if _kind(path) in ("history", "events", "console") else parent


def load(path: str, **options) -> Run:
    """Read one file of a local W&B run."""
    kind = _kind(path)
    name = run_name_for(run_root(path) or ".")
    step_col = options.get("step_col")
    if kind == "log":
        from ._log import read_log  # its readers are imported only when a log is read

        log = read_log(path, progress=bool(options.get("progress")), label=name)
        return _run_from_log(path, log, name, step_col)
    if kind == "history":
        return _run_from_history_jsonl(path, name, step_col)
    if kind == "events":
        return Run(name, {}, (path,), {"format": "wandb"},
                   (f"{path}: no metric history in this W&B run directory, only system metrics",))
    if kind == "console":
        raise InputError(path, f"the console copy of a W&B run; check the run directory {run_root(path)} "
                               "instead (its .wandb log holds the same metrics)")
    raise InputError(path, "not a W&B run file (expected run-<id>.wandb or files/wandb-history.jsonl)")


def load_group(paths: list[str], **options) -> Run:
    """Read the files of one run directory: the transaction log, else the old history JSONL."""
    name = run_name_for(run_root(paths[0]) or ".")
    logs = sorted(p for p in paths if _kind(p) == "log")
    histories = [p for p in paths if _kind(p) == "history"]
    if logs:
        runs = [load(p, **options) for p in logs]
        if histories:
            extra = f"{histories[0]}: not read; the run's .wandb log holds the same history"
            runs[-1] = Run(runs[-1].name, runs[-1].series, runs[-1].sources, runs[-1].meta,
                           runs[-1].notes + (extra,))
    elif histories:
        runs = [load(p, **options) for p in histories]
    else:
        runs = [load(paths[0], **options)]
    return merge_runs(name, runs)


def handles_uri(uri: str) -> bool:
    from ._online import handles_uri as handles

    return handles(uri)


def load_uri(uri: str, **options) -> Run:
    """Fetch an online run's full history (cached); see `_online`."""
    from ._online import load_uri as fetch

    return fetch(uri, **options)


def _run_from_log(path: str, log: LogContents, name: str, step_col: str | None) -> Run:
    from ._axes import axis_chooser, build_series

    notes = list(log.notes)
    history = log.history
    columns = history.columns()
    axis_of = axis_chooser(step_col, columns, log.step_metrics, path)
    series = build_series(columns, history.row_steps, history.row_walls, axis_of, notes)
    meta = {"format": "wandb", "config": log.config.nested(), "summary": log.summary.flat(),
            "history_rows": len(history.row_steps), "finished": log.exit_code is not None}
    meta.update(log.run)
    if log.exit_code is not None:
        meta["exit_code"] = log.exit_code
    else:
        notes.append(f"{path}: no exit record: the run is still running, or was killed before "
                     "wandb.finish()")
    if not history.row_steps:
        notes.append(f"{path}: the run logged no history rows")
    if history.bad_steps:
        notes.append(f"{path}: {history.bad_steps} history row(s) with a _step that is not {STEP_RANGE}: "
                     "read at the record's own step, or at step 0 where that is out of range too")
    notes = [n if n.startswith(path) else f"{path}: {n}" for n in notes]
    return Run(name, series, (path,), meta, tuple(notes))


def _run_from_history_jsonl(path: str, name: str, step_col: str | None) -> Run:
    """An old run's `files/wandb-history.jsonl`: one JSON row per `wandb.log`."""
    from ._axes import axis_chooser, build_series

    rows = _HistoryRows()
    notes: list[str] = []
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    notes.append(f"{path}:{lineno}: skipped a line that is not whole JSON"
                                 + ("" if line.endswith("\n") else " (the last line, without its newline: "
                                    "the file is still being written?)"))
                    continue
                if isinstance(row, dict):
                    rows.add(row, lineno)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the file ({exc})") from None
    notes.extend(f"{path}:{n}" for n in rows.notes())
    axis_of = axis_chooser(step_col, rows.columns, [], path)
    series = build_series(rows.columns, rows.row_steps, rows.row_walls, axis_of, notes)
    root = run_root(path)
    meta = {"format": "wandb-history-jsonl", "history_rows": len(rows.row_steps)}
    meta.update(_old_run_meta(os.path.join(root, "files")))
    return Run(name, series, (path,), meta, tuple(notes))


class _HistoryRows:
    """The rows of a wandb-history.jsonl as per-key (rows, values) columns with each row's step.

    A row whose `_step` is not an integer in the step range is left out (its line is named in a note);
    a value too large for float64 is Inf, with a note."""

    def __init__(self) -> None:
        self.columns: dict[str, tuple[list[int], list[float]]] = {}
        self.row_steps: list[int] = []
        self.row_walls: list[float] = []
        self.bad_step: list[tuple[int, object]] = []
        self.overflow: list[tuple[int, str]] = []

    def add(self, row: dict, lineno: int) -> None:
        flat: dict = {}
        _flatten_scalars(row, "", flat)
        raw_step = flat.pop("_step", None)
        if raw_step is not None and not (isinstance(raw_step, float) and math.isnan(raw_step)):
            step = exact_step(raw_step)
            if step is None:
                self.bad_step.append((lineno, raw_step))
                return
        else:
            step = self.row_steps[-1] + 1 if self.row_steps else 0
        index = len(self.row_steps)
        self.row_steps.append(step)
        wall, _ = as_float(flat.pop("_timestamp", math.nan))
        self.row_walls.append(wall)
        for key, raw in flat.items():
            if key in _INTERNAL or key.startswith("_wandb"):
                continue
            value, overflowed = as_float(raw)
            if overflowed:
                self.overflow.append((lineno, key))
            column = self.columns.get(key)
            if column is None:
                column = self.columns[key] = ([], [])
            column[0].append(index)
            column[1].append(value)

    def notes(self) -> list[str]:
        """Notes as `LINE: text`, for the caller to prefix with the path."""
        out = []
        if self.bad_step:
            line, raw = self.bad_step[0]
            out.append(f"{line}: {len(self.bad_step)} row(s) left out: their _step is not {STEP_RANGE} "
                       f"(first: {shown_number(raw)})")
        if self.overflow:
            line, key = self.overflow[0]
            out.append(f"{line}: {len(self.overflow)} value(s) too large for float64 read as Inf (first: {key})")
        return out


def _flatten_scalars(obj: dict, prefix: str, out: dict) -> None:
    for key, value in obj.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            if "_type" not in value:               # a logged dict; one with _type is media
                _flatten_scalars(value, name + "/", out)
        elif isinstance(value, (int, float)):      # bool included; ints stay exact (a _step of 2**63)
            out[name] = value


def _old_run_meta(files_dir: str) -> dict:
    """Summary and config of an old run from `files/wandb-summary.json` and `files/config.yaml`."""
    meta: dict = {}
    try:
        summary_path = os.path.join(files_dir, "wandb-summary.json")
        if not is_regular_file(summary_path):        # a pipe there would block the read
            raise FileNotFoundError(summary_path)
        with open(summary_path, encoding="utf-8") as fh:
            summary = json.load(fh)
        flat: dict = {}
        _flatten_scalars(summary if isinstance(summary, dict) else {}, "", flat)
        meta["summary"] = {k: as_float(v)[0] for k, v in flat.items() if not k.startswith("_wandb")}
    except (OSError, ValueError, RecursionError):
        pass
    try:
        import yaml
    except ImportError:
        return meta
    try:
        path = os.path.join(files_dir, "config.yaml")
        if not is_regular_file(path):
            raise FileNotFoundError(path)
        with open(path, encoding="utf-8") as fh:
            raw = yaml_load(fh.read(YAML_MAX + 1), path) or {}       # an alias bomb: refused, not expanded
        meta["config"] = {k: (v.get("value") if isinstance(v, dict) and "value" in v else v)
                          for k, v in raw.items() if k not in ("_wandb", "wandb_version")}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, RecursionError, InputError):
        pass
    return meta
