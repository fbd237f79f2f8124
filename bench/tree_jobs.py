"""Check a tree of 500 small runs with one job and with every usable core (issue 14, target 3).

Baseline: `stabdiag check TREE --jobs 1` in the same run.  Prints, per setting, the median wall and CPU
seconds of 3 runs, CPU/wall (how many cores were busy), the speed-up over one job, and whether the
output (stdout, stderr, exit code) is byte-identical, in the terminal and the JSON format.

The tree mixes CSV and JSONL runs of 200 steps and 10 metrics; one run in ten has a reward that runs away
from a flat eval, one in ten a grad-norm blow-up ending in NaN, so that the detectors do their full work.

    python bench/tree_jobs.py [--runs 500] [--repeats 3] [--jobs N]

CPU is the user+sys time of the command and every process under it.  The pool's workers are forked by
multiprocessing's fork server, which outlives the command unless reaped, so each command runs under a
wrapper that stops the fork server at exit; its time, and so its workers', then counts as the command's.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stabdiag.judge.config import usable_cores  # noqa: E402

STEPS = 200
METRICS = ("reward", "kl", "entropy", "grad_norm", "loss", "response_length", "lr", "eval/acc", "clip_frac")
# run the CLI, then stop the fork server so that its CPU (and its workers') is counted as the command's
RUNNER = ("import atexit, os, sys\n"
          "from stabdiag.cli import main\n"
          "def reap():\n"
          "    from multiprocessing import forkserver\n"
          "    server = forkserver._forkserver\n"
          "    if server._forkserver_pid is not None:\n"
          "        os.close(server._forkserver_alive_fd)   # the server exits when this closes\n"
          "        os.waitpid(server._forkserver_pid, 0)\n"
          "atexit.register(reap)\n"
          "sys.argv[0] = 'stabdiag'\n"
          "main()\n")


def run_columns(index: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(index)
    x = np.arange(1, STEPS + 1) / STEPS
    cols = {
        "reward": 0.3 + 0.2 * x + rng.normal(0, 0.03, STEPS),
        "kl": 0.01 * x + 0.001 + np.abs(rng.normal(0, 0.0005, STEPS)),
        "entropy": 1.0 - 0.2 * x + rng.normal(0, 0.02, STEPS),
        "grad_norm": 0.8 * np.exp(rng.normal(0, 0.2, STEPS)),
        "loss": rng.normal(0.01, 0.02, STEPS),
        "response_length": 400 + 50 * x + rng.normal(0, 10, STEPS),
        "lr": np.full(STEPS, 1e-6),
        "eval/acc": 0.40 + 0.1 * x + rng.normal(0, 0.01, STEPS),
        "clip_frac": np.abs(rng.normal(0.002, 0.001, STEPS)),
    }
    if index % 10 == 3:       # reward runs away while the eval stays flat
        cols["reward"] = 0.3 + 0.6 * x ** 2 + rng.normal(0, 0.03, STEPS)
        cols["eval/acc"] = 0.40 + rng.normal(0, 0.01, STEPS)
    if index % 10 == 7:       # grad-norm blow-up ending in NaN
        cols["grad_norm"][-40:] *= np.exp(np.arange(40) / 6)
        cols["grad_norm"][-5:] = math.nan
        cols["loss"][-5:] = math.nan
    return cols


def write_tree(root: Path, runs: int) -> None:
    for i in range(runs):
        folder = root / f"run_{i:03d}"
        folder.mkdir(parents=True)
        cols = run_columns(i)
        if i % 2 == 0:
            lines = ["step," + ",".join(METRICS)]
            lines += [f"{s + 1}," + ",".join(f"{cols[m][s]:.6g}" for m in METRICS) for s in range(STEPS)]
            (folder / "metrics.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            lines = [json.dumps({"step": s + 1, **{m: float(cols[m][s]) if math.isfinite(cols[m][s]) else "NaN"
                                                   for m in METRICS}}) for s in range(STEPS)]
            (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(args: list[str]) -> tuple[float, float, tuple[bytes, bytes, int]]:
    """(wall s, CPU s of the command and all under it, (stdout, stderr, exit code))."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (done.stdout, done.stderr, done.returncode)


def median_of(args: list[str], repeats: int) -> tuple[float, float, tuple[bytes, bytes, int]]:
    results = [timed(args) for _ in range(repeats)]
    return (statistics.median(r[0] for r in results), statistics.median(r[1] for r in results), results[0][2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="jobs of the parallel setting (default: cores)")
    opts = parser.parse_args()
    cores = usable_cores()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        write_tree(tree, opts.runs)
        print(f"{opts.runs} runs ({STEPS} steps x {len(METRICS)} metrics, CSV and JSONL); {cores} usable cores; "
              f"median of {opts.repeats}")
        parallel = [] if opts.jobs is None else ["--jobs", str(opts.jobs)]
        label = f"--jobs {opts.jobs}" if opts.jobs else f"default ({cores})"
        rows, identical = [], True
        for fmt in ("json", "terminal"):
            serial = median_of(["check", str(tree), "-f", fmt, "--jobs", "1"], opts.repeats)
            pooled = median_of(["check", str(tree), "-f", fmt, *parallel], opts.repeats)
            same = serial[2] == pooled[2]
            identical &= same
            rows.append((fmt, serial, pooled, same))
        print(f"{'format':<9} {'setting':<12} {'wall s':>7} {'CPU s':>7} {'CPU/wall':>9} {'speed-up':>9}  output")
        for fmt, serial, pooled, same in rows:
            for name, (wall, cpu, _) in (("--jobs 1", serial), (label, pooled)):
                speed = serial[0] / wall
                print(f"{fmt:<9} {name:<12} {wall:7.2f} {cpu:7.2f} {cpu / wall:9.2f} {speed:8.2f}x  "
                      f"{'identical' if same else 'DIFFERENT'}")
        exit_code = rows[0][1][2][2]
        print(f"exit code {exit_code}; output identical for --jobs 1 and {label}: {'yes' if identical else 'NO'}")
        if not identical:
            sys.exit(1)


if __name__ == "__main__":
    main()
