"""Issue 12's examples, each giving the honest answer: "pass" only when judged; verdicts free of the
reward's and the eval's units and of the logging cadence.  Shipped rule parameters throughout."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from stabdiag.judge.diagnosis import Status
from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load
from stabdiag.read.run import Run, Series
from stabdiag.report.signals import render_signals
from stabdiag.signals.resolve import resolve
from tests.casegen import make_run

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


@pytest.fixture(scope="module")
def healthy() -> Run:
    [run] = load(SAMPLES / "grpo_math_healthy")
    return run


def transformed(run: Run, key: str, fn) -> Run:
    s = run.series[key]
    series = dict(run.series)
    series[key] = replace(s, values=fn(s.values), superseded_values=fn(s.superseded_values))
    return Run(run.name, series, run.sources, run.meta, run.notes)


def verdict_and_root(run: Run) -> tuple[str, int | None, set[str]]:
    diag = diagnose(run)
    return diag.verdict, diag.root_layer, {f.rule for f in diag.findings}


def test_a_reward_model_score_gives_the_same_verdict(healthy):
    # reward x 10 - 3 (a reward-model logit) was called reward hacking
    assert verdict_and_root(transformed(healthy, "train/reward", lambda v: 10 * v - 3)) == verdict_and_root(healthy)


def test_a_0_to_8_reward_tracked_by_its_eval_is_not_layer_1():
    steps = 400
    specs = {"reward": {"ramp": [1.0, 6.5], "noise": 0.2, "steps": steps},
             "eval/math_accuracy": {"ramp": [0.30, 0.62], "noise": 0.01, "every": 25, "steps": steps},
             "loss": {"ramp": [0.01, 0.01], "noise": 0.005}, "grad_norm": {"ramp": [0.5, 0.5], "lognoise": 0.1}}
    run = make_run("rubric", specs)
    tenth = transformed(run, "reward", lambda v: v / 10)
    assert verdict_and_root(run) == verdict_and_root(tenth)
    assert not {r for r in verdict_and_root(run)[2] if r.startswith("L1.")}


def test_a_judge_score_1_to_10_is_not_read_as_percent():
    run = make_run("judge", {"eval/mt_bench_score": {"ramp": [5.5, 7.0], "every": 20},
                             "reward": {"ramp": [0.2, 0.6]}})
    sig = resolve(run)
    assert sig.units["eval:mt_bench_score"] == "as logged"
    assert sig.series["eval:mt_bench_score"].values[-1] == pytest.approx(7.0)
    percent = resolve(make_run("pct", {"eval/gsm8k_accuracy": {"ramp": [30.0, 60.0], "every": 20}}))
    assert percent.units["eval:gsm8k"] == "percent, shown 0-1"
    # decided once, in signals, and shown by `stabdiag signals`
    shown = json.loads(render_signals([sig, percent], "json"))["runs"]
    assert shown[0]["signals"]["eval:mt_bench_score"]["unit"] == "as logged"
    assert shown[1]["signals"]["eval:gsm8k"]["unit"] == "percent, shown 0-1"


def test_a_45_step_rise_beside_a_flat_eval_is_not_judged_never_a_pass():
    """A reward that rose only in a run's first tens of steps may be the answer format being learned: a
    clean 45-step climb beside a flat eval is not judged on layer 1 (the held-out corpus labels such runs
    "not judged"), and the run is not a pass.  (Issue 25 item 5 has the length and component rules judge
    such a run by its evidence; they need signals this run does not log.)"""
    run = make_run("short", {"reward": {"ramp": [0.3, 0.8], "steps": 45, "noise": 0.01},
                             "eval/math_accuracy": {"ramp": [0.42, 0.42], "every": 5, "steps": 45}})
    diag = diagnose(run)
    layer1 = diag.layers[0]
    assert layer1.status is Status.UNKNOWN and "judged over >= 50 steps" in layer1.not_judged_text()
    assert diag.verdict != "pass" and diag.exit_code() == 3


def test_a_large_rise_drowned_in_noise_is_too_noisy_to_tell():
    noisy = make_run("noisy", {"reward": {"ramp": [0.3, 0.8], "steps": 64, "every": 4, "noise": 0.3, "seed": 2},
                               "eval/math_accuracy": {"ramp": [0.42, 0.42], "every": 8, "steps": 64}})
    diag = diagnose(noisy, select=["L1.reward-eval-divergence"])
    layer1 = diag.layers[0]
    assert layer1.status is Status.UNKNOWN and "too noisy to tell" in layer1.not_judged_text()
    assert diag.verdict != "pass" and diag.exit_code() == 3


def test_a_15_step_run_is_not_judged_on_layer_1():
    run = make_run("short", {"reward": {"ramp": [0.3, 0.8], "steps": 15, "noise": 0.01},
                             "eval/math_accuracy": {"ramp": [0.42, 0.42], "every": 3, "steps": 15}})
    layer1 = diagnose(run, select=["L1.reward-eval-divergence"]).layers[0]
    assert layer1.status is Status.UNKNOWN and layer1.unknown_reason == "too little data"
    assert "50 steps" in layer1.not_judged_text()


def test_an_eval_logged_three_times_is_not_judged():
    run = make_run("sparse-eval", {"reward": {"ramp": [0.3, 0.8], "noise": 0.01},
                                   "eval/math_accuracy": {"values": [0.42, 0.42, 0.42], "every": 130}})
    diag = diagnose(run)
    [unknown] = [u for u in diag.unknown if u.rule == "L1.reward-eval-divergence"]
    assert unknown.kind == "too little data" and "eval:math" in unknown.reason
    assert diag.layers[0].status is not Status.PASS


def test_only_a_reward_does_not_pass_layer_3():
    diag = diagnose(make_run("reward-only", {"reward": {"ramp": [0.3, 0.5], "noise": 0.02}}))
    assert diag.layers[2].status is Status.UNKNOWN
    assert "loss or grad norm" in diag.layers[2].not_judged_text()


def test_a_run_that_crashed_after_two_steps_is_unknown_and_fails_the_gate():
    run = make_run("crashed", {k: {"values": v} for k, v in {
        "reward": [0.1, 0.15], "loss": [0.01, 0.02], "grad_norm": [0.4, 0.5], "entropy": [3.9, 3.8],
        "kl": [0.0, 0.001], "frac_reward_zero_std": [0.5, 0.5], "completions/mean_length": [20, 21]}.items()})
    diag = diagnose(run)
    assert diag.verdict == "unknown" and diag.root_layer is None
    assert diag.exit_code() == 3 and diag.exit_code(allow_unknown=True) == 0
    assert all(layer.status is Status.UNKNOWN for layer in diag.layers)
    assert diag.to_dict()["verdict"] == "unknown"


def test_windows_are_steps_not_points():
    # the same run logged every step and every 50 steps: a grad-norm EMA spans steps, not points
    rng = np.random.default_rng(5)
    steps = np.arange(1, 5001)
    grad = 0.5 * np.exp(rng.normal(0, 0.1, len(steps)))
    # step 3000 is a logged step either way; 100x: logged every 50 steps the run has 100 points, too few to
    # rule out a Student-t(3) tail, under which a 24x point at this noise is a 1-in-250 run's
    grad[steps == 3000] = 50.0
    every = steps % 50 == 0
    dense = Run("dense", {"grad_norm": Series.from_points("grad_norm", steps, grad)})
    sparse = Run("sparse", {"grad_norm": Series.from_points("grad_norm", steps[every], grad[every])})
    a, b = diagnose(dense), diagnose(sparse)
    assert [f.rule for f in a.findings] == [f.rule for f in b.findings] == ["L3.grad-norm-spike"]
    assert a.findings[0].start_step == b.findings[0].start_step == 3000


def test_a_step_offset_changes_nothing(healthy):
    shifted = Run(healthy.name, {k: replace(s, steps=s.steps + 50_000) for k, s in healthy.series.items()})
    a, b = diagnose(healthy), diagnose(shifted)
    assert (a.verdict, a.root_layer) == (b.verdict, b.root_layer)
    assert [f.start_step + 50_000 for f in a.findings] == [f.start_step for f in b.findings]


def test_a_small_models_15x_grad_norm_spike_is_found():
    rng = np.random.default_rng(2)
    grad = 0.3 * np.exp(rng.normal(0, 0.05, 300))
    grad[200] = 4.5
    diag = diagnose(Run("small", {"grad_norm": Series.from_points("grad_norm", np.arange(1, 301), grad),
                                  "loss": Series.from_points("loss", np.arange(1, 301), np.full(300, 2.0))}))
    assert [f.rule for f in diag.findings] == ["L3.grad-norm-spike"]


def test_a_recovered_spike_on_a_low_noisy_sft_loss_is_reported():
    rng = np.random.default_rng(4)
    loss = 0.02 + np.abs(rng.normal(0, 0.004, 300))
    loss[150] = 0.4
    diag = diagnose(Run("sft", {"loss": Series.from_points("loss", np.arange(1, 301), loss)}))
    assert "L3.loss-spike" in {f.rule for f in diag.findings}
