"""MLflow's SQL backend as SQLite (`mlflow.db`, MLflow 3's default store), read with the standard
library: no mlflow import.  Each run's metrics come with one query (every key at once, in write order).

Tables read (MLflow's schema since 1.x): experiments(experiment_id, name, lifecycle_stage),
runs(run_uuid, name, status, experiment_id, lifecycle_stage), metrics(key, value, timestamp, run_uuid,
step, is_nan), params(key, value, run_uuid), tags(key, value, run_uuid).  The file is opened read-only.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from operator import itemgetter

import numpy as np

from ....errors import InputError
from ...run import Run
from ._common import Selector, build_run, unpacked

_HEADER = b"SQLite format 3\x00"
_TABLES = {"experiments", "runs", "metrics", "params", "tags"}


def _connect(path: str) -> sqlite3.Connection:
    uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    return sqlite3.connect(uri, uri=True)


def is_store(path: str) -> bool:
    """An SQLite file with MLflow's tracking tables."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != _HEADER:
                return False
        with closing(_connect(path)) as db:
            names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except (OSError, sqlite3.Error):
        return False
    return _TABLES <= names


def members(path: str, selector: Selector) -> list[tuple[str, str, str]]:
    """(run id, run name, experiment name) of every live run the selector wants, in start order."""
    try:
        with closing(_connect(path)) as db:
            rows = db.execute(
                "SELECT r.run_uuid, COALESCE(r.name, ''), r.experiment_id, COALESCE(e.name, '') FROM runs r "
                "LEFT JOIN experiments e ON e.experiment_id = r.experiment_id "
                "WHERE COALESCE(r.lifecycle_stage, 'active') != 'deleted' "
                "AND COALESCE(e.lifecycle_stage, 'active') != 'deleted' "
                "ORDER BY r.start_time, r.name, r.run_uuid").fetchall()
    except sqlite3.Error as exc:
        raise InputError(path, f"not readable as an MLflow SQLite store ({exc})") from None
    return [(run_id, name or run_id, exp_name or str(exp_id)) for run_id, name, exp_id, exp_name in rows
            if selector.wants(str(exp_id), exp_name, run_id, name)]


def load_member(path: str, run_id: str) -> Run:
    try:
        with closing(_connect(path)) as db:
            head = db.execute(
                "SELECT COALESCE(r.name, ''), r.status, COALESCE(e.name, r.experiment_id) FROM runs r "
                "LEFT JOIN experiments e ON e.experiment_id = r.experiment_id WHERE r.run_uuid = ?",
                (run_id,)).fetchone()
            if head is None:
                raise InputError(path, f"no MLflow run {run_id} in this store")
            # every key at once, in the table's order (no sort in SQLite: see _in_key_order)
            rows = db.execute("SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ? "
                              "ORDER BY rowid", (run_id,)).fetchall()
            points = _in_key_order(rows)
            if points is None:
                rows = db.execute("SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ? "
                                  "ORDER BY key, timestamp, rowid", (run_id,)).fetchall()
                points = _sorted_in_sql(rows)
            params = dict(db.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())
            tags = dict(db.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (run_id,)).fetchall())
    except sqlite3.Error as exc:
        raise InputError(path, f"not readable as an MLflow SQLite store ({exc})") from None
    name, status, experiment = head
    names, codes, values, is_nan, stamps, steps = points
    values = unpacked(values, is_nan)
    return build_run(path, name=name or tags.get("mlflow.runName") or run_id, run_id=run_id,
                     experiment=str(experiment), status=status, keys=codes, names=names,
                     steps=steps, values=values, timestamps=stamps,
                     params={k: v or "" for k, v in params.items()}, tags={k: v or "" for k, v in tags.items()},
                     store="SQLite store")



def _in_key_order(rows: list[tuple]) -> tuple | None:
    """(names, codes, values, is_nan, timestamps, steps) of rows read in rowid order, put in the order
    `ORDER BY key, timestamp, rowid` gives (each key's points in write order) by a stable numpy sort:
    SQLite sorts a million rows in a temporary B-tree slower than the whole rest of the read.  None when
    a key is no text or a timestamp or step no integer (a store written by other means), whose SQL
    order (by storage class first) the sort below would not reproduce: SQLite sorts those."""
    if not rows:
        return _sorted_in_sql(rows)
    # column by column (zip(*rows) over a million rows costs more than the query)
    keys, values, stamps, steps, is_nan = (list(map(itemgetter(i), rows)) for i in range(5))
    first_row: dict = {}                  # key -> the index of its first row, in first-seen order
    firsts = np.fromiter(map(first_row.setdefault, keys, range(len(keys))), np.int64, len(keys))
    stamps, steps = np.asarray(stamps), np.asarray(steps)
    if not all(type(k) is str for k in first_row) or stamps.dtype.kind != "i" or steps.dtype.kind != "i":
        return None
    seen = list(first_row)
    # each key's place among the sorted names (SQLite's BINARY collation compares UTF-8 bytes, which
    # orders text as str compares code points)
    place = np.empty(len(seen), np.int64)
    place[sorted(range(len(seen)), key=seen.__getitem__)] = np.arange(len(seen))
    codes = place[np.searchsorted(np.fromiter(first_row.values(), np.int64, len(seen)), firsts)]
    order = np.lexsort((stamps, codes))  # stable: rows of one key and timestamp stay in rowid order
    return (sorted(seen), codes[order], np.array(values, dtype=np.float64)[order],
            np.array(is_nan, dtype=bool)[order], stamps[order], steps[order])


def _sorted_in_sql(rows: list[tuple]) -> tuple:
    """(names, codes, values, is_nan, timestamps, steps) of rows SQLite sorted by key, timestamp, rowid."""
    keys, values, stamps, steps, is_nan = (list(col) for col in zip(*rows)) if rows else ([], [], [], [], [])
    keys = np.array(keys, dtype=object)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.empty(0, np.int64)
    codes = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(keys)]))
    return ([str(k) for k in keys[starts]], codes, np.array(values, dtype=np.float64),
            np.array(is_nan, dtype=bool), stamps, steps)
