"""Policy-change detectors: KL and entropy read together, a floor under entropy, and entropy collapse.

A floor is a share of the early level read as a window's median (early.early_level: one high first point
does not raise it); a collapse is read against the highest of the first points, because a policy
destroyed at step 1 has no "early run" to compare with except its first points.  Difficulty (all-equal
groups) explains an entropy drop only when it was already high before the drop began.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ..stats import evidence as ev
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged, Quiet, _smooth_window
from .early import early_level

MAX_SMOOTH_POINTS = 101
_FULL_MEDIAN_POINTS = 20_000    # up to here a running median over every point costs less than 400 windows


def _on_grid(curve: Curve, grid: np.ndarray, window: float) -> np.ndarray:
    """The curve's running median on `grid`, over half the comparison `window` in steps (at least 7
    points): a median of the 3 or 5 points a sparse log gives lets a KL that grows steadily out of its
    noise double in some window by chance (tests/test_rule_properties.py: logged every 10 steps, on 29 of
    60 seeds at 5 points, 7 at 11).  A cap in points spans k times the steps when logged every k: capped
    at 21 points, a KL whose noise wanders over tens of steps doubled by chance on 59 of 60 seeds logged
    every step, 15 logged every 5th (same file).  MAX_SMOOTH_POINTS only bounds the cost of a window set
    far above the shipped 200 steps (a running median costs its width per point)."""
    points = max(_smooth_window(len(curve.values)), min(MAX_SMOOTH_POINTS, curve.points_for(window / 2, 7)))
    if len(curve.values) <= _FULL_MEDIAN_POINTS:
        return np.interp(grid, curve.steps, st.rolling_median(curve.values, points))
    # a long log: the running median only at the points that bracket a grid step (the same numbers)
    right = np.searchsorted(curve.steps, grid, side="right")
    near = st.distinct(np.clip(np.concatenate([right - 1, right]), 0, len(curve.steps) - 1))
    return np.interp(grid, curve.steps[near], st.rolling_median_at(curve.values, points, near))


def first_level(curve: Curve, points: int = 3) -> float:
    """The level a curve starts from: the highest of its first few points, so that a collapse inside
    them does not become the baseline."""
    return float(np.max(curve.values[:points]))


def _explained(difficulty: Curve | None, fall_step: float, threshold: float) -> bool:
    """All-equal groups were already the norm before the entropy started to fall (a stretch at or above
    `threshold` that began strictly before `fall_step` and still holds there), so they are its cause,
    not its consequence.  A fall at the first steps has no before: nothing explains it."""
    if difficulty is None:
        return False
    d = difficulty.finite()
    if len(d.values) < 3:
        return False
    smooth = st.rolling_median(d.values, 5)
    for a, b in st.true_runs(smooth >= threshold):
        if d.steps[a] < fall_step <= d.steps[b] + d.cadence:
            return True
    return False


def _fall_step(e: Curve, start: float, end: float) -> float:
    """The first logged step in [start, end] where entropy is a quarter of the way down: the fall is
    under way (read on the points, not on a grid, so a collapse at step 2 is dated step 2)."""
    inside = (e.steps >= start) & (e.steps <= end)
    if inside.sum() < 2:
        return start
    steps, smooth = e.steps[inside], st.rolling_median(e.values[inside], 3)
    below = smooth <= smooth[0] - 0.25 * (smooth[0] - smooth[-1])
    return float(steps[int(np.argmax(below))]) if below.any() else start


def sharpening(evals: list[Curve] | None, entropy: Curve, start: float, end: float,
               reward: Curve | None = None, steep_from: float | None = None) -> Quiet | None:
    """Entropy that falls while an independent eval improves surely (detectors/evidence.py) is the policy
    settling on answers that are right: sharpening, said in a note, not a finding (seed 000: "entropy
    falling can be the model finding a better answer").  Not while the training reward falls over the
    same steps, surely and by more than one of its batch-to-batch sds: a policy settling on right
    answers scores more on its own prompts, and seed 002's collapse is entropy falling while the reward
    stalls or slides (an eval may still creep up then, on what was learned before).  Where the fall
    steepened at `steep_from` (a quarter of the way down) after a gentle start, the eval must improve
    from there on, or have come most of the way to its ceiling over the whole fall: an eval that rose
    while the entropy eased off its early level and then stalled mid-range, as the entropy dropped, is
    no policy settling on right answers; one that reached 0.89 of 1 early has nothing left to show."""
    found = ev.eval_improvement(evals, start, end)
    if found is not None and steep_from is not None and steep_from > start and not found.saturated():
        found = ev.eval_improvement(evals, steep_from, end)
    if found is None or _reward_fell(reward, start, end):
        return None
    e = entropy.finite()
    inside = (e.steps >= start) & (e.steps <= end)
    fall = f"{float(st.median(e.values[inside][:3])):.3g} -> {float(st.median(e.values[inside][-3:])):.3g}" \
        if inside.sum() >= 3 else "falling"
    return Quiet(f"entropy {fall} over steps {int(start)}-{int(end)} while {found.text()}: read as sharpening "
                 "(the policy settling on right answers), not a collapse")


def _reward_fell(reward: Curve | None, start: float, end: float) -> bool:
    """The reward's trend over [start, end] is below 0 by its whole 95% interval and by more than the
    reward's point-to-point noise (a sure drift of a few thousandths over a long plateau is no slide)."""
    if reward is None:
        return False
    r = reward.finite()
    fall = ev.window_change(r.steps, r.values, start, end)
    return math.isfinite(fall.high) and fall.high < 0 and -fall.estimate > st.noise_sd(r.values)


def _fall_start(e: Curve, end: float, early: float) -> float:
    """Where the entropy's fall toward `end` began: the last step before `end` at which its running median
    was still at 95% of the early level (the first step when it never was)."""
    before = e.steps <= end
    # smoothed over a span of steps (a fiftieth of the run, at least 5 points), not a count of points: an
    # entropy that hovers near 95% of its early level crosses it last much later logged every step (a
    # 5-step median keeps the batch noise) than logged every 5th, and the sharpening window with it
    smooth = st.rolling_median(e.values[before], e.points_for(0.02 * e.span, 5))
    high = np.flatnonzero(smooth >= 0.95 * early)
    return float(e.steps[high[-1]]) if len(high) else float(e.steps[0])


def _sharpening(evals: list[Curve] | None, e: Curve, end: float, early: float,
                reward: Curve | None) -> Quiet | None:
    """sharpening() over the fall that ends at `end`: from where it began, steepening a quarter of the
    way down."""
    began = _fall_start(e, end, early)
    return sharpening(evals, e, began, end, reward, steep_from=_fall_step(e, began, end))


def kl_entropy_joint(kl: Curve, entropy: Curve, difficulty: Curve | None = None, evals: list[Curve] | None = None,
                     reward: Curve | None = None, *, window_steps, min_kl_ratio, min_entropy_drop_frac, min_kl,
                     min_kl_accel, min_entropy_accel, explained_zero_std_frac) -> Evidence | NotJudged | Quiet | None:
    """Within one window of `window_steps` steps `kl` grows at least `min_kl_ratio` x (read from at least
    `min_kl`) and `entropy` falls by at least `min_entropy_drop_frac` of its level, both steepening: KL rising
    at least `min_kl_accel` x and entropy falling at least `min_entropy_accel` x as fast as over the window
    before (a window at the run's very start has none before it, so never qualifies): the policy is moving too
    fast, a failure.  Entropy falling so alone warns; KL steepening alone is no finding (it can be the model
    leaving its SFT start). A drop that zero-variance groups explain (`difficulty` at or above
    `explained_zero_std_frac` already before the fall) is reported as their consequence; entropy falling while
    an eval in `evals` improves surely, and `reward` does not fall, is sharpening: a note, not a finding.

    "Moving too fast" is read on slopes, against the run's own earlier rate, so curves that converge (fast
    early, flattening) never qualify; KL grows from 0 and entropy falls in every run's first steps, and a
    collapse there is L2.entropy-collapse's (seed 000, issue 25: KL rising alone can be the model leaving its
    SFT start)."""
    k, e = kl.finite(), entropy.finite()
    if len(k.steps) < 10 or len(e.steps) < 10:
        return NotJudged(f"KL has {len(k.steps)} and entropy {len(e.steps)} points; 10 of each are needed")
    lo, hi = max(k.steps[0], e.steps[0]), min(k.steps[-1], e.steps[-1])
    span = hi - lo
    # never shorter than one logging interval: logged every 250 steps, a move within 200 steps shows as
    # one jump between two points, and a 200-step window on the line between them sees 4/5 of it
    window = min(max(window_steps, k.cadence, e.cadence), span / 2.0)
    if span <= 0 or window < 5:
        return NotJudged(f"KL and entropy overlap over {max(span, 0)} steps; 10 are needed")
    grid = np.linspace(lo, hi, 201)
    kg, eg = _on_grid(k, grid, window), _on_grid(e, grid, window)
    shift = max(1, int(round(window / (grid[1] - grid[0]))))
    if shift >= len(grid):
        return NotJudged("too few steps for one comparison window")
    k0, k1 = np.maximum(kg[:-shift], min_kl), kg[shift:]
    e0, e1 = eg[:-shift], eg[shift:]
    kl_ratio = k1 / k0
    ent_drop = np.where(e0 > 0, 1.0 - e1 / np.where(e0 > 0, e0, 1.0), 0.0)
    kl_up = (kl_ratio >= min_kl_ratio) & (k1 > min_kl)
    ent_down = ent_drop >= min_entropy_drop_frac
    # steepening: a window's rate (per step) against the rate over the window before it (cut at the run's
    # start, and then at least half a window long), so a curve that converges (fast early, flattening)
    # never qualifies, and a window at the run's very start has no earlier rate to beat (KL grows from 0
    # and entropy falls in every run's first steps)
    idx = np.arange(len(k0))
    before = np.maximum(idx - shift, 0)
    has_before = (idx - before) * 2 >= shift
    width = np.where(has_before, grid[idx] - grid[before], 1.0)
    kl_before = np.maximum((kg[idx] - kg[before]) / width, 0.0)
    fall_before = np.maximum((eg[before] - eg[idx]) / width, 0.0)
    accel = has_before & ((k1 - kg[:-shift]) / window >= min_kl_accel * kl_before)
    ent_accel = has_before & ((e0 - e1) / window >= min_entropy_accel * fall_before)
    both = kl_up & ent_down & accel & ent_accel
    ent_only = ent_down & ent_accel & ~both
    for mask, severity, what in ((both, None, "both"), (ent_only, "warn", "entropy")):
        if mask.any():
            # the steepest qualifying window: its start is where the fast movement began
            i = int(np.argmax(np.where(mask, ent_drop, -np.inf)))
            start, end = float(grid[i]), float(grid[i + shift])
            explained = _explained(difficulty, _fall_step(e, start, end), explained_zero_std_frac)
            if not explained and (quiet := sharpening(evals, e, start, end, reward)) is not None:
                return quiet
            return Evidence(int(round(start)), int(round(end)), {
                "moved": what, "signal": "entropy", "kl_start": float(kg[i]),
                "kl_end": float(kg[i + shift]),
                "kl_ratio": float(kl_ratio[i]), "entropy_start": float(eg[i]),
                "entropy_end": float(eg[i + shift]), "entropy_drop": float(ent_drop[i]),
                "window": int(round(window))},
                severity=severity, explained_by="zero_std_frac" if explained else None)
    return None


def floor_breach(values: Curve, difficulty: Curve | None = None, evals: list[Curve] | None = None,
                 reward: Curve | None = None, *,
                 floor_frac, early_frac, min_breach_steps, min_breach_frac_of_run,
                 explained_zero_std_frac) -> Evidence | NotJudged | Quiet | None:
    """The running median of `values` stays below `floor_frac` x its early level (the higher of the median of
    its first 3 points and the median over the first `early_frac` of its step span: never one point, so an
    early high point does not raise the floor) for at least `min_breach_steps` steps
    and `min_breach_frac_of_run` of the run.  A breach that zero-variance groups explain (`difficulty` at or
    above `explained_zero_std_frac` already before it) is reported as their consequence; a fall during which
    an eval in `evals` improved surely, and `reward` did not fall, is sharpening: a note, not a finding."""
    v = values.finite()
    if len(v.steps) < 10 or v.span < min_breach_steps:
        return NotJudged(f"{v.signal} covers {v.span} steps in {len(v.steps)} points; a breach of "
                         f"{min_breach_steps:g} steps and 10 points are needed")
    early = early_level(v.steps, v.values, early_frac)
    if early <= 0:
        return NotJudged(f"{v.signal} starts at {early:.3g}; a floor is a fraction of a positive level")
    floor = floor_frac * early
    if not (v.values < floor).any():
        return None         # a running median of points none of which is under the floor is not under it
    smooth = st.rolling_median(v.values, _smooth_window(len(v.values)))
    need = max(min_breach_steps, min_breach_frac_of_run * v.span)
    stretch = st.first_long_run(v.steps, smooth < floor, need)
    if stretch is not None:
        a, b = stretch
        # the fall is read from where the entropy left its first points' highest value (the sharpening window
        # then errs early: it reads more of an eval's gain, a note rather than a finding, never less), and
        # all-equal groups explain it only if they were the norm before that, not merely before the floor
        # was crossed (a floor under a level the first steps already collapsed is crossed late)
        began = max(early, first_level(v))
        explained = _explained(difficulty, _fall_start(v, float(v.steps[a]), began), explained_zero_std_frac)
        if not explained and (quiet := _sharpening(evals, v, float(v.steps[b]), began, reward)) is not None:
            return quiet
        return Evidence(int(v.steps[a]), int(v.steps[b]), {
            "signal": v.signal, "key": v.key, "early": early, "floor": floor, "floor_frac": floor_frac,
            "lowest": float(np.min(smooth[a:b + 1])), "last": float(smooth[b])},
            explained_by="zero_std_frac" if explained else None)
    return None


def collapse_below(values: Curve, evals: list[Curve] | None = None, reward: Curve | None = None, *,
                   collapse_frac, min_collapse_steps, min_collapse_frac_of_run,
                   first_points) -> Evidence | NotJudged | Quiet | None:
    """`values` falls to `collapse_frac` x the highest of its first `first_points` points or below and stays
    there (3-point running median) for at least `min_collapse_steps` steps and `min_collapse_frac_of_run` of
    the run (a stretch that runs to the log's end, for half as long): near 0 the policy samples one answer,
    whatever the step (step 1 included). A fall during which an eval in `evals` improved surely, and `reward`
    did not fall, is sharpening: a note, not a finding.

    Seed 002's collapse is entropy falling while the reward and evals stall or regress."""
    v = values.finite()
    if len(v.steps) < 5:
        return NotJudged(f"{v.signal} has {len(v.steps)} points; 5 are needed")
    start = first_level(v, int(first_points))
    if start <= 0:
        return NotJudged(f"{v.signal} starts at {start:.3g}; a collapse is a fraction of a positive level")
    need = max(min_collapse_steps, min_collapse_frac_of_run * v.span)
    for a, b in st.true_runs(st.median_passes(v.values, 3, lambda s: s <= collapse_frac * start)):
        # a stretch that runs to the end of the log counts once it is as long as the run allows
        if v.steps[b] - v.steps[a] >= need or (b == len(v.steps) - 1 and b - a + 1 >= 3
                                                and v.steps[b] - v.steps[a] >= min(need, 0.5 * v.span)):
            level = float(st.median(v.values[a:b + 1]))
            quiet = _sharpening(evals, v, float(v.steps[b]), start, reward)
            if quiet is not None:
                return quiet
            return Evidence(int(v.steps[a]), int(v.steps[b]), {
                "signal": v.signal, "key": v.key, "initial": start, "level": level, "frac": level / start,
                "first_step": int(v.steps[0])})
    if len(v.steps) < MIN_CLEAN_POINTS:
        return NotJudged(f"{v.signal} has {len(v.steps)} points: no collapse in them, but "
                         f"{MIN_CLEAN_POINTS} are needed to call it clean")
    return None
