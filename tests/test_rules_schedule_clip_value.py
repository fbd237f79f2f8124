"""The learning-rate-collapse, clip-fraction, value-head and MoE aux-loss rules (issue 25 items 6 and 7) on
real runs: quiet or "not judged" on published healthy runs, and firing on runs written by real writers
(TensorBoard's, driven by torch's own schedulers) that show the failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
HEALTHY, REAL_LOGS = SHARED / "real_healthy", SHARED / "real_logs"
needs_shared = pytest.mark.skipif(not HEALTHY.is_dir() or not REAL_LOGS.is_dir(),
                                  reason="shared/real_healthy and shared/real_logs are not beside the checkout")


def outcome(path: Path, rule: str) -> tuple[str, str]:
    (run,) = load(path)
    diag = diagnose(run, select=[rule])
    if any(f.rule == rule for f in diag.findings):
        return "fires", next(f.message for f in diag.findings if f.rule == rule)
    unknown = [u for u in diag.unknown if u.rule == rule]
    return ("not judged", unknown[0].describe()) if unknown else ("quiet", "")


# ---------------------------------------------------------------- published runs (shared/)

@needs_shared
@pytest.mark.parametrize("folder", ["deepseek7b_grpo_gsm8k_mi300", "qwen2_7b_gpg_gsm8k_math_fsdp"])
def test_verl_lr_logged_as_zero_throughout_is_not_judged(folder):
    """verl_baseline_ext logs actor/lr as 0 at every step while the loss moves: a logging artefact,
    neither a collapse nor a clean bill."""
    result, why = outcome(HEALTHY / "verl_baseline_ext" / folder, "L3.lr-schedule-collapsed")
    assert result == "not judged" and "logging artefact" in why


@needs_shared
@pytest.mark.parametrize("path", [
    "real_healthy/verl_async_reward/gsm8k_qwen2_7b_async_tb",   # linear decay 1e-6 -> ~1e-8 at the last step
    "real_healthy/verl_async_reward/q7b_fsdp_base_tb",           # constant 1e-6
    "real_logs/llmc_gpt2_124m_baseline",                         # warm-up, then decay to 0 at the end
    "real_logs/hf_trl_sft_tinyllama_lora",                       # warm-up, cosine to ~0 at the end
    "real_logs/bigscience_tr8_104B_wide_divergence",             # Megatron console, lr halved mid-run
])
def test_healthy_schedules_decaying_to_zero_at_the_end_are_quiet(path):
    assert outcome(SHARED / path, "L3.lr-schedule-collapsed")[0] == "quiet"


@needs_shared
@pytest.mark.parametrize("path", ["real_healthy/verl_async_reward/q7b_mcore_off_tb",
                                  "real_healthy/verl_baseline_ext/deepseek7b_grpo_gsm8k_mi300"])
def test_healthy_verl_clip_fractions_are_judged_and_quiet(path):
    assert outcome(SHARED / path, "L2.clip-fraction-saturated")[0] == "quiet"


@needs_shared
def test_deepspeed_chat_critic_loss_is_mapped_but_not_read_as_a_squared_error():
    """DeepSpeed-Chat step 3's cri_loss goes below 0 in its healthy reference log: no level to read."""
    (run,) = load(REAL_LOGS / "dschat_ppo_opt1.3b")
    assert diagnose(run).signals["value_loss"] == "cri_loss"
    result, why = outcome(REAL_LOGS / "dschat_ppo_opt1.3b", "L3.value-head-diverging")
    assert result == "not judged" and "not a squared error" in why


# ---------------------------------------------------------------- runs written here by real writers

def _tensorboard_run(folder: Path, series: dict[str, list[float]]) -> Path:
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for key, values in series.items():
        for step, value in enumerate(values, start=1):
            writer.add_scalar(key, value, step)
    writer.close()
    return folder


