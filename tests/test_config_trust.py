"""The trust model of settings (issue 15): nothing inside the data being judged changes the verdict, the
project's config is found from the working directory up, and every setting that differs from the
default is shown in every report format."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.judge.config import find_config

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()
DISARM = '[tool.stabdiag]\nignore = ["L1", "L2", "L3", "L4"]\n'


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A project folder (the cwd) with a failing run in runs/hack, written there by a training job."""
    root = tmp_path / "project"
    shutil.copytree(SAMPLES / "grpo_math_reward_hacking", root / "runs" / "hack")
    monkeypatch.chdir(root)
    return root


def check(*args: str):
    result = runner.invoke(app, ["check", *args])
    assert "Traceback" not in result.output
    return result


def test_a_config_planted_in_the_run_directory_cannot_turn_a_failure_into_a_pass(project, monkeypatch):
    before = check("runs/hack", "-f", "json")
    assert before.exit_code == 1 and json.loads(before.stdout)["runs"][0]["verdict"] == "fail"
    for name, body in (("pyproject.toml", DISARM), ("stabdiag.toml", DISARM.split("\n", 1)[1])):
        (project / "runs" / "hack" / name).write_text(body)
    for cwd, given in ((project, "runs/hack"), (project / "runs" / "hack", ".")):   # even from inside the data
        monkeypatch.chdir(cwd)
        result = runner.invoke(app, ["check", given, "-f", "json"])
        assert result.exit_code == 1, result.output
        doc = json.loads(result.stdout)
        assert doc["runs"][0]["verdict"] == "fail" and doc["settings"]["config"] is None
        assert "stabdiag.toml: not read: a config file beside the data being judged" in result.stderr


def test_config_named_with_config_is_used_and_shown(project):
    planted = project / "runs" / "hack" / "stabdiag.toml"
    planted.write_text('ignore = ["L1", "L2", "L3", "L4"]\n')
    result = check("runs/hack", "--config", str(planted), "--allow-unknown")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"settings: config {planted}") or "settings: config runs/hack/stabdiag.toml" in \
        result.stdout.splitlines()[0]
    assert "ignore L1, L2, L3, L4 (file)" in result.stdout.splitlines()[0]


def test_the_project_config_is_found_from_the_working_directory_up(project, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.stabdiag]\nfail-on = "warn"\n')
    deeper = project / "src" / "pkg"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    found = find_config([str(project / "runs" / "hack")])
    assert found is not None and found.path == (project / "pyproject.toml").resolve()
    (deeper / "stabdiag.toml").write_text('fail-on = "fail"\n')          # the nearest one wins
    assert find_config([str(project / "runs" / "hack")]).path == (deeper / "stabdiag.toml").resolve()


def test_a_config_inside_the_judged_directory_is_skipped_on_the_way_up(project, monkeypatch):
    (project / "runs" / "hack" / "stabdiag.toml").write_text(DISARM.split("\n", 1)[1])
    (project / "stabdiag.toml").write_text('fail-on = "warn"\n')
    monkeypatch.chdir(project / "runs" / "hack")
    found = find_config(["."])
    assert found is not None and found.path == (project / "stabdiag.toml").resolve()


def test_rules_directories_must_exist_and_stay_in_the_config_folder(project, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / "stabdiag.toml").write_text(f'rules = ["{outside}"]\n')
    result = check("runs/hack")
    assert result.exit_code == 2 and "is outside the config file's folder" in result.stderr
    (project / "stabdiag.toml").write_text('rules = ["../.."]\n')
    assert "is outside the config file's folder" in check("runs/hack").stderr
    (project / "stabdiag.toml").write_text('rules = ["missing"]\n')
    assert "rules directory 'missing' not found" in check("runs/hack").stderr
    (project / "stabdiag.toml").unlink()
    result = check("runs/hack", "--rules", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "rules directory not found" in result.stderr
    assert check("runs/hack", "--rules", str(outside)).exit_code == 1      # named on purpose: allowed


@pytest.mark.parametrize("param", ["L2.policy-moving-fast.min_kl_ratio=1e6", "L3.grad-norm-spike.recover_ratio=1e6",
                                   "L3.loss-divergence.min_share=1e6",
                                   "L3.grad-norm-spike.ratio_vs_ema=1e9"])
def test_parameters_cannot_be_set_where_a_rule_could_never_fire(project, param):
    result = check("runs/hack", "--param", param)
    assert result.exit_code == 2 and "is outside the allowed range" in result.stderr, result.stderr


def test_every_report_shows_the_config_and_what_it_changes(project):
    (project / "stabdiag.toml").write_text('fail-on = "warn"\nignore = ["L4"]\n')
    line = "settings: config stabdiag.toml; ignore L4 (file); fail-on warn (file)"
    terminal = check("runs/hack")
    assert terminal.stdout.splitlines()[0] == line
    markdown = check("runs/hack", "-f", "markdown")
    assert f"> {line}" in markdown.stdout
    github = check("runs/hack", "-f", "github")
    assert github.stdout.startswith(f"::notice title=stabdiag settings::{line}")
    doc = json.loads(check("runs/hack", "-f", "json").stdout)
    assert doc["settings"]["config"] == "stabdiag.toml" and doc["settings"]["changed"] == ["ignore", "fail-on"]
    assert doc["settings"]["values"]["ignore"] == {"value": ["L4"], "origin": "file stabdiag.toml"}
    assert doc["settings"]["values"]["select"] == {"value": [], "origin": "default"}
    junit = ET.fromstring(check("runs/hack", "-f", "junit").stdout)
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["stabdiag.config"] == "stabdiag.toml"
    assert props["stabdiag.setting.ignore"] == "L4 (file stabdiag.toml)"
    assert props["stabdiag.setting.fail-on"] == "warn (file stabdiag.toml)"


def test_a_flag_that_changes_the_verdict_is_shown_too(project):
    result = check("runs/hack", "--ignore", "L1", "-f", "markdown")
    assert "> settings: no config file; ignore L1 (flag --ignore)" in result.stdout
    plain = check("runs/hack")                    # all defaults: no settings line
    assert not plain.stdout.startswith("settings:")
    doc = json.loads(check("runs/hack", "-f", "json").stdout)
    assert doc["settings"]["config"] is None and doc["settings"]["changed"] == []


def test_an_infinite_parameter_is_shown_in_json_as_text(project):
    result = check("runs/hack", "-f", "json", "--param", "L4.logprob-mismatch.catastrophic_above=inf")
    assert result.exit_code in (0, 1), result.output
    values = json.loads(result.stdout)["settings"]["values"]["params"]
    assert values == {"value": {"L4.logprob-mismatch": {"catastrophic_above": "inf"}}, "origin": "flag --param"}
