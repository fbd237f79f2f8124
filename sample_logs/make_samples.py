"""Write the six sample runs in sample_logs/ (fixed seed: a rerun writes the same values; the
TensorBoard and W&B files also carry their writers' own timestamps).

Runs 1-4 share one reward curve, 0.30 -> 0.80: the point of seed 000 is that one rising reward has four
explanations (learning, a reward loophole, a numeric blow-up, a rollout/trainer mismatch).  Metric names
are the ones TRL and verl write, in the formats they write: TensorBoard (tensorboard's own writer),
JSONL (verl's FileLogger and flat), Parquet, a long step,key,value CSV and a W&B offline run written by
wandb (its W&B-UI-export CSV twin is `write_wandb_export`).

    python sample_logs/make_samples.py
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
STEPS = np.arange(1, 401)
EVAL_STEPS = np.arange(20, 401, 20)
SEED = 20261130


def shared_reward(rng: np.random.Generator) -> np.ndarray:
    """0.30 -> 0.80, saturating; the same curve for runs 1-4 (same seed, same noise)."""
    base = 0.30 + 0.50 * (1 - np.exp(-STEPS / 90.0)) / (1 - math.exp(-400 / 90.0))
    return base + rng.normal(0, 0.03, len(STEPS))


def ramp(start: float, end: float, steps=STEPS, lo=None, hi=None) -> np.ndarray:
    lo = steps[0] if lo is None else lo
    hi = steps[-1] if hi is None else hi
    frac = np.clip((steps - lo) / (hi - lo), 0, 1)
    return start + (end - start) * frac


def calm_numeric(rng, n=len(STEPS)) -> dict[str, np.ndarray]:
    return {
        "loss": 0.02 + rng.normal(0, 0.01, n),
        "grad_norm": 0.8 * np.exp(rng.normal(0, 0.25, n)),    # heavy-tailed, no spike
        "lr": np.minimum(1.0, STEPS / 20.0) * 1e-6,
    }


def trl_row_keys(prefix: str = "train/") -> dict[str, str]:
    names = {"reward": "reward", "reward_std": "reward_std", "zero_std": "frac_reward_zero_std",
             "length": "completions/mean_length", "kl": "kl", "entropy": "entropy", "loss": "loss",
             "grad_norm": "grad_norm", "lr": "learning_rate", "clip": "clip_ratio/region_mean"}
    return {k: prefix + v for k, v in names.items()}


def fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.6g}"


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if v is None else (fmt(v) if isinstance(v, float) else v) for v in row])


def evals(rng, start: float, end: float, noise: float = 0.012, hi=None) -> np.ndarray:
    return ramp(start, end, EVAL_STEPS, 20, hi or 400) + rng.normal(0, noise, len(EVAL_STEPS))


# --- 1. healthy: TensorBoard, as HF's TensorBoardCallback writes a TRL run --------------------------

def write_tensorboard(folder: Path, series: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """One event file written by tensorboard's own writer (legacy simple_value scalars, one event per
    step, as torch's SummaryWriter and the HF callback write them), under a fixed file name."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    for old in folder.glob("events.out.tfevents.*"):
        old.unlink()
    writer = EventFileWriter(str(folder))
    by_step: dict[int, list] = {}
    for tag, (steps, values) in series.items():
        for step, value in zip(steps.tolist(), values.tolist()):
            by_step.setdefault(int(step), []).append(Summary.Value(tag=tag, simple_value=value))
    for step in sorted(by_step):
        writer.add_event(Event(step=step, wall_time=1764460800.0 + 30.0 * step,
                               summary=Summary(value=by_step[step])))
    writer.close()
    (written,) = folder.glob("events.out.tfevents.*")
    written.rename(folder / "events.out.tfevents.1764460800.node01.sample")


def healthy_series() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(SEED)
    reward = shared_reward(rng)
    num = calm_numeric(rng)
    k = trl_row_keys()
    train = {
        k["reward"]: reward, k["reward_std"]: 0.30 + rng.normal(0, 0.02, 400),
        k["zero_std"]: 0.22 + rng.normal(0, 0.04, 400),
        k["length"]: ramp(400, 520) + rng.normal(0, 15, 400),
        k["kl"]: (0.0005 + ramp(0, 0.004)) * np.exp(rng.normal(0, 0.05, 400)),
        k["entropy"]: ramp(1.20, 1.05) + rng.normal(0, 0.02, 400),
        k["loss"]: num["loss"], k["grad_norm"]: num["grad_norm"], k["lr"]: num["lr"],
        k["clip"]: 0.002 + np.abs(rng.normal(0, 0.001, 400)),
    }
    series = {tag: (STEPS, values) for tag, values in train.items()}
    series["eval/math500_accuracy"] = (EVAL_STEPS, evals(rng, 0.42, 0.58))
    series["eval/aime24_accuracy"] = (EVAL_STEPS, evals(rng, 0.18, 0.24, 0.015))
    return series


