"""Cadence stress on runs of neither corpus: how often thinning the log changes a verdict, by noise model.

Each run is a healthy run of bench/scenarios.py whose reward, KL and entropy are redrawn on a random
piecewise-linear path (2-5 knots), so that many runs sit near some rule's threshold; on even runs the
evals follow the reward, on odd runs they stay flat (a hack).  The noise on reward, KL, entropy and grad
norm is independent ("gauss") or AR(1) with phi 0.5-0.95 ("ar": a batch's value leans on the last).
Every run is written as TRL or verl would write it, diagnosed with the shipped rules, then thinned to
every 5th and every 10th logged step (bench/metamorphic.py's "log every k") and diagnosed again.  Runs
near a threshold flip under any resampling, so the figure to compare is the flip rate between noise
models and between code versions, not its size.

    python bench/cadence_stress.py                    # 200 runs per noise model, 2 worker processes
    python bench/cadence_stress.py --runs 400 -j 1 -v # list each changed run and the rules that changed

Prints per noise model: base verdicts (even = evals track, odd = evals flat), the runs whose verdict or
root layer changed under each k, and how often each rule appeared or disappeared in those changes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import metamorphic  # noqa: E402
import scenarios  # noqa: E402

SEED = 913
THIN = (5, 10)
LENGTHS = (300, 500, 800, 1200, 2000)


def _noise(rng, n: int, sd: float, kind: str) -> np.ndarray:
    if kind == "ar":
        return scenarios.wandering_noise(rng, n, sd, float(rng.uniform(0.5, 0.95)))
    return rng.normal(0, sd, n)


def make_run(i: int, kind: str) -> tuple[scenarios.Curves, str, str]:
    """Run i of a noise model: (curves, framework, format)."""
    rng = np.random.default_rng([SEED, i])
    n = int(rng.choice(LENGTHS))
    c = scenarios.healthy(rng, n)
    x = np.linspace(0, 1, n)
    knots = np.concatenate([[0], np.sort(rng.uniform(0, 1, int(rng.integers(2, 6)))), [1]])
    heights = np.concatenate([[0], np.cumsum(rng.normal(0.03, 0.06, len(knots) - 1))])
    clean = 0.3 + np.interp(x, knots, heights)
    c.sig["reward"] = clean + _noise(rng, n, rng.uniform(0.01, 0.04), kind)
    gain = rng.uniform(0.4, 1.0) if i % 2 == 0 else rng.uniform(-0.1, 0.05)
    moved = np.interp(x, knots, np.abs(heights))
    moved = moved / max(float(moved.max()), 1e-9)
    c.sig["kl"] = (0.001 + 0.02 * moved * rng.uniform(0.2, 1.5)) * np.exp(_noise(rng, n, rng.uniform(0.05, 0.3), kind))
    e0 = float(np.median(c.sig["entropy"][:20]))
    c.sig["entropy"] = e0 * (1 - rng.uniform(0, 0.5) * moved) * (1 + _noise(rng, n, rng.uniform(0.005, 0.03), kind))
    c.sig["grad_norm"] = c.sig["grad_norm"] * np.exp(_noise(rng, n, 0.1, kind))
    for name, (s, _) in list(c.evals.items()):
        c.evals[name] = (s, rng.uniform(0.2, 0.5) + gain * (np.interp(s, c.steps, clean) - 0.3)
                         + rng.normal(0, rng.uniform(0.005, 0.02), len(s)))
    return c, str(rng.choice(["trl", "verl"])), str(rng.choice(["csv", "jsonl"]))


def check(i: int, kind: str) -> tuple[int, tuple, list[tuple[int, tuple, tuple[str, ...]]]]:
    """(run, base (verdict, root), [(k, thinned (verdict, root), rules that appeared or went)])."""
    c, framework, fmt = make_run(i, kind)
    with tempfile.TemporaryDirectory(prefix="stabdiag-stress-") as tmp:
        def diagnose_as(tag: str, curves) -> tuple[tuple, set[str]]:
            folder = Path(tmp) / tag / f"s{i}"
            scenarios.write_run(folder, curves, framework, fmt, None, np.random.default_rng(i))
            verdict, findings = metamorphic.diagnose_folder(folder)
            return verdict, {rule for rule, _, _ in findings}

        base, rules = diagnose_as("base", c)
        out = []
        for k in THIN:
            after, rules_after = diagnose_as(f"k{k}", metamorphic.apply(metamorphic.Transform("t", "thin", k=k), c))
            out.append((k, after, tuple(sorted(rules ^ rules_after))))
    return i, base, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--noise", choices=("gauss", "ar", "both"), default="both")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    for kind in (("gauss", "ar") if args.noise == "both" else (args.noise,)):
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(check, range(args.runs), [kind] * args.runs))
        bases = Counter(("evals track" if i % 2 == 0 else "evals flat", base[0]) for i, base, _ in results)
        flips: Counter = Counter()
        rules: Counter = Counter()
        for i, base, out in results:
            for k, after, changed in out:
                if tuple(after) != tuple(base):
                    flips[k] += 1
                    rules.update(changed)
                    if args.verbose:
                        print(f"  {kind} run {i} every {k}: {base} -> {after}  rules changed: {', '.join(changed)}")
        print(f"{kind}: {args.runs} runs; base verdicts "
              + ", ".join(f"{a} {v} {n}" for (a, v), n in sorted(bases.items())))
        print("  verdict or root changed: " + ", ".join(
            f"every {k}: {flips[k]} ({flips[k] / args.runs:.1%})" for k in THIN))
        print("  rules in those changes: " + (", ".join(f"{r} {n}" for r, n in rules.most_common()) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
