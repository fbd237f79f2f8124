"""Issue 18 beyond the verdict: what a failure cost (checked against hand-computed figures), forecasts for
runs still going (shown on a collapsing run, silent on healthy ones), and abrupt-change onsets."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from stabdiag import _stats
from stabdiag.advise import advisor
from stabdiag.advise.cost import describe
from stabdiag.judge.engine import diagnose as judge
from stabdiag.read.assemble import load
from stabdiag.read.run import Run, Series
from tests.casegen import make_run


def diagnose(run, *, gpus=None, gpu_hour_cost=None, **options):
    """Judged and advised (cost, forecasts, methods), as `stabdiag check` does."""
    return judge(run, advise=advisor(gpus=gpus, gpu_hour_cost=gpu_hour_cost), **options)

FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


def test_cost_of_a_collapse_against_hand_computed_figures():
    [run] = load(str(FIXTURES / "grpo_entropy_collapse"))
    diag = diagnose(run, gpus=8, gpu_hour_cost=2.5)
    step_time = run.series["train/step_time"]
    seconds = float(np.median(step_time.values))
    zero = run.series["train/frac_reward_zero_std"]
    spans = np.diff(np.concatenate([[zero.steps[0] - 1], zero.steps]))
    wasted = float(np.sum(np.clip(zero.values, 0, 1) * spans))
    cost = diag.cost
    assert cost["step_seconds"] == pytest.approx(seconds) and cost["gpus"] == 8
    assert cost["zero_variance"]["steps"] == pytest.approx(wasted, abs=0.05)
    hours = wasted * seconds / 3600
    assert cost["zero_variance"]["gpu_hours"] == pytest.approx(8 * hours, abs=1e-3)
    assert cost["zero_variance"]["cost"] == pytest.approx(8 * hours * 2.5, abs=0.01)
    # the equal groups followed the collapse: layer 2's cost, never "data too easy"
    assert "layer 2" in cost["zero_variance"]["owner"]
    after = cost["after_root"]
    assert after["layer"] == 2 and after["steps"] == 50 - after["from_step"]
    assert diag.to_dict()["cost"]["step_seconds_source"] == "median train/step_time"


def test_no_step_time_no_cost_and_the_reason_is_said():
    diag = diagnose(make_run("csv", {"reward": {"ramp": [0.3, 0.6], "noise": 0.02},
                                     "loss": {"ramp": [1.0, 0.5]}}))
    assert "no cost is claimed" in diag.cost["reason"]
    assert describe(diag.cost)[0].startswith("cost: not estimated")


def test_step_time_from_train_runtime():
    steps = np.arange(1, 101)
    run = Run("hf", {"loss": Series.from_points("loss", steps, np.linspace(2, 1, 100))},
              meta={"summary": {"train_runtime": 250.0}, "global_step": 100})
    assert diagnose(run).cost["step_seconds"] == pytest.approx(2.5)


@pytest.mark.parametrize(("runtime", "global_step"), [(float("inf"), 100), (1e307, 1)])
def test_a_runtime_past_what_a_number_holds_claims_no_cost_and_the_report_stays_json(runtime, global_step):
    """A trainer_state.json whose train_runtime was written as 1e400 (read as inf) made step_seconds inf, and
    the JSON report an internal error (bench/fuzz.py seed 31337 case 26268); 1e307 s a step overflows the
    hours of 100 steps."""
    import json

    from stabdiag.judge.diagnosis import report_dict

    steps = np.arange(1, 101)
    run = Run("hf", {"loss": Series.from_points("loss", steps, np.linspace(2, 1, 100))},
              meta={"summary": {"train_runtime": runtime}, "global_step": global_step})
    diag = diagnose(run)
    assert "no cost is claimed" in diag.cost["reason"] and "step_seconds" not in diag.cost
    json.dumps(report_dict([diag], "x"), allow_nan=False)


def collapsing(n: int = 200, still_going: bool = True) -> Run:
    """Entropy steady at 1.2 for most of the run, then falling 0.004 a step: the floor (0.96) is near."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, n + 1)
    entropy = np.where(steps < 150, 1.2, 1.2 - 0.004 * (steps - 150)) + rng.normal(0, 0.005, n)
    return Run("collapsing", {"entropy": Series.from_points("entropy", steps, entropy),
                              "kl": Series.from_points("kl", steps, np.linspace(0, 0.02, n))})


def test_a_collapsing_run_gets_an_entropy_forecast_matching_its_trend():
    run = collapsing()
    diag = diagnose(run)
    [forecast] = [f for f in diag.forecasts if f.what == "entropy floor"]
    entropy = run.series["entropy"]
    recent = entropy.steps >= 200 - 0.25 * 199
    slope = _stats.slope_quantiles(entropy.steps[recent].astype(float), entropy.values[recent], (0.5,))[0]
    now = float(np.median(entropy.values[-3:]))
    floor = 0.8 * max(float(np.median(entropy.values[:20])), float(np.max(entropy.values[:3])))
    assert forecast.level == pytest.approx(floor)
    assert forecast.at_step == 200 + round((now - floor) / -slope)
    assert forecast.earliest <= forecast.at_step <= (forecast.latest or 10**9)
    assert diag.verdict != "fail"            # a forecast never changes a verdict
    assert diag.to_dict()["forecasts"][0]["what"] == "entropy floor"


def test_a_finished_run_gets_no_forecast():
    run = collapsing()
    from stabdiag.read.ending import Ending

    finished = Run(run.name, run.series, meta={"ending": Ending("finished", "done", "console.log", 200)})
    assert diagnose(finished).forecasts == ()


def test_forecasts_are_silent_on_healthy_runs(tmp_path):
    import scenarios

    names = [f"healthy-{i:03d}" for i in range(0, 40, 4)] + ["healthy-long-answers-001", "healthy-sft-000"]
    scenarios.build(tmp_path, names=names)
    runs = load(str(tmp_path / "runs")) + load(str(FIXTURES / "grpo_healthy")) + load(str(FIXTURES / "sft_healthy"))
    assert len(runs) == len(names) + 2
    assert {r.name: diagnose(r).forecasts for r in runs if diagnose(r).forecasts} == {}


def test_change_points_date_an_abrupt_shift():
    values = np.concatenate([np.full(100, 1.0), np.full(100, 3.0)]) + np.random.default_rng(1).normal(0, 0.05, 200)
    assert _stats.cusum_change(values, 50) in range(99, 103)
    for seed in range(20):                   # neither normal nor heavy-tailed noise is a shift
        assert _stats.cusum_change(np.random.default_rng(seed).normal(0, 1, 1000), 50) is None
        assert _stats.cusum_change(np.random.default_rng(seed).standard_t(3, 1000), 50) is None


def test_findings_carry_the_change_step_as_evidence():
    [run] = load(str(Path(__file__).resolve().parent.parent / "sample_logs" / "grpo_math_reward_hacking"))
    finding = next(f for f in diagnose(run).findings if f.rule == "L1.reward-eval-divergence")
    assert 20 <= finding.evidence["change_step"] <= finding.end_step