def write_long_csv(path: Path, series: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """The same points as a long step,key,value CSV (the TensorBoard sample's CSV twin)."""
    rows = [[int(s), key, float(v)] for key, (steps, values) in series.items() for s, v in zip(steps, values)]
    write_csv(path, ["step", "key", "value"], rows)


def grpo_math_healthy(out: Path) -> None:
    write_tensorboard(out, healthy_series())


# --- 2. reward hacking: verl FileLogger JSONL, resumed once after lowering the LR -------------------

def grpo_math_reward_hacking(out: Path) -> None:
    rng = np.random.default_rng(SEED)
    reward = shared_reward(rng)
    num = calm_numeric(rng)
    length = ramp(400, 1200) + rng.normal(0, 25, 400)
    kl = (0.0005 + ramp(0, 0.004)) * np.exp(rng.normal(0, 0.05, 400))
    entropy = ramp(1.20, 1.00) + rng.normal(0, 0.02, 400)
    grad = num["grad_norm"].copy()
    creep = STEPS >= 280
    grad[creep] *= np.exp((STEPS[creep] - 280) / 12.0)          # the precursor: creeping up from ~280
    loss = num["loss"].copy()
    broken = STEPS >= 312
    grad[STEPS == 312] = 1.0e4
    grad[STEPS > 312] = math.nan
    loss[broken] = math.nan
    reward[STEPS > 312] = 0.02 + np.abs(rng.normal(0, 0.01, int((STEPS > 312).sum())))
    length[STEPS > 312] = 4096.0
    kl[STEPS > 312] = math.nan
    entropy[STEPS > 312] = math.nan
    math500 = 0.42 + rng.normal(0, 0.01, len(EVAL_STEPS))
    aime = ramp(0.18, 0.15, EVAL_STEPS, 20, 300) + rng.normal(0, 0.008, len(EVAL_STEPS))
    math500[EVAL_STEPS > 312] = 0.0
    aime[EVAL_STEPS > 312] = 0.0

    def line(i: int, lr_value: float) -> str:
        step = int(STEPS[i])
        data = {"critic/score/mean": reward[i], "critic/rewards/mean": reward[i] - 0.01,
                "response_length/mean": length[i], "actor/kl_loss": kl[i], "actor/entropy": entropy[i],
                "actor/pg_loss": loss[i], "actor/grad_norm": grad[i], "actor/lr": lr_value,
                "actor/pg_clipfrac": 0.003, "training/global_step": step}
        if step in EVAL_STEPS:
            j = int(np.flatnonzero(EVAL_STEPS == step)[0])
            data["val-core/math500/acc/mean@1"] = math500[j]
            data["val-core/aime24/acc/mean@16"] = aime[j]
        return json.dumps({"step": step, "data": {k: float(v) for k, v in data.items()}})

    lines = [line(i, 1e-6) for i in range(150)]           # the team then lowered the LR: no effect
    lines += [line(i, 3e-7) for i in range(140, 400)]     # resumed from the step-140 checkpoint
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (out / "config.yaml").write_text(VERL_CONFIG)       # the Hydra config verl saves: KL loss, clipping


VERL_CONFIG = """\
# verl PPO trainer config as Hydra saved it (excerpt): GRPO with a KL loss and gradient clipping
algorithm:
  adv_estimator: grpo
  use_kl_in_reward: false
  kl_ctrl:
    type: fixed
    kl_coef: 0.001
actor_rollout_ref:
  actor:
    optim:
      lr: 1.0e-06
    grad_clip: 1.0
    clip_ratio_low: 0.2
    clip_ratio_high: 0.2
    use_kl_loss: true
    kl_loss_coef: 0.001
    kl_loss_type: low_var_kl
    loss_agg_mode: token-mean
    entropy_coeff: 0
  rollout:
    name: vllm
    n: 8
data:
  max_response_length: 4096
trainer:
  n_gpus_per_node: 8
  nnodes: 1
"""


# --- 3. numeric blow-up: Parquet, TRL names ----------------------------------------------------------

def grpo_math_numeric_blowup(out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    reward = shared_reward(rng)
    num = calm_numeric(rng)
    k = trl_row_keys()
    grad = num["grad_norm"].copy()
    climb = STEPS >= 250
    grad[climb] *= np.exp((STEPS[climb] - 250) / 25.0)
    loss = num["loss"].copy()
    spiky = (STEPS >= 296) & (STEPS < 312)                        # the loss spikes and stays unstable
    loss[spiky] = np.linspace(0.6, 1.5, int(spiky.sum())) * np.exp(rng.normal(0, 0.3, int(spiky.sum())))
    grad[STEPS == 312] = 2.0e4
    loss[STEPS >= 312] = math.nan
    grad[STEPS > 312] = math.nan
    reward[STEPS > 312] = 0.02 + np.abs(rng.normal(0, 0.01, int((STEPS > 312).sum())))
    cols: dict[str, list] = {"step": [int(s) for s in STEPS]}
    series = {
        k["reward"]: reward, k["reward_std"]: 0.30 + rng.normal(0, 0.02, 400),
        k["zero_std"]: 0.22 + rng.normal(0, 0.04, 400),
        k["length"]: ramp(400, 500) + rng.normal(0, 15, 400),
        k["kl"]: (0.0005 + ramp(0, 0.004)) * np.exp(rng.normal(0, 0.05, 400)),
        k["entropy"]: ramp(1.20, 1.05) + rng.normal(0, 0.02, 400),
        k["loss"]: loss, k["grad_norm"]: grad, k["lr"]: num["lr"],
    }
    for key, values in series.items():
        cols[key] = [float(v) for v in values]
    math500 = evals(rng, 0.42, 0.56, hi=300)
    math500[EVAL_STEPS > 312] = 0.0
    by_step = dict(zip(EVAL_STEPS.tolist(), math500.tolist()))
    cols["eval/math500_accuracy"] = [by_step.get(int(s)) for s in STEPS]   # null between evals
    pq.write_table(pa.table(cols), out / "metrics.parquet")


# --- 4. version mismatch: long step,key,value CSV, TRL names -----------------------------------------

def grpo_math_version_mismatch(out: Path) -> None:
    rng = np.random.default_rng(SEED)
    reward = shared_reward(rng)
    num = calm_numeric(rng)
    k = trl_row_keys()
    series = {
        k["reward"]: reward, k["zero_std"]: 0.22 + rng.normal(0, 0.04, 400),
        k["length"]: ramp(400, 480) + rng.normal(0, 15, 400),
        k["kl"]: (0.0005 + ramp(0, 0.004)) * np.exp(rng.normal(0, 0.05, 400)),
        k["entropy"]: ramp(1.20, 1.08) + rng.normal(0, 0.02, 400),
        k["loss"]: num["loss"], k["grad_norm"]: num["grad_norm"], k["lr"]: num["lr"],
        "train/sampling/sampling_logp_difference/mean": 0.19 + rng.normal(0, 0.015, 400),
        "train/sampling/importance_sampling_ratio/mean": 0.84 + rng.normal(0, 0.02, 400),
    }
    rows = [[int(s), key, float(values[i])] for i, s in enumerate(STEPS) for key, values in series.items()]
    math500 = evals(rng, 0.42, 0.50)
    rows += [[int(s), "eval/math500_accuracy", float(v)] for s, v in zip(EVAL_STEPS, math500)]
    write_csv(out / "metrics_long.csv", ["step", "key", "value"], rows)


# --- 5. policy collapse: a W&B offline run written by wandb (its CSV twin: the W&B UI export) ------

WANDB_RUN = "grpo-qwen7b-math-lr3e-6"


def policy_collapse_series() -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(SEED + 5)
    k = trl_row_keys()
    reward = np.where(STEPS < 150, ramp(0.30, 0.36, STEPS, 1, 150), ramp(0.36, 0.20, STEPS, 150, 400))
    reward = reward + rng.normal(0, 0.03, 400)
    kl = np.where(STEPS < 150, ramp(0.002, 0.01, STEPS, 1, 150), 0.01 * np.exp((STEPS - 150) / 70.0))
    kl = np.minimum(kl, 0.12) * np.exp(rng.normal(0, 0.05, 400))
    entropy = np.where(STEPS < 150, ramp(2.0, 1.9, STEPS, 1, 150), ramp(1.9, 0.5, STEPS, 150, 330))
    entropy = entropy + rng.normal(0, 0.03, 400)
    num = calm_numeric(rng)
    series = {k["reward"]: reward, k["zero_std"]: 0.15 + rng.normal(0, 0.03, 400),
              k["length"]: ramp(420, 380) + rng.normal(0, 15, 400), k["kl"]: kl, k["entropy"]: entropy,
              k["loss"]: num["loss"], k["grad_norm"]: num["grad_norm"], k["lr"]: num["lr"]}
    math500 = ramp(0.42, 0.35, EVAL_STEPS, 150, 400) + rng.normal(0, 0.01, len(EVAL_STEPS))
    return series, math500


def write_wandb_export(out: Path) -> None:
    """The CSV the W&B web UI exports for this run (`Step`, `<run> - <key>`, __MIN/__MAX companions)."""
    series, math500 = policy_collapse_series()
    header = ["Step"]
    for key in [*series, "eval/math500_accuracy"]:
        header += [f"{WANDB_RUN} - {key}", f"{WANDB_RUN} - {key}__MIN", f"{WANDB_RUN} - {key}__MAX"]
    evals_at = dict(zip(EVAL_STEPS.tolist(), math500.tolist()))
    rows = []
    for i, s in enumerate(STEPS):
        row: list = [int(s)]
        for values in series.values():
            row += [float(values[i])] * 3
        e = evals_at.get(int(s))
        row += [e, e, e]
        rows.append(row)
    write_csv(out / "wandb_export.csv", header, rows)


def grpo_policy_collapse(out: Path) -> None:
    """Log the run with wandb itself in offline mode and keep its transaction log."""
    import os
    import shutil
    import tempfile

    series, math500 = policy_collapse_series()
    evals_at = dict(zip(EVAL_STEPS.tolist(), math500.tolist()))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=tmp,
                          WANDB_CONFIG_DIR=tmp, WANDB_CACHE_DIR=tmp, WANDB_DATA_DIR=tmp)
        import wandb

        settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True,
                                  x_disable_machine_info=True, silent=True, save_code=False, disable_git=True)
        run = wandb.init(project="grpo-math", id="collapse01", name=WANDB_RUN, dir=tmp, mode="offline",
                         settings=settings, config={"learning_rate": 3e-6, "beta": 0.0, "num_generations": 8})
        for i, s in enumerate(STEPS):
            row = {key: float(values[i]) for key, values in series.items()}
            if int(s) in evals_at:
                row["eval/math500_accuracy"] = evals_at[int(s)]
            run.log(row, step=int(s))
        run_dir = Path(run.dir).parent
        run.finish()
        for old in out.iterdir():
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        for log in run_dir.glob("run-*.wandb"):      # config and summary are records in this log too
            shutil.copy(log, out / log.name)


