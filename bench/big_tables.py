"""Time and size stabdiag on big tables: 1M steps x 30 metrics as CSV and Parquet, a JSONL log, and
(with --huge) the 5M x 20 CSV of issue 14, each against the bare read of the same file.

Every figure comes from a fresh process, interpreter start-up included on both sides:

  load      stabdiag.read.assemble.load(FILE): every point as float64 series (the loader alone)
  check     `python -m stabdiag check FILE -f json` (load, detectors, report)
  baseline  Parquet: pyarrow.parquet.read_table(FILE); CSV: pandas.read_csv(FILE);
            JSONL: json.loads of every line (a plain `for line in file` loop)

CPU is the process's user+system time (os.wait4), the median of --repeat tries; peak is the process's
own VmHWM read at exit (not ru_maxrss, which can hold the forking parent's peak).  The targets
(issue 14, target 2): check <= 2x the baseline's CPU; peak <= 3x the float64 data plus start-up (the
check of a 200-row CSV).

    python bench/big_tables.py [--steps 1000000] [--metrics 30] [--jsonl-steps 300000] [--huge]
                               [--repeat 3] [--dir DIR] [--only csv,parquet,jsonl,huge] [--no-check]

DIR keeps the generated files between runs (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

# run in the child: the task's body, then this process's CPU is read by the parent and its peak RSS is
# written to OUT at exit (atexit also runs when the CLI ends with SystemExit)
_CHILD = r"""
import atexit, sys
task, path, out = sys.argv[1:4]
def _report():
    with open("/proc/self/status") as fh:
        peak = next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:"))
    with open(out, "w") as fh:
        fh.write(str(peak / 1024))
atexit.register(_report)
if task == "load":
    from stabdiag.read.assemble import load
    (run,) = load(path)
    print(sum(len(s) for s in run.series.values()))
elif task == "check":
    import os, runpy
    sys.argv = ["stabdiag", "check", path, "-f", "json", "--exit-zero"]
    sys.stdout = open(os.devnull, "w")
    runpy.run_module("stabdiag", run_name="__main__")
elif task == "pyarrow":
    import pyarrow.parquet as pq
    print(pq.read_table(path).num_rows)
elif task == "pandas":
    import pandas as pd
    print(len(pd.read_csv(path)))
elif task == "json":
    import json
    rows = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                json.loads(line)
                rows += 1
    print(rows)
"""
BASELINES = {"csv": "pandas", "huge": "pandas", "parquet": "pyarrow", "jsonl": "json"}
BASELINE_NAMES = {"pandas": "pandas.read_csv", "pyarrow": "pyarrow.parquet.read_table", "json": "json lines loop"}


def columns(steps: int, metrics: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The metrics of a GRPO-like run under TRL names (two evals every 100 steps, NaN at the end of
    grad_norm), rounded to 5 decimals as loggers print them; absent eval cells are NaN here."""
    rng = np.random.default_rng(seed)
    step = np.arange(1, steps + 1)
    x = step / steps
    cols = {
        "train/reward": 0.3 + 0.4 * (1 - np.exp(-x / 0.1)) + rng.normal(0, 0.03, steps),
        "train/kl": 0.01 * x + 0.0005,
        "train/entropy": 1.2 - 0.1 * x + rng.normal(0, 0.02, steps),
        "train/loss": rng.normal(0.01, 0.02, steps),
        "train/grad_norm": 0.8 * np.exp(rng.normal(0, 0.3, steps)),
        "train/learning_rate": 1e-6 * np.minimum(1, x * 20),
        "train/completions/mean_length": 400 * (1 + 0.3 * x) + rng.normal(0, 10, steps),
        "train/reward_std": 0.3 + rng.normal(0, 0.02, steps),
    }
    cols["train/grad_norm"][-10:] = np.nan
    evals = ("eval/math500_accuracy", "eval/aime24_accuracy")
    i = 0
    while len(cols) < metrics - len(evals):
        cols[f"train/extra_metric_{i:02d}"] = rng.normal(0, 1, steps)
        i += 1
    for name in evals:
        col = np.full(steps, np.nan)
        col[99::100] = 0.4 + 0.1 * (1 - np.exp(-x[99::100] / 0.1)) + rng.normal(0, 0.01, len(col[99::100]))
        cols[name] = col
    rounded = {k: np.round(v, 10 if k.endswith("learning_rate") else 5) for k, v in cols.items()}
    return {"step": step, **rounded}


