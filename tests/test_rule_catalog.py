"""Every shipped rule is valid, documented, explainable and covered by fires/quiet/unknown cases;
malformed rule files are refused with the file, line and rule id."""

from __future__ import annotations

from pathlib import Path

import pytest

from stabdiag import _toml
from stabdiag.errors import RuleError
from stabdiag.judge.rules import get_rule, load_rules, parse_rule_file, select_rules

CASES_DIR = Path(__file__).parent / "rule_cases"
RULES = load_rules()


def test_every_layer_has_rules():
    assert {r.layer for r in RULES} == {1, 2, 3, 4}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_is_documented_and_explains(rule):
    text = rule.explain()
    for heading in ("What it checks", "Why it matters", "Check first", "Example", "References"):
        assert heading in text
    assert rule.why.strip() and rule.example_fires and rule.example_quiet
    assert 2 <= len(rule.check_first) <= 5


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_has_fires_quiet_and_unknown_cases(rule):
    path = CASES_DIR / f"{rule.id}.toml"
    assert path.exists(), f"no case file for {rule.id}"
    data = _toml.loads(path.read_text())
    assert data["rule"] == rule.id
    kinds = {c["expect"] for c in data["case"]}
    # an event rule (how the run ended) only ever reports: it has no "not judged" state
    needed = {"fires", "quiet"} if rule.requires == "event" else {"fires", "quiet", "unknown"}
    assert needed <= kinds


def test_every_case_file_names_a_rule():
    ids = {r.id for r in RULES}
    for path in CASES_DIR.glob("*.toml"):
        assert path.stem in ids


def test_explain_reward_eval_divergence_has_why_check_first_and_example():
    text = get_rule("L1.reward-eval-divergence").explain()
    assert text.startswith("L1.reward-eval-divergence: Training reward rises")
    assert "MATH-500" in text and "1. Read 20 of the highest-reward rollouts" in text
    assert "fires: reward 0.30 -> 0.80" in text


def test_select_by_layer_prefix_and_ignore_by_id():
    chosen = select_rules(RULES, ["L3"], ["L3.loss-spike"])
    assert chosen and all(r.layer == 3 for r in chosen)
    assert "L3.loss-spike" not in {r.id for r in chosen}


def test_unknown_rule_suggests_a_close_id():
    with pytest.raises(RuleError, match="did you mean 'L3.loss-spike'"):
        get_rule("L3.loss-spikes")


GOOD = '''
[[rule]]
id = "L3.test-spike"
layer = 3
title = "A test rule"
severity = "warn"
status = "preview"
since = "0.1.0"
detector = "spike_vs_ema"
message = "x"
why = "because"
check_first = ["one", "two"]
references = ["here"]
signals = { values = "grad_norm" }
params = { ratio_vs_ema = 5.0 }
example = { fires = "a", quiet = "b" }
'''


@pytest.mark.parametrize("old, new, problem", [
    ('severity = "warn"', 'severity = "warn"\ntreshold = 1', "unknown key 'treshold'"),
    ("layer = 3", "layer = 2", "does not match"),
    ('detector = "spike_vs_ema"', 'detector = "spike_vs_emma"', "did you mean 'spike_vs_ema'"),
    ("ratio_vs_ema = 5.0", "ratio_vs_ema = 0.5", "outside"),
    ("ratio_vs_ema = 5.0", "window = 5", "has no parameter 'window'"),
    ('"grad_norm"', '"grad_nrom"', "unknown signal 'grad_nrom'"),
    ('why = "because"', 'why = ""', "missing or empty 'why'"),
    ('quiet = "b"', 'quiet = ""', "example needs both"),
    ('id = "L3.test-spike"', 'id = "L3.Test_Spike"', "must look like"),
    # the detector's contract (issue 24): its curves, and the evidence fields a message may quote
    ('signals = { values = "grad_norm" }', 'signals = { valeus = "grad_norm" }',
     "takes no curve 'valeus'.*did you mean 'values'"),
    ('signals = { values = "grad_norm" }', 'signals = { values = "grad_norm", loss = "loss" }',
     "takes no curve 'loss'"),
    ('message = "x"', 'message = "{value:.3g} at step {start}, {ratoi:.1f}x"',
     "quotes ratoi, which detector spike_vs_ema does not return.*did you mean 'ratio'"),
])
def test_bad_rule_files_are_refused_with_file_line_and_id(old, new, problem):
    with pytest.raises(RuleError, match=problem) as info:
        parse_rule_file(GOOD.replace(old, new), "rules/x.toml")
    assert str(info.value).startswith("rules/x.toml:")


def test_good_rule_parses_and_duplicate_ids_are_refused(tmp_path):
    assert parse_rule_file(GOOD, "x.toml")[0].id == "L3.test-spike"
    (tmp_path / "a.toml").write_text(GOOD)
    (tmp_path / "b.toml").write_text(GOOD)
    with pytest.raises(RuleError, match="duplicate rule id"):
        load_rules([tmp_path])


def test_extra_rules_directory_adds_rules(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    assert "L3.test-spike" in {r.id for r in load_rules([tmp_path])}


def test_a_rule_naming_a_consequence_of_an_unknown_rule_is_refused(tmp_path):
    (tmp_path / "a.toml").write_text(GOOD.replace('example =', 'consequence_of = ["L2.entropy-colapse"]\nexample ='))
    with pytest.raises(RuleError, match="consequence_of names no rule 'L2.entropy-colapse'.*L2.entropy-collapse"):
        load_rules([tmp_path])


def test_every_message_quotes_only_its_detectors_evidence_and_every_finding_returns_only_declared_fields():
    """The declared evidence fields are the detectors' real ones: every finding of every rule case returns
    no field its detector does not declare (so a message checked at load time cannot quote a field that
    is not there)."""
    from stabdiag.judge.detectors import DETECTORS
    from stabdiag.judge.engine import diagnose
    from tests.casegen import make_run
    engine_fields = {"onset", "onset_low", "onset_high", "change_step"}
    rules = {r.id: r for r in load_rules()}
    checked = 0
    for path in sorted(CASES_DIR.glob("*.toml")):
        data = _toml.loads(path.read_text())
        rule = rules.get(data["rule"])
        declared = set(DETECTORS[rule.detector].evidence) if rule else set()
        if not declared:
            continue
        for case in data.get("case", []):
            if case.get("expect") != "fires":
                continue
            diag = diagnose(make_run(case["name"], case.get("series", {}), case.get("ending")), select=[rule.id])
            for f in diag.findings:
                if f.rule == rule.id:
                    assert set(f.evidence) - declared - engine_fields == set(), (rule.id, case["name"])
                    checked += 1
    assert checked >= 25
