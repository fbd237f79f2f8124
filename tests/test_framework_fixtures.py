"""Real output dirs of TRL 1.16 GRPOTrainer and the transformers 5.24 Trainer (tiny model, CPU), committed
under tests/fixtures/framework_runs by make_framework_runs.py: each dir is one run, the framework is named,
its keys map to signals, nothing is called resumed that was not, and the verdict is the one EXPECTED.toml
gives (with why).  CI reads the committed files; it needs neither TRL nor a GPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag import _toml
from stabdiag.cli import app
from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import discover, load
from stabdiag.signals.resolve import resolve

FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
EXPECTED = _toml.loads((FIXTURES / "EXPECTED.toml").read_text())
SCENARIOS = sorted(EXPECTED)
GRPO = [s for s in SCENARIOS if EXPECTED[s]["kind"] == "grpo"]
TRL_KEYS = {"truncation_rate": "train/completions/clipped_ratio",
            "terminated_length": "train/completions/mean_terminated_length",
            "clip_frac": "train/clip_ratio/region_mean", "clip_frac_low": "train/clip_ratio/low_mean",
            "clip_frac_high": "train/clip_ratio/high_mean", "response_length": "train/completions/mean_length",
            "zero_std_frac": "train/frac_reward_zero_std", "reward": "train/reward", "entropy": "train/entropy"}


@pytest.fixture(scope="module")
def runs():
    return {name: load(str(FIXTURES / name)) for name in SCENARIOS}


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_output_dir_is_one_run_named_after_it(name, runs):
    assert [r.name for r in runs[name]] == [name]
    [found] = discover(str(FIXTURES / name))
    kinds = {os.path.relpath(f, FIXTURES / name).split(os.sep)[0] for f in found.files}
    assert "runs" in kinds and "wandb" in kinds and "console.log" in kinds


@pytest.mark.parametrize("name", SCENARIOS)
def test_expected_verdict(name, runs):
    [run] = runs[name]
    diag = diagnose(run)
    expected = EXPECTED[name]
    said = [f"{f.rule}: {f.message}" for f in diag.findings]
    assert diag.verdict == expected["expected_verdict"], (expected["why"], said)
    assert diag.root_layer == expected.get("expected_root_layer"), (expected["why"], said)
    assert diag.framework == ("TRL GRPO" if expected["kind"] == "grpo" else "HF Trainer")


@pytest.mark.parametrize("name", SCENARIOS)
def test_no_false_resume(name, runs):
    [run] = runs[name]
    assert run.resumed == (name == "grpo_resumed"), [n for n in run.notes if "resum" in n or "restart" in n]
    assert run.duplicate_steps == 0


@pytest.mark.parametrize("name", SCENARIOS)
def test_console_steps_matched_to_the_other_files_keep_no_stale_guess(name, runs):
    # the tee'd console.log has no step; once its steps are matched to the event file's, the note that
    # they "count log records" no longer holds and must not be shown
    notes = runs[name][0].notes
    assert any("console.log: steps taken from the other files by matching" in n for n in notes)
    assert not any("step axis" in n for n in notes), notes


@pytest.mark.parametrize("name", GRPO)
def test_trl_keys_that_carry_a_signal_are_mapped(name, runs):
    [run] = runs[name]
    sig = resolve(run)
    mapped = sig.mapping()
    for signal, key in TRL_KEYS.items():
        if key in run.series:
            assert mapped.get(signal) == key, signal
    components = {k for k in run.series if k.startswith("train/rewards/") and k.endswith("/mean")}
    assert components and components == {v for s, v in mapped.items() if s.startswith("reward:")}
    assert not any(s.startswith("eval:") for s in mapped), "TRL eval/reward is not an independent eval"


def test_the_crash_is_an_ending_not_a_pass(runs):
    [run] = runs["grpo_crash"]
    diag = diagnose(run)
    assert diag.ending.kind == "nonfinite" and diag.ending.step == 6
    assert "probability tensor contains" in diag.ending.message
    assert diag.to_dict()["ending"]["source"] == "console.log"


def test_a_tree_of_ten_output_dirs_is_ten_runs_and_never_exit_2(tmp_path):
    for name in SCENARIOS:
        shutil.copytree(FIXTURES / name, tmp_path / "tree" / name, symlinks=True)
    result = CliRunner().invoke(app, ["check", str(tmp_path / "tree"), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    import json
    names = sorted(r["run"] for r in json.loads(result.stdout)["runs"])
    assert names == SCENARIOS and len(names) == 10


def test_cause_before_consequence_in_both_orders(runs):
    """Issue 44 item 4 on real TRL runs, both orders.  lr 1.0 collapses the policy first (entropy 3.76 ->
    0.12 in one step) and every group's rewards become equal after it: the root is layer 2 and each
    layer-1 finding is its consequence or downstream of it.  A reward that pays length alone moves first
    (truncation 0.02 -> 0.84 while the weight-0 checks stay flat): the root is layer 1, and no finding of a
    deeper layer is read as its cause."""
    collapse = diagnose(runs["grpo_entropy_collapse"][0])
    assert collapse.root_layer == 2
    layer1 = [f for f in collapse.findings if f.layer == 1]
    assert layer1 and all(f.downstream or (f.explained_by or "").startswith("L2.") for f in layer1), \
        [(f.rule, f.explained_by, f.downstream) for f in layer1]
    hack = diagnose(runs["grpo_length_hack"][0])
    assert hack.root_layer == 1
    assert all(f.downstream for f in hack.findings if f.layer > 1)
