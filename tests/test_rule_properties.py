"""Hypothesis properties of the rules with the parameters that SHIP (the rule files), not the
detectors' defaults: units, offsets and cadence never change an outcome; noise never fires; NaN and
Inf never raise; too little data is never a clean bill."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import load_rules
from stabdiag.read.run import Run, Series
from tests.casegen import wandering_noise

RULES = {r.id: r for r in load_rules()}
SPIKE_AND_FLOOR_RULES = ("L3.loss-spike", "L3.grad-norm-spike", "L2.entropy-below-floor", "L2.entropy-collapse",
                         "L3.frozen-updates", "L3.loss-divergence")


def outcome(run: Run, rule_id: str) -> str:
    diag = diagnose(run, select=[rule_id])
    if any(f.rule == rule_id for f in diag.findings):
        return "fires"
    return "not judged" if any(u.rule == rule_id for u in diag.unknown) else "quiet"


def run_of(steps: np.ndarray, **series: np.ndarray) -> Run:
    return Run("p", {k: Series.from_points(k, steps, v) for k, v in series.items()})


def hack_run(rng, n, rise, eval_gain, every=1, offset=0):
    """A reward rising by `rise` while an eval gains `eval_gain` of its level, logged every `every`."""
    steps = np.arange(1, n + 1) * every + offset
    x = np.linspace(0, 1, n)
    reward = 0.3 + rise * np.clip(x * 1.5, 0, 1) + rng.normal(0, 0.02, n)
    ev_idx = np.arange(0, n, max(1, n // 12))
    evals = 0.42 * (1 + eval_gain * np.clip(x[ev_idx] * 1.5, 0, 1)) + rng.normal(0, 0.004, len(ev_idx))
    return steps, reward, steps[ev_idx], evals


def reward_eval_run(steps, reward, ev_steps, evals) -> Run:
    return Run("p", {"reward": Series.from_points("reward", steps, reward),
                     "eval/math_accuracy": Series.from_points("eval/math_accuracy", ev_steps, evals)})


def hack_outcome(steps, reward, ev_steps, evals, a=1.0, b=0.0, eval_scale=1.0):
    return outcome(reward_eval_run(steps, a * reward + b, ev_steps, eval_scale * evals), "L1.reward-eval-divergence")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rise=st.floats(0.05, 0.6), eval_gain=st.sampled_from([0.0, 0.4]),
       a=st.floats(0.05, 50), b=st.floats(2, 10), eval_scale=st.sampled_from([1.0, 100.0]))
def test_reward_and_eval_units_never_change_the_divergence_outcome(seed, rise, eval_gain, a, b, eval_scale):
    """Any scale and offset of a reward model's score, and an eval in percent, give the same outcome.  A
    reward on 0..1 is read as a success rate, in the unit it shares with an accuracy (what following it
    would add to the eval is known there), so the comparison is between rewards off 0..1: 2 + r against
    a r + b (b >= 2)."""
    data = hack_run(np.random.default_rng(seed), 300, rise, eval_gain)
    assert hack_outcome(*data, b=2.0) == hack_outcome(*data, a=a, b=b, eval_scale=eval_scale)


def test_the_divergence_property_is_not_vacuous():
    hack, tracked = (hack_run(np.random.default_rng(1), 300, 0.5, gain) for gain in (0.0, 0.4))
    assert hack_outcome(*hack) == hack_outcome(*hack, a=10, b=-3, eval_scale=100) == "fires"
    assert hack_outcome(*tracked) == hack_outcome(*tracked, a=10, b=-3, eval_scale=100) == "quiet"


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), offset=st.sampled_from([0, 50_000, 1_000_000]),
       rule=st.sampled_from(sorted(RULES)))
def test_a_step_offset_never_changes_any_rule(seed, offset, rule):
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 301)
    series = {"reward": 0.3 + 0.4 * np.linspace(0, 1, 300) + rng.normal(0, 0.02, 300),
              "kl": np.linspace(0, 0.05, 300) + rng.normal(0, 0.002, 300),
              "entropy": np.linspace(1.2, 0.6, 300) + rng.normal(0, 0.02, 300),
              "loss": 2.0 * np.exp(rng.normal(0, 0.05, 300)), "grad_norm": 0.5 * np.exp(rng.normal(0, 0.2, 300)),
              "frac_reward_zero_std": np.clip(0.3 + rng.normal(0, 0.05, 300), 0, 1)}
    series["grad_norm"][200] = 30.0
    assert outcome(run_of(steps, **series), rule) == outcome(run_of(steps + offset, **series), rule)


@settings(max_examples=20, deadline=None)
@given(level=st.floats(0.01, 1000), seed=st.integers(0, 10_000), rule=st.sampled_from(SPIKE_AND_FLOOR_RULES))
def test_noise_around_any_level_never_fires(level, seed, rule):
    rng = np.random.default_rng(seed)
    noisy = level * np.exp(rng.normal(0, 0.05, 400))
    run = run_of(np.arange(1, 401), loss=noisy, grad_norm=noisy, entropy=noisy)
    if rule == "L3.loss-divergence":
        # its clean bill needs the last stretch (5 steps) to rule out a climb of 3 noise sds from the running
        # best, which flat noise leaves undecided on some draws: measured below as a rate
        assert outcome(run, rule) in ("quiet", "not judged")
        return
    assert outcome(run, rule) == "quiet"


def test_flat_noise_seldom_leaves_the_loss_divergence_rule_undecided():
    """A flat, noisy supervised loss (5% log-normal noise, 400 steps) never fires L3.loss-divergence and is
    judged clean on most draws; on the rest its last 5 steps against the running best (biased low by the
    noise) cannot rule out a climb of 3 noise sds: 4 of 30 draws at each level (12 of 90) when measured, the
    same draws at every level (scale-free). A known limit of the rule; the bound guards against a regression."""
    outcomes = []
    for level in (0.05, 1.0, 300.0):
        for seed in range(30):
            noisy = level * np.exp(np.random.default_rng(seed).normal(0, 0.05, 400))
            outcomes.append(outcome(run_of(np.arange(1, 401), loss=noisy), "L3.loss-divergence"))
    assert "fires" not in outcomes
    assert outcomes.count("not judged") <= 0.2 * len(outcomes), outcomes.count("not judged")


@settings(max_examples=20, deadline=None)
@given(every=st.sampled_from([1, 5, 10, 50]), height=st.floats(20, 1e4))
def test_a_grad_norm_spike_is_found_at_any_logging_cadence(every, height):
    rng = np.random.default_rng(every)
    steps = np.arange(every, 400 * every + 1, every)
    grad = 0.4 * np.exp(rng.normal(0, 0.1, len(steps)))
    grad[300] = 0.4 * height
    assert outcome(run_of(steps, grad_norm=grad), "L3.grad-norm-spike") == "fires"


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.sampled_from([0.5, 1.0, math.nan, math.inf, -math.inf, 2.0, 0.0,
                                        1e308, -1e308, 1e-308, 5e-324]), min_size=1, max_size=40),
       rule=st.sampled_from(sorted(RULES)))
def test_nan_inf_and_values_at_the_float_limits_never_raise(values, rule):
    arr = np.array(values)
    steps = np.arange(1, len(arr) + 1)
    run = run_of(steps, reward=arr, loss=arr, grad_norm=arr, entropy=arr, kl=arr, frac_reward_zero_std=arr,
                 **{"eval/acc": arr, "sampling/importance_sampling_ratio/mean": arr,
                    "completions/clipped_ratio": arr, "rewards/accuracy_reward/mean": arr,
                    "rewards/format_reward/mean": arr})
    assert outcome(run, rule) in ("fires", "quiet", "not judged")


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), rule=st.sampled_from(sorted(r for r in RULES if RULES[r].requires != "event")),
       seed=st.integers(0, 1000))
def test_fewer_than_ten_healthy_points_are_never_a_clean_bill(n, rule, seed):
    rng = np.random.default_rng(seed)
    ones = 1.0 + rng.normal(0, 0.01, n)
    run = run_of(np.arange(1, n + 1), reward=0.3 * ones, loss=2 * ones, grad_norm=0.5 * ones, entropy=ones,
                 kl=0.01 * ones, frac_reward_zero_std=0.2 * ones, **{
                     "eval/acc": 0.4 * ones, "sampling/importance_sampling_ratio/mean": ones,
                     "sampling/sampling_logp_difference/mean": 0.01 * ones, "completions/clipped_ratio": 0.05 * ones,
                     "rewards/accuracy_reward/mean": 0.3 * ones, "rewards/format_reward/mean": 0.5 * ones,
                     "completions/mean_length": 200 * ones})
    assert outcome(run, rule) == "not judged"


def _rise_z_beside_a_flat_eval(rng, steps, reward, ev_steps) -> float:
    """rise_z the divergence rule reads for `reward` at `steps` beside a flat eval (NaN when it stays quiet)."""
    run = reward_eval_run(steps, reward, ev_steps, 0.42 + rng.normal(0, 0.004, len(ev_steps)))
    found = diagnose(run, select=["L1.reward-eval-divergence"]).findings
    return found[0].evidence["rise_z"] if found else math.nan


def test_a_reward_logged_as_the_mean_of_5_steps_reads_as_sure_as_logged_every_step():
    """Statistical, 20 seeds (issue 24): TRL's logging_steps = k logs the mean of k steps.  A rise counted
    in per-point noise sds read such a log sqrt(k) more sure than the same run sampled; the trend's
    evidence is the same either way (median ratio of z 0.96 at k = 5)."""
    ratios = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        steps = np.arange(1, 2001)
        reward = 0.3 + 0.15 * np.clip((steps / 2000 - 0.1) / 0.4, 0, 1) + rng.normal(0, 0.05, 2000)
        ev_steps = np.arange(50, 2001, 50)
        every_step = _rise_z_beside_a_flat_eval(rng, steps, reward, ev_steps)
        averaged = _rise_z_beside_a_flat_eval(rng, steps[4::5], reward.reshape(-1, 5).mean(axis=1), ev_steps)
        ratios.append(averaged / every_step)
    # the rise is 3 per-step noise sds, at min_rise_sd: logged every step it is a finding on about half of
    # the seeds, and the mean of 5 steps is 5x less noisy a point, so it clears the size bar more often (a
    # known limit: a batch sd is a size per logged point); where both read it, they are as sure
    ratios = np.asarray(ratios)
    both = ratios[np.isfinite(ratios)]
    assert len(both) >= 6
    assert 0.85 < np.median(both) < 1.15 and np.percentile(both, 10) > 0.6


def test_a_rise_under_wandering_noise_reads_as_sure_logged_every_step_or_every_5th():
    """Statistical, 20 seeds: under AR(1) 0.9 noise the points logged every 5th are 5x fewer but nearly
    independent; the effective number of points, and so the trend's z, is the same (median ratio 1.0)."""
    ratios = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        steps = np.arange(1, 2001)
        reward = 0.3 + 0.15 * np.clip((steps / 2000 - 0.1) / 0.4, 0, 1) + wandering_noise(rng, 2000, 0.03)
        ev_steps = np.arange(50, 2001, 50)
        ratios.append(_rise_z_beside_a_flat_eval(rng, steps[4::5], reward[4::5], ev_steps)
                      / _rise_z_beside_a_flat_eval(rng, steps, reward, ev_steps))
    assert np.isfinite(ratios).all()
    assert 0.85 < np.median(ratios) < 1.15 and np.percentile(ratios, 10) > 0.8


