"""Spike detectors: a jump against the recent level or an EMA, and the climb before a blow-up.

Windows, EMA spans and recovery are set in training steps and turned into logged points at the curve's
own cadence (`Curve.points_for`), so logging every k steps does not stretch them k-fold.  Thresholds are
ratios and robust noise sds of the curve itself: a small model's grad norm of 0.3 that jumps to 4.5 is
as much a spike as a large model's 1.0 -> 15.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ._base import Curve, Evidence, NotJudged

# a median of two points is their mean: logged every 5th step, a second burst right after the first kept
# a pg loss that was back at its level at once "not recovered" (tuning healthy-pg-loss-bursts).  Near
# the run's end the two points there are still read
_MIN_RECOVER_POINTS = 3
_MIN_RECOVER_POINTS_AT_END = 2
# a recent level within this many printed steps of 0 is one the log's precision cannot resolve (a GRPO loss
# printed as 0.0000 while KL is still 0): against it a point is a spike only if it also stands above where
# the curve is now, the median of the last tenth of the recent window (at least 5 points).  A loss that is
# beta * KL climbs from 0.0000 as KL grows, its scatter growing with it: 60 steps in, 0.0025 stood 25x
# above a window of 0.0000s and 0.0001s, and 2.8x the 0.0009 of the ten points before it (Unsloth's
# Mistral-7B GRPO notebook, read live at 30% of its run; at half of it, 0.0104 against 0.0003)
_UNRESOLVED_STEPS = 5
_LOCAL_SHARE = 0.1
_MIN_LOCAL_POINTS = 5


def _recovered(values: np.ndarray, idx: np.ndarray, recover_points: int, back_under: np.ndarray,
               stay_points: int = 3) -> list[tuple[int, int, bool | None]]:
    """The spike episodes at `idx` as (first index, last index, whether the run came back: None when the
    log ends too soon after it to tell).

    Consecutive spike points are one episode (a blow-up that lasts three steps is one event); one longer
    than `recover_points` is a level shift, not a spike.  The run came back from an episode when the
    `recover_points` points after it have their median under that episode's `back_under` level, or when
    within them the curve gets under it and stays for `stay_points` points (BLOOM-176B: grad norm 960 at
    iteration 31219, still 650 at 31222, back to 0.27 by 31250)."""
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([idx[:1], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks], idx[-1:]])
    k = int(recover_points)

    def recovered(start: int, end: int) -> bool | None:
        if end - start + 1 > k:
            return False                    # elevated for longer than a spike: a level shift
        after = values[end + 1:end + 1 + k]
        if len(after) < min(k, _MIN_RECOVER_POINTS_AT_END):
            return None                     # the log ends (or breaks off) before the run could come back
        if float(st.median(after)) <= back_under[start]:
            return True
        under = values[end + 1:end + k + stay_points] <= back_under[start]    # only the points it reads
        return any(j + stay_points <= len(under) and under[j:j + stay_points].all() for j in range(k))

    return [(int(a), int(e), recovered(a, e)) for a, e in zip(starts, ends)]


def _crowded(v: Curve, episodes, max_count: float, window_steps: float) -> bool:
    """More than `max_count` spike episodes inside some `window_steps` stretch: repeated spikes, not
    isolated ones (llm.c GPT-2 124M absorbs two 5x spikes 1,600 steps apart and trains on)."""
    starts = v.steps[[a for a, _, _ in episodes]]
    k = int(max_count)
    return any(starts[j + k] - starts[j] <= window_steps for j in range(len(starts) - k))


def _spike_evidence(v: Curve, episodes, level: np.ndarray, level_name: str, recover_points: int,
                    isolated_max_count: float, isolated_window_steps: float) -> Evidence:
    i = episodes[0][0]
    # a run that came back from every spike warns, however many (issue 25: verl's published DeepSeek-7B
    # GSM8K baseline absorbs 13 grad-norm spikes of 6-160x in 1,120 steps and trains on); repeated ones
    # are said, and one it did not come back from fails
    absorbed = all(back for _, _, back in episodes)
    repeated = _crowded(v, episodes, isolated_max_count, isolated_window_steps)
    return Evidence(int(v.steps[i]), int(v.steps[episodes[-1][1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), level_name: float(level[i]),
        "ratio": float(v.values[i] / level[i]) if level[i] > 0 else math.inf, "count": len(episodes),
        "absorbed": (("repeated, each " if repeated else "") + f"absorbed: back to its level within "
                     f"{recover_points} points") if absorbed else "not absorbed"},
        severity="warn" if absorbed else None)


def _spikes_vs_recent(x: np.ndarray, window: int, min_ratio: float,
                      min_jump_sd: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which points spike against the median of the `window` points before them (all points so far until
    a full window has passed, from the 11th point on), and that recent median and robust sd (NaN where
    not needed).  The sd is never under a floor, so a point whose jump over a cheap lower bound of its
    recent median stays under `min_jump_sd` floors is no spike: the exact median and MAD (O(window)
    each) are computed only for the few points left."""
    n = len(x)
    lower = st.recent_median_floor(x, window)
    lower[:10] = np.nan
    # a history that is flat to the logged precision (a GRPO loss printed as 0.0000 for 30 steps) has a
    # MAD of 0; the run's own point-to-point noise is the floor, so 0.0001 is not a spike
    noise = st.noise_sd(x)
    maybe = np.flatnonzero(x - lower >= min_jump_sd * max(noise, 1e-12))
    med, sd, spike = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=bool)
    if not len(maybe):
        return spike, med, sd
    # ... and a loss printed to 4 decimals moves in steps of 0.0001: one printed step is the least noise
    quantum = st.logged_quantum(x)
    floor = max(noise, quantum)
    m, d = st.recent_median_mad(x, window, maybe)
    d = np.maximum(d, np.maximum(floor, 1e-6 * np.abs(m) + 1e-12))
    level = x[maybe]
    positive_level = m > 3.0 * d
    # a spike needs a baseline: against a recent median of exactly 0 (a GRPO loss or grad norm of 0 while
    # every group is equal: layer 1's consequence) any value is an "infinite" jump (issue 25)
    spike[maybe] = (level - m >= min_jump_sd * d) & np.where(positive_level, level >= min_ratio * m, True) \
        & np.isfinite(m) & (m != 0)
    med[maybe], sd[maybe] = m, d
    _drop_climbs_from_zero(x, spike, med, sd, min_jump_sd, max(_MIN_LOCAL_POINTS, int(_LOCAL_SHARE * window)),
                           _UNRESOLVED_STEPS * quantum)
    return spike, med, sd


