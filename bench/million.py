"""A 1M-step run whose reward rises beside a flat eval, checked against a bare read of the same file
(issue 43: every statistic O(n) or capped; target: the check within 2x a bare pyarrow read).

    python bench/million.py                  # 1,000,000 steps, 5 repeats
    python bench/million.py --steps 200000 --repeats 3

The run is a Parquet file (step, reward, response length, KL, entropy, loss, grad norm, lr; an eval every
1,000 steps as NaN elsewhere), written once.  Timed in this process, each the best of `--repeats`:
  baseline   pyarrow.parquet.read_table of the file, every column converted to numpy (what any reader pays)
  check      stabdiag.load(path) + stabdiag.diagnose(run): reading, resolving, every rule, the advice
and the ratio check / baseline, with the verdict (the hack must be found at layer 1).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def write_run(path: str, steps: int, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, steps)
    rise = np.clip((x - 0.2) / 0.5, 0, 1)
    evals = np.full(steps, np.nan)
    evals[::1000] = 0.42 + rng.normal(0, 0.01, len(evals[::1000]))
    table = pa.table({
        "step": np.arange(1, steps + 1, dtype=np.int64),
        "reward": 0.3 + 0.4 * rise + rng.normal(0, 0.03, steps),
        "eval_math500_accuracy": evals,
        "completions/mean_length": 400 * (1 + 0.05 * x) * np.exp(rng.normal(0, 0.02, steps)),
        "kl": 0.01 * (1 - np.exp(-x / 0.3)) + 0.001 * np.abs(rng.normal(0, 1, steps)),
        "entropy": 1.0 - 0.05 * x + rng.normal(0, 0.01, steps),
        "loss": 0.02 + rng.normal(0, 0.005, steps),
        "grad_norm": 0.5 * np.exp(rng.normal(0, 0.2, steps)),
        "learning_rate": np.full(steps, 1e-6),
    })
    pq.write_table(table, path)


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import pyarrow.parquet as pq

    import stabdiag

    with tempfile.TemporaryDirectory(prefix="stabdiag-million-") as folder:
        path = os.path.join(folder, "metrics.parquet")
        write_run(path, args.steps)

        def bare():
            table = pq.read_table(path)
            return {name: table.column(name).to_numpy() for name in table.column_names}

        def check():
            return stabdiag.diagnose(stabdiag.load(path)[0])

        check()                                          # imports and the checklist's cache, once
        base, _ = best_of(bare, args.repeats)
        took, diag = best_of(check, args.repeats)
    fired = [f.rule for f in diag.findings if not f.downstream]
    print(f"{args.steps:,} steps: pyarrow read {base:.3f} s, stabdiag load + diagnose {took:.3f} s, "
          f"ratio {took / base:.2f} (target <= 2); verdict {diag.verdict}, root layer {diag.root_layer}, "
          f"fired {', '.join(fired) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
