"""Every parameter that decides a verdict can flip one: on one of its rule's cases (tests/rule_cases/),
moving the parameter across its declared range changes the outcome (a finding appears or goes, or its
severity changes), and the test names the threshold pair (the two neighbouring values it flips between).
A parameter no case can flip yet is listed in UNFLIPPED - a known gap, recorded rather than skipped: the
test fails when one of them gains a pair, so the list only shrinks (issue 43: "every parameter that
decides a verdict has a threshold pair").

Parameters that only bound the work (declared with the role "bounds": how much data a judgement needs)
or only word a finding ("words": which reading its message gives), and those a rule ships at the value
that switches their check off (`Param.off`: a catastrophic level of inf), are not asked to flip a
finding; `stabdiag rules explain` lists them as such."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stabdiag import _toml
from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import load_rules
from tests.casegen import make_run

CASES = Path(__file__).parent / "rule_cases"
RULES = {r.id: r for r in load_rules()}
STEPS = 9

# Parameters that decide a verdict but that no rule case flips yet (measured on a 9-point grid across the
# declared range and x0.5..x2 of the shipped value): each wants a case pair just under / just over its
# value.  Empty since every such parameter got its pair, was found to decide nothing where it was declared
# (removed, or given the role it has: "words", or switched off), so a new parameter must come with its pair.
UNFLIPPED: frozenset[tuple[str, str]] = frozenset()


def _cases(rule_id: str) -> list[dict]:
    path = CASES / f"{rule_id}.toml"
    return _toml.loads(path.read_text())["case"] if path.exists() else []


def _grid(low: float, high: float, value: float) -> list[float]:
    """Values across the allowed range (log-spaced where it spans orders of magnitude) and near the shipped
    one (x0.5, 0.8, 1.25, 2), within the range."""
    high = high if math.isfinite(high) else max(value * 100, low + 100)
    grid = np.geomspace(low, high, STEPS) if low > 0 and high / low > 50 else np.linspace(low, high, STEPS)
    near = [value * f for f in (0.5, 0.8, 1.25, 2.0)] if math.isfinite(value) else []
    return sorted({float(v) for v in [*grid, value, *near] if low <= v <= high})


def _params() -> list[tuple[str, str]]:
    out = []
    for rule_id, rule in sorted(RULES.items()):
        if rule.status == "removed" or not _cases(rule_id):
            continue
        for param in rule.spec.params:
            if param.role == "decides" and not param.is_off(rule.params[param.name]):
                out.append((rule_id, param.name))
    return out


def _outcome(rule_id: str, run, overrides: dict) -> tuple[str, ...]:
    diag = diagnose(run, select=[rule_id], params={rule_id: overrides})
    return tuple(sorted(f.severity for f in diag.findings if f.rule == rule_id)) or ("none",)


def _pair(rule_id: str, name: str, coarse: bool = False) -> tuple[str, float, float] | None:
    """(the case, the two values) where moving `name` changes a case's outcome, or None; `coarse` reads
    only the range's ends and x0.5 / x2 of the shipped value."""
    rule = RULES[rule_id]
    param = next(p for p in rule.spec.params if p.name == name)
    grid = _grid(param.low, param.high, rule.params[name])
    if coarse:
        value = rule.params[name]
        grid = [v for v in grid if v in (grid[0], grid[-1], value) or v in (value * 0.5, value * 2.0)]
    for case in _cases(rule_id):
        run = make_run(case["name"], case["series"], case.get("ending"), case.get("config"))
        outcomes = [_outcome(rule_id, run, {name: v}) for v in grid]
        for (a, fa), (b, fb) in zip(zip(grid, outcomes), zip(grid[1:], outcomes[1:])):
            if fa != fb:
                return case["name"], a, b
    return None


def test_unflipped_names_only_parameters_that_decide_a_verdict():
    # a parameter removed or re-roled must leave the list, or the list would hide nothing and look like a gap
    assert UNFLIPPED <= set(_params())


@pytest.mark.parametrize("rule_id, name", _params(), ids=lambda v: v)
def test_a_parameter_that_decides_a_verdict_has_a_threshold_pair(rule_id, name):
    pair = _pair(rule_id, name, coarse=(rule_id, name) in UNFLIPPED)
    if (rule_id, name) in UNFLIPPED:
        assert pair is None, f"{rule_id} {name} now flips on {pair}: take it off UNFLIPPED"
        return
    assert pair is not None, f"no case of {rule_id} changes its outcome as {name} moves"
