"""The statistics every trend rule uses (src/stabdiag/judge/stats/evidence.py), and the properties issue 24 asks
of the rules that use them, with the parameters that ship: evidence grows with the number of points, a
large change the data cannot confirm is "not judged" (never a pass), onsets come with intervals, and
the root is the layer whose failure began first."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from stabdiag.judge.detectors._base import Curve
from stabdiag.judge.engine import diagnose
from stabdiag.judge.stats import evidence as ev
from stabdiag.read.assemble import load
from stabdiag.read.run import Run, Series


def ar1(rng, n, phi, sd=1.0):
    """AR(1) noise with stationary sd `sd`."""
    out = np.empty(n)
    out[0] = rng.normal(0, sd)
    shocks = rng.normal(0, sd * math.sqrt(1 - phi * phi), n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + shocks[i]
    return out


# --- the statistics -------------------------------------------------------------------------------

@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_the_trend_interval_covers_a_zero_trend_about_95_percent_of_the_time_under_ar1_noise(phi):
    """Statistical, 300 seeds of 300 points: a test that assumed independent points would reject a zero
    trend on ~40% of AR(1) 0.9 curves; the corrected interval misses 0 on about 5%."""
    rng = np.random.default_rng(1)
    misses = 0
    for _ in range(300):
        c = ev.linear_change(np.arange(300), ar1(rng, 300, phi))
        misses += c.low > 0 or c.high < 0
    assert misses / 300 < 0.09, misses


def test_evidence_grows_with_the_number_of_points():
    """The same rise under the same per-point noise: z grows about as the square root of the points, where
    a rise measured in per-point noise sds stays put."""
    rng = np.random.default_rng(2)
    zs = []
    for n in (60, 240, 960):
        x = np.linspace(0, 1, n)
        zs.append(np.median([ev.linear_change(x, 0.1 * x + rng.normal(0, 0.1, n)).z for _ in range(30)]))
    assert zs[0] < zs[1] < zs[2]
    assert 1.6 < zs[1] / zs[0] < 2.4 and 1.6 < zs[2] / zs[1] < 2.4


def test_the_noise_floor_of_a_mean_of_few_binary_samples_never_collapses_at_a_ceiling():
    rng = np.random.default_rng(3)
    near_ceiling = rng.binomial(128, 0.99, 200) / 128        # most batches all correct
    floor = ev.binomial_floor(near_ceiling)
    assert floor == pytest.approx(math.sqrt(0.99 * 0.01 / 128), rel=0.5)
    assert ev.binomial_floor(rng.random(50)) == 0.0             # no granularity: no floor claimed
    assert ev.binomial_floor(rng.normal(0, 1, 50)) == 0.0       # not on 0..1
    # a reward pinned at 1.0 with a rare 127/128: the trend's sd is the floor, not ~0
    pinned = np.ones(200)
    pinned[::40] = 127 / 128
    c = ev.linear_change(np.arange(200), pinned + np.linspace(0, 1e-3, 200), noise_floor=ev.binomial_floor(pinned))
    assert c.noise_sd >= ev.binomial_floor(pinned) > 0


def test_the_hinge_onset_finds_where_a_creep_turns_into_a_climb_with_an_interval():
    rng = np.random.default_rng(4)
    t = np.arange(600)
    y = 0.3 + 0.0001 * t + np.where(t > 400, 0.004 * (t - 400), 0.0) + rng.normal(0, 0.02, 600)
    onset = ev.hinge_onset(t, y)
    assert onset is not None and onset.low <= 400 <= onset.high and onset.high - onset.low < 60
    assert 380 <= onset.step <= 420
    flat = ev.hinge_onset(t, np.full(600, 0.3))
    assert flat is None


def test_a_jump_between_two_sparse_points_is_dated_between_them_and_a_ramp_still_where_it_bends():
    """Logged every 250 steps, entropy 1.45 -> 0.77 between steps 1750 and 2000: no continuous hinge fits
    a step, and the best one bent at step 1250 with an interval (750-1250) that excluded the jump."""
    rng = np.random.default_rng(5)
    steps = np.arange(1, 21) * 250
    entropy = np.where(steps <= 1750, 1.45, 0.77) + rng.normal(0, 0.005, 20)
    onset = ev.hinge_onset(steps[:10], entropy[:10])
    assert (onset.step, onset.low, onset.high) == (1750, 1750, 2000)
    # a ramp the points resolve (a creep from the start, then a climb) keeps the hinge's onset at its bend
    t = np.arange(400)
    ramp = 0.45 + np.clip((t - 100) / 150, 0, 1) * 0.4 + rng.normal(0, 0.02, 400)
    bend = ev.hinge_onset(t[:240], ramp[:240])
    assert bend.low <= 100 <= bend.high and bend.high - bend.low < 40


def test_a_collapse_between_two_points_logged_every_250_steps_has_its_onset_between_them():
    steps = np.arange(1, 21) * 250
    kl = np.where(steps <= 1750, 0.004, 0.037)
    entropy = np.where(steps <= 1750, 1.45, 0.77)
    run = Run("sparse", {"kl": Series.from_points("kl", steps, kl),
                         "entropy": Series.from_points("entropy", steps, entropy)})
    (f,) = [f for f in diagnose(run).findings if f.rule == "L2.policy-moving-fast"]
    assert f.onset_interval[0] <= 1750 and f.onset_interval[1] >= 1750 and f.onset_interval[1] <= 2000


def test_an_eval_that_jumps_early_and_holds_is_a_sure_improvement():
    values = np.array([0.21, 0.86, 0.88, 0.885, 0.89, 0.887, 0.893, 0.89, 0.895, 0.892, 0.898, 0.895])
    gain = ev.level_gain(values)
    assert gain.z > 10 and gain.estimate == pytest.approx(0.8915 - 0.21, abs=0.01)
    assert ev.level_gain(np.array([0.42, 0.41, 0.43, 0.42, 0.42, 0.415])).z < 2



def test_a_window_of_five_flat_evals_is_a_sure_gain_no_more_often_than_its_family_bar_says():
    """Sharpening (entropy falling while an eval surely improves) silences L2.policy-moving-fast, so a gain
    read by chance must be as rare as the bar says: two flat evals of 500 items each, logged every 50 steps,
    read over a 200-step window (five points each).  Their noise is read on all of their points, not on the
    window's four differences alone, which were small by luck often enough that a dip and a rebound between
    two points read as a sure gain on 3.9% of windows (nominal 2.3%: one z of 2.0 among two evals)."""
    rng = np.random.default_rng(0)
    steps = np.arange(50, 5001, 50, dtype=float)
    windows = 1000
    claimed = 0
    for _ in range(windows):
        evals = [Curve(f"eval:{name}", name, steps, rng.binomial(500, p, len(steps)) / 500)
                 for name, p in (("math500", 0.22), ("gsm8k", 0.69))]
        start = rng.uniform(200, 4700)
        claimed += ev.eval_improvement(evals, start, start + 200) is not None
    assert claimed <= 0.025 * windows, f"a sure gain on {claimed} of {windows} windows of flat evals"

# --- rules with the shipped parameters ------------------------------------------------------------

def grpo_reward(rng, n, lift, group=8, prompts=16):
    """A per-step GRPO reward: the mean of `prompts` x `group` 0/1 completions, prompt difficulty drawn per
    step, the policy's logit rising by `lift` over the middle 80% of the run."""
    x = np.linspace(0, 1, n)
    shift = lift * np.clip((x - 0.1) / 0.8, 0, 1)
    logits = rng.normal(-0.4, 1.2, (n, prompts)) + shift[:, None]
    return rng.binomial(group, 1 / (1 + np.exp(-logits))).sum(axis=1) / (prompts * group)


