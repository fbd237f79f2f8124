"""The verdict's false-alarm budget split among the rules (issue 43 item 6): each sureness claim's share,
charged to the budget of its severity, and the shipped rules within both budgets."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.judge.budget import FAIL_BUDGET, FINDING_BUDGET, allocate, share_of
from stabdiag.judge.rules import load_rules
from tests.test_rule_catalog import GOOD


def test_a_sureness_claim_is_its_one_sided_normal_tail_charged_to_its_severitys_budget():
    fail = share_of("L1.x", "fail", {"min_drop_z": 3.5, "min_points": 4})
    assert fail.budget == "fail" and math.isclose(fail.chance, 2.326290790355e-4, rel_tol=1e-9)
    warn = share_of("L3.x", "warn", {"sure_z": 3.0})
    assert warn.budget == "finding" and math.isclose(warn.chance, 1.349898031630e-3, rel_tol=1e-9)


def test_an_event_budget_is_its_run_alpha_charged_to_any_finding_whatever_the_rules_severity():
    # a healthy run's false spike is one it absorbs: a warning, whatever the severity of a kept one
    share = share_of("L3.x", "fail", {"run_alpha": 0.01, "ratio_vs_ema": 5.0})
    assert (share.budget, share.param, share.chance) == ("finding", "run_alpha", 0.01)


def test_a_level_rule_makes_no_claim():
    assert share_of("L2.x", "fail", {"floor": 0.1, "min_points": 10}) is None


def test_the_shipped_rules_spend_within_both_budgets():
    plan = allocate(load_rules())
    assert plan.over() == []
    assert 0 < plan.fail_spent <= FAIL_BUDGET and plan.fail_spent < plan.finding_spent <= FINDING_BUDGET
    # every shipped sureness claim is counted, each rule once
    claims = [r.id for r in load_rules() if r.status != "removed" and share_of(r.id, r.severity, r.params)]
    assert sorted(s.rule for s in plan.shares) == sorted(claims) and len(set(claims)) == len(claims)


def test_rules_budget_prints_the_split_and_exits_1_when_an_added_rule_overspends(tmp_path):
    runner = CliRunner()
    shipped = runner.invoke(app, ["rules", "budget", "--format", "json"])
    assert shipped.exit_code == 0, shipped.output
    doc = json.loads(shipped.stdout)
    assert doc["over"] == [] and math.isclose(doc["fail_spent"], sum(s["chance"] for s in doc["shares"]
                                                                      if s["budget"] == "fail"))
    # an extra event rule that may raise a false alarm on 3% of healthy runs takes the finding budget past 5%
    (tmp_path / "mine.toml").write_text(GOOD.replace("run_alpha = 0.01", "run_alpha = 0.03"))
    over = runner.invoke(app, ["rules", "budget", "--rules", str(tmp_path)])
    assert over.exit_code == 1
    assert "L3.test-spike" in over.stdout and "3.000%" in over.stdout
    assert "error: over budget: all rules spend" in over.output


def test_explain_states_every_rules_share():
    rules = {r.id: r for r in load_rules()}
    assert "0.023% of healthy runs (min_drop_z 3.5" in rules["L1.eval-below-start"].explain()
    assert "of the 1% fail budget" in rules["L1.eval-below-start"].budget_share()
    assert rules["L2.entropy-collapse"].to_dict()["budget_share"].startswith("none declared: a level rule")