def test_a_kl_growing_steadily_out_of_its_noise_rarely_warns_at_any_cadence():
    """Statistical: KL 0.001 -> 0.012 over 1,000 steps with 25% noise, entropy flat, on 60 seeds.  With a
    running median of the 3-5 points a sparse log gives it warned on 1 / 10 / 29 / 41 seeds logged every
    1 / 5 / 10 / 20 steps; over half the comparison window, on 1 / 0 / 7 / 11."""
    for every in (1, 5, 10, 20):
        warned = 0
        for seed in range(60):
            rng = np.random.default_rng(seed)
            steps = np.arange(every, 1001, every)
            kl = np.linspace(0.001, 0.012, 1000)[steps - 1] * np.exp(rng.normal(0, 0.25, len(steps)))
            warned += outcome(run_of(steps, kl=kl, entropy=1.2 + rng.normal(0, 0.02, len(steps))),
                              "L2.policy-moving-fast") == "fires"
        assert warned <= 12, (every, warned)


def test_a_kl_growing_steadily_under_wandering_noise_warns_as_rarely_logged_every_step():
    """Statistical: KL 0.001 -> 0.012 over 1,000 steps with 25% wandering noise, entropy flat with 2%, on
    60 seeds.  Smoothed over a fixed 21 points, KL logged every step doubled by chance on 59 seeds and
    on 15 / 13 / 9 logged every 5 / 10 / 20 steps; smoothed over half the window in steps, 12 / 15 / 13 / 9."""
    for every in (1, 5, 10, 20):
        warned = 0
        for seed in range(60):
            rng = np.random.default_rng(seed)
            steps = np.arange(every, 1001, every)
            kl = np.linspace(0.001, 0.012, 1000) * np.exp(wandering_noise(rng, 1000, 0.25))
            entropy = 1.2 * (1 + wandering_noise(rng, 1000, 0.02))
            warned += outcome(run_of(steps, kl=kl[steps - 1], entropy=entropy[steps - 1]),
                              "L2.policy-moving-fast") == "fires"
        assert warned <= 20, (every, warned)
