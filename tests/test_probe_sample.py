"""The shipped probe sample (sample_logs/probe): the probe finds its known bf16 drift, writes a series
that lines up with the 400-step samples, and `check --with` judges layer 4 from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.errors import InputError
from stabdiag.read.assemble import discover, load

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
PROBE = SAMPLES / "probe"
runner = CliRunner()


def test_rollout_dumps_are_not_metric_logs():
    assert "probe" not in [s.name for s in discover(SAMPLES)]
    with pytest.raises(InputError, match="a rollout dump, not a metric log"):
        load(PROBE / "rollouts.jsonl")


@pytest.mark.torch
def test_probe_on_the_sample_and_check_with_its_series(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    drift = tmp_path / "drift.csv"
    report = tmp_path / "report.json"
    probed = runner.invoke(app, ["probe", str(PROBE / "rollouts.jsonl"), "--model", str(PROBE / "model"),
                                 "--dtype", "fp32", "--series-out", str(drift), "--out", str(report)])
    assert probed.exit_code == 0, probed.output
    assert "WARN" in probed.stdout
    (series,) = load(drift)
    assert series.series["logprob_delta"].steps.tolist() == list(range(50, 401, 50))
    checked = runner.invoke(app, ["check", str(SAMPLES / "grpo_math_healthy"), "--with", str(drift),
                                  "--format", "json"])
    run = json.loads(checked.stdout)["runs"][0]
    assert run["verdict"] == "warn" and run["root_layer"] == 4
    assert [f["rule"] for f in run["findings"]] == ["L4.mult-prob-error-high"]