def _drop_climbs_from_zero(x: np.ndarray, spike: np.ndarray, med: np.ndarray, sd: np.ndarray,
                           min_jump_sd: float, local: int, unresolved: float) -> None:
    """Clear, in place, each run of consecutive spike points that starts against a recent level at or
    under `unresolved` (0 to the log's precision) and whose first point does not also stand
    `min_jump_sd` sds (the larger of the window's and the `local` points' own) above the median of the
    `local` points before it: a curve climbing from 0 that left the window's zeros behind, not a spike.
    A jump from 0 that stands above its last points too stays, however long it then stays up."""
    first = np.flatnonzero(spike & ~np.concatenate([[False], spike[:-1]]))
    first = first[np.abs(med[first]) <= unresolved]
    if not len(first):
        return
    now, now_sd = st.recent_median_mad(x, local, first)
    for i in first[~(x[first] - now >= min_jump_sd * np.maximum(now_sd, sd[first]))]:
        end = i + int(np.argmin(spike[i:])) if not spike[i:].all() else len(spike)
        spike[i:end] = False


def spike_vs_recent(values: Curve, reward: Curve | None = None, *, window_steps, min_ratio, min_jump_sd,
                    isolated_max_count, isolated_window_steps, recover_steps,
                    recover_sd) -> Evidence | NotJudged | None:
    """A point of `values` jumps far above the median of the points in the `window_steps` steps before it: by
    `min_jump_sd` robust sds and, where that level is clearly positive (a cross-entropy loss), by `min_ratio`
    x the level.  Consecutive spike points are one episode; the run came back from it when, within
    `recover_steps` steps, the median of the points after it (or 3 in a row) is back within `recover_sd` sds
    of the level.  Episodes the run came back from only warn (said to repeat when more than
    `isolated_max_count` fall within `isolated_window_steps` steps); one it did not come back from fails.  In
    an RL run (a `reward` is logged) a loss near 0 is a policy-gradient loss: bursts it comes back from are
    not reported, and one in the log's last points leaves the rule undecided.

    Against a level that is 0 to the log's precision, a run of spike points whose first point does not also
    stand that far above the last few points is a climb from 0, not a spike (_drop_climbs_from_zero); an
    episode longer than the recovery window is a level shift, not a spike (_recovered). Without a reward the
    loss is a cross-entropy, however low and noisy, and every spike counts."""
    v = values.finite()
    if len(v.values) <= 10:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; 11 are needed to know its level")
    window = v.points_for(window_steps, 10)
    recover = v.points_for(recover_steps, _MIN_RECOVER_POINTS)
    spike, med, sd = _spikes_vs_recent(v.values, window, min_ratio, min_jump_sd)
    if not spike.any():
        return None
    episodes = _recovered(v.values, np.flatnonzero(spike), recover, med + recover_sd * sd)
    # the seed's 10x reads a loss with a positive level (cross-entropy).  A policy-gradient loss that
    # hovers at 0 has no such scale and bursts with the batch's KL: a burst it comes back from is not a
    # finding (healthy TRL GRPO runs show several), one it does not come back from is.
    # "hovers at 0" = a level under 10 robust sds: a cross-entropy loss sits 20-100+ sds above 0, a
    # KL-dominated GRPO loss (0.002 +- 0.001) 2-3 sds
    cross_entropy_like = (med > 10.0 * sd) | (reward is None)
    # a burst the finite points end after did not come back where a NaN or Inf follows it: it blew up
    blew_up_after = values.steps[~np.isfinite(values.values)]
    episodes = [(a, e, False if back is None and (blew_up_after > v.steps[e]).any() else back)
                for a, e, back in episodes]
    reported = [(a, e, back) for a, e, back in episodes if cross_entropy_like[a] or back is False]
    if reported:
        return _spike_evidence(v, reported, med, "recent", recover, isolated_max_count, isolated_window_steps)
    # a burst of such a loss in the log's last points: whether the run comes back from it is not known
    # yet (a live log read at 30% of a healthy Unsloth GRPO run ended one point after a 13x burst)
    pending = [a for a, _, back in episodes if back is None]
    if pending:
        i = pending[-1]
        return NotJudged(f"{v.signal} {v.values[i]:.4g} at step {int(v.steps[i])}, "
                         f"{len(v.values) - 1 - i} point(s) before the log ends: whether the run comes back "
                         "from this burst is not known yet", undecided=True)
    return None


