"""Issue 44's failures, walked through as a new user would: each scenario of its "Why" list written as a real
file (pandas CSV, a console log), read with `stabdiag.load`, diagnosed with the shipped rules, over 10 seeds.

    python bench/issue44_walkthrough.py            # every scenario, 10 seeds each (about 30 s)
    python bench/issue44_walkthrough.py --seeds 3 --keep /tmp/walk44   # fewer seeds, keep the files

Prints, per scenario, what was expected and on how many seeds it held, and exits 1 when a scenario holds on
fewer than 9 of 10 seeds (or the same share of --seeds).  Scenarios (expected outcome after the arrow):
  climb_scratch     pretraining loss 10.8 -> 3.0, back to 9.0 for the last 300 of 1,000 steps, grad norm
                    0.3 -> 3.3                                           -> fail, root 3, L3.loss-divergence
  climb_sft         SFT loss 4.0 -> 1.0 -> 5.5 for the last 150 of 600  -> fail, root 3, L3.loss-divergence
  excursion         a loss at 2.0 jumps 3-5x within 3 steps and decays back over ~40 steps, eval loss follows
                                                                         -> warn, root 3, L3.loss-excursion
  flat_loss_every10 a loss flat at 2.0 +- 0.02 (it never came down), 100 points logged every 10th step
                                                                         -> no departure finding
  pasted_grad_800   12 pasted points, grad norm ~0.5 and one 800        -> L3.grad-norm-spike judged and fired
  lr_jump_collapse  lr x10 at step 600; KL and entropy collapse; truncation jumps only after -> root 2
  weight0_check     a reward rising 0.3 -> 0.8 beside a weight-0 correctness reward, length x3, no eval/*
                                                                         -> fail, root 1
  early_eval_drop   eval 0.45 -> 0.15 within 50 steps, the reward flat, then rising -> fail, root 1,
                                                                            L1.eval-below-start
  entropy_first_2.5 entropy flat at 0.8 but its first point 2.5        -> pass
  entropy_first_0   entropy flat at 0.8 but its first point 0.0 (a placeholder) -> pass, the 0.0 said in a note
  loss_at_ln_v      a loss flat at ln(32000) = 10.373, no config         -> L3.loss-at-uniform-level, V = 32000
  csv_and_console   metrics.csv beside a train.log that prints the same numbers and ends on an ECC error
                                                                         -> one run, L4.job-died
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

DEPARTURES = {"L3.loss-divergence", "L3.loss-excursion", "L1.eval-loss-rising", "L3.grad-norm-excursion"}


def _cosine(n: int, peak: float = 3e-4, warm: int = 50, floor: float = 3e-5) -> np.ndarray:
    s = np.arange(n)
    cosine = floor + 0.5 * (peak - floor) * (1 + np.cos(np.pi * (s - warm) / (n - warm)))
    return np.where(s < warm, peak * (s + 1) / warm, cosine)


def climb_scratch(rng, folder: Path) -> None:
    n, s = 1000, np.arange(1000)
    climb = np.clip((s - 670) / 30, 0, 1)
    loss = (3.0 + 7.8 * np.exp(-s / 100.0)) * (1 - climb) + 9.0 * climb + rng.normal(0, 0.02, n)
    grad = (0.3 + 3.0 * climb) * (1 + rng.normal(0, 0.05, n))
    pd.DataFrame({"step": s, "loss": loss, "grad_norm": grad, "learning_rate": _cosine(n)}).to_csv(
        folder / "pretrain.csv", index=False)


def climb_sft(rng, folder: Path) -> None:
    n, s = 600, np.arange(600)
    climb = np.clip((s - 420) / 30, 0, 1)
    loss = (1.0 + 3.0 * np.exp(-s / 50.0)) * (1 - climb) + 5.5 * climb + rng.normal(0, 0.02, n)
    grad = (1.0 + 2.0 * climb) * (1 + rng.normal(0, 0.05, n))
    lr = 2e-5 * np.where(s < 30, (s + 1) / 30, 1 - (s - 30) / (n - 30) * 0.9)
    pd.DataFrame({"step": s, "loss": loss, "grad_norm": grad, "learning_rate": lr}).to_csv(folder / "sft.csv",
                                                                                         index=False)


def excursion(rng, folder: Path) -> None:
    n, s, at = 2000, np.arange(2000), 995
    mult = rng.uniform(3, 5)
    shape = np.where(s < at, 0.0, np.where(s < at + 3, np.clip((s - at) / 3, 0, 1), np.exp(-(s - at - 3) / 8.0)))
    mean = 2.0 * (1 + (mult - 1) * shape)
    frame = pd.DataFrame({"step": s, "loss": mean + rng.normal(0, 0.02, n),
                          "grad_norm": 0.5 * (1 + rng.normal(0, 0.05, n)) * (1 + 2 * shape),
                          "learning_rate": np.full(n, 1e-4)})
    frame["eval_loss"] = np.where(s % 50 == 0, mean + 0.1 + rng.normal(0, 0.01, n), np.nan)
    frame.to_csv(folder / "sft.csv", index=False)


def flat_loss_every10(rng, folder: Path) -> None:
    pd.DataFrame({"step": np.arange(1, 101) * 10, "loss": 2.0 + rng.normal(0, 0.02, 100),
                  "grad_norm": 0.5 * np.exp(rng.normal(0, 0.1, 100))}).to_csv(folder / "flat.csv", index=False)


def pasted_grad_800(rng, folder: Path) -> None:
    grad = 0.5 * (1 + rng.normal(0, 0.1, 12))
    grad[7] = 800.0
    pd.DataFrame({"step": np.arange(1, 13) * 10, "loss": 2.0 + rng.normal(0, 0.02, 12), "grad_norm": grad}).to_csv(
        folder / "pasted.csv", index=False)


def lr_jump_collapse(rng, folder: Path) -> None:
    n, s = 1000, np.arange(1000)
    post, cut = np.clip((s - 600) / 30, 0, 1), np.clip((s - 630) / 10, 0, 1)
    kl = (0.002 + 0.003 * np.minimum(s, 600) / 600 + 0.3 * post) * (1 + rng.normal(0, 0.05, n))
    frame = pd.DataFrame({
        "step": s,
        "reward": np.where(s < 630, 0.3 + 0.2 * np.minimum(s, 600) / 600, 0.5 - 0.3 * np.clip((s - 630) / 30, 0, 1))
        + rng.normal(0, 0.02, n),
        "completions/mean_length": 400 + 20 * np.minimum(s, 600) / 600 + 500 * cut + rng.normal(0, 10, n),
        "completions/clipped_ratio": 0.02 + 0.38 * cut + rng.normal(0, 0.005, n),
        "kl": kl, "entropy": (0.8 - 0.1 * s / 1000) * (1 - post) + 0.05 * post + rng.normal(0, 0.01, n),
        "loss": 0.04 * kl + rng.normal(0, 0.002, n), "grad_norm": 0.3 * (1 + rng.normal(0, 0.05, n)) * (1 + 2 * post),
        "learning_rate": np.where(s < 600, 1e-6, 1e-5)})
    accuracy = np.where(s < 630, 0.40 + 0.05 * np.minimum(s, 600) / 600, 0.45 - 0.25 * np.clip((s - 630) / 50, 0, 1))
    frame["eval/math500_accuracy"] = np.where(s % 50 == 0, accuracy + rng.normal(0, 0.01, n), np.nan)
    frame.to_csv(folder / "grpo.csv", index=False)


def _rl_quiet(rng, n: int) -> dict:
    return {"kl": 0.001 + 0.002 * np.arange(n) / n, "entropy": 0.7 + rng.normal(0, 0.01, n),
            "loss": rng.normal(0, 0.002, n), "grad_norm": 0.3 * (1 + rng.normal(0, 0.05, n)),
            "learning_rate": np.full(n, 1e-6)}


def weight0_check(rng, folder: Path) -> None:
    n, s = 500, np.arange(500)
    format_reward = 0.3 + 0.5 * (1 - np.exp(-s / 120.0)) + rng.normal(0, 0.02, n)
    pd.DataFrame({"step": s, "reward": format_reward, "rewards/format_reward": format_reward,
                  "rewards/correctness_reward": 0.2 + rng.normal(0, 0.02, n),
                  "completions/mean_length": 300 + 600 * (1 - np.exp(-s / 150.0)) / (1 - np.exp(-499 / 150.0))
                  + rng.normal(0, 10, n), **_rl_quiet(rng, n)}).to_csv(folder / "grpo.csv", index=False)


def early_eval_drop(rng, folder: Path) -> None:
    n, s = 400, np.arange(400)
    accuracy = 0.15 + 0.30 * np.clip(1 - s / 50, 0, 1) + rng.normal(0, 0.01, n)
    pd.DataFrame({"step": s, "reward": 0.2 + 0.5 * np.clip((s - 200) / 150, 0, 1) + rng.normal(0, 0.02, n),
                  "eval/accuracy": np.where(s % 25 == 0, accuracy, np.nan),
                  "completions/mean_length": 400 + rng.normal(0, 10, n), **_rl_quiet(rng, n)}).to_csv(
        folder / "grpo.csv", index=False)


def _entropy_first(first: float) -> Callable:
    def write(rng, folder: Path) -> None:
        n = 1000
        entropy = 0.8 + rng.normal(0, 0.01, n)
        entropy[0] = first
        quiet = _rl_quiet(rng, n)
        quiet["entropy"] = entropy
        pd.DataFrame({"step": np.arange(n), "reward": 0.5 + rng.normal(0, 0.02, n), **quiet}).to_csv(
            folder / "grpo.csv", index=False)
    return write


def loss_at_ln_v(rng, folder: Path) -> None:
    n = 500
    pd.DataFrame({"step": np.arange(n), "loss": math.log(32000) + rng.uniform(-0.005, 0.005, n),
                  "grad_norm": 0.5 * (1 + rng.normal(0, 0.05, n)), "learning_rate": _cosine(n)}).to_csv(
        folder / "pretrain.csv", index=False)


def csv_and_console(rng, folder: Path) -> None:
    n, s = 300, np.arange(1, 301)
    loss, grad = 1.2 + 0.8 * np.exp(-s / 60) + rng.normal(0, 0.02, n), 0.8 * (1 + rng.normal(0, 0.05, n))
    pd.DataFrame({"step": s, "loss": loss, "grad_norm": grad, "learning_rate": np.full(n, 1e-5)}).to_csv(
        folder / "metrics.csv", index=False)
    lines = [f"step {a} loss={b:.4f} grad_norm={c:.4f} lr=1.00e-05" for a, b, c in zip(s, loss, grad)]
    lines += ["Traceback (most recent call last):", '  File "train.py", line 211, in <module>', "    loss.backward()",
              "RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    (folder / "train.log").write_text("\n".join(lines) + "\n")


def _rules(runs) -> set[str]:
    return {f.rule for d in runs for f in d.findings}


def _ends(verdict: str, layer: int, rule: str) -> Callable:
    """The first run ends `verdict`, rooted at `layer`, with `rule` among its findings."""
    return lambda ds: ds[0].verdict == verdict and ds[0].root_layer == layer and rule in _rules(ds)


# name: (writer, what is expected, whether the diagnoses of the folder meet it)
SCENARIOS: dict[str, tuple[Callable, str, Callable]] = {
    "climb_scratch": (climb_scratch, "fail, root 3, L3.loss-divergence", _ends("fail", 3, "L3.loss-divergence")),
    "climb_sft": (climb_sft, "fail, root 3, L3.loss-divergence", _ends("fail", 3, "L3.loss-divergence")),
    "excursion": (excursion, "warn, root 3, L3.loss-excursion", _ends("warn", 3, "L3.loss-excursion")),
    "flat_loss_every10": (flat_loss_every10, "no departure finding", lambda ds: not _rules(ds) & DEPARTURES),
    "pasted_grad_800": (pasted_grad_800, "L3.grad-norm-spike fired", lambda ds: "L3.grad-norm-spike" in _rules(ds)),
    "lr_jump_collapse": (lr_jump_collapse, "root 2", lambda ds: ds[0].root_layer == 2),
    "weight0_check": (weight0_check, "fail, root 1", lambda ds: ds[0].verdict == "fail" and ds[0].root_layer == 1),
    "early_eval_drop": (early_eval_drop, "fail, root 1, L1.eval-below-start", _ends("fail", 1, "L1.eval-below-start")),
    "entropy_first_2.5": (_entropy_first(2.5), "pass", lambda ds: ds[0].verdict == "pass"),
    "entropy_first_0": (_entropy_first(0.0), "pass, the 0.0 said in a note",
                        lambda ds: ds[0].verdict == "pass" and any("placeholder" in n for n in ds[0].notes)),
    "loss_at_ln_v": (loss_at_ln_v, "L3.loss-at-uniform-level quoting 32000",
                     lambda ds: any(f.rule == "L3.loss-at-uniform-level" and "32000" in f.message
                                    for f in ds[0].findings)),
    "csv_and_console": (csv_and_console, "one run, L4.job-died",
                        lambda ds: len(ds) == 1 and "L4.job-died" in _rules(ds)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--keep", help="write the runs under this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    import stabdiag

    missed = 0
    with tempfile.TemporaryDirectory(prefix="stabdiag-issue44-") as tmp:
        root = Path(args.keep or tmp)
        for name, (write, expected, holds) in SCENARIOS.items():
            held = 0
            for seed in range(args.seeds):
                folder = root / name / f"seed{seed}"
                folder.mkdir(parents=True, exist_ok=True)
                write(np.random.default_rng(seed), folder)
                held += bool(holds([stabdiag.diagnose(run) for run in stabdiag.load(str(folder))]))
            ok = held >= math.ceil(0.9 * args.seeds)
            missed += not ok
            print(f"{name:18} {held:2}/{args.seeds}  {'ok    ' if ok else 'MISSED'}  expected: {expected}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
