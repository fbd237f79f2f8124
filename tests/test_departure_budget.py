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


@pytest.mark.parametrize("noise, most", [("normal", None), ("student_t3", 1)])
def test_a_blip_one_heavy_tailed_point_can_make_is_no_sure_excursion(noise, most):
    # a flat loss (2.0 +- 0.02, 3,000 points logged every 5th step) two points of which stand +0.2 (10 sds) up:
    # under normal noise an excursion; under Student-t(3) noise one point of 20 sds makes that mean on ~9% of
    # such curves (P(t3 > 34.6) ~ 1.5e-5 per point), so it is too noisy to tell (excursions._OnePoint)
    found = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        z = rng.standard_t(3, 3000) / np.sqrt(3) if noise == "student_t3" else rng.standard_normal(3000)
        loss = 2.0 + 0.02 * z
        loss[2000:2002] += 0.2
        frame = pd.DataFrame({"step": np.arange(3000) * 5, "loss": loss})
        diag = stabdiag.diagnose(stabdiag.load(frame, name="blip")[0])
        found += "L3.loss-excursion" in {f.rule for f in diag.findings}
    if most is None:
        assert found >= 18, f"{found} of 20 normal-noise blips found"
    else:
        assert found <= most, f"{found} of 20 heavy-tailed blips called sure"
