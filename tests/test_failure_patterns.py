"""Issue 13's failure patterns, each reproduced with the numbers the issue quotes and diagnosed with the
shipped rules: collapse -> 2, frozen -> 3 (or the layer of its cause), KL level -> 2, SFT divergence
-> 3, component gaming and a capped length loophole -> 1, rolled-back blow-up -> 3, layer 4 on few
points.  The real TRL / Trainer output dirs are checked in test_framework_fixtures.py."""

from __future__ import annotations

import math

import numpy as np

from stabdiag.judge.diagnosis import Status
from stabdiag.judge.engine import diagnose
from stabdiag.read.run import Run, Series
from tests.casegen import make_run


def grpo_run(n: int = 80, **overrides) -> dict:
    """A TRL GRPO run's specs (trainer_state names): healthy unless overridden."""
    specs = {"reward": {"ramp": [0.3, 0.45], "noise": 0.02, "steps": n},
             "frac_reward_zero_std": {"ramp": [0.2, 0.25], "noise": 0.02, "steps": n},
             "completions/mean_length": {"ramp": [20, 22], "noise": 0.5, "steps": n},
             "entropy": {"ramp": [3.9, 3.6], "noise": 0.03, "steps": n},
             "loss": {"ramp": [0.0, 0.0], "noise": 0.01, "steps": n},
             "grad_norm": {"ramp": [0.8, 0.8], "lognoise": 0.15, "steps": n},
             "learning_rate": {"ramp": [1e-4, 1e-4], "steps": n}}
    specs.update(overrides)
    return specs


def rules(diag) -> set[str]:
    return {f.rule for f in diag.findings}


def test_instant_collapse_is_layer_2_and_equal_rewards_are_its_consequence():
    n = 80
    collapsed = [3.9, 0.4, 0.07] + [0.0] * (n - 3)
    diag = diagnose(make_run("lr-1.0", grpo_run(
        n, entropy={"values": collapsed},
        frac_reward_zero_std={"values": [0.3, 0.7] + [1.0] * (n - 2)},
        reward={"values": [0.3, 0.2] + [0.0] * (n - 2)},
        grad_norm={"values": [2.0, 1.1, 0.05] + [0.0] * (n - 3)},
        loss={"values": [0.01, 0.02] + [0.0] * (n - 2)},
        learning_rate={"ramp": [1.0, 1.0], "steps": n})))
    assert diag.root_layer == 2 and diag.verdict == "fail"
    assert "L2.entropy-collapse" in rules(diag)
    equal = [f for f in diag.findings if f.rule == "L1.zero-variance-groups"]
    assert equal and all(f.explained_by.startswith("L2.") and "data too" not in f.message for f in equal)
    assert not any("explained by zero_std_frac" in f.message for f in diag.findings)
    frozen = [f for f in diag.findings if f.rule == "L3.frozen-updates"]
    assert frozen and frozen[0].downstream
    assert diag.exit_code() == 1


def test_collapse_at_lr_100_does_not_pass_layer_2():
    n = 80
    diag = diagnose(make_run("lr-100", grpo_run(n, entropy={"values": [3.9] + [0.0] * (n - 1)})))
    assert diag.layers[1].status is Status.FAIL


def test_frozen_updates_alone_are_layer_3():
    n = 100
    diag = diagnose(make_run("frozen", grpo_run(
        n, loss={"values": [0.02] * 24 + [0.0] * (n - 24)},
        grad_norm={"values": list(np.linspace(0.9, 0.7, 24)) + [0.0] * (n - 24)})))
    assert diag.root_layer == 3 and "L3.frozen-updates" in rules(diag)


def test_kl_of_one_nat_is_named_even_from_zero():
    diag = diagnose(make_run("kl", grpo_run(80, kl={"ramp": [0.0, 0.95], "noise": 0.01, "steps": 80})))
    assert diag.root_layer == 2 and "L2.kl-level-high" in rules(diag)


def test_sft_divergence_without_nan_is_layer_3_with_sft_advice():
    loss = [4.0, 3.9, 3.8, 3.9, 3.7, 3.8, 9.0, 40.0, 160.0, 546.0] + list(
        np.random.default_rng(0).uniform(200, 600, 30))
    diag = diagnose(make_run("sft", {"loss": {"values": loss, "every": 5},
                                     "grad_norm": {"values": [3.0] * 6 + [80.0] * 34, "every": 5},
                                     "learning_rate": {"values": [1e-2] * 40, "every": 5}}))
    assert diag.root_layer == 3 and "L3.loss-divergence" in rules(diag)
    words = " ".join(step for f in diag.root_findings() for step in f.check_first).lower()
    assert "reward" not in words and "advantage" not in words