def spike_vs_ema(values: Curve, *, ratio_vs_ema, min_jump_sd, ema_span_steps, isolated_max_count,
                 isolated_window_steps, recover_steps, recover_ratio,
                 min_level_of_median) -> Evidence | NotJudged | None:
    """A point of `values` exceeds `ratio_vs_ema` x the EMA (span `ema_span_steps` steps) of the points before
    it and stands `min_jump_sd` robust noise sds above it; the EMA is floored at `min_level_of_median` x the
    run's median, so a step back to normal after steps of zero gradient is no spike.  Spikes the run came back
    from (the median of the points within `recover_steps` steps after it, or 3 in a row, under `recover_ratio`
    x the EMA) only warn, said to repeat when more than `isolated_max_count` fall within
    `isolated_window_steps` steps; one it did not come back from fails.

    Seed 002's second condition, an absolute 5.0, is an example for one model size and would hide a small
    model's 0.3 -> 4.5; the noise test takes its place."""
    v = values.finite()
    if len(v.values) <= 10:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; 11 are needed to know its level")
    spike, ema = _ema_spikes(v, ratio_vs_ema, min_jump_sd, ema_span_steps, min_level_of_median)
    if not spike.any():
        return None
    recover = v.points_for(recover_steps, _MIN_RECOVER_POINTS)
    episodes = _recovered(v.values, np.flatnonzero(spike), recover, recover_ratio * ema)
    return _spike_evidence(v, episodes, ema, "ema", recover, isolated_max_count, isolated_window_steps)