def hack(rng, n, lift, group=8, truncation=False):
    """A GRPO reward hack: the reward lifts, a 500-item eval stays flat; with `truncation`, the share of
    responses cut at the length cap climbs 0.05 -> 0.65 with it (issue 24's "strong hack")."""
    steps = np.arange(1, n + 1)
    ev_steps = np.arange(10, n + 1, 10)
    series = {"reward": Series.from_points("reward", steps, grpo_reward(rng, n, lift, group)),
              "eval/math500_accuracy": Series.from_points(
                  "eval/math500_accuracy", ev_steps, rng.binomial(500, 0.42, len(ev_steps)) / 500)}
    if truncation:
        climb = 0.05 + 0.6 * np.clip((np.linspace(0, 1, n) - 0.1) / 0.8, 0, 1)
        series["completions/clipped_ratio"] = Series.from_points(
            "completions/clipped_ratio", steps, np.clip(climb + rng.normal(0, 0.02, n), 0, 1))
    return Run("hack", series)


def divergence(run):
    diag = diagnose(run, select=["L1.reward-eval-divergence"])
    if any(f.rule == "L1.reward-eval-divergence" for f in diag.findings):
        return "fires"
    unknown = [u for u in diag.unknown if u.rule == "L1.reward-eval-divergence"]
    return ("not judged: " + unknown[0].describe()) if unknown else "quiet"


