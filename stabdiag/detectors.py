"""Detectors: pure functions that look for one pattern in one or more curves.

A detector takes Curves (steps + values of a signal, already cut at the run's first non-finite step
unless the detector asks for the whole series) and its parameters, and returns Evidence or None.
No I/O, no printing.  Each detector declares its parameters once, in DETECTORS at the bottom: name,
default, allowed range and meaning; rules may override the values, and `rules explain` prints them.
Detectors are named for the pattern they find, never for a layer: several rules may share one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import _stats as st


@dataclass(frozen=True, slots=True)
class Curve:
    """One resolved signal: its canonical name, the raw key it came from, and its points."""

    signal: str
    key: str
    steps: np.ndarray
    values: np.ndarray

    def finite(self) -> "Curve":
        ok = np.isfinite(self.values)
        return self if ok.all() else Curve(self.signal, self.key, self.steps[ok], self.values[ok])

    @property
    def span(self) -> int:
        return int(self.steps[-1] - self.steps[0]) if len(self.steps) else 0


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a detector saw: the step range, the numbers behind the message, and two qualifiers.

    severity: a detector may lower a rule's severity (e.g. only one of two joint signals moved).
    explained_by: the signal that explains the pattern away (e.g. all-correct groups explain an
    entropy drop), so the finding is reported as a consequence, not a cause.
    """

    start_step: int
    end_step: int
    values: dict = field(default_factory=dict)
    severity: str | None = None
    explained_by: str | None = None


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    default: float
    low: float
    high: float
    meaning: str


@dataclass(frozen=True, slots=True)
class DetectorSpec:
    name: str
    fn: Callable[..., Evidence | None]
    params: tuple[Param, ...]
    describe: Callable[[dict], str]
    sees_nonfinite: bool = False      # gets the whole series, not the part before the first NaN

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}