def _ema_spikes(v: Curve, ratio_vs_ema: float, min_jump_sd: float, ema_span_steps: float,
                min_level_of_median: float) -> tuple[np.ndarray, np.ndarray]:
    """Which points of a finite curve spike against the (floored) EMA of the points before them, and
    that EMA."""
    span = v.points_for(ema_span_steps, 2)
    ema = np.maximum(st.ema_before(v.values, span), min_level_of_median * float(st.median(v.values)))
    noise = max(st.noise_sd(v.values), 1e-12)
    # the EMA must be positive: steps of exactly 0 gradient (all groups equal) are no baseline to spike from
    return (v.values > ratio_vs_ema * ema) & (v.values - ema >= min_jump_sd * noise) & np.isfinite(ema) \
        & (ema > 0), ema


def rising_trend_before_event(values: Curve, loss: Curve | None = None, *, rise_ratio, baseline_frac,
                              min_lead_steps, ratio_vs_ema, min_jump_sd, ema_span_steps,
                              min_level_of_median) -> Evidence | NotJudged | None:
    """Before an event (the first NaN/Inf in `values` or `loss`, else the first spike of `values`: over
    `ratio_vs_ema` x its EMA of span `ema_span_steps` steps, floored at `min_level_of_median` x its median,
    and `min_jump_sd` noise sds above it), the running median of `values` held at or above `rise_ratio` x its
    baseline (the first `baseline_frac` of the steps before the event) over its last `min_lead_steps` steps or
    more, trending up: a precursor, and the evidence says how many steps ahead the climb showed."""
    event = None
    for curve in (values, loss):
        if curve is not None and (~np.isfinite(curve.values)).any():
            step = int(curve.steps[np.argmax(~np.isfinite(curve.values))])
            event = step if event is None else min(event, step)
    v = values.finite()
    if len(v.values) <= 10:
        return NotJudged(f"{v.signal} has {len(v.values)} finite points; 11 are needed")
    if event is None:
        spike, _ = _ema_spikes(v, ratio_vs_ema, min_jump_sd, ema_span_steps, min_level_of_median)
        event = int(v.steps[np.argmax(spike)]) if spike.any() else None
    if event is None:
        return None
    before = v.steps < event
    steps, vals = v.steps[before], v.values[before]
    if len(vals) < 10:
        return NotJudged(f"{v.signal} has {len(vals)} points before the event at step {event}; 10 are needed "
                         "to see a climb")
    baseline = st.edge_level_by_steps(steps, vals, baseline_frac, min_points=5)
    smooth = st.rolling_median(vals, 5)
    above = smooth >= rise_ratio * max(baseline, 1e-12)
    if not above[-1]:
        return None
    below = np.flatnonzero(~above)
    start = int(below[-1]) + 1 if len(below) else 0     # where the final stretch above began
    lead = int(event - steps[start])
    if lead < min_lead_steps or st.theil_sen_slope(steps[start:], vals[start:]) <= 0:
        return None
    return Evidence(int(steps[start]), int(event), {
        "signal": v.signal, "key": v.key, "lead": lead, "event_step": int(event),
        "baseline": baseline, "before_event": float(vals[-1]), "rise": float(vals[-1] / baseline)
        if baseline > 0 else math.inf})
