"""A sample run in TensorBoard or W&B form gives the same diagnosis as its CSV twin (issues 3 and 4)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


@pytest.fixture(scope="module")
def make_samples():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary(path):
    (run,) = load(path)
    diag = diagnose(run)
    findings = sorted((f.rule, f.severity, f.start_step, f.end_step, f.downstream) for f in diag.findings)
    return diag.verdict, diag.root_layer, findings, sorted(diag.signals.items())


def test_tensorboard_sample_matches_its_csv_twin(make_samples, tmp_path):
    make_samples.write_long_csv(tmp_path / "twin.csv", make_samples.healthy_series())
    tb = summary(SAMPLES / "grpo_math_healthy")
    assert tb == summary(tmp_path / "twin.csv")
    assert tb[0] == "pass"


def test_wandb_sample_matches_its_csv_twin(make_samples, tmp_path):
    make_samples.write_wandb_export(tmp_path)
    wandb_form = summary(SAMPLES / "grpo_policy_collapse")
    assert wandb_form == summary(tmp_path / "wandb_export.csv")
    assert wandb_form[:2] == ("fail", 2)
