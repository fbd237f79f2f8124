"""Cold start (issues 14 and 42): CPU seconds of a fresh process for the commands a person or a CI job
runs most, against `python -c pass` and the dependency floor measured in the same run.

    python -c pass                           the interpreter alone: the baseline
    import numpy, typer, rich                the dependencies every check needs (arrays, the CLI, the
                                             terminal report), with one BLAS thread as `stabdiag` sets
                                             it: the floor no stabdiag change can lower
    stabdiag --version                       target <= 3x `python -c pass` (issue 42)
    stabdiag check small.csv                 a 200-step x 10-column CSV; target: stabdiag's own share
                                             (its CPU minus the floor's) <= 0.8x the floor (issue 42)

The targets are ratios to what is measured in the same run, so that they hold on a slow machine and a
fast one alike; issue 14's absolute ones (0.15 s and 0.35 s CPU) are shown beside them.

CPU is user+sys of the child (getrusage of waited-for children), the median of --repeats fresh processes,
run in turn so that a busy machine slows each alike.  The commands run as `python -m stabdiag` with the
interpreter running this script, from bytecode as an installed package does (pip compiles it): an untimed
first round writes any missing __pycache__ file, with PYTHONDONTWRITEBYTECODE lifted for it, since
compiling a changed module from source on every start would be counted otherwise.  Exit status 1 when a
target is missed.

    python bench/startup.py [--repeats 9] [--rev REV]

With --rev, --version and the check of REV's stabdiag (its package on PYTHONPATH, this interpreter and dependencies)
is timed in the same rounds, and the ratio printed: the machine's drift between runs (tens of percent
on a shared VM) does not enter it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _stabdiag_cli import extract_rev  # this folder's helper (the script's own folder is on sys.path)

SECONDS = {"stabdiag --version": 0.15, "stabdiag check small.csv": 0.35}     # issue 14, on its machine
VERSION_OVER_PASS = 3.0          # issue 42: `stabdiag --version` at most 3x the interpreter's own start
OWN_OVER_FLOOR = 0.8             # issue 42: the check's own share at most 0.8x the dependency floor
FLOOR = "import numpy, typer, rich"


def write_small_csv(path: Path) -> None:
    """200 steps x 10 columns of plausible GRPO metrics (step + 9)."""
    rng = np.random.default_rng(0)
    names = ["reward", "kl", "entropy", "grad_norm", "loss", "response_length", "lr", "eval_acc", "clip_frac"]
    rows = [["step", *names]]
    for step in range(200):
        rows.append([str(step), *(f"{v:.4g}" for v in rng.random(len(names)))])
    path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rev", help="also time the check of a git revision's stabdiag (git archive REV "
                                      "stabdiag, first on PYTHONPATH), taking turns with this checkout's")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.csv"
        write_small_csv(small)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            FLOOR: [sys.executable, "-c", "import os; os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'); "
                                          "import numpy, typer, rich.console, rich.table"],
            "stabdiag --version": [sys.executable, "-m", "stabdiag", "--version"],
            "stabdiag check small.csv": [sys.executable, "-m", "stabdiag", "check", str(small)],
        }
        envs = {name: None for name in commands}
        if opts.rev:
            old = extract_rev(opts.rev, str(Path(tmp) / "rev"))
            for name, same in ((f"--version @ {opts.rev}", "stabdiag --version"),
                               (f"check small.csv @ {opts.rev}", "stabdiag check small.csv")):
                commands[name] = commands[same]
                envs[name] = dict(os.environ, PYTHONPATH=str(old))
        for name, argv in commands.items():       # bytecode written with PYTHONDONTWRITEBYTECODE lifted
            compiling = {k: v for k, v in (envs[name] or os.environ).items() if k != "PYTHONDONTWRITEBYTECODE"}
            subprocess.run(argv, capture_output=True, cwd=tmp, env=compiling)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(opts.repeats):
            for name, argv in commands.items():
                before = child_cpu()
                done = subprocess.run(argv, capture_output=True, cwd=tmp, env=envs[name])
                times[name].append(child_cpu() - before)
                if done.returncode not in (0, 1, 3):
                    sys.exit(f"{name} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
    base = statistics.median(times["python -c pass"])
    floor = statistics.median(times[FLOOR])
    print(f"CPU seconds, median of {opts.repeats} fresh processes (user+sys)")
    print(f"{'command':<26} {'CPU s':>7} {'x pass':>8} {'x floor':>8} {'issue 14':>9}")
    for name, samples in times.items():
        cpu = statistics.median(samples)
        seconds = SECONDS.get(name)
        shown = "-" if seconds is None else f"{'ok' if cpu <= seconds else 'over'} {seconds:.2f}"
        print(f"{name:<26} {cpu:7.3f} {cpu / base:7.1f}x {cpu / floor:7.2f}x {shown:>9}")
    check = statistics.median(times["stabdiag check small.csv"])
    version = statistics.median(times["stabdiag --version"])
    own = check - floor
    results = [(f"stabdiag --version / python -c pass = {version / base:.2f}x", version / base, VERSION_OVER_PASS),
               (f"the check's own share / floor = {own:.3f} / {floor:.3f} s = {own / floor:.2f}x", own / floor,
                OWN_OVER_FLOOR)]
    print("issue 42 targets (ratios measured in this run):")
    missed = False
    for text, ratio, target in results:
        missed |= ratio > target
        print(f"  {text}  (target <= {target:g}x: {'ok' if ratio <= target else 'MISSED'})")
    if opts.rev:
        then = statistics.median(times[f"check small.csv @ {opts.rev}"])
        then_version = statistics.median(times[f"--version @ {opts.rev}"])
        print(f"against {opts.rev} in the same run: check {then:.3f} -> {check:.3f} s ({check / then:.2f}x), "
              f"own share {then - floor:.3f} -> {own:.3f} s ({(then - floor) / floor:.2f}x -> {own / floor:.2f}x "
              f"the floor); --version {then_version / base:.2f}x -> {version / base:.2f}x python -c pass")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
