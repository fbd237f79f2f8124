"""Rule selection as ruff's: ids, aliases and prefixes in any case, comma lists; what a selection leaves
out is shown in every format, and a run whose failing evidence was ignored never reads as a bare pass."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.errors import ConfigError
from stabdiag.judge.config import resolve_settings
from stabdiag.judge.rules import load_rules
from stabdiag.judge.selection import canonical, choose, split_selectors

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
BLOWUP = str(SAMPLES / "grpo_math_numeric_blowup")
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


def test_comma_lists_any_case_and_repeats_are_one_selection():
    rules = load_rules()
    assert split_selectors(["l1,L3", " L4 ,"]) == ("l1", "L3", "L4")
    assert canonical(["l1,l3", "L1"], rules, "--select") == ("L1", "L3")
    assert canonical(["l3.GRAD-NORM"], rules, "--select") == ("L3.grad-norm",)
    settings, _ = resolve_settings(None, {"select": ["l1,L3"], "ignore": ["l3.grad-norm"]})
    assert settings.select == ("L1", "L3") and settings.ignore == ("L3.grad-norm",)


def test_a_prefix_is_a_prefix_of_the_id_not_only_a_layer():
    rules = load_rules()
    chosen, left_out = choose(rules, select=["L3.grad-norm"])
    assert {r.id for r in chosen} == {r.id for r in rules if r.id.startswith("L3.grad-norm")}
    assert len(chosen) >= 2 and len(chosen) + len(left_out) == len([r for r in rules if r.status != "removed"])
    chosen, _ = choose(rules, select=["L1", "L3"], ignore=["L3.grad-norm"])
    assert {r.layer for r in chosen} == {1, 3} and not any(r.id.startswith("L3.grad-norm") for r in chosen)


def test_an_unknown_selector_is_one_line_with_the_closest_id():
    with pytest.raises(ConfigError, match="unknown rule id or prefix 'L3.grad-nrom'.*L3.grad-norm"):
        canonical(["L3.grad-nrom"], load_rules(), "--select")
    result = invoke("check", BLOWUP, "--select", "L1,L9")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "'L9'" in result.stderr


def test_select_l1_l3_runs_only_those_layers():
    result = invoke("check", BLOWUP, "--select", "l1,L3", "--format", "json")
    run = json.loads(result.stdout)["runs"][0]
    assert result.exit_code == 1 and run["root_layer"] == 3
    assert {f["rule"][:2] for f in run["findings"]} <= {"L1", "L3"}
    assert [layer["status"] for layer in run["layers"]][1::2] == ["ignored", "ignored"]
    assert run["ignored_layers"] == [2, 4] and all(r[:2] in ("L2", "L4") for r in run["ignored"])
    same = json.loads(invoke("check", BLOWUP, "--select", "L1", "--select", "l3", "--format", "json").stdout)
    assert same["runs"][0]["findings"] == run["findings"]


def test_ignoring_the_failing_layers_is_a_pass_that_says_so_in_every_format():
    args = ("check", BLOWUP, "--ignore", "L1", "--ignore", "L3")
    doc = json.loads(invoke(*args, "--format", "json").stdout)["runs"][0]
    assert doc["verdict"] == "pass" and doc["verdict_text"].startswith("pass, L1 and L3 ignored")
    assert "L3.nonfinite-values" in {f["rule"] for f in doc["ignored_findings"]}
    terminal = invoke(*args)
    assert terminal.exit_code == 0
    assert "PASS, L1 and L3 ignored" in terminal.stdout and "would have fired" in terminal.stdout
    assert "pass, L1 and L3 ignored" in invoke(*args, "--format", "markdown").stdout
    junit = invoke(*args, "--format", "junit").stdout
    assert "ignored by --select/--ignore, would fire: L3.nonfinite-values (fail)" in junit   # in the case's output
    assert '<property name="ignored" value="L1 and L3"' in junit
    github = invoke(*args, "--format", "github").stdout
    assert "::warning" in github and "pass, L1 and L3 ignored" in github


def test_message_templates_do_not_print_a_parameter_as_a_constant():
    # a parameter is overridable (--param): its value in the text must come from the evidence in force
    for rule in load_rules():
        literal = re.sub(r"\{[^}]*\}", "", rule.message)
        numbers = set(re.findall(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])", literal))
        forms = {f"{v:g}" for v in rule.params.values()}
        forms |= {f"{math.exp(v):.2g}" for v in rule.params.values() if v < 50}
        assert not numbers & forms, (rule.id, rule.message)


def test_an_overridden_floor_is_the_floor_the_evidence_names():
    collapse = str(SAMPLES / "grpo_policy_collapse")
    low = json.loads(invoke("check", collapse, "--format", "json",
                            "--param", "L2.entropy-below-floor.floor_frac=0.5").stdout)["runs"][0]
    for f in low["findings"]:
        assert "0.8x" not in f["message"]          # the shipped default, not the floor in force
    floor = {f["rule"]: f for f in low["findings"]}.get("L2.entropy-below-floor")
    assert floor is not None
    ev = floor["evidence"]
    assert ev["floor"] == pytest.approx(0.5 * ev["early"]) and f"{ev['floor']:.3g}" in floor["message"]
