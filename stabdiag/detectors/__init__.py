"""Detectors: pure functions that look for one pattern in one or more curves.

A detector takes Curves (steps + values of a signal, already cut at the run's first non-finite step
unless the detector asks for the whole series) and its parameters, and returns Evidence or None.
No I/O, no printing.  Each detector declares its parameters once, in DETECTORS at the bottom: name,
default, allowed range and meaning; rules may override the values, and `rules explain` prints them.
Detectors are named for the pattern they find, never for a layer: several rules may share one.
They live by family in trends.py, policy.py and spikes.py; the shared types are in _base.py.
"""

from __future__ import annotations

from ._base import Curve, DetectorSpec, Evidence, Param
from .policy import floor_breach, kl_entropy_joint
from .spikes import CHAIN, first_nonfinite, rising_trend_before_event, spike_vs_ema, spike_vs_recent
from .trends import growth_while_flat, high_fraction_sustained, level_above, trend_divergence

__all__ = ["CHAIN", "DETECTORS", "Curve", "DetectorSpec", "Evidence", "Param"]


def _p(name, default, low, high, meaning) -> Param:
    return Param(name, float(default), float(low), float(high), meaning)


DETECTORS: dict[str, DetectorSpec] = {spec.name: spec for spec in (
    DetectorSpec("trend_divergence", trend_divergence, (
        _p("min_steps", 50, 1, 1e9, "shortest rise judged, in steps"),
        _p("min_rise_sd", 5.0, 0, 1e3, "rise of the rising curve, in robust noise sds"),
        _p("max_flat_gain_frac", 0.1, 0, 1, "an eval that gains more than this fraction of the rise tracks it"),
        _p("max_flat_upper_frac", 0.3, 0, 10, "flat only if its gain plus flat_se standard errors stays under this"),
        _p("flat_se", 2.0, 0, 10, "standard errors added to an eval's gain before calling it flat"),
        _p("edge_frac", 0.1, 0.01, 0.5, "fraction of points that sets the start level"),
        _p("min_flat_points", 4, 2, 1e6, "fewest eval points needed to judge an eval"),
        _p("min_covered_frac", 0.5, 0, 1, "an eval whose points see less of the rise than this is not judged")),
        lambda p: (f"the rising signal climbs >= {p['min_rise_sd']:g} noise sds over >= {p['min_steps']:g} "
                   f"steps while an eval gains < {p['max_flat_gain_frac']:g} of that rise (and < "
                   f"{p['max_flat_upper_frac']:g} at +{p['flat_se']:g} se), and none gains clearly more")),
    DetectorSpec("growth_while_flat", growth_while_flat, (
        _p("min_growth_ratio", 2.0, 1, 1e3, "end level / start level that counts as growth"),
        _p("max_flat_gain_rel", 0.05, 0, 10, "an eval gaining more than this fraction of its level is not flat"),
        _p("min_gain_se", 2.0, 0, 100, "... and more than this many standard errors of its gain"),
        _p("edge_frac", 0.1, 0.01, 0.5, "fraction of points that sets the start and end levels"),
        _p("min_steps", 50, 1, 1e9, "shortest run judged, in steps"),
        _p("min_flat_points", 4, 2, 1e6, "fewest eval points needed to judge an eval")),
        lambda p: (f"the signal ends >= {p['min_growth_ratio']:g}x its start level while no eval gains "
                   f">= {p['max_flat_gain_rel']:.0%} of its own level by >= {p['min_gain_se']:g} standard errors")),
    DetectorSpec("high_fraction_sustained", high_fraction_sustained, (
        _p("min_frac", 0.5, 0, 1, "fraction (0-1) that counts as high"),
        _p("min_stretch_steps", 30, 1, 1e9, "shortest high stretch, in steps"),
        _p("min_stretch_frac_of_run", 0.2, 0, 1, "shortest high stretch, as a fraction of the run"),
        _p("high_level", 0.5, -1e9, 1e9, "reward level above which equal groups are read as all-correct")),
        lambda p: (f"the fraction stays >= {p['min_frac']:g} for >= {p['min_stretch_steps']:g} steps and "
                   f">= {p['min_stretch_frac_of_run']:.0%} of the run")),
    DetectorSpec("kl_entropy_joint", kl_entropy_joint, (
        _p("window_steps", 200, 5, 1e9, "window in which KL and entropy are compared"),
        _p("min_kl_ratio", 2.0, 1, 1e6, "KL end / start within the window"),
        _p("min_entropy_drop_frac", 0.4, 0, 1, "relative entropy drop within the window"),
        _p("min_kl", 1e-4, 0, 1e9, "KL below this is treated as this (KL starts at 0)"),
        _p("warmup_frac", 0.25, 0, 1, "KL-alone warnings ignore this leading fraction of the run"),
        _p("min_kl_accel", 2.0, 1, 1e6, "KL-alone: window slope / previous window slope"),
        _p("explained_zero_std_frac", 0.5, 0, 1, "zero-variance group fraction that explains the drop")),
        lambda p: (f"within {p['window_steps']:g} steps KL grows >= {p['min_kl_ratio']:g}x and entropy falls "
                   f">= {p['min_entropy_drop_frac']:.0%}; one alone warns")),
    DetectorSpec("floor_breach", floor_breach, (
        _p("floor_frac", 0.8, 0, 1, "floor as a fraction of the early-run level"),
        _p("early_frac", 0.1, 0.01, 0.5, "fraction of points that sets the early level"),
        _p("min_breach_steps", 20, 1, 1e9, "shortest breach, in steps"),
        _p("min_breach_frac_of_run", 0.1, 0, 1, "shortest breach, as a fraction of the run"),
        _p("explained_zero_std_frac", 0.5, 0, 1, "zero-variance group fraction that explains the drop")),
        lambda p: (f"the signal stays below {p['floor_frac']:g}x its early level for >= "
                   f"{p['min_breach_steps']:g} steps and >= {p['min_breach_frac_of_run']:.0%} of the run")),
    DetectorSpec("spike_vs_recent", spike_vs_recent, (
        _p("window_points", 100, 3, 1e5,
           "points before each point that set its recent level (early in the run: all so far, at least 10)"),
        _p("min_ratio", 10.0, 1, 1e9, "jump as a multiple of a positive recent level"),
        _p("min_jump_sd", 10.0, 0, 1e9, "jump in robust sds of the recent points"),
        _p("isolated_max_count", 1, 0, 1e6, "at most this many spike episodes, each absorbed, only warn"),
        _p("recover_points", 5, 1, 1e6, "points after a spike episode in which the run must come back"),
        _p("recover_sd", 5.0, 0, 1e9, "came back: their median, or 3 in a row, within this many robust sds "
                                      "of the level")),
        lambda p: (f"a point is >= {p['min_ratio']:g}x the median of the {p['window_points']:g} points "
                   f"before it and >= {p['min_jump_sd']:g} robust sds above it; at most "
                   f"{p['isolated_max_count']:g} spike(s) that the run absorbs within {p['recover_points']:g} "
                   f"points only warn")),
    DetectorSpec("spike_vs_ema", spike_vs_ema, (
        _p("ratio_vs_ema", 5.0, 1, 1e9, "value / EMA of the previous points"),
        _p("min_value", 5.0, 0, 1e12, "absolute floor the value must also exceed"),
        _p("ema_span_steps", 20, 1, 1e6, "EMA span, in logged points"),
        _p("isolated_max_count", 1, 0, 1e6, "at most this many spike episodes, each absorbed, only warn"),
        _p("recover_points", 5, 1, 1e6, "points after a spike episode in which the run must come back"),
        _p("recover_ratio", 2.0, 1, 1e6, "came back: their median, or 3 in a row, under this x the EMA")),
        lambda p: (f"a point is > {p['ratio_vs_ema']:g}x the EMA (span {p['ema_span_steps']:g}) of the points "
                   f"before it and > {p['min_value']:g}; at most {p['isolated_max_count']:g} spike(s) that the "
                   f"run absorbs within {p['recover_points']:g} points only warn")),
    DetectorSpec("first_nonfinite", first_nonfinite, (),
                 lambda p: "the first step at which any of the signals is NaN or Inf, and which came first",
                 sees_nonfinite=True),
    DetectorSpec("rising_trend_before_event", rising_trend_before_event, (
        _p("rise_ratio", 1.5, 1, 1e6, "level over baseline that counts as climbing"),
        _p("baseline_frac", 0.5, 0.05, 1, "leading fraction of the pre-event points that sets the baseline"),
        _p("min_lead_steps", 5, 1, 1e9, "shortest climb reported, in steps before the event"),
        _p("ratio_vs_ema", 5.0, 1, 1e9, "spike test for the event when nothing is non-finite"),
        _p("min_value", 5.0, 0, 1e12, "spike floor for the event"),
        _p("ema_span_steps", 20, 1, 1e6, "EMA span for the event's spike test")),
        lambda p: (f"before the first NaN/Inf or spike the signal stays >= {p['rise_ratio']:g}x its baseline "
                   f"for >= {p['min_lead_steps']:g} steps while trending up"),
        sees_nonfinite=True),
    DetectorSpec("level_above", level_above, (
        _p("warn_above", 0.05, 0, 1e9, "level that warns"),
        _p("fail_above", 0.1, 0, 1e9, "level that fails"),
        _p("min_stretch_points", 5, 1, 1e6, "fewest consecutive points above the level")),
        lambda p: (f"the running median of |value| stays above {p['warn_above']:g} (warn) or "
                   f"{p['fail_above']:g} (fail) for >= {p['min_stretch_points']:g} points")),
)}