def test_component_gaming_is_layer_1():
    diag = diagnose(make_run("open-r1", grpo_run(
        300, **{"rewards/format_reward/mean": {"ramp": [0.48, 0.86], "noise": 0.02, "steps": 300},
                "rewards/accuracy_reward/mean": {"ramp": [0.16, 0.06], "noise": 0.02, "steps": 300},
                "reward": {"ramp": [0.64, 0.92], "noise": 0.02, "steps": 300}})))
    assert diag.root_layer == 1 and "L1.reward-component-divergence" in rules(diag)


def test_trl_eval_reward_is_not_an_independent_eval():
    # a length hack whose eval/reward rises with it: with no independent eval, layer 1's divergence rule
    # is not judged (it was "tracked" and passed)
    diag = diagnose(make_run("length-hack", grpo_run(
        200, reward={"ramp": [0.3, 0.9], "noise": 0.02, "steps": 200},
        eval_reward={"ramp": [0.3, 0.9], "every": 10, "steps": 200})))
    assert not any(name.startswith("eval:") for name in diag.signals)
    assert "L1.reward-eval-divergence" in {u.rule for u in diag.unknown}


def test_length_loophole_under_a_cap_is_layer_1():
    diag = diagnose(make_run("capped", grpo_run(
        100, reward={"ramp": [0.6, 0.97], "noise": 0.02, "steps": 100},
        **{"completions/clipped_ratio": {"ramp": [0.5, 1.0], "noise": 0.02, "steps": 100},
           "completions/mean_length": {"ramp": [21, 31], "noise": 0.5, "steps": 100}})))
    assert diag.root_layer == 1 and "L1.truncation-climb" in rules(diag)


def test_a_transient_inf_does_not_cut_a_reward_hack():
    n = 300
    specs = grpo_run(n, reward={"ramp": [0.3, 0.8], "noise": 0.01, "steps": n},
                     loss={"ramp": [0.0, 0.0], "noise": 0.01, "steps": n, "set": {3: "inf"}},
                     grad_norm={"ramp": [0.8, 0.8], "lognoise": 0.1, "steps": n, "set": {3: "inf"}})
    specs["eval/math_accuracy"] = {"ramp": [0.42, 0.42], "noise": 0.005, "every": 20, "steps": n}
    diag = diagnose(make_run("overflow", specs))
    assert diag.root_layer == 1 and "L1.reward-eval-divergence" in rules(diag)
    nonfinite = [f for f in diag.findings if f.rule == "L3.nonfinite-values"]
    assert nonfinite and nonfinite[0].severity == "warn"
    assert diag.first_nonfinite_step == 3


def test_a_rolled_back_blowup_is_layer_3():
    steps = np.arange(1, 401)
    first = np.arange(200, 296)
    first_loss = np.concatenate([np.linspace(1.5, 40.0, len(first) - 1), [math.nan]])
    loss = np.linspace(2.0, 1.0, 400)
    run = Run("resumed", {
        "loss": Series.from_points("loss", np.concatenate([first, steps]), np.concatenate([first_loss, loss])),
        "grad_norm": Series.from_points("grad_norm", steps, np.full(400, 0.5) * np.exp(
            np.random.default_rng(1).normal(0, 0.1, 400)))})
    diag = diagnose(run)
    assert diag.root_layer == 3 and run.resumed
    [f] = [f for f in diag.findings if f.rule == "L3.rolled-back-blowup"]
    assert "restarted from step 200" in f.message


def test_layer_4_catastrophe_on_two_points():
    diag = diagnose(make_run("verl-2-steps", {
        "train/sampling/sampling_logp_difference/mean": {"values": [0.81, 0.8]},
        "train/sampling/importance_sampling_ratio/mean": {"values": [3e-7, 3e-7]}}))
    assert diag.layers[3].status is Status.FAIL
    assert {"L4.logprob-mismatch", "L4.importance-ratio-off"} <= rules(diag)