def test_a_strong_hack_of_a_mean_of_8_completions_is_found_at_layer_1_from_100_steps():
    """Issue 24: a reward averaged over 8 completions per prompt, rising by a third of its range over 100
    steps while the eval stays flat and truncation climbs, was missed on almost every seed under "5
    per-point noise sds"."""
    found = 0
    for seed in range(20):
        diag = diagnose(hack(np.random.default_rng(seed), 100, 2.0, truncation=True))
        found += diag.root_layer == 1 and any(f.layer == 1 for f in diag.findings)
    assert found >= 19


def test_without_truncation_a_flat_eval_of_ten_noisy_points_reads_the_hack_or_says_too_noisy():
    """The same hack beside only a 500-item eval scored 10 times: fires, or says the eval is too noisy to
    call flat - never a pass."""
    outcomes = [divergence(hack(np.random.default_rng(seed), 100, 2.0)) for seed in range(20)]
    assert all(o == "fires" or "too noisy" in o for o in outcomes), outcomes
    assert sum(o == "fires" for o in outcomes) >= 10


def test_power_grows_with_points():
    """The same hack, logged at G = 8 over more and more steps: found more often as the run gets longer
    (evidence grows with data), where a bar in per-point sds would find it equally often at any length."""
    rates = [sum(divergence(hack(np.random.default_rng(seed), n, 1.5)) == "fires" for seed in range(15))
             for n in (24, 60, 300)]
    assert rates[0] < rates[2] and rates[0] <= rates[1] <= rates[2] and rates[2] >= 12, rates


def test_a_large_rise_the_data_cannot_confirm_is_not_judged_never_a_pass():
    """A reward that rose a lot but on few, very noisy points: "too noisy to tell", with its interval."""
    outcomes = []
    for seed in range(30):
        rng = np.random.default_rng(seed)
        steps = np.arange(1, 17) * 4            # 64 steps: past the 50 a rise is judged over
        reward = 0.3 + 0.4 * np.linspace(0, 1, 16) + rng.normal(0, 0.3, 16)     # 16 points, sd 0.3
        ev_steps = steps[::2]
        run = Run("noisy", {"reward": Series.from_points("reward", steps, reward),
                            "eval/math500_accuracy": Series.from_points(
                                "eval/math500_accuracy", ev_steps, 0.42 + rng.normal(0, 0.002, len(ev_steps)))})
        outcomes.append(divergence(run))
    too_noisy = [o for o in outcomes if o.startswith("not judged: too noisy to tell")]
    assert len(too_noisy) >= 5 and all("interval" in o for o in too_noisy)
    # a pass only where the rise read small; a large one is never called clean
    assert sum(o == "fires" for o in outcomes) < len(too_noisy)