def write_tables(folder: str, steps: int, metrics: int, jsonl_steps: int, huge: bool) -> dict[str, str]:
    """Write the files that are not there yet; returns kind -> path."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    paths = {"csv": f"{folder}/wide_{steps}x{metrics}.csv", "parquet": f"{folder}/wide_{steps}x{metrics}.parquet",
             "jsonl": f"{folder}/log_{jsonl_steps}x{metrics}.jsonl"}
    if huge:
        paths["huge"] = f"{folder}/wide_5000000x20.csv"

    def table(n: int, m: int):
        cols = columns(n, m)
        return pa.table({k: pa.array(v, mask=None if k == "step" else np.isnan(v)) for k, v in cols.items()})

    def write_csv(t, path: str) -> None:
        with open(path, "wb") as fh:                    # a plain header, as loggers write it
            fh.write((",".join(t.column_names) + "\n").encode())
            pacsv.write_csv(t, fh, pacsv.WriteOptions(include_header=False, quoting_style="none"))

    if not (os.path.exists(paths["csv"]) and os.path.exists(paths["parquet"])):
        t = table(steps, metrics)
        write_csv(t, paths["csv"])
        pq.write_table(t, paths["parquet"])
    if not os.path.exists(paths["jsonl"]):
        cols = columns(jsonl_steps, metrics)
        names = list(cols)
        rows = np.column_stack([cols[k] for k in names]).tolist()
        with open(paths["jsonl"], "w") as fh:
            for row in rows:
                record = {k: (int(v) if k == "step" else v) for k, v in zip(names, row) if v == v}
                fh.write(json.dumps(record) + "\n")
    if huge and not os.path.exists(paths["huge"]):
        write_csv(table(5_000_000, 20), paths["huge"])
    return paths


def measure(task: str, path: str, repeat: int) -> tuple[float, float]:
    """Median CPU seconds and median peak RSS (MB) of `task` on `path`, one fresh process per try."""
    cpus, peaks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "peak")
        for _ in range(repeat):
            proc = subprocess.Popen([sys.executable, "-c", _CHILD, task, path, out],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            err = proc.stderr.read().decode(errors="replace")
            proc.stderr.close()
            if proc.returncode not in (0, 1, 3) or not os.path.exists(out):
                raise SystemExit(f"{task} {path} failed ({proc.returncode}):\n{err[-2000:]}")
            cpus.append(usage.ru_utime + usage.ru_stime)
            with open(out) as fh:
                peaks.append(float(fh.read()))
    return statistics.median(cpus), statistics.median(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--jsonl-steps", type=int, default=300_000)
    parser.add_argument("--huge", action="store_true", help="also the 5M x 20 CSV (about 790 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="keep the generated files here between runs")
    parser.add_argument("--only", help="comma-separated kinds: csv, parquet, jsonl, huge")
    parser.add_argument("--no-check", action="store_true", help="time the load and the baseline only")
    args = parser.parse_args()
    folder = args.dir or tempfile.mkdtemp(prefix="stabdiag-big-")
    os.makedirs(folder, exist_ok=True)
    try:
        paths = write_tables(folder, args.steps, args.metrics, args.jsonl_steps, args.huge)
        kinds = [k for k in ("parquet", "csv", "jsonl", "huge") if k in paths]
        if args.only:
            kinds = [k for k in kinds if k in args.only.split(",")]
        report(paths, kinds, args)
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)


def report(paths: dict[str, str], kinds: list[str], args) -> None:
    small = os.path.join(tempfile.mkdtemp(prefix="stabdiag-small-"), "small.csv")
    with open(small, "w") as fh:
        fh.write("step," + ",".join(f"m{i}" for i in range(10)) + "\n")
        fh.writelines(f"{s}," + ",".join(f"{(s * (i + 1)) % 97 / 97:.4f}" for i in range(10)) + "\n"
                      for s in range(1, 201))
    start_cpu, start_peak = measure("check", small, args.repeat)
    print(f"start-up: check of a 200-row CSV  {start_cpu:.2f} s CPU, peak {start_peak:.0f} MB")
    print(f"{'file':34} {'MB':>6} {'points':>9} | {'load s':>7} {'peak':>6} | {'check s':>7} {'peak':>6} | "
          f"{'bare s':>7} {'peak':>6} | {'check/bare':>10} {'peak/data':>9}")
    for kind in kinds:
        path = paths[kind]
        size = os.path.getsize(path) / 2 ** 20
        points_mb = points_data_mb(kind, args)
        load_cpu, load_peak = measure("load", path, args.repeat)
        check_cpu, check_peak = measure("check", path, args.repeat) if not args.no_check else (float("nan"),) * 2
        base = BASELINES[kind]
        base_cpu, base_peak = measure(base, path, args.repeat)
        ratio = (check_cpu if not args.no_check else load_cpu) / base_cpu
        peak = check_peak if not args.no_check else load_peak
        data_ratio = (peak - start_peak) / points_mb
        print(f"{os.path.basename(path):34} {size:6.0f} {points_mb / 8 * 2 ** 20 / 1e6:8.1f}M | "
              f"{load_cpu:7.2f} {load_peak:6.0f} | {check_cpu:7.2f} {check_peak:6.0f} | {base_cpu:7.2f} "
              f"{base_peak:6.0f} | {ratio:9.2f}x {data_ratio:8.2f}x")
    print("check/bare: stabdiag check CPU (load CPU with --no-check) / baseline CPU "
          f"({', '.join(f'{k}: {BASELINE_NAMES[BASELINES[k]]}' for k in kinds)}); target <= 2x")
    print("peak/data: (peak - start-up peak) / float64 bytes of the points; target <= 3x")


def points_data_mb(kind: str, args) -> float:
    """float64 MB of the points in the file of `kind` (the evals hold one point in 100)."""
    steps, metrics = {"huge": (5_000_000, 20), "jsonl": (args.jsonl_steps, args.metrics)}.get(
        kind, (args.steps, args.metrics))
    dense = metrics - 2
    return steps * (dense + 2 / 100) * 8 / 2 ** 20


if __name__ == "__main__":
    main()