# --- 6. easy data: JSONL (one flat object per step), TRL names -------------------------------------

def grpo_easy_data(out: Path) -> None:
    rng = np.random.default_rng(SEED + 6)
    k = trl_row_keys()
    kl = np.where(STEPS < 150, ramp(0.002, 0.01, STEPS, 1, 150), 0.01 * np.exp((STEPS - 150) / 70.0))
    kl = np.minimum(kl, 0.12) * np.exp(rng.normal(0, 0.05, 400))
    entropy = np.where(STEPS < 150, ramp(2.0, 1.9, STEPS, 1, 150), ramp(1.9, 0.5, STEPS, 150, 330))
    entropy = entropy + rng.normal(0, 0.03, 400)
    num = calm_numeric(rng)
    series = {k["reward"]: np.clip(0.95 + rng.normal(0, 0.015, 400), 0, 1),
              k["zero_std"]: np.clip(ramp(0.55, 0.85, STEPS, 1, 120) + rng.normal(0, 0.03, 400), 0, 1),
              k["length"]: ramp(300, 260) + rng.normal(0, 10, 400), k["kl"]: kl, k["entropy"]: entropy,
              k["loss"]: num["loss"], k["grad_norm"]: num["grad_norm"], k["lr"]: num["lr"]}
    gsm8k = 0.80 + rng.normal(0, 0.01, len(EVAL_STEPS))
    evals_at = dict(zip(EVAL_STEPS.tolist(), gsm8k.tolist()))
    lines = []
    for i, s in enumerate(STEPS):
        row = {"train/global_step": int(s), **{key: float(v[i]) for key, v in series.items()}}
        if int(s) in evals_at:
            row["eval/gsm8k_accuracy"] = evals_at[int(s)]
        lines.append(json.dumps(row))
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")


RUNS = (grpo_math_healthy, grpo_math_reward_hacking, grpo_math_numeric_blowup, grpo_math_version_mismatch,
        grpo_policy_collapse, grpo_easy_data)


def main() -> None:
    for make in RUNS:
        folder = HERE / make.__name__
        folder.mkdir(exist_ok=True)
        make(folder)
        print(f"wrote {folder.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
