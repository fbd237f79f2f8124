"""How `stabdiag check` grows with the run: CPU time and peak memory of a full check of a Parquet log at
1k to 1M steps x 30 metrics, and the fitted growth exponents (issue 14 target 5: <= 1.1 for both).

Each size is a Parquet file written with pyarrow in the run shape of bench/check_speed.py (the twelve
canonical GRPO signals under TRL names, extra metrics to make 30, two evals every 100 steps, a grad-norm
blow-up that ends in NaN), so that every detector does its full work.  Each check runs in a fresh
process (interpreter start-up included); CPU is its user+sys time, memory its VmHWM, the median of
--repeats runs.  Beside it, a bare `pyarrow.parquet.read_table` of the same file in a fresh process is
the baseline (issue 14 target 2: check <= 2x at 1M steps).

Three exponents are printed, each the least-squares slope of log(cost) on log(steps): over every
size; over the sizes from 100k up; and over the sizes from 100k up of the cost *above the smallest
size's* (the marginal cost).  The target is read on the marginal one: a fixed start-up (interpreter,
imports, rules: about 1 s and 200 MB before issue 14) flattens the other two slopes even at 100k steps
(the code before issue 14 read 0.75 there while its marginal cost grew as n^1.0), which would hide growth
faster than the data.  The smallest size must be small (1k) for the marginal cost to mean anything.

    python bench/scaling.py                       # 1k, 10k, 100k, 300k, 1M steps
    python bench/scaling.py --sizes 1000,10000    # a quick look
    python bench/scaling.py --tree /path/to/other/checkout   # the same bench against another tree
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
METRICS = 30
SIZES = (1_000, 10_000, 100_000, 300_000, 1_000_000)
UPPER_FROM = 100_000
TARGET_EXPONENT = 1.1
TARGET_VS_READ = 2.0

# runs the CLI in the child and writes the child's own VmHWM (the peak of this process only) at exit
_PEAK_WRAPPER = """
import atexit, os, sys
def _peak():
    with open('/proc/self/status') as fh:
        kb = next(int(line.split()[1]) for line in fh if line.startswith('VmHWM:'))
    with open(os.environ['SCALING_PEAK_FILE'], 'w') as out:
        out.write(str(kb))
atexit.register(_peak)
sys.argv = ['stabdiag', 'check', sys.argv[1], '--format', 'json']
from stabdiag.cli import main
main()
"""


def write_parquet(path: Path, steps_count: int) -> int:
    """The check_speed run shape at `steps_count` steps as a wide Parquet table; returns its float64
    bytes (the size of the data the check holds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT / "bench"))
    from check_speed import make_columns

    steps, cols, ev, evals = make_columns(steps_count, METRICS)
    arrays = {"step": pa.array(steps)}
    arrays.update({k: pa.array(v) for k, v in cols.items()})
    logged = np.zeros(steps_count, dtype=bool)
    logged[ev - 1] = True
    for k, v in evals.items():
        full = np.zeros(steps_count)
        full[ev - 1] = v
        arrays[k] = pa.array(full, mask=~logged)
    pq.write_table(pa.table(arrays), path)
    return 8 * (steps_count * (len(cols) + 1) + len(ev) * len(evals))


def _run(argv: list[str], env: dict, peak_file: Path | None = None) -> tuple[float, float]:
    """CPU seconds (user+sys) and peak MB of one fresh process; the peak is read from `peak_file` when
    the child writes one (its own VmHWM), else it is NaN."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 3):
        raise SystemExit(f"{' '.join(argv[:3])} ... exited {code}: {err.decode()[-2000:]}")
    peak = float(peak_file.read_text()) / 1024 if peak_file is not None else math.nan
    return usage.ru_utime + usage.ru_stime, peak


def measure(path: Path, tree: Path, repeats: int) -> dict:
    # a checkout of the src layout holds its package in src/, an older one at its root
    env = {**os.environ, "PYTHONPATH": str(tree / "src" if (tree / "src" / "stabdiag").is_dir() else tree)}
    peak_file = path.with_suffix(".peak")
    env["SCALING_PEAK_FILE"] = str(peak_file)
    check = [_run([sys.executable, "-c", _PEAK_WRAPPER, str(path)], env, peak_file) for _ in range(repeats)]
    read_code = f"import pyarrow.parquet as pq; pq.read_table({str(path)!r})"
    read = [_run([sys.executable, "-c", read_code], env)[0] for _ in range(repeats)]
    return {"cpu": statistics.median(c for c, _ in check), "peak": statistics.median(p for _, p in check),
            "read": statistics.median(read)}


def slope(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) on log(size); NaN with fewer than two sizes or a cost <= 0."""
    if len(sizes) < 2 or min(values) <= 0:
        return math.nan
    return float(np.polyfit(np.log(sizes), np.log(values), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="steps per run, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", default=str(ROOT), help="checkout whose stabdiag is measured (default: this one)")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    tree = Path(args.tree).resolve()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"stabdiag check of a Parquet log, {METRICS} metrics, fresh process each (median of {args.repeats}); "
              f"tree {tree}")
        print(f"{'steps':>9} {'data MB':>8} {'check CPU s':>12} {'read CPU s':>11} {'check/read':>11} "
              f"{'peak MB':>8} {'peak/data':>10}")
        for n in sizes:
            path = Path(tmp) / f"run_{n}.parquet"
            data_mb = write_parquet(path, n) / 2**20
            m = measure(path, tree, args.repeats)
            rows.append((n, m))
            print(f"{n:>9,} {data_mb:>8.1f} {m['cpu']:>12.3f} {m['read']:>11.3f} {m['cpu'] / m['read']:>10.2f}x "
                  f"{m['peak']:>8.0f} {m['peak'] / data_mb:>9.1f}x", flush=True)
    upper = [(n, m) for n, m in rows if n >= UPPER_FROM]
    base = rows[0][1]
    marginal = [(n, {k: m[k] - base[k] for k in ("cpu", "peak")}) for n, m in upper]
    for label, part in (("all sizes", rows), (f"{UPPER_FROM // 1000}k and up", upper),
                        (f"{UPPER_FROM // 1000}k and up, above the {rows[0][0]:,}-step cost (the target)",
                         marginal)):
        ns = [n for n, _ in part]
        print(f"growth exponent, {label}: time {slope(ns, [m['cpu'] for _, m in part]):.2f}, "
              f"peak memory {slope(ns, [m['peak'] for _, m in part]):.2f} (target <= {TARGET_EXPONENT})")
    n, m = rows[-1]
    print(f"at {n:,} steps: check {m['cpu'] / m['read']:.2f}x a bare pyarrow read (target <= {TARGET_VS_READ}x); "
          f"peak {m['peak']:.0f} MB")


if __name__ == "__main__":
    main()
