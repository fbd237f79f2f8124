"""Detectors: pure functions that look for one pattern in one or more curves.

A detector takes Curves (steps + values of a signal, already cut at the run's first persistent
non-finite step unless the detector asks for the whole series) and its parameters, and returns
Evidence (it fired), None (it judged the run and found nothing) or NotJudged (too little data, with
the reason).  No I/O, no printing.  Each detector declares its parameters once, in DETECTORS below:
name, allowed range, meaning and role (decides a verdict, or only bounds the work), and no value: every
rule gives the value of each in its `[rule.params]` (judge/rules.py refuses one that leaves a parameter
out), and the detector function takes them keyword-only, without defaults, so no second value can
differ silently.  What a detector checks is its function's docstring, first paragraph: `rules explain`
prints it with the rule's values.  The ranges keep every rule able to fire: switching a rule off is
`--ignore`'s job, which the report shows.  Detectors are named for the pattern they find, never for a
layer: several rules may share one.  By family: trends.py (layer-1 patterns), policy.py, spikes.py,
numeric.py, levels.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ._base import Curve, DetectorSpec, Evidence, NotJudged, Param, Quiet
from .clipping import fraction_held_high
from .divergence import growth_while_flat, trend_divergence
from .easy_data import ceiling_from_start
from .ending import ended_unfinished
from .eval_drop import drop_below_start
from .excursions import climb_from_best, level_excursion, recovered_climb
from .levels import kl_level_above, level_above, log_ratio_off
from .numeric import (
    CHAIN,
    ended_on_failure,
    ended_on_nonfinite,
    first_nonfinite,
    frozen_values,
    superseded_blowup,
)
from .policy import collapse_below, floor_breach, kl_entropy_joint
from .schedule import loss_at_uniform_level, loss_flat_in_warmup, lr_collapsed_early
from .spikes import rising_trend_before_event, spike_vs_ema, spike_vs_recent
from .trends import (
    component_divergence,
    fraction_climb_while_rising,
    growth_while_steady,
    high_fraction_sustained,
    rise_from_best,
)
from .value import value_head_diverging

__all__ = ["CHAIN", "DETECTORS", "Curve", "DetectorSpec", "Evidence", "NotJudged", "Param", "Quiet"]


def _p(name: str, low: float, high: float, meaning: str, off: float | None = None) -> Param:
    """A parameter that decides a verdict: a threshold on how sure, how large or how long (`off`: the value
    that switches its check off)."""
    return Param(name, float(low), float(high), meaning, "decides", off)


def _wording(name: str, low: float, high: float, meaning: str) -> Param:
    """A parameter that only words a finding (which reading its message gives), never whether it fires."""
    return Param(name, float(low), float(high), meaning, "words")


def _bound(name: str, low: float, high: float, meaning: str) -> Param:
    """A parameter that only bounds the work: how much data a judgement needs (below it the rule is not
    judged), never which verdict a judged run gets."""
    return Param(name, float(low), float(high), meaning, "bounds")


_DIVERGENCE = (
    _p("min_steps", 5, 1e6, "shortest rise judged, in steps: a shorter run is not judged, and a rise done "
                            "within its first min_steps is not read as one"),
    _p("min_rise_z", 1, 20, "how sure: the interval of the rise (end level minus start level) is this many "
                            "standard errors either side, from the curve's own noise; the same number decides "
                            "whether an eval followed"),
    _p("min_rise_share", 0.01, 1, "how large: the rise as a share of the rising curve's smoothed range"),
    _p("min_rise_sd", 0, 100, "... and in sds of the rising curve's noise (a standardized effect size, not a "
                              "test)"),
    _p("max_flat_gain_rel", 0, 1, "an eval that surely gains this fraction of its own scale followed the rise"),
    _p("max_flat_upper_rel", 0, 1, "where the rise and an eval do not share a 0..1 unit, an eval whose gain, "
                                   "flat_se standard errors higher, stays under this fraction of its scale did "
                                   "not follow"),
    _p("flat_se", 0.5, 5, "standard errors either side of an eval's change (its own noise)"),
    _p("edge_frac", 0.01, 0.5, "fraction of the step span whose mean sets the start level (and the end level)"),
    _bound("min_flat_points", 3, 1e6, "fewest eval points over the stretch needed to read an eval"),
    _bound("min_covered_frac", 0.1, 1, "an eval whose first and last thirds of points see less of the rise than "
                                       "this is not read"))
# where the rising curve and an eval share no summands but both lie on 0..1 (trend_divergence's "following"
# reading; the reward's components share a unit and are read without it)
_FOLLOWING = (
    _p("min_tracking_gain", 0, 1, "where the rising curve and an eval both lie on 0..1, an eval that follows "
                                  "gains at least this share of the rise (carried over on the logit scale, into "
                                  "the room it has left)"),
    _p("max_flat_share", 0, 1, "... and an eval that did not follow gained under this share of it"))

# a level with a meaning of its own against sourced thresholds (detectors/levels.py)
_LEVEL_PARAMS = (
    _p("warn_above", 0, 1e9, "level that warns"),
    _p("fail_above", 0, math.inf, "level that fails (inf: never)", off=math.inf),
    _p("min_stretch_steps", 1, 1e6, "shortest stretch above the level, in steps (at least 2 points)"),
    _p("catastrophic_above", 0, math.inf, "one value above this fails alone (inf: never)", off=math.inf))

# a point event's per-run false-alarm budget (issue 43 item 5; stats/extremes.py)
_BUDGET = (
    _p("run_alpha", 1e-4, 0.2, "per-run false-alarm budget: the chance that a healthy run of as many points, with "
                               "this run's noise tail, shows one spike anywhere; the bar grows with the points"),
    _p("huge_ratio", 10, 1e6, "where the run is too short to read its tail: a jump of this x its level or more "
                              "(orders of magnitude past any noise) is a spike on as few as 4 points"),
    _bound("min_tail_points", 11, 1e6, "points needed to read the run's own noise tail (fewer: only huge jumps "
                                       "are judged)"))

# spike episodes: said to repeat (wording only), and whether the run came back (detectors/spikes.py)
_EPISODES = (
    _wording("isolated_max_count", 0, 100, "more spike episodes than this per window are said to repeat"),
    _wording("isolated_window_steps", 1, 1e9, "the window in which spike episodes are counted, in steps"),
    _p("recover_steps", 1, 1e6, "steps after a spike episode in which the run must come back (at least 3 points)"))

# a departure that lasts (issue 44 items 1, 2; detectors/excursions.py)
_DEPARTURE = (
    _p("min_sd", 0, 100, "... and at least this many sds of the curve's own noise (the larger of its "
                         "point-to-point scatter and its spread around its running median)"),
    _p("sure_z", 1, 20, "how sure: the departure's mean minus its reference level clear of 0 with the one-sided "
                        "chance of this many standard errors, for the run (spread over the stretches and "
                        "reference windows it was picked from; Student's t for its noise's degrees of freedom)"),
    _p("stretch_steps", 1, 1e6, "shortest departure read, in steps (shorter ones are the spike rules'); the "
                                "curve is smoothed over half of it"),
    _bound("min_points", 3, 1e6, "fewest points needed to judge"))
_CLIMB = (_p("min_share", 0.01, 10, "how large: the climb from the running best, as a share of the way the loss "
                                    "came down (its start level minus that best)"), *_DEPARTURE)

DETECTORS: dict[str, DetectorSpec] = {spec.name: spec for spec in (
    DetectorSpec("trend_divergence", trend_divergence, (*_DIVERGENCE, *_FOLLOWING)),
    DetectorSpec("component_divergence", component_divergence, _DIVERGENCE),
    DetectorSpec("growth_while_flat", growth_while_flat, (
        _p("min_growth_ratio", 1.1, 100, "end level / start level that counts as growth"),
        _p("max_flat_gain_rel", 0, 1, "an eval surely gaining this fraction of its own scale improved"),
        _p("max_flat_upper_rel", 0, 1, "an eval whose gain, min_gain_se standard errors higher, stays under "
                                       "this fraction of its scale did not"),
        _p("min_gain_se", 0.5, 10, "how sure: the growth's and each eval's change are read this many standard "
                                   "errors either side, from each curve's own noise"),
        _p("edge_frac", 0.01, 0.5, "fraction of the step span whose mean sets the start and end levels"),
        _bound("min_steps", 5, 1e6, "shortest run judged, in steps"),
        _bound("min_flat_points", 3, 1e6, "fewest eval points needed to read an eval"))),
    DetectorSpec("high_fraction_sustained", high_fraction_sustained, (
        _p("min_frac", 0.05, 1, "fraction (0-1) that counts as high"),
        _p("min_stretch_steps", 1, 1e6, "shortest high stretch, in steps (a shorter run is not judged)"),
        _p("min_stretch_frac_of_run", 0, 0.5, "shortest high stretch, as a fraction of the run"),
        _wording("easy_level", 0, 1, "a 0-1 reward at or above this: mostly all-correct groups"),
        _wording("hard_level", 0, 1, "a 0-1 reward at or under this: mostly all-wrong groups"))),
    DetectorSpec("fraction_climb_while_rising", fraction_climb_while_rising, (
        _p("min_end_frac", 0.05, 1, "the fraction ends at least this high (a warning)"),
        _p("fail_end_frac", 0.05, 1, "... and at or above this, nearly every answer is cut off (a failure)"),
        _p("min_climb", 0.01, 1, "... having climbed by at least this much (absolute, 0-1)"),
        _p("min_rise_z", 1, 20, "while the reward's end level minus its start level, over the whole run, is this "
                                "many standard errors clear of 0 (from its own noise)"),
        _p("edge_frac", 0.01, 0.5, "fraction of the step span that sets start and end levels"),
        _bound("min_steps", 5, 1e6, "shortest run judged, in steps"))),
    DetectorSpec("growth_while_steady", growth_while_steady, (
        _p("min_growth_ratio", 1.1, 100, "end level / start level that counts as growth"),
        _p("max_steady_rise", 0, 10, "the other curve (the loss) may rise at most this fraction of its level"),
        _p("edge_frac", 0.01, 0.5, "fraction of the step span that sets start and end levels"),
        _bound("min_steps", 5, 1e6, "shortest run judged, in steps"))),
    DetectorSpec("rise_from_best", rise_from_best, _CLIMB),
    DetectorSpec("drop_below_start", drop_below_start, (
        _p("min_drop_share", 0.01, 1, "how large: the drop as a share of the eval's start level"),
        _p("min_drop_z", 1, 20, "how sure: the drop's interval is this many standard errors either side (from "
                                "the eval's own noise; more beside several evals), and must clear 0"),
        _p("edge_frac", 0.01, 0.5, "fraction of the eval's step span whose mean sets its end level (at least its "
                                   "last third of points)"),
        _bound("min_points", 3, 1e6, "fewest points an eval needs to be read"))),
    DetectorSpec("ceiling_from_start", ceiling_from_start, (
        _p("ceiling_level", 0.5, 0.99, "a success rate whose early level is surely above this sits near its "
                                       "ceiling: most prompts are too easy for the model"),
        _p("min_entropy_fall_share", 0.01, 1, "how large: the entropy's fall as a share of its start level"),
        _p("min_eval_move_share", 0.001, 1, "an eval that surely moves (up or down) by this share of its start "
                                            "level changed with the model"),
        _p("sure_z", 1, 20, "how sure: every reading is this many standard errors either side, from each "
                            "curve's own noise"),
        _p("edge_frac", 0.01, 0.5, "fraction of the step span that sets the early level (and the entropy's "
                                   "start and end levels)"),
        _bound("min_points", 3, 1e6, "fewest reward (and entropy) points needed to judge"),
        _bound("min_eval_points", 3, 1e6, "fewest eval points needed to read an eval"))),
    DetectorSpec("kl_entropy_joint", kl_entropy_joint, (
        _p("window_steps", 5, 1e6, "window in which KL and entropy are compared, in steps (never under one "
                                   "logging interval, nor over half the run)"),
        _p("min_kl_ratio", 1.1, 100, "KL end / start within the window"),
        _p("min_entropy_drop_frac", 0.05, 1, "relative entropy drop within the window"),
        _p("min_kl", 0, 1, "KL below this is treated as this (KL starts at 0)"),
        _p("min_kl_accel", 1, 100, "steepening: a window's KL rise over the window before's; a window "
                                   "without one before it never qualifies"),
        _p("min_entropy_accel", 1, 100, "... and its entropy fall over the window before's"),
        _p("explained_zero_std_frac", 0, 1, "zero-variance group fraction, before the drop, that explains it"))),
    DetectorSpec("floor_breach", floor_breach, (
        _p("floor_frac", 0.05, 0.99, "floor as a fraction of the early-run level"),
        _p("early_frac", 0.01, 0.5, "fraction of the step span that sets the early level"),
        _p("min_breach_steps", 1, 1e6, "shortest breach, in steps"),
        _p("min_breach_frac_of_run", 0, 0.5, "shortest breach, as a fraction of the run"),
        _p("explained_zero_std_frac", 0, 1, "zero-variance group fraction, before the drop, that explains it"))),
    DetectorSpec("collapse_below", collapse_below, (
        _p("collapse_frac", 0.001, 0.5, "collapsed: at or below this fraction of the first points' level"),
        _p("min_collapse_steps", 1, 1e6, "shortest collapsed stretch, in steps"),
        _p("min_collapse_frac_of_run", 0, 0.5, "shortest collapsed stretch, as a fraction of the run"),
        _p("first_points", 1, 20, "first logged points whose highest value is the starting level"))),
    DetectorSpec("spike_vs_recent", spike_vs_recent, (
        _p("window_steps", 10, 1e6, "steps before each point that set its recent level (at least 10 points)"),
        _p("min_ratio", 1.5, 100, "jump as a multiple of a positive recent level (a loss read on the log scale)"),
        *_BUDGET,
        *_EPISODES,
        _p("recover_sd", 0, 100, "came back: their median, or 3 in a row, within this many robust sds of "
                                 "the level"))),
    DetectorSpec("spike_vs_ema", spike_vs_ema, (
        _p("ratio_vs_ema", 1.5, 100, "value / EMA of the previous points"),
        *_BUDGET,
        _p("ema_span_steps", 1, 1e6, "EMA span, in steps (at least 2 points)"),
        *_EPISODES,
        _p("recover_ratio", 1, 100, "came back: their median, or 3 in a row, under this x the EMA"),
        _p("min_level_of_median", 0, 1, "the EMA is floored at this x the run's median so far"))),
    DetectorSpec("first_nonfinite", first_nonfinite, (), sees_nonfinite=True),
    DetectorSpec("rising_trend_before_event", rising_trend_before_event, (
        _p("rise_ratio", 1.05, 100, "level over baseline that counts as climbing"),
        _p("baseline_frac", 0.05, 1, "leading fraction of the pre-event steps that sets the baseline"),
        _p("min_lead_steps", 1, 1e6, "shortest climb reported, in steps before the event"),
        _p("ratio_vs_ema", 1.5, 100, "spike test for the event when nothing is non-finite"),
        _p("min_jump_sd", 1, 100, "... and its height in noise sds"),
        _p("ema_span_steps", 1, 1e6, "EMA span for the event's spike test, in steps"),
        _p("min_level_of_median", 0, 1, "the event test's EMA floor, x the run's median so far")),
        sees_nonfinite=True),
    DetectorSpec("frozen_values", frozen_values, (
        _p("min_frozen_steps", 2, 1e6, "shortest frozen stretch, in steps"),
        _p("min_frozen_frac_of_run", 0, 0.5, "shortest frozen stretch, as a fraction of the run"),
        _p("min_points", 3, 1e6, "fewest logged points in the stretch (and in the curve, to judge it)"))),
    DetectorSpec("climb_from_best", climb_from_best, (*_CLIMB, _p(
        "huge_ratio", 2, 1e6, "... or a held level this x the lowest of the first three points (past any noise: "
                              "a loss that blew up from its first step)"))),
    DetectorSpec("recovered_climb", recovered_climb, _CLIMB),
    DetectorSpec("level_excursion", level_excursion, (
        _p("min_ratio", 1.2, 1e6, "how large: the departure's mean level over the level before it, as a ratio"),
        *_DEPARTURE)),
    DetectorSpec("superseded_blowup", superseded_blowup, (
        _p("min_ratio", 1.5, 100, "a replaced write this many x the rerun's value is a blow-up"),
        _p("min_jump_sd", 0, 100, "... if it also stands this many of the curve's robust point-to-point sds "
                                  "above the rerun's value")),
        sees_nonfinite=True),
    DetectorSpec("ended_on_nonfinite", ended_on_nonfinite, (), sees_nonfinite=True),
    DetectorSpec("ended_on_failure", ended_on_failure, (), sees_nonfinite=True),
    DetectorSpec("ended_unfinished", ended_unfinished, (), sees_nonfinite=True),
    DetectorSpec("level_above", level_above, _LEVEL_PARAMS),
    DetectorSpec("kl_level_above", kl_level_above, (
        *_LEVEL_PARAMS,
        _p("min_coef", 0, 1, "read beside a loss that is the signal x a coefficient, or a logged coefficient: "
                             "a coefficient under this leaves the level unjudged (0: never)", off=0))),
    DetectorSpec("log_ratio_off", log_ratio_off, (
        _p("warn_above", 0, 4.61, "|log ratio| that warns"),
        _p("fail_above", 0, 4.61, "|log ratio| that fails"),
        _p("min_stretch_steps", 1, 1e6, "shortest stretch off, in steps (at least 2 points)"),
        _p("catastrophic_above", 0, math.inf, "one |log ratio| above this fails alone (inf: never)",
           off=math.inf))),
    DetectorSpec("lr_collapsed_early", lr_collapsed_early, (
        _p("collapse_frac", 0.0001, 0.2, "collapsed: below this fraction of the schedule's peak"),
        _p("min_after_frac_of_run", 0.07, 0.9, "shortest collapsed stretch, as a fraction of the run (a cosine "
                                               "decay to 0 spends its last 6.4% under 1% of the peak)"),
        _p("min_after_steps", 1, 1e6, "shortest collapsed stretch, in steps"))),
    DetectorSpec("fraction_held_high", fraction_held_high, (
        _p("high_frac", 0.05, 0.95, "fraction (0-1) that counts as high"),
        _p("min_stretch_steps", 1, 1e6, "shortest high stretch, in steps"),
        _p("min_stretch_frac_of_run", 0, 0.9, "shortest high stretch, as a fraction of the run"))),
    DetectorSpec("value_head_diverging", value_head_diverging, (
        _p("min_loss_ratio", 1.5, 100, "value loss over its early level that counts as diverged"),
        _p("early_frac", 0.01, 0.5, "fraction of the step span that sets the value loss's early level"),
        _p("min_learned_explained_var", 0, 0.99, "explained variance the critic must have reached first"),
        _p("max_explained_var", -10, 0.9, "explained variance below this has lost the returns"),
        _p("min_stretch_steps", 1, 1e6, "shortest stretch, in steps"),
        _p("min_stretch_frac_of_run", 0, 0.9, "shortest stretch, as a fraction of the run"))),
    DetectorSpec("loss_flat_in_warmup", loss_flat_in_warmup, (
        _p("min_drop_frac", 0.001, 0.5, "a loss that ends within this fraction of its start, below or above, "
                                        "has not moved"),
        _p("edge_frac", 0.01, 0.5, "fraction of the step span that sets the loss's start and end levels"),
        _p("min_climb_ratio", 1.05, 100, "still warming up: the last lr is this x its mid-run level, and the "
                                         "highest"))),
    DetectorSpec("loss_at_uniform_level", loss_at_uniform_level, (
        _p("max_gap_frac", 0.001, 0.5, "a loss within this fraction of ln(vocabulary size), above or below, "
                                       "has not left the uniform guess"),
        _p("max_gap_frac_common_vocab", 0.001, 0.05, "without a vocabulary size in the configuration: a loss "
                                                     "within this fraction of ln V for a common tokenizer's V "
                                                     "(GPT-2, Llama, Qwen2, Mistral, Gemma) warns"),
        _p("after_frac", 0, 0.9, "read after this fraction of the run's steps (the first steps of any run sit "
                                 "at ln V)"),
        _bound("min_points", 3, 1e6, "fewest loss points after that needed to judge"))),
)}


# detectors whose findings are trends (a curve that moves over many steps): their onset, with an interval,
# comes from one change-point model (evidence.hinge_onset); the others report events at their own step
_TRENDS = frozenset({"trend_divergence", "component_divergence", "growth_while_flat", "fraction_climb_while_rising",
                     "growth_while_steady", "kl_entropy_joint", "floor_breach", "collapse_below",
                     "high_fraction_sustained", "drop_below_start"})
DETECTORS = {name: replace(spec, trend=True) if name in _TRENDS else spec for name, spec in DETECTORS.items()}

# the Evidence fields each detector returns: a rule's message template is checked against them at load time
# (tests/test_rule_catalog.py checks every finding of the rule cases returns no field undeclared here)
_SPIKE = ("absorbed", "budget", "count", "key", "ratio", "signal", "value")
_LEVEL = ("catastrophic", "key", "level", "off_pct", "peak", "points", "ratio", "signal", "threshold", "value")
_RISE = ("eval_changes", "evals", "key", "level_peak", "level_start", "n_eff", "rise", "rise_high", "rise_low",
         "rise_sd", "rise_share", "rise_z", "signal", "sure")
_ENDING = ("message", "source", "step", "what", "planned")
_CLIMBED = ("best", "best_step", "early", "key", "level", "onset", "peak", "sds", "sds_text", "share", "share_text",
            "signal", "stretch", "sure")
EVIDENCE_FIELDS: dict[str, tuple[str, ...]] = {
    "ceiling_from_start": ("ceiling", "entropy_end", "entropy_fall_share", "entropy_key", "entropy_start",
                           "evals", "key", "level", "onset", "signal", "sure"),
    "collapse_below": ("first_step", "frac", "initial", "key", "level", "signal"),
    "component_divergence": _RISE, "trend_divergence": _RISE,
    "ended_on_failure": _ENDING, "ended_on_nonfinite": _ENDING, "ended_unfinished": _ENDING,
    "drop_below_start": ("baseline", "drop", "drop_low", "drop_share", "drop_z", "end_level", "key", "signal",
                         "start_level", "start_step", "sure", "sure_z"),
    "first_nonfinite": ("count", "first_steps", "key", "kind", "recovered", "signal", "step", "then"),
    "floor_breach": ("early", "floor", "floor_frac", "key", "last", "lowest", "signal"),
    "fraction_climb_while_rising": ("frac_end", "frac_start", "key", "reward_during_climb", "reward_end",
                                    "reward_key", "reward_rise_z", "reward_start", "reward_trend", "signal"),
    "frozen_values": ("key", "points", "signal", "steps", "value"),
    "growth_while_flat": ("eval_changes", "evals", "growth", "key", "level_end", "level_start", "signal"),
    "growth_while_steady": ("growth", "key", "level_end", "level_start", "loss", "signal"),
    "high_fraction_sustained": ("fraction", "key", "kind", "signal"),
    "kl_entropy_joint": ("entropy_drop", "entropy_end", "entropy_start", "kl_end", "kl_ratio", "kl_start",
                         "moved", "signal", "window"),
    "level_above": _LEVEL, "kl_level_above": _LEVEL, "log_ratio_off": _LEVEL,
    "rise_from_best": _CLIMBED,
    "rising_trend_before_event": ("baseline", "before_event", "event_step", "key", "lead", "rise", "signal"),
    "spike_vs_ema": _SPIKE + ("ema", "level_said"), "spike_vs_recent": _SPIKE + ("recent",),
    "superseded_blowup": ("key", "kind", "restart", "rolled_back", "signal", "step", "value"),
    "climb_from_best": _CLIMBED, "recovered_climb": _CLIMBED + ("back", "count", "recovery"),
    "level_excursion": ("back", "count", "key", "level", "onset", "peak", "peak_ratio", "ratio", "recovery", "sds",
                        "sds_text", "signal", "stretch", "sure"),
    "lr_collapsed_early": ("frac_of_peak", "key", "level", "peak", "peak_step", "run_frac", "signal", "stretch"),
    "fraction_held_high": ("fraction", "key", "peak", "run_frac", "signal", "stretch", "threshold"),
    "value_head_diverging": ("readings", "signal", "what"),
    "loss_flat_in_warmup": ("drop", "key", "level_end", "level_start", "lr_end", "lr_key", "lr_middle", "signal"),
    "loss_at_uniform_level": ("gap", "highest", "key", "last", "lowest", "signal", "uniform", "vocab",
                              "vocab_source"),
}
DETECTORS = {name: replace(spec, evidence=EVIDENCE_FIELDS.get(name, ())) for name, spec in DETECTORS.items()}
