"""Early levels read as a window's median, and a recorder's placeholder 0.0 at the first step read as no data
(issue 44 item 7)."""

from __future__ import annotations

import numpy as np

from stabdiag.judge.detectors.early import early_level, placeholder_at_start
from stabdiag.judge.engine import diagnose, without_placeholders
from stabdiag.signals.resolve import resolve
from tests.casegen import make_run


def test_a_zero_far_from_the_points_after_it_is_a_placeholder():
    assert placeholder_at_start(np.array([0.0, 1.21, 1.19, 1.2, 1.2]))
    assert placeholder_at_start(np.array([0.0, -2.0, -2.1, -1.9]))          # a loss logged negative


def test_a_curve_that_grows_from_zero_keeps_its_zero():
    assert not placeholder_at_start(np.array([0.0, 1e-4, 3e-4, 8e-4, 1.5e-3, 2e-3]))     # KL from the reference
    assert not placeholder_at_start(np.array([0.0, 0.05, 0.1, 0.02, 0.08]))               # a success rate from 0
    assert not placeholder_at_start(np.array([0.0, -0.1, 0.2, 0.1]))                      # around 0
    assert not placeholder_at_start(np.array([0.3, 1.2, 1.2, 1.2]))                       # not exactly 0
    assert not placeholder_at_start(np.array([0.0, 1.2, 1.2]))                            # too few after it


def test_one_high_point_does_not_set_the_early_level():
    rng = np.random.default_rng(3)
    values = np.concatenate([[2.0], 0.9 + rng.normal(0, 0.02, 399)])
    assert abs(early_level(np.arange(1, 401), values, 0.1) - 0.9) < 0.06      # not 2.0
    collapsed = np.array([3.9, 0.4, 0.07] + [0.0] * 27)          # a fall inside the first window
    assert early_level(np.arange(1, 31), collapsed, 0.1) == 0.4


def test_a_placeholder_is_dropped_where_a_step_cannot_measure_0_and_said():
    run = make_run("t", {"entropy": {"ramp": [1.2, 1.2], "noise": 0.01, "set": {1: 0.0}},
                         "kl": {"ramp": [0.0, 0.05]},
                         "frac_reward_zero_std": {"ramp": [1.0, 1.0], "set": {1: 0.0}},
                         "eval/math500_accuracy": {"every": 20, "ramp": [0.0, 0.4], "noise": 0.0,
                                                   "set": {20: 0.0}}})
    signals = without_placeholders(resolve(run))
    assert signals.get("entropy").steps[0] == 2 and float(signals.get("entropy").values.min()) > 1.0
    assert signals.get("kl").steps[0] == 1                   # 0 -> 0.05 over the run: a real 0
    assert signals.get("zero_std_frac").steps[0] == 1        # every group mixed, then a collapse: data
    assert signals.get("eval:math500").steps[0] == 20        # a score of 0 before training is data
    assert any("placeholder" in n and "entropy at step 1" in n for n in signals.notes)


def test_a_placeholder_does_not_become_an_onset():
    """Before: the entropy's fall (steps 100-250) was dated with an interval from step 3, the jump from the
    placeholder 0.0 at step 1; over seeds the onset now lies near step 100."""
    for draw in range(1, 6):
        run = make_run("t", {"entropy": {"ramp": [2.0, 0.9], "ramp_steps": [100, 250], "noise": 0.02,
                                         "set": {1: 0.0}}}, draw=draw)
        (finding,) = [f for f in diagnose(run).findings if f.rule == "L2.entropy-below-floor"]
        assert 80 <= finding.onset_interval[0] and finding.onset <= 110, finding.onset_interval
