"""Detector properties (hypothesis) and worked examples from the seeds."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stabdiag import _stats
from stabdiag.judge.detectors import DETECTORS, Curve, NotJudged
from stabdiag.judge.rules import load_rules

SEED_STEPS = np.arange(1, 401)
RULES = load_rules()


def shipped_params(detector: str, rule: str | None = None) -> dict:
    """The values a shipped rule (`rule`, else the first that uses `detector`) gives the detector:
    detectors declare no values, rule files give every one."""
    return dict(next(r.params for r in RULES if r.detector == detector and rule in (None, r.id)))


def curve(values, name="x", steps=None):
    values = np.asarray(values, dtype=float)
    steps = np.arange(1, len(values) + 1) if steps is None else np.asarray(steps)
    return Curve(name, name, steps, values)


def run_detector(name, rule=None, **curves):
    spec = DETECTORS[name]
    return spec.fn(**curves, **shipped_params(name, rule))


SINGLE = ("spike_vs_recent", "spike_vs_ema", "floor_breach", "level_above", "high_fraction_sustained")


@settings(max_examples=30, deadline=None)
@given(level=st.floats(0.5, 100), seed=st.integers(0, 10_000))
def test_pure_noise_never_fires(level, seed):
    rng = np.random.default_rng(seed)
    noisy = curve(level * (1 + rng.normal(0, 0.02, 300)))
    for name in ("spike_vs_recent", "spike_vs_ema", "floor_breach"):
        assert run_detector(name, values=noisy) is None, name
    assert run_detector("kl_entropy_joint", kl=noisy, entropy=noisy) is None


@settings(max_examples=20, deadline=None)
@given(shift=st.floats(-50, 50), seed=st.integers(0, 1000))
def test_adding_a_constant_does_not_change_an_excursion_finding(shift, seed):
    rng = np.random.default_rng(seed)
    base = 1.0 + rng.normal(0, 0.02, 200)
    base[150:160] = 30.0                      # steps 151-160, then back: an excursion (issue 44), at any level
    a = run_detector("recovered_climb", values=curve(base))
    b = run_detector("recovered_climb", values=curve(base + shift))
    assert type(a) is type(b)
    if isinstance(a, NotJudged):              # a flat loss's chance departure can hold the excursion inside it
        assert a.undecided == b.undecided
    elif a is not None:
        assert (a.start_step, a.end_step, a.severity) == (b.start_step, b.end_step, b.severity)


def test_an_excursion_is_dated_where_it_left_its_level_and_says_how_long():
    rng = np.random.default_rng(0)
    base = 1.0 + rng.normal(0, 0.02, 200)
    base[150:160] = 30.0                      # steps 151-160
    found = run_detector("recovered_climb", values=curve(base))
    assert found.start_step == 151 and 9 <= found.values["stretch"] <= 12 and found.values["peak"] == 30.0


@settings(max_examples=20, deadline=None)
@given(scale=st.floats(1e-3, 1e3), seed=st.integers(0, 1000))
def test_multiplying_by_a_constant_does_not_change_a_spike_finding(scale, seed):
    # a positive loss is read on the log scale (issue 43 item 5): its spikes are multiples of its level, so
    # its units do not move them (a constant added to it does: a cross-entropy's 0 is not arbitrary)
    rng = np.random.default_rng(seed)
    base = 1.0 + rng.normal(0, 0.02, 200)
    base[150:160] = 30.0                      # up for longer than a spike: a level shift
    params = {**shipped_params("spike_vs_recent"), "window_steps": 20, "min_ratio": 1.5}
    a = DETECTORS["spike_vs_recent"].fn(curve(base), **params)
    b = DETECTORS["spike_vs_recent"].fn(curve(base * scale), **params)
    assert type(a) is type(b)                 # a finding at any scale, or a note at any scale
    if hasattr(a, "start_step"):
        assert (a.start_step, a.severity) == (b.start_step, b.severity)
        assert math.isclose(a.values["ratio"], b.values["ratio"], rel_tol=1e-9)


def test_a_burst_the_run_comes_back_from_matters_only_on_a_cross_entropy_level():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.02, 300)
    params = shipped_params("spike_vs_recent")
    ce = 2.3 + noise
    ce[200] = 30.0
    assert DETECTORS["spike_vs_recent"].fn(curve(ce), **params).severity == "warn"
    pg = np.abs(noise) + 0.01                 # a KL-dominated loss a few sds above 0, in an RL run
    pg[200] = 1.0
    reward = curve(np.linspace(0.2, 0.6, 300), "reward")
    assert DETECTORS["spike_vs_recent"].fn(curve(pg), reward, **params) is None
    # without a reward the same curve is a low, noisy SFT cross-entropy: the spike counts (issue 12)
    assert DETECTORS["spike_vs_recent"].fn(curve(pg), **params).severity == "warn"


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.sampled_from([0.5, 1.0, math.nan, math.inf, -math.inf, 2.0]), min_size=0, max_size=60))
def test_nan_and_inf_never_raise(values):
    c = curve(values) if values else curve([])
    for name in SINGLE:
        if name == "high_fraction_sustained":
            DETECTORS[name].fn(c, **shipped_params(name))
        else:
            run_detector(name, values=c)
    run_detector("first_nonfinite", loss=c)
    run_detector("rising_trend_before_event", values=c)
    run_detector("kl_entropy_joint", kl=c, entropy=c)
    run_detector("trend_divergence", rising=c, flat=[c])
    run_detector("growth_while_flat", growing=c, flat=[c])


def test_short_series_are_not_judged():
    # too little data is never a clean bill: the detector says it could not judge, and why
    short = curve([1.0, 2.0, 50.0])
    for name, curves in (("spike_vs_recent", {"values": short}), ("spike_vs_ema", {"values": short}),
                         ("trend_divergence", {"rising": short, "flat": [short]}),
                         ("floor_breach", {"values": short}), ("level_above", {"values": short}),
                         ("kl_entropy_joint", {"kl": short, "entropy": short})):
        result = run_detector(name, **curves)
        assert isinstance(result, NotJudged) and result.reason, name


@settings(max_examples=20, deadline=None)
@given(height=st.floats(12, 1e6))
def test_a_bigger_spike_never_turns_quiet(height):
    base = np.ones(200) + np.random.default_rng(0).normal(0, 0.02, 200)
    base[150] = height
    assert run_detector("spike_vs_recent", values=curve(base)) is not None
    base[150] = height * 10
    assert run_detector("spike_vs_recent", values=curve(base)) is not None


def test_seed_kl_entropy_example():
    # seed 000: [0.80,0.20] -> [0.95,0.05] gives KL 0.19 -> 0.49 and entropy 0.50 -> 0.20
    p0, p1, ref = np.array([0.8, 0.2]), np.array([0.95, 0.05]), np.array([0.5, 0.5])
    kl = lambda p: float(np.sum(p * np.log(p / ref)))  # noqa: E731
    ent = lambda p: float(-np.sum(p * np.log(p)))      # noqa: E731
    assert round(kl(p0), 2) == 0.19 and round(kl(p1), 2) == 0.49
    assert round(ent(p0), 2) == 0.50 and round(ent(p1), 2) == 0.20
    frac = np.clip((SEED_STEPS - 100) / 150, 0, 1)
    ev = run_detector("kl_entropy_joint", kl=curve(kl(p0) + (kl(p1) - kl(p0)) * frac),
                      entropy=curve(ent(p0) + (ent(p1) - ent(p0)) * frac))
    assert ev is not None and ev.severity is None  # both moved: a full fail


def test_seed_logprob_ratio():
    ev = run_detector("level_above", "L4.logprob-mismatch", values=curve(np.full(50, -1.32 - (-1.51))))
    assert ev is not None and abs(ev.values["ratio"] - 0.83) < 0.005 and ev.severity is None


def test_grad_norm_spike_is_relative_to_the_run_not_to_seed_002s_example_floor():
    # seed 002: > 5x the EMA and > "e.g. 5.0"; the 5.0 is one model's scale.  A small model's 15x spike
    # (0.3 -> 4.5) is found; under 5x the EMA nothing is, at any scale
    rng = np.random.default_rng(1)
    for level in (0.3, 0.9, 30.0):
        g = level * (1 + rng.normal(0, 0.03, 100))
        g[60] = level * 15
        assert run_detector("spike_vs_ema", values=curve(g)).start_step == 61, level
        g[60] = level * 4.5
        assert run_detector("spike_vs_ema", values=curve(g)) is None, level



def test_a_grad_norm_spike_read_against_the_emas_floor_says_so():
    # after 40 steps at 1% of its level the EMA has sunk to ~0.03; the point is read against the floor
    # (min_level_of_median x the median so far), and the message must not call that floor "its EMA"
    rng = np.random.default_rng(1)
    g = np.exp(rng.normal(0, 0.2, 400))
    g[200:240] *= 0.01
    g[240] = 30.0
    found = run_detector("spike_vs_ema", values=curve(g))
    floor = shipped_params("spike_vs_ema")["min_level_of_median"]
    assert found.start_step == 241
    assert found.values["level_said"].startswith(f"its EMA's floor {found.values['ema']:.3g} ({floor:g}x its median")
    g[200:240] /= 0.01                        # the same jump against a healthy EMA: named as the EMA
    found = run_detector("spike_vs_ema", values=curve(g))
    assert found.values["level_said"] == f"its EMA {found.values['ema']:.3g}"
def test_stats_helpers():
    x = np.array([1.0, 2.0, 3.0, 100.0])
    assert _stats.robust_sd(x) < 5
    assert _stats.theil_sen_slope(np.arange(10.0), 3 * np.arange(10.0) + 1) == 3.0
    assert _stats.true_runs(np.array([0, 1, 1, 0, 1], bool)) == [(1, 2), (4, 4)]
    steps, mask = np.arange(10) * 10, np.array([0, 1, 1, 1, 0, 0, 0, 1, 1, 1], bool)
    assert _stats.first_long_run(steps, mask, 25) is None               # each run spans 20 steps
    assert _stats.first_long_run(steps, mask, 25, need_at_end=20) == (7, 9)   # the one still on at the end
    assert _stats.first_long_run(steps, mask, 20, need_at_end=100) == (1, 3)  # the first long one, as before


# a keyword-only argument with a default that is not a tunable value: component_divergence reads its
# components in one shared unit through trend_divergence
_FLAGS = {"trend_divergence": {"shared_units"}}
# detectors that forward their parameters to another (**params), and the arguments they set themselves:
# component_divergence reads without trend_divergence's "following" reading, whose parameters it leaves unread
_FORWARDS = {"component_divergence": ("trend_divergence", {"shared_units", "min_tracking_gain", "max_flat_share"})}


def test_detectors_take_their_declared_parameters_keyword_only_and_without_defaults():
    """A parameter's value lives in the rule file alone: a default in a detector's signature could differ
    from it silently, and a keyword-only argument the spec does not declare could never be set."""
    import inspect
    for name, spec in DETECTORS.items():
        fn, own = spec.fn, _FLAGS.get(spec.fn.__name__, set())
        if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()):
            if not spec.params:
                continue              # takes any curves (**curves) and no parameters
            target, own = _FORWARDS[name]
            fn = DETECTORS[target].fn
        keyword = {a: p for a, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}
        declared = {p.name for p in spec.params}
        assert set(keyword) - own == declared, name
        assert all(keyword[a].default is inspect.Parameter.empty for a in declared), name
