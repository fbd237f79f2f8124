"""A finding read on curves without noise says "exact" or "no noise", never an infinite z or a quotient of
rounding errors (issue 43 item 7: "no infinite z in a message")."""

from __future__ import annotations

import re

import pytest

from stabdiag.judge.engine import diagnose
from tests.casegen import make_run

_NOT_A_NUMBER = re.compile(r"\b(inf|nan)\b|\d{10,}", re.IGNORECASE)

NOISE_FREE = {
    "L1.eval-below-start": {"eval/math500_accuracy": {"every": 10, "ramp": [0.42, 0.20, 0.313],
                                                      "ramp_steps": [10, 60, 400]},
                            "reward": {"ramp": [0.3, 0.3, 0.8], "ramp_steps": [1, 100, 400]}},
    "L3.loss-excursion": {"loss": {"steps": 1000, "ramp": [2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 0.95],
                                   "ramp_steps": [1, 300, 500, 501, 510, 511, 1000]}},
    "L3.grad-norm-excursion": {"grad_norm": {"steps": 1000, "ramp": [0.3, 0.3, 1.5, 1.5, 0.3, 0.3],
                                             "ramp_steps": [1, 400, 403, 480, 483, 1000]}},
}


@pytest.mark.parametrize("rule", sorted(NOISE_FREE))
def test_a_noise_free_finding_says_exact_not_an_infinite_z(rule):
    found = [f for f in diagnose(make_run(rule, NOISE_FREE[rule], None, None)).findings if f.rule == rule]
    assert found, f"{rule} did not fire on its noise-free case"
    for finding in found:
        assert not _NOT_A_NUMBER.search(finding.message), finding.message
