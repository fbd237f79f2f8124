"""How often the onset interval of a change holds the step where the change truly began (issue 43 item 4:
an onset interval with measured coverage), for a bend (a flat curve that starts to climb) and a jump (a
level shift between two logged points), under white and autocorrelated noise, at several lengths and sizes.

    python bench/onset_coverage.py                 # 200 curves a cell
    python bench/onset_coverage.py --runs 50

Each curve: n points, the change at a uniform place in 30-70% of the run, its size D in noise sds (the rise
over the rest of the run for a bend, the step for a jump), noise N(0, 1) or AR(1).  The interval is
stats.evidence.hinge_onset's (the engine dates every trend finding with it).  Printed per cell: coverage
with its Wilson 95% interval (nominal 95%) and the median width of the interval as a share of the run.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate import wilson  # noqa: E402

from stabdiag.judge.stats.evidence import hinge_onset  # noqa: E402


def noise(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e = rng.normal(0, 1, n)
    if phi == 0:
        return e
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + math.sqrt(1 - phi * phi) * e[i]
    return x


def curve(rng: np.random.Generator, kind: str, n: int, size: float, phi: float) -> tuple[np.ndarray, int]:
    at = int(rng.uniform(0.3, 0.7) * n)
    t = np.arange(n, dtype=float)
    mean = size * np.clip((t - at) / (n - at), 0, 1) if kind == "bend" else size * (t > at)
    return mean + noise(rng, n, phi), at


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{'kind':5} {'noise':6} {'n':>5} {'D':>4}  coverage [95% interval]   median width")
    for kind in ("bend", "jump"):
        for phi in (0.0, 0.5, 0.9):
            for n in (50, 200, 1000):
                for size in (3.0, 10.0):
                    hit, widths, judged = 0, [], 0
                    for _ in range(args.runs):
                        y, at = curve(rng, kind, n, size, phi)
                        onset = hinge_onset(np.arange(n), y)
                        if onset is None:
                            continue
                        judged += 1
                        # a jump happened between point `at` and the next: an interval touching either holds it
                        hit += onset.low <= at + (kind == "jump") and at <= onset.high
                        widths.append((onset.high - onset.low) / n)
                    low, high = wilson(hit, judged)
                    print(f"{kind:5} {'ar' + str(phi) if phi else 'white':6} {n:5} {size:4.0f}  "
                          f"{hit / max(judged, 1):6.1%} [{low:5.1%}-{high:5.1%}]   {np.median(widths):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
