"""The Parquet cache of online W&B runs: one file per run and last step, metadata inside.

A fetched history is stored long (key, step, value, wall_time) with the key dictionary-encoded, and
the run's metadata (state, config, summary, last step, notes) as JSON in the file's schema metadata,
so that one file is the whole answer.  A file is written under a temporary name and renamed, so an
interrupted fetch never leaves a half file behind.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...run import Run
from ._axes import axis_chooser, build_series

_TERMINAL = frozenset(("finished", "crashed", "failed", "killed"))


def cache_root() -> Path:
    """Where fetched runs are kept: $STABDIAG_CACHE_DIR, else the user cache dir for stabdiag."""
    if os.environ.get("STABDIAG_CACHE_DIR"):
        return Path(os.environ["STABDIAG_CACHE_DIR"])
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return Path.home() / ".cache" / "stabdiag"
    return Path(user_cache_dir("stabdiag"))


def run_cache_dir(entity: str, project: str, run_id: str) -> Path:
    """The folder that holds one run's cached histories; every part is one folder name below the
    cache, never `.` or `..` (parse_uri refuses those first, with the URI in the message)."""
    safe = [re.sub(r"[^A-Za-z0-9._-]", "_", part) for part in (entity, project, run_id)]
    if any(part in ("", ".", "..") for part in safe):
        raise ValueError(f"not a folder name for the cache: {'/'.join(safe)!r}")
    return cache_root() / "wandb" / safe[0] / safe[1] / safe[2]


def _private_dirs(folder: Path) -> None:
    """Create `folder` and the folders above it that are missing, each readable by the user only
    (0700): the cache holds runs' configs and summaries."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
        except FileExistsError:
            pass


def to_table(points: dict, meta: dict):
    """A fetched history, (step, value, wall time) lists per key, as the cache's Arrow table."""
    import pyarrow as pa

    keys, steps, values, walls = [], [], [], []
    for key, (s, v, w) in points.items():
        keys.extend([key] * len(s))
        steps.extend(s)
        values.extend(v)
        walls.extend(w)
    table = pa.table({"key": pa.array(keys, pa.string()).dictionary_encode(),
                      "step": pa.array(steps, pa.int64()), "value": pa.array(values, pa.float64()),
                      "wall_time": pa.array(walls, pa.float64())})
    return table.replace_schema_metadata({"stabdiag.meta": json.dumps(meta, default=str)})


def write_cache(path: Path, table) -> bool:
    """Store a table under `path` (whole or not at all); False when the cache is not writable."""
    import pyarrow.parquet as pq

    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _private_dirs(path.parent)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)     # the user's only
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle)
        os.replace(partial, path)
    except OSError:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass
        return False
    return True


def finished_cache(folder: Path) -> Path | None:
    """The newest cached history of this run, if the run had ended when it was fetched."""
    if not folder.is_dir():
        return None
    files = sorted(folder.glob("history-step*.parquet"), key=lambda p: _cached_step(p), reverse=True)
    for path in files[:1]:
        meta = _cache_meta(path)
        if meta is not None and meta.get("state") in _TERMINAL:
            return path
    return None


def _cached_step(path: Path) -> int:
    match = re.search(r"history-step(-?\d+)\.parquet$", path.name)
    return int(match.group(1)) if match else -1


def _cache_meta(path: Path) -> dict | None:
    try:
        import pyarrow.parquet as pq

        raw = pq.read_schema(path).metadata or {}
        return json.loads(raw[b"stabdiag.meta"])
    except (OSError, KeyError, ValueError):
        return None


def read_cache(path: Path, uri: str, step_col: str | None) -> Run:
    """The run stored in a cache file."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except OSError as exc:
        raise InputError(str(path), f"unreadable cache file ({exc}); rerun with --refresh") from None
    return run_from_table(table, uri, step_col, path)


def run_from_table(table, uri: str, step_col: str | None, path: Path | None) -> Run:
    """A Run from a cache table: series per key, metadata from the schema."""
    try:
        meta = json.loads((table.schema.metadata or {})[b"stabdiag.meta"])
    except (KeyError, ValueError) as exc:
        raise InputError(str(path or uri), f"unreadable cache file ({exc}); rerun with --refresh") from None
    keys = table.column("key").combine_chunks()
    if not hasattr(keys, "indices"):
        keys = keys.dictionary_encode()
    names = keys.dictionary.to_pylist()
    codes = keys.indices.to_numpy(zero_copy_only=False)
    steps = table.column("step").to_numpy()
    values = table.column("value").to_numpy(zero_copy_only=False)
    walls = table.column("wall_time").to_numpy(zero_copy_only=False)
    uniq, rows = np.unique(steps, return_inverse=True)      # rows: positions on the step axis
    row_walls = np.full(len(uniq), np.nan)
    np.fmax.at(row_walls, rows, walls)                       # any scan that had the row's time
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    columns = {name: (rows[order[bounds[i]:bounds[i + 1]]], values[order[bounds[i]:bounds[i + 1]]])
               for i, name in enumerate(names) if bounds[i + 1] > bounds[i]}
    notes = list(meta.pop("notes", []))
    series = build_series(columns, uniq, row_walls, axis_chooser(step_col, columns, [], uri), notes)
    if path is not None:
        meta["cache"] = str(path)
    name = meta.get("display_name") or meta.get("run_id") or uri
    return Run(str(name), series, (uri,), meta, tuple(f"{uri}: {n}" for n in notes))
