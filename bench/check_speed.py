"""Time `check` on a 50,000-step run with 30 metrics, after load (the issue's speed target: < 1 s).

The run is built in memory (the loaders are timed elsewhere): the twelve canonical signals a GRPO run
logs, under TRL names, plus extra metrics to make 30, two evals every 100 steps, and a grad-norm
blow-up near the end so that every detector, the non-finite ones included, does its full work.

    python bench/check_speed.py
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

STEPS = 50_000
METRICS = 30
REPEATS = 3


def make_columns(steps_count: int = STEPS, metrics: int = METRICS):
    """The run's points: (steps, {name: values}, eval steps, {eval name: values}).  Every column but the
    two evals is logged at every step; the grad norm blows up over the last 500 steps and ends NaN."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, steps_count + 1)
    x = steps / steps_count
    cols = {
        "train/reward": 0.3 + 0.4 * (1 - np.exp(-x / 0.1)) + rng.normal(0, 0.03, steps_count),
        "train/frac_reward_zero_std": np.clip(0.2 + rng.normal(0, 0.03, steps_count), 0, 1),
        "train/completions/mean_length": 400 * (1 + 0.3 * x) + rng.normal(0, 10, steps_count),
        "train/kl": 0.01 * x + 0.0005,
        "train/entropy": 1.2 - 0.1 * x + rng.normal(0, 0.02, steps_count),
        "train/loss": rng.normal(0.01, 0.02, steps_count),
        "train/grad_norm": 0.8 * np.exp(rng.normal(0, 0.3, steps_count)),
        "train/learning_rate": 1e-6 * np.minimum(1, x * 20),
        "train/sampling/sampling_logp_difference/mean": 0.02 * np.exp(rng.normal(0, 0.1, steps_count)),
        "training/rollout_probs_diff_mean": 0.003 * np.exp(rng.normal(0, 0.1, steps_count)),
        "training/off_policy/trajectory_staleness/mean": 1 + rng.normal(0, 0.1, steps_count),
        "train/reward_std": 0.3 + rng.normal(0, 0.02, steps_count),
        "train/clip_ratio/region_mean": np.abs(rng.normal(0.002, 0.001, steps_count)),
    }
    blowup = min(500, steps_count // 2)
    cols["train/grad_norm"][steps_count - blowup:] *= np.exp(np.arange(blowup) / 100)
    cols["train/grad_norm"][steps_count - 10:] = math.nan
    cols["train/loss"][steps_count - 12:] = math.nan
    i = 0
    while len(cols) < metrics - 2:
        cols[f"train/extra_metric_{i:02d}"] = rng.normal(0, 1, steps_count)
        i += 1
    ev = np.arange(100, steps_count + 1, 100)
    evals = {f"eval/{name}_accuracy": 0.4 + 0.1 * (1 - np.exp(-ev / steps_count / 0.1)) + rng.normal(0, 0.01, len(ev))
             for name in ("math500", "aime24")}
    return steps, cols, ev, evals


def make_run(steps_count: int = STEPS):
    from stabdiag.read.run import Run, Series

    steps, cols, ev, evals = make_columns(steps_count)
    series = {k: Series.from_points(k, steps, v) for k, v in cols.items()}
    series.update({k: Series.from_points(k, ev, v) for k, v in evals.items()})
    return Run(name=f"speed-{steps_count // 1000}k", series=series)


def measure(repeats: int = REPEATS) -> float:
    """Best wall time of diagnose() over `repeats` tries (rules loaded once, as `check` does)."""
    from stabdiag.judge.engine import diagnose
    from stabdiag.judge.rules import load_rules

    run = make_run()
    assert len(run.series) == METRICS, len(run.series)
    rules = load_rules()
    diagnose(run, rules=rules)                        # warm imports and caches
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        diagnose(run, rules=rules)
        best = min(best, time.perf_counter() - t0)
    return best


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    t = measure()
    print(f"check of a {STEPS:,}-step run with {METRICS} metrics, after load: {t:.3f} s (best of {REPEATS})")