def _lrs(scheduler_factory, steps: int) -> list[float]:
    torch = pytest.importorskip("torch")

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=2e-5)
    scheduler = scheduler_factory(optimizer)
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_a_linear_schedule_set_for_300_of_600_steps_fires(tmp_path):
    """torch's LinearLR told the run is 300 steps long (total_iters) while it trains for 600: lr 0 from
    step 300 on, half the run spent without updates."""
    torch = pytest.importorskip("torch")

    lrs = _lrs(lambda opt: torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.0, total_iters=300), 600)
    run = _tensorboard_run(tmp_path / "tb", {"train/learning_rate": lrs, "train/loss": [2.0] * 600})
    result, message = outcome(run, "L3.lr-schedule-collapsed")
    assert result == "fires" and "learning_rate" in message and "(50% of the run)" in message


def test_a_cosine_schedule_over_the_whole_run_is_quiet(tmp_path):
    torch = pytest.importorskip("torch")

    lrs = _lrs(lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=600), 600)
    run = _tensorboard_run(tmp_path / "tb", {"train/learning_rate": lrs, "train/loss": [2.0] * 600})
    assert outcome(run, "L3.lr-schedule-collapsed")[0] == "quiet"


def test_verl_file_logger_run_with_lr_zero_throughout_is_not_judged(tmp_path):
    """verl's FileLogger JSONL ({"step": N, "data": {...}}) with actor/lr 0 at every step."""
    lines = [json.dumps({"step": s, "data": {"actor/lr": 0.0, "actor/pg_loss": 0.03 / s, "actor/pg_clipfrac": 0.001,
                                             "critic/score/mean": 0.3 + s / 100}}) for s in range(1, 61)]
    (tmp_path / "exp.jsonl").write_text("\n".join(lines) + "\n")
    result, why = outcome(tmp_path, "L3.lr-schedule-collapsed")
    assert result == "not judged" and "logging artefact" in why
    assert outcome(tmp_path, "L2.clip-fraction-saturated")[0] == "quiet"


def test_verl_ppo_critic_that_loses_the_returns_fails(tmp_path):
    """verl PPO keys: the critic's loss climbs 10x and its explained variance goes negative."""
    lines = []
    for s in range(1, 201):
        late = max(0.0, min(1.0, (s - 80) / 40))
        lines.append(json.dumps({"step": s, "data": {
            "critic/vf_loss": 0.05 + 0.45 * late + 0.002 * (s % 3), "critic/vf_explained_var": 0.6 - 1.1 * late,
            "critic/score/mean": 0.4, "actor/pg_clipfrac": 0.002, "actor/ppo_kl": 0.001}}))
    (tmp_path / "ppo.jsonl").write_text("\n".join(lines) + "\n")
    (run,) = load(tmp_path)
    found = [f for f in diagnose(run, select=["L3.value-head-diverging"]).findings]
    assert found and found[0].severity == "fail"
    assert "critic/vf_loss" in found[0].message and "critic/vf_explained_var" in found[0].message


def test_a_warmup_longer_than_the_run_with_a_flat_loss_is_not_learning(tmp_path):
    """torch's LinearLR warm-up over 2,000 steps in a 200-step SFT run, the loss at its start: the
    "not learning" warning of issue 25 item 4; the same run with a falling loss is quiet."""
    torch = pytest.importorskip("torch")

    lrs = _lrs(lambda opt: torch.optim.lr_scheduler.LinearLR(opt, 0.001, 1.0, total_iters=2000), 200)
    flat = [1.82 + 0.01 * ((s * 7) % 5 - 2) for s in range(200)]
    falling = [1.82 - 0.2 * s / 200 + 0.01 * ((s * 7) % 5 - 2) for s in range(200)]
    result, message = outcome(_tensorboard_run(tmp_path / "flat", {"train/learning_rate": lrs, "train/loss": flat}),
                              "L3.loss-flat-in-warmup")
    assert result == "fires" and message.startswith("not learning")
    assert outcome(_tensorboard_run(tmp_path / "falling", {"train/learning_rate": lrs, "train/loss": falling}),
                   "L3.loss-flat-in-warmup")[0] == "quiet"


@needs_shared
@pytest.mark.parametrize("folder", ["llmc_gpt2_124m_baseline", "hf_trl_sft_tinyllama_lora",
                                    "hf_trainer_cpt_feedback_gen"])
def test_healthy_supervised_runs_past_their_warmup_are_quiet(folder):
    assert outcome(REAL_LOGS / folder, "L3.loss-flat-in-warmup")[0] == "quiet"
