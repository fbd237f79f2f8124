"""Advice by run kind (issue 44 item 9): an SFT or pretraining run is never told to start logging a reward, a
KL or a rollout signal, nor advised a method of rollouts (dynamic sampling, a KL penalty); an RL run still
is; a job that died of a GPU hardware fault gets the node's checks, not the generic OOM/NCCL list.

The runs are the framework fixtures (real HF Trainer and TRL GRPO output, tests/fixtures/framework_runs),
the BigScience 13B log that died on an uncorrectable ECC error (../shared/real_logs, skipped where absent),
and runs built from generator specs (tests/casegen.py) for the endings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stabdiag import _toml
from stabdiag.advise import advise
from stabdiag.advise.methods import advice, methods_map
from stabdiag.errors import RuleError
from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import get_rule
from stabdiag.read.assemble import load
from stabdiag.signals.resolve import default_alias_table, parse_alias_table
from tests.casegen import make_run
from tests.clihelp import cli

FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
REAL = Path(__file__).resolve().parents[2] / "shared" / "real_logs"
RL_ONLY = {"reward", "kl", "entropy", "clip_frac", "logprob_delta", "prob_delta", "policy_version_lag",
           "response_length", "is_ratio_mean", "rollout_kl"}
RL_METHODS = {"dynamic-sampling", "overlong-reward-shaping", "length-adaptive-gae", "kl-penalty", "clip-higher",
              "importance-sampling-correction", "routing-replay"}


def judged(path: Path):
    [run] = load(str(path))
    return diagnose(run, advise=advise)


def test_signals_toml_says_which_signals_only_an_rl_run_logs():
    table = default_alias_table()
    for signal in RL_ONLY:
        assert table.fits(signal, "rl") and not table.fits(signal, "sft"), signal
    for signal in ("loss", "grad_norm", "lr", "eval_loss", "eval:gsm8k", "moe_imbalance", "loss_scale"):
        assert table.fits(signal, "sft") and table.fits(signal, "rl"), signal
    assert not table.fits("reward:format", "sft")


def test_a_kind_signals_toml_does_not_know_is_refused():
    with pytest.raises(RuleError, match="kinds must name some of rl, sft"):
        parse_alias_table('[signal.reward]\nlayer = 1\nkinds = ["ppo"]\n', "signals.toml")


@pytest.mark.parametrize("name", ["sft_healthy", "sft_eval_overfit", "sft_diverging"])
def test_an_sft_run_is_told_to_log_no_rl_signal(name):
    diag = judged(FIXTURES / name)
    assert diag.kind == "sft"
    for layer in diag.layers:
        assert not RL_ONLY & set(layer.missing_signals), (layer.layer, layer.missing_signals)
    entropy_rule = next(u for u in diag.unknown if u.rule == "L2.entropy-collapse")     # JSON `unknown` keeps it
    assert entropy_rule.missing == ("entropy",) and entropy_rule.describe().startswith("an RL run's rule")
    for fmt in ("terminal", "markdown"):
        text = " ".join(cli("check", str(FIXTURES / name), "-v", "-f", fmt, "--exit-zero").stdout.split())
        lacks = text[text.index("Not judged"):]
        told = re.findall(r"start logging ((?:[\w:*]+(?: \(\d+ rules\))?(?:, )?)+)", lacks)
        assert told and not any(s in what for what in told for s in ("kl", "entropy", "reward", "logprob")), told
        assert "layer 2 (policy change) missing signal: nothing an SFT/pretraining run logs: its rules read an " \
               "RL run's kl, entropy, clip_frac" in text.replace("| ", "").replace("**", "") or fmt == "markdown"


def test_an_sft_run_without_an_eval_loss_is_told_to_log_one():
    run = make_run("sft", {"loss": {"ramp": [3.0, 1.5], "noise": 0.02}, "grad_norm": {"ramp": [1.0, 0.8]}})
    diag = diagnose(run)
    # an independent eval (eval:*, a benchmark's accuracy) is read on an SFT run too: L1.eval-below-start
    # finds one that ends below its start (forgetting)
    assert diag.kind == "sft" and diag.layers[0].missing_signals == ("eval:*", "eval_loss")
    assert diag.layers[1].missing_signals == ()


def test_an_rl_run_is_still_told_to_log_the_rollout_engines_signals():
    diag = judged(FIXTURES / "grpo_healthy")
    assert diag.kind == "rl" and "logprob_delta" in diag.layers[3].missing_signals


def test_an_sft_run_is_advised_no_method_of_rollouts():
    diag = judged(FIXTURES / "sft_eval_overfit")              # root layer 1: overfitting
    assert diag.root_layer == 1 and diag.methods_advice
    assert not any(name in diag.methods_advice for name in RL_METHODS), diag.methods_advice
    # the same root on an RL run is advised the layer's methods
    rl = advice(1, [], kind="rl")
    assert "dynamic-sampling" in rl and "dynamic-sampling" not in advice(1, [], kind="sft")
    assert "gradient-clipping" in advice(3, [], kind="sft")      # layer 3 methods exist for every kind
    assert {m.name for m in methods_map().methods if m.kinds == ("rl",)} >= RL_METHODS


@pytest.mark.parametrize("ending, series, expected", [
    ({"kind": "hardware", "message": "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
     {"loss": {"ramp": [2.0, 1.0], "steps": 50}}, "check_first_hardware"),
    ({"kind": "hardware", "message": "NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus"},
     {"loss": {"ramp": [2.0, 1.0], "steps": 50}, "reward": {"ramp": [0.1, 0.4], "steps": 50}},
     "check_first_hardware"),
    ({"kind": "oom", "message": "torch.OutOfMemoryError: CUDA out of memory"},
     {"loss": {"ramp": [2.0, 1.0], "steps": 50}}, "check_first_sft"),
    ({"kind": "oom", "message": "torch.OutOfMemoryError: CUDA out of memory"},
     {"loss": {"ramp": [2.0, 1.0], "steps": 50}, "reward": {"ramp": [0.1, 0.4], "steps": 50}}, "check_first"),
])
def test_a_job_death_gets_the_checks_of_its_cause_and_kind(ending, series, expected):
    diag = diagnose(make_run("died", series, ending), select=["L4.job-died"])
    [finding] = diag.findings
    rule = get_rule("L4.job-died")
    assert finding.check_first == getattr(rule, expected) and finding.check_first
    assert ("rollout" in " ".join(finding.check_first)) == (expected == "check_first")


def test_the_hardware_checks_are_the_nodes_not_the_training_codes():
    rule = get_rule("L4.job-died")
    text = " ".join(rule.check_first_hardware)
    assert "nvidia-smi" in text and "Xid" in text and "drain" in text
    assert "Out of memory" not in text and "timeout" not in text


def test_a_rule_file_with_a_hardware_list_that_is_not_a_list_is_refused(tmp_path):
    from stabdiag.judge.rules import load_rules

    text = (Path(__file__).parents[1] / "src" / "stabdiag" / "judge" / "checklist" / "layer4_system.toml").read_text()
    block = text[text.index('[[rule]]\nid       = "L4.job-died"'):]
    block = block[:block.index("\n[[rule]]", 1)]
    bad = block.replace('id       = "L4.job-died"', 'id       = "L4.job-died-copy"')
    start = bad.index("check_first_hardware = [")
    bad = bad[:start] + 'check_first_hardware = "drain the node"\n' + bad[bad.index("]\n", start) + 2:]
    assert _toml.loads(bad)["rule"][0]["check_first_hardware"] == "drain the node"
    (tmp_path / "extra.toml").write_text(bad)
    with pytest.raises(RuleError, match="check_first_hardware must be a list"):
        load_rules([str(tmp_path)])


@pytest.mark.skipif(not (REAL / "bigscience_tr1_13B_glitches").is_dir(), reason="shared/real_logs not present")
def test_a_real_ecc_death_gets_the_hardware_checks():
    result = cli("check", str(REAL / "bigscience_tr1_13B_glitches"), "--format", "json")
    [run] = json.loads(result.stdout)["runs"]
    [died] = [f for f in run["findings"] if f["rule"] == "L4.job-died"]
    assert "ECC" in died["message"] and "nvidia-smi" in " ".join(died["check_first"])
    assert not any("rollout" in step for step in died["check_first"])
    assert not any(name in (run["methods_advice"] or "") for name in RL_METHODS)
