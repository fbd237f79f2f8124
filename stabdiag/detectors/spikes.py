"""Numeric-update detectors: spikes against a recent level or an EMA, the first non-finite value, and
the climb before a blow-up."""

from __future__ import annotations

import math

import numpy as np

from .. import _stats as st
from ._base import Curve, Evidence


def _recovered(values: np.ndarray, idx: np.ndarray, recover_points: int, back_under: np.ndarray,
               stay_points: int = 3) -> list[tuple[int, int, bool]]:
    """The spike episodes at `idx` as (first index, last index, whether the run came back).

    Consecutive spike points are one episode (a blow-up that lasts three steps is one event); one longer
    than `recover_points` is a level shift, not a spike.  The run came back from an episode when the
    `recover_points` points after it have their median under that episode's `back_under` level, or when
    within them the curve gets under it and stays for `stay_points` points (BLOOM-176B: grad norm 960 at
    iteration 31219, still 650 at 31222, back to 0.27 by 31250)."""
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([idx[:1], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks], idx[-1:]])
    k = int(recover_points)

    def recovered(start: int, end: int) -> bool:
        if end - start + 1 > k:
            return False                    # elevated for longer than a spike: a level shift
        after = values[end + 1:end + 1 + k]
        if len(after) < k:
            return False                    # the run ends (or breaks off) before it could come back
        under = values <= back_under[start]
        if float(np.median(after)) <= back_under[start]:
            return True
        return any(j + stay_points <= len(values) and under[j:j + stay_points].all()
                   for j in range(end + 1, end + 1 + k))

    return [(int(a), int(e), recovered(a, e)) for a, e in zip(starts, ends)]


