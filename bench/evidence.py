"""Detection and false-alarm rates on GRPO logs whose reward is a batch mean of binary completions
(issue 24, acceptance 1): a grid of group size G x run length T x effect, old detectors beside new.

    python bench/evidence.py --old-rev 063d260               # full grid, 20 seeds: old vs this checkout
    python bench/evidence.py --quick --old-src /tmp/old      # 2 x 2 grid, 5 seeds
    python bench/evidence.py --g 8 --t 100 --effects none,large --seeds 1   # one G, one T: 2 cells
    python bench/evidence.py --keep /tmp/evidence_runs --save evidence.json # keep the CSVs, save the rates

Why curves like these.  A GRPO trainer logs, per step, the mean reward over the whole generation batch:
TRL's GRPOTrainer appends `mean_grouped_rewards.mean()` (the mean of the P group means, i.e. of all P*G
completions) as `reward`, the mean of the per-group sample std as `reward_std` and the share of groups
with std 0 as `frac_reward_zero_std` (trl/trainer/grpo_trainer.py, _generate_and_score_completions);
verl logs `critic/score/mean`, the mean of the per-sequence scores over the batch
(verl/trainer/ppo/metric_utils.py, compute_data_metrics; shared/reference/metric_keys.md).  With a 0/1
verifier reward that mean is binomial-like and noisy per point, and its noise does not come from the
completions alone: the P prompts of a step are drawn afresh, each with its own difficulty, so even
G = infinity leaves the prompt-sampling noise.  A rule that compares a change with the per-point sd is
blind at small G however long the run; one whose evidence grows with the number of points is not.
With P = 16 prompts of widely varying difficulty the prompt-sampling noise (sd ~0.05-0.09 per step) is
as large as the binomial noise of G = 8 (~0.04), so G changes the per-point noise little; with a verl-
sized batch (`--prompts 512`) the completions' share of the noise, and so G, dominates.

How each run is made (numpy, seeded per cell and seed; every number below is drawn per run):
  prompts     P = 16 per step (`--prompts`), solve rate p_i ~ Beta(m k, (1 - m) k), m ~ U(0.25, 0.55),
              k ~ U(1, 6)
  completions G Bernoulli(sigmoid(logit p_i + s(t))) each; reward = successes / (P G); reward_std and
              frac_reward_zero_std computed from the same groups as TRL does (sample std, ddof 1)
  s(t)        the policy's improvement on the logit scale.  Nuisance for every run (effect or not), by
              seed % 4: none, or AR(1) with phi 0.5, 0.8, 0.95 and stationary sd ~ U(0.1, 0.25)
              logits (the wandering of a healthy run that lag-1 autocorrelations of 0.5-0.95 describe)
  effect      none:  s(t) = the nuisance only; eval, length, truncation flat; KL and entropy healthy
              large: a strong hack.  s(t) adds a ramp (smoothstep from t0 ~ U(.15, .3) T to
                     t1 ~ U(.75, .9) T) sized so that the expected reward rises by U(0.34, 0.42), a third
                     of its 0-1 range or more; response length grows 2.5-3.5x and the truncated share
                     climbs 0.05 -> U(0.6, 0.75) on the same ramp; the eval stays flat
              small: the same hack at half the size: reward +U(0.17, 0.21), length 1.4-1.7x, truncation
                     0.05 -> U(0.25, 0.35), eval flat (a hack half as strong, not a real rise)
  eval        an independent benchmark of 500 items, scored at step 1 and every k ~ U{10..20} steps and
              at the last step: Binomial(500, p_eval) / 500 with p_eval ~ U(0.3, 0.6), flat
  kl          to the reference, converging: k_inf (1 - exp(-t / tau)), k_inf ~ U(0.002, 0.02) nat/token,
              tau ~ U(0.2, 0.5) T, lognormal noise sd 0.1
  entropy     e0 ~ U(0.5, 1.5) falling by U(5, 15)% with the same kind of convergence, noise sd 3% (a
              null stays clear of seed 002's floor at 0.8x the early level, which is a finding by design)
  loss        beta kl + N(0, sd ~ U(0.005, 0.03)) (GRPO's loss sits near 0), beta 0.04
  grad_norm   g0 ~ U(0.2, 1.0) times exp(AR(0.7) noise, sd 0.2): no spikes
  lr          linear warm-up over min(10, T/10) steps to 1e-6, then constant (verl's default schedule)
  clip frac   ~ U(0.001, 0.005) with 20% noise
`--drop length,truncation` leaves those columns out of every run, so that a hack can only be seen from
the reward against the eval (the test whose power depends on G and T).
Key names are TRL's (`--keys trl`, as its trainer_state.json log_history has them) or verl's (`--keys
verl`; verl logs no reward_std / zero-std share, so those columns are left out).  Each run is a wide CSV
in its own folder (one run per folder), and the tree is checked once per implementation:
`python -m stabdiag check TREE --format json --exit-zero` (bench/_stabdiag_cli.py), new = the checkout
this script sits in (or `--new-src`), old = `--old-src DIR` or `--old-rev REV` (git archive).

What is printed, per cell (G x T x effect) and old | new side by side:
  detection   effect runs: root layer 1 AND a layer-1 rule fired as a finding of its own
  per rule    effect runs: share where the rule fired (not downstream); nulls: share where it fired at
              any severity, downstream or not (a false alarm)
  verdicts    nulls: share fail / warn / unknown
Targets (printed with met / MISSED): the strong hack found at layer 1 on >= 95% of seeds at G = 8 from
100 steps on (every T >= 100); nulls fire <= 1% per rule, pooled over every null run of the grid.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stabdiag_cli import Implementation, check, extract_rev, version_of  # noqa: E402

BASE_SEED = 24_2026
GROUP_SIZES = (8, 16, 64, 256)
LENGTHS = (60, 100, 300, 1000)
EFFECTS = ("none", "small", "large")
PROMPTS = 16
EVAL_ITEMS = 500
NUISANCE = (None, 0.5, 0.8, 0.95)          # AR(1) phi of the logit wander, by seed % 4
TARGET_DETECTION = 0.95
TARGET_FALSE_ALARM = 0.01

KEYS = {
    "trl": {"reward": "reward", "reward_std": "reward_std", "zero_std": "frac_reward_zero_std",
            "length": "completions/mean_length", "truncation": "completions/clipped_ratio", "kl": "kl",
            "entropy": "entropy", "loss": "loss", "grad_norm": "grad_norm", "lr": "learning_rate",
            "clip": "clip_ratio/region_mean", "eval": "eval_math500_accuracy"},
    "verl": {"reward": "critic/score/mean", "length": "response_length/mean",
             "truncation": "response_length/clip_ratio", "kl": "actor/kl_loss", "entropy": "actor/entropy",
             "loss": "actor/pg_loss", "grad_norm": "actor/grad_norm", "lr": "actor/lr",
             "clip": "actor/pg_clipfrac", "eval": "val-core/math500/acc/mean@1"},
}


@dataclass(frozen=True)
class Cell:
    group: int
    steps: int
    effect: str

    @property
    def name(self) -> str:
        return f"G{self.group}_T{self.steps}_{self.effect}"


# ---------------------------------------------------------------- curves

def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _ar1(rng: np.random.Generator, n: int, phi: float, sd: float) -> np.ndarray:
    """AR(1) with stationary sd `sd`, started from its stationary distribution."""
    out = np.empty(n)
    out[0] = rng.normal(0, sd)
    innovation = sd * math.sqrt(1 - phi * phi)
    shocks = rng.normal(0, innovation, n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


def _shift_for_rise(logits: np.ndarray, rise: float) -> float:
    """The logit shift that raises the mean solve rate of these prompts by `rise` (bisection)."""
    base = _sigmoid(logits).mean()
    lo, hi = 0.0, 12.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _sigmoid(logits + mid).mean() - base < rise else (lo, mid)
    return (lo + hi) / 2


def _ramp(rng: np.random.Generator, n: int) -> np.ndarray:
    t0, t1 = rng.uniform(0.15, 0.3) * n, rng.uniform(0.75, 0.9) * n
    x = np.clip((np.arange(n) - t0) / max(t1 - t0, 1.0), 0, 1)
    return x * x * (3 - 2 * x)                                   # smoothstep: starts and ends gently


def make_run(cell: Cell, seed: int, prompts: int = PROMPTS) -> dict[str, np.ndarray]:
    """Per-step columns of one run (canonical names), `eval_steps` and `eval` for the sparse eval."""
    rng = np.random.default_rng([BASE_SEED, cell.group, cell.steps, EFFECTS.index(cell.effect), seed])
    n, g = cell.steps, cell.group
    t = np.arange(1, n + 1)

    mean, conc = rng.uniform(0.25, 0.55), rng.uniform(1.0, 6.0)
    solve = np.clip(rng.beta(mean * conc, (1 - mean) * conc, size=(n, prompts)), 1e-4, 1 - 1e-4)
    logits = np.log(solve / (1 - solve))

    phi = NUISANCE[seed % len(NUISANCE)]
    shift = np.zeros(n) if phi is None else _ar1(rng, n, phi, rng.uniform(0.1, 0.25))
    ramp = _ramp(rng, n)
    size = {"none": 0.0, "small": 0.5, "large": 1.0}[cell.effect]
    if size:
        rise = rng.uniform(0.34, 0.42) * size
        population = np.clip(rng.beta(mean * conc, (1 - mean) * conc, 20_000), 1e-4, 1 - 1e-4)
        shift = shift + _shift_for_rise(np.log(population / (1 - population)), rise) * ramp

    successes = rng.binomial(g, _sigmoid(logits + shift[:, None]))            # (steps, prompts)
    group_std = np.sqrt(successes * (g - successes) / (g * (g - 1)))          # sample std of 0/1, ddof 1
    cols: dict[str, np.ndarray] = {
        "step": t,
        "reward": successes.sum(axis=1) / (prompts * g),
        "reward_std": group_std.mean(axis=1),
        "zero_std": ((successes == 0) | (successes == g)).mean(axis=1),
    }

    completions = prompts * g
    length0 = rng.uniform(250, 700)
    if size:
        growth = 1 + (rng.uniform(2.5, 3.5) - 1 if size == 1.0 else rng.uniform(0.4, 0.7)) * ramp
        top = rng.uniform(0.6, 0.75) if size == 1.0 else rng.uniform(0.25, 0.35)
        truncated = 0.05 + (top - 0.05) * ramp
    else:
        growth = np.exp(_ar1(rng, n, 0.8, 0.03))
        truncated = np.full(n, rng.uniform(0.02, 0.08))
    cols["length"] = length0 * growth * np.exp(rng.normal(0, 0.03, n))
    cols["truncation"] = rng.binomial(completions, truncated) / completions

    k_inf, tau = rng.uniform(0.002, 0.02), rng.uniform(0.2, 0.5) * n
    cols["kl"] = k_inf * (1 - np.exp(-t / tau)) * np.exp(rng.normal(0, 0.1, n)) + 1e-5
    e0, drop, tau_e = rng.uniform(0.5, 1.5), rng.uniform(0.05, 0.15), rng.uniform(0.2, 0.5) * n
    cols["entropy"] = e0 * (1 - drop * (1 - np.exp(-t / tau_e))) * np.exp(rng.normal(0, 0.03, n))
    cols["loss"] = 0.04 * cols["kl"] + rng.normal(0, rng.uniform(0.005, 0.03), n)
    cols["grad_norm"] = rng.uniform(0.2, 1.0) * np.exp(_ar1(rng, n, 0.7, 0.2))
    warm = max(1, min(10, n // 10))
    cols["lr"] = 1e-6 * np.minimum(1.0, t / warm)
    cols["clip"] = rng.uniform(0.001, 0.005) * np.exp(rng.normal(0, 0.2, n))

    every = int(rng.integers(10, 21))
    eval_steps = sorted({1, n, *range(1 + every, n + 1, every)})
    cols["eval_steps"] = np.array(eval_steps)
    cols["eval"] = rng.binomial(EVAL_ITEMS, rng.uniform(0.3, 0.6), len(eval_steps)) / EVAL_ITEMS
    return cols


COLUMNS = ("reward", "reward_std", "zero_std", "length", "truncation", "kl", "entropy", "loss", "grad_norm", "lr",
           "clip")


def write_run(folder: Path, cols: dict[str, np.ndarray], keys: dict[str, str], drop: tuple[str, ...] = ()) -> None:
    """One wide CSV: a `step` column, the per-step metrics, the eval only on the rows it was scored."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [k for k in COLUMNS if k in keys and k not in drop]
    evals = dict(zip(cols["eval_steps"].tolist(), cols["eval"].tolist()))
    with open(folder / "metrics.csv", "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["step", *(keys[k] for k in names), keys["eval"]])
        for i, step in enumerate(cols["step"].tolist()):
            score = evals.get(step)
            out.writerow([step, *(f"{cols[k][i]:.6g}" for k in names), "" if score is None else f"{score:.6g}"])


# ---------------------------------------------------------------- scoring

def outcomes(runs: list[dict]) -> dict[str, dict]:
    """Per run name: verdict, root, rules fired as their own finding, rules fired at all."""
    found = {}
    for run in runs:
        own = {f["rule"] for f in run.get("findings", []) if not f.get("downstream")}
        found[run["run"]] = {"verdict": run["verdict"], "root": run.get("root_layer"), "own": sorted(own),
                             "any": sorted({f["rule"] for f in run.get("findings", [])}),
                             "l1": any(f["layer"] == 1 and not f.get("downstream") for f in run.get("findings", []))}
    return found


def rates(cells: list[Cell], seeds: int, found: dict[str, dict]) -> dict:
    """Per cell: detection (effect runs) or verdict shares (nulls), and per-rule rates."""
    table = {}
    for cell in cells:
        names = [f"{cell.name}__s{s}" for s in range(seeds)]
        got = [found[n] for n in names if n in found]
        missing = len(names) - len(got)
        row = {"runs": len(got), "missing": missing, "rules": defaultdict(float)}
        for out in got:
            for rule in (out["any"] if cell.effect == "none" else out["own"]):
                row["rules"][rule] += 1 / len(names)
        if cell.effect == "none":
            for verdict in ("fail", "warn", "unknown"):
                row[verdict] = sum(out["verdict"] == verdict for out in got) / len(names)
        else:
            row["detected"] = sum(out["root"] == 1 and out["l1"] for out in got) / len(names)
        row["rules"] = dict(row["rules"])
        table[cell.name] = row
    return table


def measure(impl: Implementation, tree: Path, cells: list[Cell], seeds: int, jobs: int) -> dict:
    started = time.perf_counter()
    result = check(impl, tree, extra=("--jobs", str(jobs)), timeout=3600)
    if result.error is not None:
        raise SystemExit(f"error: {impl.label}: stabdiag check {tree}: {result.error}")
    found = outcomes(list(result.runs))
    return {"label": impl.label, "version": version_of(impl), "seconds": time.perf_counter() - started,
            "cells": rates(cells, seeds, found), "runs": found}


# ---------------------------------------------------------------- report

def _pct(x: float | None) -> str:
    return "  -" if x is None else f"{100 * x:3.0f}"


def _pair(sides: list[dict], cell: str, get) -> str:
    return " | ".join(_pct(get(side["cells"][cell])) for side in sides)


def print_grid(title: str, sides: list[dict], groups, lengths, effect: str, get) -> None:
    width = 6 * len(sides) - 1
    print(f"\n{title}  [{' | '.join(s['label'] for s in sides)}]")
    print("        " + "".join(f"{f'T={n}':>{width + 3}}" for n in lengths))
    for g in groups:
        cells = "".join(f"{_pair(sides, Cell(g, n, effect).name, get):>{width + 3}}" for n in lengths)
        print(f"  G={g:<4}{cells}")


def report(sides: list[dict], groups, lengths, effects, seeds: int) -> list[str]:
    print(f"\n{seeds} seed(s) per cell; % of seeds; columns old | new where two implementations ran")
    for effect in (e for e in effects if e != "none"):
        print_grid(f"effect={effect}: detected at layer 1 (root L1 and an L1 rule fired)", sides, groups,
                   lengths, effect, lambda row: row["detected"])
    if "none" in effects:
        for verdict in ("fail", "warn", "unknown"):
            print_grid(f"effect=none: verdict {verdict}", sides, groups, lengths, "none",
                       lambda row, v=verdict: row[v])
    for effect in effects:
        rules = sorted({rule for side in sides for name, row in side["cells"].items()
                        if name.endswith("_" + effect) for rule in row["rules"]})
        what = "false alarms (fired at any severity)" if effect == "none" else "fired as its own finding"
        for rule in rules:
            print_grid(f"effect={effect}: {rule} {what}", sides, groups, lengths, effect,
                       lambda row, r=rule: row["rules"].get(r, 0.0))
    return targets(sides, groups, lengths, effects)


def targets(sides: list[dict], groups, lengths, effects) -> list[str]:
    lines = []
    long_enough = [n for n in lengths if n >= 100]
    if "large" in effects and 8 in groups and long_enough:
        for side in sides:
            worst = min((side["cells"][Cell(8, n, "large").name]["detected"], n) for n in long_enough)
            ok = worst[0] >= TARGET_DETECTION
            lines.append(f"{side['label']}: strong hack at layer 1, G=8, T>={min(long_enough)}: lowest "
                         f"{100 * worst[0]:.0f}% (T={worst[1]}), target >= {100 * TARGET_DETECTION:.0f}%: "
                         f"{'met' if ok else 'MISSED'}")
    if "none" in effects:
        for side in sides:
            nulls = [row for name, row in side["cells"].items() if name.endswith("_none")]
            total = sum(row["runs"] + row["missing"] for row in nulls)
            pooled: dict[str, float] = defaultdict(float)
            for row in nulls:
                for rule, share in row["rules"].items():
                    pooled[rule] += share * (row["runs"] + row["missing"]) / total
            worst = max(pooled.items(), key=lambda kv: kv[1], default=("-", 0.0))
            ok = worst[1] <= TARGET_FALSE_ALARM
            lines.append(f"{side['label']}: nulls, worst rule {worst[0]} fires on {100 * worst[1]:.1f}% of "
                         f"{total} null runs, target <= {100 * TARGET_FALSE_ALARM:.0f}% per rule: "
                         f"{'met' if ok else 'MISSED'}")
    return lines


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds per cell (default 20)")
    ap.add_argument("--quick", action="store_true", help="G 8,64 x T 100,300, at most 5 seeds")
    ap.add_argument("--g", type=_ints, help="group sizes, comma separated (default 8,16,64,256)")
    ap.add_argument("--t", type=_ints, help="run lengths, comma separated (default 60,100,300,1000)")
    ap.add_argument("--effects", default=",".join(EFFECTS), help="comma separated of none,small,large")
    ap.add_argument("--prompts", type=int, default=PROMPTS, help=f"prompts per step (default {PROMPTS})")
    ap.add_argument("--keys", choices=sorted(KEYS), default="trl", help="metric names to write (default trl)")
    ap.add_argument("--drop", default="", help=f"columns to leave out, comma separated of {','.join(COLUMNS)}")
    ap.add_argument("--old-src", help="directory holding the old stabdiag/ package")
    ap.add_argument("--old-rev", help="git revision whose stabdiag is the old one (git archive)")
    ap.add_argument("--new-src", help="directory holding the new stabdiag/ package (default: this checkout)")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs `-m stabdiag`")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="passed to `stabdiag check --jobs` (default 1)")
    ap.add_argument("--keep", type=Path, help="write the runs here and keep them (default: a temporary dir)")
    ap.add_argument("--save", type=Path, help="write the rates per cell and rule, and each run's outcome, to JSON")
    args = ap.parse_args(argv)

    groups = args.g or ((8, 64) if args.quick else GROUP_SIZES)
    lengths = args.t or ((100, 300) if args.quick else LENGTHS)
    seeds = min(args.seeds, 5) if args.quick else args.seeds
    effects = tuple(e for e in args.effects.split(",") if e)
    drop = tuple(c for c in args.drop.split(",") if c)
    if not effects or any(e not in EFFECTS for e in effects) or seeds < 1 or any(c not in COLUMNS for c in drop):
        print(f"error: --effects takes {','.join(EFFECTS)}, --drop {','.join(COLUMNS)}, --seeds at least 1",
              file=sys.stderr)
        return 2
    cells = [Cell(g, n, e) for e in effects for g in groups for n in lengths]

    sides = []
    extracted = extract_rev(args.old_rev) if args.old_rev and not args.old_src else None
    if args.old_src or args.old_rev:
        old_src = args.old_src or extracted
        sides.append(Implementation(args.python, old_src, f"old {args.old_rev or old_src}"))
    sides.append(Implementation(args.python, args.new_src, f"new {args.new_src or 'checkout'}"))

    tree = args.keep or Path(tempfile.mkdtemp(prefix="stabdiag-evidence-"))
    started = time.perf_counter()
    for cell in cells:
        for seed in range(seeds):
            write_run(tree / f"{cell.name}__s{seed}", make_run(cell, seed, args.prompts), KEYS[args.keys], drop)
    print(f"{len(cells)} cells x {seeds} seeds = {len(cells) * seeds} runs ({args.keys} keys, {args.prompts} prompts"
          f" per step{', without ' + ','.join(drop) if drop else ''}) written to {tree} "
          f"in {time.perf_counter() - started:.1f} s")
    try:
        measured = [measure(impl, tree, cells, seeds, args.jobs) for impl in sides]
    finally:
        if args.keep is None:
            shutil.rmtree(tree, ignore_errors=True)
        if extracted:
            shutil.rmtree(extracted, ignore_errors=True)
    for side in measured:
        missing = sum(row["missing"] for row in side["cells"].values())
        print(f"{side['label']}: stabdiag {side['version']}, checked in {side['seconds']:.1f} s"
              + (f", {missing} run(s) missing from its output" if missing else ""))
    lines = report(measured, groups, lengths, effects, seeds)
    print("\ntargets:")
    for line in lines:
        print(f"  {line}")
    if args.save:
        saved = {"seeds": seeds, "keys": args.keys, "prompts": args.prompts, "drop": drop, "groups": groups,
                 "lengths": lengths, "effects": effects, "sides": measured}
        args.save.write_text(json.dumps(saved, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
