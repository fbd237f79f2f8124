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


@pytest.mark.parametrize("points", [20, 30])
def test_a_short_slowly_wandering_flat_loss_is_no_divergence(points):
    # a loss flat at 2.0 with AR(0.9) noise (sd 0.02), 20-30 points: too few to bound the noise's memory, so a
    # climb is read as well under a random walk's contrast; read under the memory a dozen points show, 28 and
    # 18 of 100 such curves failed L3.loss-divergence
    fired = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        noise = np.empty(points)
        noise[0] = rng.standard_normal()
        for i in range(1, points):
            noise[i] = 0.9 * noise[i - 1] + np.sqrt(1 - 0.81) * rng.standard_normal()
        frame = pd.DataFrame({"step": np.arange(1, points + 1), "loss": 2.0 + 0.02 * noise})
        diag = stabdiag.diagnose(stabdiag.load(frame, name="wander")[0])
        fired += "L3.loss-divergence" in {f.rule for f in diag.findings}
    assert fired <= 1, f"{fired} of 40 short wandering losses read as divergences"


def test_a_short_loss_that_came_down_and_climbs_back_is_still_a_divergence():
    # 24 points: 2.0 -> 1.2, then back up 0.5 (62% of the way down, 25 noise sds) for its last 10 points; its bar
    # is a share of the descent, not the noise's multiple, so the walk reading of a short curve does not apply
    fired = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        i = np.arange(24)
        mean = np.where(i < 14, 1.2 + 0.8 * np.exp(-i / 4), 1.7)
        frame = pd.DataFrame({"step": (i + 1) * 10, "loss": mean + 0.02 * rng.standard_normal(24)})
        diag = stabdiag.diagnose(stabdiag.load(frame, name="sft")[0])
        fired += "L3.loss-divergence" in {f.rule for f in diag.findings}
    assert fired >= 18, f"{fired} of 20 short divergences found"


def test_a_climb_after_a_sure_excursion_is_read_against_the_noise_without_it():
    # a loss that came down 3.5 -> 2.0 (+- 0.02), left it for 15 steps at 8.0 and came back (an excursion), then
    # climbs 0.6 (40% of the way down) for its last 100 steps: the excursion read as noise left the climb too
    # noisy to tell on 20 of 20 draws; single spikes never did
    fired = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        i = np.arange(400)
        loss = 2.0 + 1.5 * np.exp(-i / 40) + 0.02 * rng.standard_normal(400)
        loss[150:165] = 8.0
        loss[300:] += 0.6
        diag = stabdiag.diagnose(stabdiag.load(pd.DataFrame({"step": i + 1, "loss": loss}), name="x")[0])
        fired += "L3.loss-divergence" in {f.rule for f in diag.findings}
    assert fired >= 18, f"{fired} of 20 climbs after an excursion found"