def _smooth_window(n: int) -> int:
    return max(3, min(21, n // 20))


def _level_change(curve: Curve, start_step: float, end_step: float) -> tuple[float, int]:
    """Theil–Sen change of a curve over [start_step, end_step], and the number of points used."""
    inside = (curve.steps >= start_step) & (curve.steps <= end_step)
    steps, values = curve.steps[inside], curve.values[inside]
    if len(steps) < 2:
        return 0.0, len(steps)
    return st.theil_sen_slope(steps, values) * float(end_step - start_step), len(steps)


def _ols_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its standard error (inf when it cannot be estimated)."""
    n = len(x)
    dx = x - x.mean()
    sxx = float(np.sum(dx * dx))
    if n < 3 or sxx <= 0:
        return 0.0, math.inf
    slope = float(np.sum(dx * (y - y.mean())) / sxx)
    resid = y - y.mean() - slope * dx
    sigma = math.sqrt(float(np.sum(resid * resid)) / (n - 2))
    return slope, sigma / math.sqrt(sxx)


def _change_se(curve: Curve, start_step: float, end_step: float) -> float:
    """Standard error of a straight-line change over [start, end], from the curve's own point noise."""
    inside = (curve.steps >= start_step) & (curve.steps <= end_step)
    steps = curve.steps[inside].astype(np.float64)
    if len(steps) < 3:
        return math.inf
    spread = float(np.sum((steps - steps.mean()) ** 2))
    sigma = st.noise_sd(curve.values[inside])
    return sigma * float(end_step - start_step) / math.sqrt(spread) if spread > 0 else math.inf


def _eval_summary(changes: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:+.3f}" for k, v in changes.items())


# --- layer-agnostic trend detectors ---------------------------------------------------------------

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


# --- policy change ----------------------------------------------------------------------------------

def _on_grid(curve: Curve, grid: np.ndarray) -> np.ndarray:
    smooth = st.rolling_median(curve.values, _smooth_window(len(curve.values)))
    return np.interp(grid, curve.steps, smooth)


def _explained(difficulty: Curve | None, lo: float, hi: float, threshold: float) -> bool:
    if difficulty is None:
        return False
    d = difficulty.finite()
    inside = (d.steps >= lo) & (d.steps <= hi)
    if not inside.any():
        return False
    values = d.values / 100.0 if np.nanmax(d.values) > 1.0 else d.values
    return float(np.median(values[inside])) >= threshold


def kl_entropy_joint(kl: Curve, entropy: Curve, difficulty: Curve | None = None, *, window_steps,
                     min_kl_ratio, min_entropy_drop_frac, min_kl, warmup_frac, min_kl_accel,
                     explained_zero_std_frac) -> Evidence | None:
    """Within one window KL at least doubles *and* entropy falls steeply (fail); one alone is a
    warning, and KL alone only when it accelerates after warm-up (KL grows from 0 in every run)."""
    k, e = kl.finite(), entropy.finite()
    if len(k.steps) < 10 or len(e.steps) < 10:
        return None
    lo, hi = max(k.steps[0], e.steps[0]), min(k.steps[-1], e.steps[-1])
    span = hi - lo
    window = min(window_steps, span / 2.0)
    if span <= 0 or window < 5:
        return None
    grid = np.linspace(lo, hi, 201)
    kg, eg = _on_grid(k, grid), _on_grid(e, grid)
    shift = max(1, int(round(window / (grid[1] - grid[0]))))
    if shift >= len(grid):
        return None
    k0, k1 = np.maximum(kg[:-shift], min_kl), kg[shift:]
    e0, e1 = eg[:-shift], eg[shift:]
    kl_ratio = k1 / k0
    ent_drop = np.where(e0 > 0, 1.0 - e1 / np.where(e0 > 0, e0, 1.0), 0.0)
    kl_up = (kl_ratio >= min_kl_ratio) & (k1 > min_kl)
    ent_down = ent_drop >= min_entropy_drop_frac
    # KL alone: only after warm-up and only when its slope accelerates against the previous window
    prev = np.full(len(k0), np.nan)
    prev[shift:] = kg[shift:-shift] - kg[:-2 * shift] if len(kg) > 2 * shift else np.nan
    accel = np.isfinite(prev) & ((k1 - kg[:-shift]) >= min_kl_accel * np.maximum(np.nan_to_num(prev), 0.0))
    after_warmup = grid[:-shift] >= lo + warmup_frac * span
    both = kl_up & ent_down
    kl_only = kl_up & accel & after_warmup & ~both
    ent_only = ent_down & ~both
    for mask, severity, what in ((both, None, "kl+entropy"), (kl_only, "warn", "kl"),
                                 (ent_only, "warn", "entropy")):
        if mask.any():
            # the steepest qualifying window: its start is where the fast movement began
            steepness = kl_ratio if what == "kl" else ent_drop
            i = int(np.argmax(np.where(mask, steepness, -np.inf)))
            start, end = float(grid[i]), float(grid[i + shift])
            explained = _explained(difficulty, start, end, explained_zero_std_frac)
            return Evidence(int(round(start)), int(round(end)), {
                "moved": what, "kl_start": float(kg[i]), "kl_end": float(kg[i + shift]),
                "kl_ratio": float(kl_ratio[i]), "entropy_start": float(eg[i]),
                "entropy_end": float(eg[i + shift]), "entropy_drop": float(ent_drop[i]),
                "window": int(round(window))},
                severity=severity, explained_by="zero_std_frac" if explained else None)
    return None


def floor_breach(values: Curve, difficulty: Curve | None = None, *, floor_frac, early_frac,
                 min_breach_steps, min_breach_frac_of_run, explained_zero_std_frac) -> Evidence | None:
    """The curve stays below `floor_frac` × its early-run level for a sustained stretch."""
    v = values.finite()
    if len(v.steps) < 10:
        return None
    early = st.edge_level(v.values, early_frac, min_points=5)
    if early <= 0:
        return None
    floor = floor_frac * early
    smooth = st.rolling_median(v.values, _smooth_window(len(v.values)))
    need = max(min_breach_steps, min_breach_frac_of_run * v.span)
    for a, b in st.true_runs(smooth < floor):
        if v.steps[b] - v.steps[a] >= need:
            explained = _explained(difficulty, v.steps[a], v.steps[b], explained_zero_std_frac)
            return Evidence(int(v.steps[a]), int(v.steps[b]), {
                "signal": v.signal, "key": v.key, "early": early, "floor": floor,
                "lowest": float(np.min(smooth[a:b + 1])), "last": float(smooth[b])},
                explained_by="zero_std_frac" if explained else None)
    return None


# --- numeric update ---------------------------------------------------------------------------------

def _recovered(values: np.ndarray, idx: np.ndarray, recover_points: int, back_under: np.ndarray,
               stay_points: int = 3) -> tuple[bool, int]:
    """Whether the run came back from every spike episode at `idx`, and how many episodes there are.

    Consecutive spike points are one episode (a blow-up that lasts three steps is one event).  The run
    came back from it when the `recover_points` points after it have their median under that episode's
    `back_under` level, or when within them the curve gets under it and stays for `stay_points` points
    (BLOOM-176B: grad norm 960 at iteration 31219, still 650 at 31222, back to 0.27 by 31250)."""
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.concatenate([idx[:1], idx[breaks + 1]])
    ends = np.concatenate([idx[breaks], idx[-1:]])
    k = int(recover_points)

    def recovered(start: int, end: int) -> bool:
        after = values[end + 1:end + 1 + k]
        if len(after) < k:
            return False                    # the run ends (or breaks off) before it could come back
        under = values <= back_under[start]
        if float(np.median(after)) <= back_under[start]:
            return True
        return any(j + stay_points <= len(values) and under[j:j + stay_points].all()
                   for j in range(end + 1, end + 1 + k))

    return all(recovered(a, e) for a, e in zip(starts, ends)), len(starts)


def spike_vs_recent(values: Curve, *, window_points, min_ratio, min_jump_sd, isolated_max_count,
                    recover_points, recover_sd) -> Evidence | None:
    """A point jumps far above the median of the points before it: by `min_jump_sd` robust sds, and
    (where that level is clearly positive, as for a cross-entropy loss) by `min_ratio` × the level.
    At most `isolated_max_count` spikes, each followed by `recover_points` points whose median is back
    within `recover_sd` robust sds of the recent level, are spikes the run absorbed: a warning."""
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
    idx = np.flatnonzero(spike)
    i = int(idx[0])
    came_back, episodes = _recovered(v.values, idx, recover_points, med + recover_sd * sd)
    # the seed's 10x reads a loss with a positive level (cross-entropy); a policy-gradient loss that
    # hovers at 0 has no such scale, so spikes the run came back from are warnings however many
    absorbed = came_back and (episodes <= isolated_max_count or not positive_level[i])
    return Evidence(int(v.steps[i]), int(v.steps[idx[-1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), "recent": float(med[i]),
        "ratio": float(v.values[i] / med[i]) if med[i] > 0 else math.inf, "count": episodes,
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
    came_back, episodes = _recovered(v.values, idx, recover_points, recover_ratio * ema)
    absorbed = came_back and episodes <= isolated_max_count
    return Evidence(int(v.steps[i]), int(v.steps[idx[-1]]), {
        "signal": v.signal, "key": v.key, "value": float(v.values[i]), "ema": float(ema[i]),
        "ratio": float(v.values[i] / ema[i]) if ema[i] > 0 else math.inf, "count": episodes,
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


# --- training system --------------------------------------------------------------------------------

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