def test_a_reward_that_jumps_with_its_eval_and_then_creeps_is_learning():
    """verl's published GSM8K baselines: reward 0.25 -> 0.95 in 10 steps with the eval 0.21 -> 0.86, then
    the reward creeps to 0.99 while the eval holds near its ceiling: a small share of the reward's range."""
    rng = np.random.default_rng(8)
    steps = np.arange(1, 106)
    reward = np.where(steps < 10, 0.25 + 0.07 * steps, 0.93 + 0.0006 * (steps - 10)) + rng.normal(0, 0.008, 105)
    ev_steps = np.arange(0, 106, 5)
    evals = np.where(ev_steps < 5, 0.21, 0.86 + 0.0003 * ev_steps) + rng.normal(0, 0.004, len(ev_steps))
    run = Run("verl-like", {"reward": Series.from_points("reward", steps, np.clip(reward, 0, 1)),
                            "eval/gsm8k_accuracy": Series.from_points("eval/gsm8k_accuracy", ev_steps, evals)})
    assert divergence(run) == "quiet"


def success_rate_creep(seed, rise, eval_items, n=1000, completions=512):
    """A reward that is the mean of 512 0/1 completions creeping up by `rise` over the middle 80% of the
    run, beside a flat eval scored on `eval_items` items every 50 steps."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    p = 0.40 + rise * np.clip((np.linspace(0, 1, n) - 0.1) / 0.8, 0, 1)
    ev_steps = np.arange(50, n + 1, 50)
    return Run("creep", {
        "reward": Series.from_points("reward", steps, rng.binomial(completions, p) / completions),
        "eval/math500_accuracy": Series.from_points(
            "eval/math500_accuracy", ev_steps, rng.binomial(eval_items, 0.42, len(ev_steps)) / eval_items)})


def test_an_eval_too_coarse_to_show_a_small_creep_is_not_called_flat():
    """A success rate creeping +0.08 is sure over 1,000 steps; an eval that followed it at 0.3 of its rise
    would gain ~0.024, about the noise of a 200-item eval scored 20 times.  Such an eval either rules
    following out or cannot tell whether it followed - never a pass; the same creep beside an eval precise
    enough to show a following fires every time."""
    coarse = [divergence(success_rate_creep(seed, 0.08, 200)) for seed in range(10)]
    assert all(o == "fires" or o.startswith("not judged") for o in coarse), coarse
    assert any("cannot tell whether it followed" in o for o in coarse), coarse
    precise = [divergence(success_rate_creep(seed, 0.08, 100_000)) for seed in range(10)]
    assert precise.count("fires") == 10, precise


def test_an_eval_logged_only_after_the_reward_saturated_is_not_read_as_flat():
    """The reward climbs 0.25 -> 0.45 within its first 100 steps and holds (learning, under a wandering
    noise); the eval's first point is at step 200.  Read against the reward's smoothed wander, those
    points seemed to see half of the rise and their noise read as a fall over all of it; split where the
    reward had made half of its rise, they all lie after it and see its last few percent: the eval is
    not read (and a rise the noise cannot pin is not confirmed either)."""
    outcomes = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        steps = np.arange(1, 1001)
        clean = 0.25 + 0.2 * (1 - np.exp(-steps / 30))
        reward = clean + ar1(rng, 1000, 0.7, 0.02) + rng.normal(0, 0.02, 1000)
        ev_steps = np.arange(200, 1001, 200)
        run = Run("saturated", {"reward": Series.from_points("reward", steps, reward),
                                "eval/math500_accuracy": Series.from_points(
                                    "eval/math500_accuracy", ev_steps, 0.55 + rng.normal(0, 0.03, 5))})
        outcomes.append(divergence(run))
    assert not any(o == "fires" for o in outcomes), outcomes
    assert all("of the rise (needs" in o for o in outcomes if o.startswith("not judged")), outcomes


def collapse_then_hack(rng, collapse_at, hack_at, n=600):
    """Entropy collapses at `collapse_at` (KL surging), the reward climbs from `hack_at` with the eval flat."""
    steps = np.arange(1, n + 1)
    t = steps.astype(float)
    entropy = np.where(t < collapse_at, 1.5, 1.5 * np.maximum(0.05, 1 - (t - collapse_at) / 60)) \
        * (1 + rng.normal(0, 0.01, n))
    kl = np.where(t < collapse_at, 0.003, 0.003 * np.exp(np.minimum(t - collapse_at, 100) / 25)) \
        * np.exp(rng.normal(0, 0.05, n))
    reward = 0.3 + 0.45 * np.clip((t - hack_at) / 150, 0, 1) + rng.normal(0, 0.02, n)
    ev_steps = np.arange(20, n + 1, 20)
    return Run("order", {
        "reward": Series.from_points("reward", steps, reward), "entropy": Series.from_points("entropy", steps, entropy),
        "kl": Series.from_points("kl", steps, kl),
        "eval/math500_accuracy": Series.from_points("eval/math500_accuracy", ev_steps,
                                                    0.42 + rng.normal(0, 0.004, len(ev_steps)))})


def test_the_root_is_the_layer_whose_failure_began_first():
    """Entropy collapses at step 120 and the reward diverges from step 350: the root is layer 2 and the
    layer-1 finding is downstream, after it; the reverse order makes layer 1 the root."""
    early_collapse = diagnose(collapse_then_hack(np.random.default_rng(9), collapse_at=120, hack_at=350))
    fired = {f.rule: f for f in early_collapse.findings}
    assert "L1.reward-eval-divergence" in fired and early_collapse.root_layer == 2
    later = fired["L1.reward-eval-divergence"]
    assert later.downstream and "after" in (later.downstream_reason or "")

    early_hack = diagnose(collapse_then_hack(np.random.default_rng(9), collapse_at=450, hack_at=60))
    assert early_hack.root_layer == 1
    assert any(f.layer == 2 and f.downstream for f in early_hack.findings)


def test_trend_findings_carry_an_onset_with_an_interval():
    diag = diagnose(hack(np.random.default_rng(10), 300, 2.0))
    (f,) = [f for f in diag.findings if f.rule == "L1.reward-eval-divergence"]
    low, high = f.onset_interval
    assert low <= f.onset <= high and f.evidence["change_step"] == f.onset
    assert 0 < f.onset < 150            # the lift starts at 10% of the run


def test_a_z_of_3_on_three_effective_points_is_not_sure():
    """Student's t with n_eff - 2 degrees of freedom: on 3 effective points the 95% interval is 12.7
    standard errors wide, so a z of 3.1 is no evidence (a truncation climb fired on one)."""
    weak = ev.Change(0.31, 0.1, 0.31 - 12.7 * 0.1, 0.31 + 12.7 * 0.1, 200, 3.0, 0.95, 0.05)
    strong = ev.Change(0.31, 0.1, 0.31 - 2.0 * 0.1, 0.31 + 2.0 * 0.1, 200, 150.0, 0.1, 0.05)
    assert weak.z > 3 and not weak.sure(3.0)
    assert strong.sure(3.0) and not strong.sure(3.5)


def test_a_change_on_too_few_independent_points_says_so_instead_of_an_infinite_interval():
    """verl's GPG baseline: response length 245 -> 602 in one late step over 211 points, n_eff 2; its
    evidence had read "95% interval -inf..inf, z 0.0"."""
    few = ev.Change(498.0, math.inf, -math.inf, math.inf, 211, 2.0, 0.98, 40.0)
    assert few.text() == "+498 (no interval: n_eff 2, too few independent points)" and not few.sure(3.0)
    # a ramp to a plateau logged 20 times: the two-phase fit missed the plateau and its residuals carried
    # the misfit (20 points counted as 3, "too noisy to tell"); the end-minus-start contrast under a noise
    # read apart from the mean reads it
    steps = np.arange(1, 21) * 50
    reward = np.interp(steps, [0, 250, 450, 1000], [0.25, 0.25, 0.9, 0.9]) + \
        np.random.default_rng(1).normal(0, 0.03, 20)
    run = Run("few", {"reward": Series.from_points("reward", steps, reward),
                      "eval/math500_accuracy": Series.from_points(
                          "eval/math500_accuracy", steps[::2], 0.42 + np.random.default_rng(9).normal(0, 0.005, 10))})
    assert divergence(run) == "fires"


def test_one_of_several_evals_must_improve_beyond_chance_among_them():
    """Sidak: the best of k independent readings clears a bar by chance as often as one reading clears z."""
    assert ev.family_z(2.0, 1) == 2.0
    from statistics import NormalDist

    normal = NormalDist()
    for k in (2, 3, 5):
        z = ev.family_z(2.0, k)
        assert 1.0 - normal.cdf(z) ** k == pytest.approx(1.0 - normal.cdf(2.0), rel=1e-9) and z > 2.0


def test_a_sure_rise_whose_size_the_points_cannot_pin_is_too_noisy_to_tell_never_clean():
    """bench/evidence.py's strong hack at G = 8 (16 prompts), logged every 50th step: the reward rose beside
    a flat eval, but its 20 points read the rise as 2.99 batch-to-batch sds, under the bar of 3, and it
    passed clean.  20 points cannot tell such a rise from a wander that has not settled (the noise's
    memory is read as long as they allow): too noisy to tell, on any scale, never clean.  The same rise
    logged every 5th step is pinned by its 200 points: a finding."""
    steps = np.arange(1, 21) * 50
    reward = np.array([0.406, 0.5, 0.25, 0.312, 0.312, 0.289, 0.328, 0.336, 0.344, 0.328, 0.375, 0.695, 0.508,
                       0.602, 0.523, 0.688, 0.531, 0.68, 0.586, 0.703])
    ev_steps = np.arange(1, 1001, 20)
    evals = 0.45 + np.random.default_rng(3).normal(0, 0.022, len(ev_steps))
    eval_series = Series.from_points("eval/math500_accuracy", ev_steps, evals)
    run = Run("sparse-hack", {"reward": Series.from_points("reward", steps, reward),
                              "eval/math500_accuracy": eval_series})
    assert divergence(run).startswith("not judged: too noisy to tell")
    run = Run("sparse-hack-rescaled", {"reward": Series.from_points("reward", steps, 10 * reward - 3),
                                       "eval/math500_accuracy": eval_series})
    assert divergence(run).startswith("not judged: too noisy to tell")
    # a rise of that size logged every 5th step: its 200 points pin the size, and it is a finding
    dense_steps = np.arange(1, 201) * 5
    dense = 0.32 + 0.3 * np.clip((dense_steps - 500) / 200, 0, 1) + np.random.default_rng(4).normal(0, 0.09, 200)
    run = Run("dense-hack", {"reward": Series.from_points("reward", dense_steps, dense),
                             "eval/math500_accuracy": Series.from_points("eval/math500_accuracy", ev_steps, evals)})
    assert divergence(run) == "fires"


def test_a_reward_that_climbs_to_the_cap_reads_sure_at_every_logging_phase(tmp_path):
    """bench/scenarios.py's truncation-climb-000 (tuning part): truncation 50% -> 100% while the reward climbs
    0.59 -> 0.94 under a slowly wandering noise.  Logged every 5th step, a straight line through the climb
    left its residuals autocorrelated by the misfit (n_eff 2-4 of 200 points): "sure" at z 3.1 on one phase
    (interval -0.59..1.22), not on the others.  The two-phase fit reads it sure on every phase."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import scenarios

    scenarios.build(tmp_path, names=["truncation-climb-000"])
    [run] = load(str(tmp_path / "runs"))
    for phase in range(5):
        thinned = {key: Series.from_points(key, s.steps[s.steps % 5 == phase], s.values[s.steps % 5 == phase])
                   for key, s in run.series.items()}
        diag = diagnose(Run(run.name, thinned, meta=run.meta), select=["L1.truncation-climb"])
        assert [f.rule for f in diag.findings] == ["L1.truncation-climb"], (phase, diag.unknown)


def test_values_near_the_float64_limit_give_no_onset_crash():
    """bench/fuzz (cases 43995, 48374, ...): Parquet values near 1e308 overflowed the sd, every hinge's fit
    was NaN and the onset's interval an empty set ("internal error").  Standardized by the largest value
    first, the onset is found; a NaN fit is no onset."""
    v = np.linspace(1, 2, 60)
    v[30:32] = 1e308
    onset = ev.hinge_onset(np.arange(60), v)
    assert onset is not None and onset.low <= onset.step <= onset.high
    assert not ev.hinge_change(np.arange(60), v).sure(3.0)
