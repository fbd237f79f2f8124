"""Independent checks a run logs beside its reward (issue 44 item 6): a reward function logged with weight 0,
read from the logged reward itself (TRL's reward is the weighted sum of its functions' means), and, where the
weights cannot be read, a component named for correctness or an accuracy under its own key (a guess)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load
from stabdiag.read.run import Series
from stabdiag.signals.checks import component_weights
from stabdiag.signals.resolve import resolve
from tests.casegen import make_run

FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
REAL = Path(__file__).resolve().parents[2] / "shared" / "real_runs" / "framework_set1" / "runs"


def _series(key, values):
    return Series.from_points(key, np.arange(1, len(values) + 1), np.asarray(values, dtype=float))


def test_the_weights_of_a_real_trl_run_are_read_from_its_logged_reward():
    """grpo_length_hack trained with reward_weights [1, 0, 0] on (length_reward, partial_credit, exact_match)."""
    [run] = load(str(FIXTURES / "grpo_length_hack"))
    signals = resolve(run)
    components = {n: s for n, s in signals.series.items() if n.startswith("reward:")}
    weights = component_weights(signals.get("reward"), components)
    assert weights == {"reward:exact_match": 0.0, "reward:length_reward": pytest.approx(1.0, abs=1e-6),
                       "reward:partial_credit": 0.0}
    assert set(signals.checks) == {"reward:exact_match", "reward:partial_credit"}
    assert any("reward:exact_match (weight 0 in the logged reward)" in n for n in signals.notes)


def test_weights_the_data_cannot_tell_apart_are_not_read():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1, 50), rng.uniform(0, 1, 50)
    zeros = np.zeros(50)
    # a component always 0 has no weight to read; the others do
    weights = component_weights(_series("r", a + b), {"a": _series("a", a), "b": _series("b", b),
                                                      "z": _series("z", zeros)})
    assert weights["a"] == pytest.approx(1.0) and weights["b"] == pytest.approx(1.0) and weights["z"] is None
    # two components that move in step (b2 = 2 b): neither weight can be told apart
    weights = component_weights(_series("r", a + b), {"a": _series("a", a), "b": _series("b", b),
                                                      "b2": _series("b2", 2 * b)})
    assert weights["a"] == pytest.approx(1.0) and weights["b"] is None and weights["b2"] is None
    # a reward that is no exact sum of its components: no weight is read
    assert component_weights(_series("r", a + b + rng.normal(0, 0.01, 50)),
                             {"a": _series("a", a), "b": _series("b", b)}) is None


def test_a_component_trained_on_is_no_check_whatever_its_name():
    run = make_run("t", {"reward": {"ramp": [0.3, 0.8], "noise": 0.02, "seed": 5},
                         "rewards/accuracy_reward/mean": {"ramp": [0.3, 0.8], "noise": 0.02, "seed": 5},
                         "rewards/format_reward/mean": {"ramp": [0.0, 0.0]}})
    assert resolve(run).checks == {}


def test_where_the_weights_cannot_be_read_a_name_is_a_guess_said_in_the_notes():
    run = make_run("t", {"reward": {"ramp": [0.3, 0.8], "noise": 0.02, "seed": 5},
                         "rewards/format_reward/mean": {"ramp": [0.1, 0.6], "noise": 0.02, "seed": 7},
                         "rewards/accuracy_reward/mean": {"ramp": [0.2, 0.2], "noise": 0.01, "seed": 6},
                         "train/gsm8k_accuracy": {"ramp": [0.4, 0.4], "every": 20},
                         "train/mean_token_accuracy": {"ramp": [0.4, 0.6]}})
    signals = resolve(run)
    assert set(signals.checks) == {"reward:accuracy_reward", "check:gsm8k"}
    assert all("a guess" in why for why in signals.checks.values())
    diag = diagnose(run)
    (finding,) = [f for f in diag.findings if f.rule == "L1.reward-eval-divergence"]
    assert "reward:accuracy_reward" in finding.message and "check:gsm8k" in finding.message
    assert any("a guess from its name" in n for n in diag.notes)


def test_an_sft_run_s_accuracy_is_no_check():
    run = make_run("t", {"loss": {"ramp": [3.0, 1.0]}, "train/token_f1_accuracy": {"ramp": [0.3, 0.3]},
                         "train/gsm8k_accuracy": {"ramp": [0.3, 0.3]}})
    assert resolve(run).checks == {}


@pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_runs is not beside the checkout")
def test_the_real_length_hack_with_a_weight_0_score_fails_at_layer_1():
    """framework_set1 grpo_c_length_hack (labelled warn or fail, root 1): reward = length, a digits score logged
    with weight 0 stays flat, 100% truncated at the end.  It passed: nothing read the digits score, and the
    truncation rule read the reward only inside the climb (z 1.8); over the run it is z 4.3."""
    [run] = load(str(REAL / "grpo_c_length_hack"))
    diag = diagnose(run)
    assert diag.verdict == "fail" and diag.root_layer == 1
    (finding,) = [f for f in diag.findings if f.rule == "L1.truncation-climb"]
    assert finding.evidence["reward_rise_z"] > 3
    assert any("reward:digits_reward (weight 0 in the logged reward)" in n for n in diag.notes)
