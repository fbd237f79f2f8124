"""The departure rules (L3.loss-divergence, L3.loss-excursion, L1.eval-loss-rising, L3.grad-norm-excursion)
pick the largest of the departures a curve shows, against the lowest level so far: their sureness is spread
over the stretches they could have picked (excursions._scan_z), so a flat loss is not a divergence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import stabdiag
from stabdiag.judge.detectors.excursions import _scan_z

DEPARTURE_RULES = {"L3.loss-divergence", "L3.loss-excursion", "L1.eval-loss-rising", "L3.grad-norm-excursion"}


def test_the_sureness_is_the_rules_for_one_stretch_and_grows_with_the_stretches_it_could_be_in():
    assert _scan_z(3.0, 10, 10) == pytest.approx(3.0)
    assert 3.0 < _scan_z(3.0, 100, 10) < _scan_z(3.0, 1000, 10) < _scan_z(3.0, 1000, 10, before=500, wide=20)
    assert _scan_z(3.0, 100, 1) == pytest.approx(4.197, abs=1e-3)       # Sidak over 100: 0.00135 / 100 each
    assert np.isfinite(_scan_z(12.0, 10_000, 1))                           # a threshold pair's z: no 1 - tail


@pytest.mark.parametrize("every", [1, 10])
def test_a_flat_noisy_loss_seldom_reads_as_a_departure_at_any_cadence(every):
    # the issue-44 walk-through's null: a loss flat at 2.0 +- 0.02 (it never came down, so no share of a descent
    # bars a departure), 100 points; logged every 10th step it raised a finding on 12 of 50 runs before
    fired = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        frame = pd.DataFrame({"step": np.arange(1, 101) * every, "loss": 2.0 + 0.02 * rng.standard_normal(100),
                              "grad_norm": 0.5 * np.exp(0.1 * rng.standard_normal(100))})
        diag = stabdiag.diagnose(stabdiag.load(frame, name="flat")[0])
        fired += bool({f.rule for f in diag.findings} & DEPARTURE_RULES)
    assert fired <= 2, f"{fired} of 40 flat losses read as departures"