def spike_vs_recent(values: Curve, *, window_points, min_ratio, min_jump_sd, isolated_max_count,
                    recover_points, recover_sd) -> Evidence | None:
    """A point jumps far above the median of the points before it: by `min_jump_sd` robust sds, and
    (where that level is clearly positive, as for a cross-entropy loss) by `min_ratio` × the level.
    At most `isolated_max_count` spike episodes the run comes back from (see _recovered) are a warning;
    on a level near 0 (a policy-gradient loss) episodes it comes back from are not reported at all."""
    v = values.finite()
    window = int(window_points)
    if len(v.values) <= 10:
        return None
    med, sd = st.trailing_median_mad(v.values, window)
    # before a full window has passed, the recent level is all the points so far (at least 10)
    for i in range(10, min(window, len(v.values))):
        head = v.values[:i]
        med[i] = np.median(head)
        sd[i] = st.robust_sd(head)
    # a history that is flat to the logged precision (a GRPO loss printed as 0.0000 for 30 steps) has a
    # MAD of 0; the run's own point-to-point noise is the floor, so 0.0001 is not a spike
    sd = np.maximum(sd, np.maximum(st.noise_sd(v.values), 1e-6 * np.abs(med) + 1e-12))
    jump = v.values - med
    positive_level = med > 3.0 * sd
    spike = (jump >= min_jump_sd * sd) & np.where(positive_level, v.values >= min_ratio * med, True)
    spike &= np.isfinite(med)
    if not spike.any():
        return None
    episodes = _recovered(v.values, np.flatnonzero(spike), recover_points, med + recover_sd * sd)
    # the seed's 10x reads a loss with a positive level (cross-entropy).  A policy-gradient loss that
    # hovers at 0 has no such scale and bursts with the batch's KL: a burst it comes back from is not a
    # finding (healthy TRL GRPO runs show several), one it does not come back from is
    # "hovers at 0" = a level under 10 robust sds: a cross-entropy loss sits 20-100+ sds above 0, a
    # KL-dominated GRPO loss (0.002 +- 0.001) 2-3 sds
    cross_entropy_like = med > 10.0 * sd
    episodes = [(a, e, back) for a, e, back in episodes if cross_entropy_like[a] or not back]
    if not episodes:
        return None
    i = episodes[0][0]
    absorbed = all(back for _, _, back in episodes) and len(episodes) <= isolated_max_count
    return Evidence(int(v.steps[i]), int(v.steps[episodes[-1][1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), "recent": float(med[i]),
        "ratio": float(v.values[i] / med[i]) if med[i] > 0 else math.inf, "count": len(episodes),
        "absorbed": f"absorbed: back to its level within {int(recover_points)} points" if absorbed
        else "not absorbed"},
        severity="warn" if absorbed else None)


def spike_vs_ema(values: Curve, *, ratio_vs_ema, min_value, ema_span_steps, isolated_max_count,
                 recover_points, recover_ratio) -> Evidence | None:
    """A point exceeds `ratio_vs_ema` × the EMA of the points before it and `min_value` (seed 002).
    At most `isolated_max_count` spikes, each followed by `recover_points` points whose median is back
    under `recover_ratio` × the EMA, are spikes the run absorbed: a warning, not a failure."""
    v = values.finite()
    if len(v.values) < 3:
        return None
    ema = st.ema_before(v.values, ema_span_steps)
    spike = (v.values > ratio_vs_ema * ema) & (v.values > min_value) & np.isfinite(ema)
    if not spike.any():
        return None
    idx = np.flatnonzero(spike)
    i = int(idx[0])
    episodes = _recovered(v.values, idx, recover_points, recover_ratio * ema)
    absorbed = all(back for _, _, back in episodes) and len(episodes) <= isolated_max_count
    return Evidence(int(v.steps[i]), int(v.steps[idx[-1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), "ema": float(ema[i]),
        "ratio": float(v.values[i] / ema[i]) if ema[i] > 0 else math.inf, "count": len(episodes),
        "absorbed": f"absorbed: back to its level within {int(recover_points)} points" if absorbed
        else "not absorbed"},
        severity="warn" if absorbed else None)


CHAIN = ("reward", "logprob_delta", "loss", "grad_norm")   # seed 002's finite-status chain, in order


def first_nonfinite(**curves: Curve | None) -> Evidence | None:
    """The first step at which any curve holds NaN or Inf, and which one turned first (ties follow
    the reward → logprob → loss → grad-norm chain)."""
    firsts: dict[str, tuple[int, float, str, int]] = {}
    for curve in curves.values():
        if curve is None:
            continue
        bad = ~np.isfinite(curve.values)
        if bad.any():
            i = int(np.argmax(bad))
            firsts[curve.signal] = (int(curve.steps[i]), float(curve.values[i]), curve.key,
                                    int(bad.sum()))
    if not firsts:
        return None
    order = sorted(firsts, key=lambda s: (firsts[s][0], CHAIN.index(s) if s in CHAIN else len(CHAIN)))
    first = order[0]
    step, value, key, count = firsts[first]
    then = ", ".join(f"{s} at {firsts[s][0]}" for s in order[1:]) or "no other signal"
    return Evidence(step, max(v[0] for v in firsts.values()), {
        "signal": first, "key": key, "step": step, "kind": "NaN" if math.isnan(value) else "Inf",
        "count": count, "then": then,
        "first_steps": {s: firsts[s][0] for s in order}})


def rising_trend_before_event(values: Curve, loss: Curve | None = None, *, rise_ratio, baseline_frac,
                              min_lead_steps, ratio_vs_ema, min_value, ema_span_steps) -> Evidence | None:
    """Before the first non-finite value or spike, the curve climbed steadily above its baseline;
    the evidence says how many steps ahead the climb showed (the precursor lead)."""
    event = None
    for curve in (values, loss):
        if curve is not None and (~np.isfinite(curve.values)).any():
            step = int(curve.steps[np.argmax(~np.isfinite(curve.values))])
            event = step if event is None else min(event, step)
    v = values.finite()
    if event is None:
        spike = spike_vs_ema(v, ratio_vs_ema=ratio_vs_ema, min_value=min_value,
                             ema_span_steps=ema_span_steps, isolated_max_count=0, recover_points=1,
                             recover_ratio=1.0)
        event = spike.start_step if spike else None
    if event is None:
        return None
    before = v.steps < event
    steps, vals = v.steps[before], v.values[before]
    if len(vals) < 10:
        return None
    baseline = st.edge_level(vals, baseline_frac, min_points=5)
    smooth = st.rolling_median(vals, 5)
    above = smooth >= rise_ratio * max(baseline, 1e-12)
    if not above[-1]:
        return None
    start = len(above) - 1
    while start > 0 and above[start - 1]:
        start -= 1
    lead = int(event - steps[start])
    if lead < min_lead_steps or st.theil_sen_slope(steps[start:], vals[start:]) <= 0:
        return None
    return Evidence(int(steps[start]), int(event), {
        "signal": v.signal, "key": v.key, "lead": lead, "event_step": int(event),
        "baseline": baseline, "before_event": float(vals[-1]), "rise": float(vals[-1] / baseline)
        if baseline > 0 else math.inf})
