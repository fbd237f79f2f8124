"""One pytest id per case in tests/rule_cases/<rule-id>.toml: does the rule fire, stay quiet, or say
unknown as the case says, with the evidence it names?

A case with `seeds = N` holds for a behaviour, not for one noise draw: it is checked on N draws of its
noise (every series its own seed) and must come out as it says on at least 90% of them (a case that
fires: >= 18 of 20), a quiet one firing on at most 5% (<= 1 of 20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stabdiag import _toml
from stabdiag.judge.engine import diagnose
from tests.casegen import make_run

CASES_DIR = Path(__file__).parent / "rule_cases"


def _cases():
    for path in sorted(CASES_DIR.glob("*.toml")):
        data = _toml.loads(path.read_text())
        for case in data["case"]:
            marks = [pytest.mark.xfail(strict=True)] if case["expect"].startswith("todo-") else []
            yield pytest.param(data["rule"], case, id=f"{data['rule']}::{case['name']}", marks=marks)


def _check_evidence(finding, expected: dict) -> None:
    ev = finding.evidence
    for key, value in expected.items():
        if key == "start":
            assert finding.start_step == value
        elif key.endswith("_min"):
            field = key[:-4]
            actual = finding.end_step if field == "end" else ev[field]
            assert actual >= value, (field, actual)
        elif key.endswith("_max"):
            assert ev[key[:-4]] <= value, (key, ev[key[:-4]])
        else:
            assert ev[key] == value, (key, ev[key])


@pytest.mark.parametrize("rule_id, case", list(_cases()))
def test_rule_case(rule_id, case):
    draws = int(case.get("seeds", 0))
    if draws:
        _check_rate(rule_id, case, draws)
        return
    run = make_run(case["name"], case["series"], case.get("ending"), case.get("config"))
    diag = diagnose(run, select=[rule_id])
    expect = case["expect"].removeprefix("todo-")
    fired = [f for f in diag.findings if f.rule == rule_id]
    unknown = [u for u in diag.unknown if u.rule == rule_id]
    if expect == "unknown":
        assert unknown and not fired
        assert case.get("reason", "") in unknown[0].describe(), unknown[0].describe()
    elif expect == "quiet":
        assert not unknown, unknown
        assert not fired, fired[0].message if fired else ""
    else:
        assert fired, f"{rule_id} did not fire"
        if "severity" in case:
            assert fired[0].severity == case["severity"], fired[0].message
        _check_evidence(fired[0], case.get("evidence", {}))


def _outcome(rule_id: str, case: dict, draw: int) -> tuple[str, str]:
    """"fires" (with its evidence and severity as the case says: a draw that fires otherwise is "fires
    wrongly" and why), "unknown" and why, or "quiet"."""
    run = make_run(case["name"], case["series"], case.get("ending"), case.get("config"), draw=draw)
    diag = diagnose(run, select=[rule_id])
    fired = [f for f in diag.findings if f.rule == rule_id]
    if fired:
        try:
            if "severity" in case:
                assert fired[0].severity == case["severity"], ("severity", fired[0].severity)
            _check_evidence(fired[0], case.get("evidence", {}))
        except (AssertionError, KeyError) as wrong:
            return "fires wrongly", str(wrong)
        return "fires", ""
    unknown = [u for u in diag.unknown if u.rule == rule_id]
    return ("unknown", unknown[0].describe()) if unknown else ("quiet", "")


def _check_rate(rule_id: str, case: dict, draws: int) -> None:
    expect = case["expect"].removeprefix("todo-")
    outcomes = [_outcome(rule_id, case, draw) for draw in range(1, draws + 1)]
    fired = sum(kind.startswith("fires") for kind, _ in outcomes)
    if expect == "quiet":
        assert fired <= 0.05 * draws, f"fired on {fired} of {draws} draws"
        return
    hits = [why for kind, why in outcomes if kind == expect and case.get("reason", "") in why]
    assert len(hits) >= 0.9 * draws, (f"{expect} on {len(hits)} of {draws} draws: "
                                      f"{sorted(set(kind for kind, _ in outcomes))} {outcomes[:3]}")
