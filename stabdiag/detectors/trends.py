"""Trend detectors: a curve rising while others stay flat, a fraction staying high, a level staying high."""

from __future__ import annotations

import math

import numpy as np

from .. import _stats as st
from ._base import Curve, Evidence, _change_se, _eval_summary, _level_change, _ols_slope, _smooth_window


def trend_divergence(rising: Curve, flat: list[Curve], *, min_steps, min_rise_sd, max_flat_gain_frac,
                     max_flat_upper_frac, flat_se, edge_frac, min_flat_points,
                     min_covered_frac) -> Evidence | None:
    """`rising` climbs clearly to its peak while the `flat` curves do not follow it.

    Each flat curve (an eval) is regressed on the rising curve's level at the eval's own steps; the
    slope is the eval's gain per unit of rise.  It tracks the rise if that gain is above
    `max_flat_gain_frac` and `flat_se` standard errors clear of 0 (then nothing fires); it is flat if
    it is below and, `flat_se` standard errors higher, still below `max_flat_upper_frac`; otherwise it
    is too noisy to tell, and so is an eval whose points see under `min_covered_frac` of the rise
    (first logged after the reward already rose).  Evals are read over the rise and the plateau after
    it (reward within 20% of the rise of its peak).  The rule fires when at least one eval is flat."""
    r = rising.finite()
    if len(r.steps) < 10 or r.span < min_steps:
        return None
    smooth = st.rolling_median(r.values, _smooth_window(len(r.values)))
    start_level = st.edge_level(r.values, edge_frac)
    peak = int(np.argmax(smooth))
    rise = float(smooth[peak] - start_level)
    noise = max(st.noise_sd(r.values), 1e-12)
    if rise <= 0 or rise < min_rise_sd * noise or r.steps[peak] - r.steps[0] < min_steps:
        return None
    # evals are read over the rise and the plateau after it, while the reward stays within 20% of its peak
    high = np.flatnonzero(smooth[peak:] >= start_level + 0.8 * rise)
    last = peak + int(high[-1]) if len(high) else peak
    window = (float(r.steps[0]), float(r.steps[last]))
    changes: dict[str, float] = {}
    for curve in flat:
        c = curve.finite()
        keep = (c.steps >= window[0]) & (c.steps <= window[1])
        if keep.sum() < min_flat_points:
            continue
        # regress the eval on the reward level at its own steps: the slope is the eval's gain per unit
        # of reward gain, whatever the shape of the rise (early saturation, late climb)
        level = np.interp(c.steps[keep], r.steps, smooth)
        if float(level.max() - level.min()) < min_covered_frac * rise:
            continue                       # this eval saw too little of the rise to say anything
        gain, gain_se = _ols_slope(level, c.values[keep])
        if gain > max_flat_gain_frac and gain - flat_se * gain_se > 0:
            return None                    # this eval tracks the reward: the rise is real learning
        if gain > max_flat_gain_frac or gain + flat_se * gain_se > max_flat_upper_frac:
            continue                       # too noisy to call flat: a few se up, it could be tracking
        changes[c.signal] = gain * rise
    if not changes:
        return None
    onset = int(r.steps[np.argmax(smooth >= start_level + 0.25 * rise)])
    return Evidence(onset, int(r.steps[peak]), {
        "signal": r.signal, "key": r.key, "level_start": start_level, "level_peak": float(smooth[peak]),
        "rise": rise, "rise_sd": rise / noise, "eval_changes": changes,
        "evals": _eval_summary(changes)})


def growth_while_flat(growing: Curve, flat: list[Curve], *, min_growth_ratio, max_flat_gain_rel,
                      min_gain_se, edge_frac, min_steps, min_flat_points) -> Evidence | None:
    """`growing` ends at least `min_growth_ratio` × its start level while every `flat` curve stays flat.
    An eval improves when it gains more than `max_flat_gain_rel` of its own level *and* more than
    `min_gain_se` standard errors of that gain (a noisy eval's wobble is not an improvement)."""
    g = growing.finite()
    if len(g.steps) < 10 or g.span < min_steps:
        return None
    start_level = st.edge_level(g.values, edge_frac)
    end_level = st.edge_level(g.values, edge_frac, end=True)
    if start_level <= 0 or end_level / start_level < min_growth_ratio:
        return None
    window = (float(g.steps[0]), float(g.steps[-1]))
    changes: dict[str, float] = {}
    for curve in flat:
        c = curve.finite()
        change, points = _level_change(c, *window)
        if points < min_flat_points:
            continue
        base = max(abs(st.edge_level(c.values, edge_frac)), 1e-12)
        if change / base > max_flat_gain_rel and change > min_gain_se * _change_se(c, *window):
            return None
        changes[c.signal] = change
    if not changes:
        return None
    smooth = st.rolling_median(g.values, _smooth_window(len(g.values)))
    onset = int(g.steps[np.argmax(smooth >= start_level + 0.25 * (end_level - start_level))])
    return Evidence(onset, int(g.steps[-1]), {
        "signal": g.signal, "key": g.key, "level_start": start_level, "level_end": end_level,
        "growth": end_level / start_level, "eval_changes": changes, "evals": _eval_summary(changes)})


def high_fraction_sustained(fraction: Curve, level: Curve | None = None, *, min_frac, min_stretch_steps,
                            min_stretch_frac_of_run, high_level) -> Evidence | None:
    """A fraction (0–1, or 0–100 read as percent) stays at or above `min_frac` for a long stretch."""
    f = fraction.finite()
    if len(f.steps) < 5:
        return None
    values = f.values / 100.0 if np.nanmax(f.values) > 1.0 else f.values
    smooth = st.rolling_median(values, 5)
    need = max(min_stretch_steps, min_stretch_frac_of_run * f.span)
    for a, b in st.true_runs(smooth >= min_frac):
        if f.steps[b] - f.steps[a] >= need:
            frac = float(np.median(values[a:b + 1]))
            kind = "groups whose rewards are all equal"
            if level is not None:
                lv = level.finite()
                inside = (lv.steps >= f.steps[a]) & (lv.steps <= f.steps[b])
                if inside.any():
                    easy = float(np.median(lv.values[inside])) >= high_level
                    kind = "all-correct groups: data too easy" if easy else "all-wrong groups: data too hard"
            return Evidence(int(f.steps[a]), int(f.steps[b]), {
                "signal": f.signal, "key": f.key, "fraction": frac, "kind": kind})
    return None


def level_above(values: Curve, *, warn_above, fail_above, min_stretch_points) -> Evidence | None:
    """The curve's running median stays above a threshold for a stretch: above `fail_above` fails,
    between `warn_above` and `fail_above` warns."""
    v = values.finite()
    if len(v.values) < min_stretch_points:
        return None
    smooth = st.rolling_median(np.abs(v.values), 5)
    best = None
    for a, b in st.true_runs(smooth > warn_above):
        if b - a + 1 >= min_stretch_points:
            level = float(np.median(np.abs(v.values[a:b + 1])))
            if best is None or level > best[2]:
                best = (a, b, level)
    if best is None:
        return None
    a, b, level = best
    return Evidence(int(v.steps[a]), int(v.steps[b]), {
        "signal": v.signal, "key": v.key, "level": level, "ratio": math.exp(-level),
        "off_pct": 100.0 * (1.0 - math.exp(-level)), "threshold": fail_above if level > fail_above
        else warn_above}, severity=None if level > fail_above else "warn")
