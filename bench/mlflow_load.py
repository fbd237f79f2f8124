"""Time the MLflow SQLite reader against a bare Python loop over the same points as text lines.

Builds an SQLite store with MLflow's own schema (copied from the committed store
tests/fixtures/mlflow/mlflow.db, which the real MLflow client wrote: same tables, keys and indexes),
holding one run of --keys metrics x --steps steps (1M points by default), written step by step as
mlflow.log_metrics writes them (every key of a step, then the next step; one timestamp per step).
The same points are written as a text file of `key value timestamp step` lines.  Then, in one process,
after one warm-up read (imports and the OS page cache warm on both sides):

  stabdiag    stabdiag.read.formats.mlflow load_member: the run's head, every metric point (one query),
              params and tags, as float64 series with wall times
  loop+split  with open(text) as f: for line in f: line.split()     (the floor of a text reader)
  fetchall    the reader's own query (the run's points in table order), fetched with the standard
              library's sqlite3: the floor of any reader of this store that needs no other package

The ratios stabdiag / loop+split (the issue's target: at most about 1.0) and stabdiag / fetchall are
printed; times are CPU seconds (time.process_time), the best of --repeat, the three taking turns. sqlite3
builds a tuple and five Python objects per row, which costs more than splitting a text line: the fetch alone
is several times loop+split.

    python bench/mlflow_load.py [--keys 20] [--steps 50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from contextlib import closing

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "tests", "fixtures", "mlflow", "mlflow.db")
RUN_ID = "0123456789abcdef0123456789abcdef"


def _store(path: str, text_path: str, keys: int, steps: int) -> None:
    """The store at `path` (MLflow's schema, one experiment, one FINISHED run) and its text twin."""
    with closing(sqlite3.connect(TEMPLATE)) as template:
        schema = [sql for (sql,) in template.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY type = 'index'")]   # tables first
    names = [f"group_{k // 10}/metric_{k:03d}" for k in range(keys)]
    start = 1764547200000
    with closing(sqlite3.connect(path)) as db, open(text_path, "w", encoding="utf-8") as text:
        for sql in schema:
            db.execute(sql)
        db.execute("INSERT INTO experiments (experiment_id, name, lifecycle_stage) VALUES (1, 'bench', 'active')")
        db.execute("INSERT INTO runs (run_uuid, name, status, start_time, lifecycle_stage, experiment_id) "
                   "VALUES (?, 'bench-run', 'FINISHED', ?, 'active', 1)", (RUN_ID, start))
        db.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                       [("learning_rate", "0.0003", RUN_ID), ("max_steps", str(steps), RUN_ID)])
        db.execute("INSERT INTO tags (key, value, run_uuid) VALUES ('mlflow.runName', 'bench-run', ?)", (RUN_ID,))
        for chunk in range(0, steps, 5000):
            rows = [(name, 1.0 / (1 + step + k), start + 50 * step, RUN_ID, step, 0)
                    for step in range(chunk, min(steps, chunk + 5000)) for k, name in enumerate(names)]
            db.executemany("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                           "VALUES (?, ?, ?, ?, ?, ?)", rows)
            text.writelines(f"{key} {value!r} {stamp} {step}\n" for key, value, stamp, _, step, _ in rows)
        db.commit()


def _best(fns, repeat: int) -> tuple[list[float], list[object]]:
    """The best CPU time (time.process_time: the machine is shared, and every side here computes in this
    process) of each function over `repeat` tries, the functions taking turns so that all see the same
    load, after one warm-up call each; and each one's last result."""
    results = [fn() for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            started = time.process_time()
            results[i] = fn()
            best[i] = min(best[i], time.process_time() - started)
    return best, results


def _loop_split(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line.split()


def _fetchall(store: str) -> None:
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        db.execute("SELECT key, value, timestamp, step, is_nan FROM metrics WHERE run_uuid = ? ORDER BY rowid",
                   (RUN_ID,)).fetchall()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    from stabdiag.read.formats import mlflow

    with tempfile.TemporaryDirectory() as tmp:
        store, text = os.path.join(tmp, "mlflow.db"), os.path.join(tmp, "points.txt")
        _store(store, text, args.keys, args.steps)
        points = args.keys * args.steps
        (ours, floor, fetch), (run, _, _) = _best([lambda: mlflow.load_member(store, RUN_ID),
                                                   lambda: _loop_split(text), lambda: _fetchall(store)], args.repeat)
        read = sum(len(s.steps) for s in run.series.values())
        if read != points:
            print(f"error: {store}: read {read} points of {points}", file=sys.stderr)
            return 1
        print(f"{points:,} points ({args.keys} keys x {args.steps} steps), SQLite "
              f"{os.path.getsize(store) / 1e6:.0f} MB, text {os.path.getsize(text) / 1e6:.0f} MB")
        print(f"stabdiag load_member  {ours:7.3f} s")
        print(f"loop+split (text)     {floor:7.3f} s")
        print(f"fetchall (sqlite3)    {fetch:7.3f} s")
        print(f"stabdiag / loop+split {ours / floor:7.2f}")
        print(f"stabdiag / fetchall   {ours / fetch:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
