"""The Parquet cache of online W&B runs: one file per run and last step, metadata inside.

A fetched history is stored long (key, step, value, wall_time) with the key dictionary-encoded, and
the run's metadata (state, config, summary, last step, notes) as JSON in the file's schema metadata,
so that one file is the whole answer.  A file is written under a temporary name and renamed, so an
interrupted fetch never leaves a half file behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from ....errors import InputError
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


def _folder_name(part: str) -> str:
    """One URI part as a folder name no other part can have: its characters outside [A-Za-z0-9._-]
    %-escaped (so `a b` and `a_b` stay apart), then a hash of the exact part (so `Run` and `run` stay
    apart on a case-insensitive disk, and a long part stays short)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), part)
    return f"{readable[:64]}-{hashlib.sha256(part.encode()).hexdigest()[:16]}"


def run_cache_dir(entity: str, project: str, run_id: str) -> Path:
    """The folder that holds one run's cached histories; every part is one folder name below the
    cache, never `.` or `..` (parse_uri refuses those first, with the URI in the message), and no two
    runs share one (`_folder_name`); each file also holds its run's parts, checked when it is read."""
    if any(part in ("", ".", "..") for part in (entity, project, run_id)):
        raise ValueError(f"not a folder name for the cache: {entity}/{project}/{run_id}")
    return cache_root() / "wandb" / _folder_name(entity) / _folder_name(project) / _folder_name(run_id)


def is_for(meta: dict | None, entity: str, project: str, run_id: str) -> bool:
    """A cached file's metadata names exactly this run (a file of another run is never served)."""
    named = None if meta is None else (meta.get("entity"), meta.get("project"), meta.get("run_id"))
    return named == (entity, project, run_id)


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


def finished_cache(folder: Path, run: tuple[str, str, str]) -> Path | None:
    """The newest cached history of this run (entity, project, run id), if the run had ended when it
    was fetched and the file says it is this run's."""
    if not folder.is_dir():
        return None
    files = sorted(folder.glob("history-step*.parquet"), key=lambda p: _cached_step(p), reverse=True)
    for path in files[:1]:
        meta = _cache_meta(path)
        if is_for(meta, *run) and meta.get("state") in _TERMINAL:
            return path
    return None


def cached_for(path: Path, run: tuple[str, str, str]) -> bool:
    """`path` exists and holds this run's history."""
    return path.is_file() and is_for(_cache_meta(path), *run)


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
