"""Sample forensics (stabdiag.advise.samples): the acceptance fixtures (a hack's feature is named on each
hacked run, nothing on its healthy twin), the tests' behaviour under their nulls, and the evidence on a
diagnosed run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stabdiag.advise.samples import stats
from stabdiag.advise.samples.forensics import reward_forensics
from stabdiag.read.samples import SampleSource

RUNS = Path(__file__).parent / "fixtures" / "sample_runs"


def _forensics(run: str):
    source = SampleSource.of([str(p) for p in (RUNS / run).rglob("*") if p.is_file()])
    return reward_forensics(source.window(), rule="L1.test", first_step=None, last_step=None)


@pytest.mark.parametrize("hacked, feature", [("trl_length_hack", {"chars", "words"}),
                                             ("verl_format_hack", {"answer_tag", "has:<answer>"}),
                                             ("plain_phrase_hack", {"has:certainly", "opens:certainly"})])
def test_the_hack_is_named(hacked, feature):
    found = _forensics(hacked)
    assert found.named, found.headline()
    assert found.named[0].feature in feature, [e.feature for e in found.named]


@pytest.mark.parametrize("twin", ["trl_healthy", "verl_healthy", "plain_healthy"])
def test_nothing_is_named_on_the_healthy_twins(twin):
    found = _forensics(twin)
    assert found.not_judged is None
    assert found.named == (), [e.describe() for e in found.named]


def _strata(n_strata: int, size: int):
    return np.repeat(np.arange(n_strata), size)


def test_association_within_steps_is_found():
    rng = np.random.default_rng(1)
    strata = _strata(40, 8)
    reward = rng.random(len(strata))
    feature = (reward + rng.normal(0, 0.3, len(strata)) > 0.5).astype(float)
    high = stats.reward_halves(reward, strata)
    found = stats.within_strata(feature, high, strata)
    assert found.p < 1e-6 and found.high > found.low


def test_a_difference_between_steps_alone_is_not_an_association():
    # later steps pay more and answer longer, but inside each step length and reward are unrelated:
    # a pooled comparison would call it an association, the within-step test must not
    rng = np.random.default_rng(2)
    strata = _strata(30, 16)
    reward = strata / 30 + rng.random(len(strata)) * 0.1
    length = 100 + 10 * strata + rng.normal(0, 5, len(strata))
    pooled = np.corrcoef(reward, length)[0, 1]
    assert pooled > 0.8
    found = stats.within_strata(length, stats.reward_halves(reward, strata), strata)
    assert found.p > 0.01


@pytest.mark.parametrize("size", [6, 40])            # the Monte Carlo path and the normal path
def test_false_alarm_rate_under_the_null_is_at_most_its_level(size):
    rng = np.random.default_rng(3)
    strata = _strata(20, size)
    hits = 0
    for seed in range(60):
        reward = rng.random(len(strata))
        feature = rng.random(len(strata))
        found = stats.within_strata(feature, stats.reward_halves(reward, strata), strata, seed=seed)
        hits += found.p < 0.05
    assert hits <= 8                                   # 5% of 60 is 3; binomial 99.9% bound ~ 9


def test_over_steps_is_exact_for_few_steps_and_one_sided():
    steps = np.repeat(np.arange(6), 4)
    rising = steps.astype(float)
    up = stats.over_steps(rising, steps, direction=1)
    down = stats.over_steps(rising, steps, direction=-1)
    assert up.p == pytest.approx(1 / 20)              # C(6, 3) splits, the observed one the most extreme
    assert down.p == 1.0 and up.late > up.early


def test_over_steps_by_monte_carlo_for_many_steps():
    steps = np.repeat(np.arange(40), 3)                # C(40, 20) splits: too many to enumerate
    rising = steps.astype(float)
    assert stats.over_steps(rising, steps, direction=1).p == 1 / (1 + stats.DRAWS)
    assert stats.over_steps(rising, steps, direction=-1).p == 1.0
    rng = np.random.default_rng(5)
    null = [stats.over_steps(rng.random(len(steps)), steps, direction=1, seed=k).p for k in range(40)]
    assert 0.3 < np.mean(null) < 0.7                   # uniform under the null: mean 0.5, sd 0.05 over 40


def test_holm_steps_down():
    assert stats.holm([0.001, 0.02, 0.004], 0.01) == [True, False, True]
    assert stats.holm([0.02, 0.001], 0.01) == [False, True]


def test_a_diagnosis_gets_the_evidence_on_its_layer1_finding():
    # the tiny fixtures are too short for a layer-1 rule to fire: the finding is given, the run and its
    # samples are the real ones
    from dataclasses import replace

    import stabdiag
    from stabdiag.advise.samples import sample_evidence
    from stabdiag.judge.diagnosis import Finding

    run = stabdiag.load(str(RUNS / "verl_format_hack"))
    run = run[0] if isinstance(run, list) else run
    diag = stabdiag.diagnose(run)
    finding = Finding("L1.reward-component-divergence", 1, "fail", "t", 2, 16, "m", {}, ("c",))
    found = sample_evidence(run, replace(diag, findings=(finding,)))
    assert found.rule == "L1.reward-component-divergence" and found.last_step == 16
    assert found.named and found.named[0].feature in {"answer_tag", "has:<answer>"}
    assert sample_evidence(run, replace(diag, findings=())) is None


def test_a_p_value_that_underflows_is_not_said_to_be_zero():
    from stabdiag.advise.samples.forensics import FeatureEffect

    effect = FeatureEffect("has:x", "contains 'x'", True, 0.9, 0.1, 0.2, 0.8, 40.0, 0.0, 5e-4, True)
    assert "p < 1e-16 within groups" in effect.describe() and "p 0.0005 over steps" in effect.describe()
