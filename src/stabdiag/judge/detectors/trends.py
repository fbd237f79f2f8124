"""Layer-1 trend detectors besides the divergences of divergence.py: a fraction staying high, a reward
component climbing while correctness stays, a truncation fraction climbing with the reward, a curve
climbing back from its best, a growth while another curve stays steady.

Units: a rising curve is measured against its own noise (a reward on any scale or offset gives the same
answer), and an eval's movement against its own level and noise (an eval in percent, on 0-1 or scored
1-10 by a judge gives the same answer).  Nothing compares one curve's raw units with another's.
"""

from __future__ import annotations

import numpy as np

from ... import _stats as st
from ...signals.resolve import default_alias_table
from ..stats import evidence as ev
from ..stats.change import CLEAN, FINDING, end_minus_start
from ._base import (
    Curve,
    Evidence,
    NotJudged,
    Quiet,
    _smooth_window,
)
from .divergence import trend_divergence
from .excursions import climb_values, held_climb, read_climbs

_SMALL_SHARE = 0.3       # a rise under this share of a curve's range is small (the divergence rule's min_rise_share)
_OVERLAP_SHARE = 0.25    # the reward had made this share of its rise by the end of the truncation's climb, and
                         # had this share still to make at its start: the two moved together


def high_fraction_sustained(fraction: Curve, level: Curve | None = None, *, min_frac, min_stretch_steps,
                            min_stretch_frac_of_run, easy_level, hard_level) -> Evidence | NotJudged | None:
    """The running median (5 points) of `fraction` (0-1; the signals table rescales percentages) stays at or
    above `min_frac` for at least `min_stretch_steps` steps and `min_stretch_frac_of_run` of the run (a
    stretch that runs to the log's end, `min_stretch_steps` alone: the run's state now).  Where
    `level` lies on 0-1, the finding says whether the equal groups are mostly all-correct (its median at or
    above `easy_level`: data too easy) or mostly all-wrong (at or under `hard_level`: too hard); otherwise
    only that rewards were equal."""
    f = fraction.finite()
    need = max(min_stretch_steps, min_stretch_frac_of_run * f.span)
    if len(f.steps) < 5 or f.span < min_stretch_steps:
        return NotJudged(f"{f.signal} covers {f.span} steps in {len(f.steps)} points; a stretch of "
                         f"{min_stretch_steps:g} steps is needed")
    # still high when the log ends: the run's state, however long it ran before
    stretch = st.first_long_run(f.steps, st.median_passes(f.values, 5, lambda s: s >= min_frac), need,
                                need_at_end=min_stretch_steps)
    if stretch is not None:
        a, b = stretch
        return Evidence(int(f.steps[a]), int(f.steps[b]), {
            "signal": f.signal, "key": f.key, "fraction": float(st.median(f.values[a:b + 1])),
            "kind": _equal_group_kind(level, int(f.steps[a]), int(f.steps[b]), easy_level, hard_level)})
    return None


def _equal_group_kind(level: Curve | None, lo: int, hi: int, easy: float, hard: float) -> str:
    plain = "groups whose rewards are all equal"
    if level is None:
        return plain
    lv = level.finite()
    inside = (lv.steps >= lo) & (lv.steps <= hi)
    if not inside.any():
        return plain
    if lv.values.min() < 0 or lv.values.max() > 1:
        return plain + "; the reward is not on 0-1, so not whether all correct or all wrong"
    median = float(st.median(lv.values[inside]))
    if median >= easy:
        return "mostly all-correct groups: data too easy"
    if median <= hard:
        return "mostly all-wrong groups: data too hard"
    return plain + " (all-correct and all-wrong mixed)"


def component_divergence(components: list[Curve], checks: list[Curve] | None = None,
                         **params) -> Evidence | NotJudged | None:
    """A component of `components` that is not a check (format, length, ...) climbs while the checks among
    them (those named for correctness - accuracy, exact match, verifier, ... - and those the run logs with
    weight 0, which `checks` lists) stay flat: the policy is being paid for form, length or format, not for
    being right (open-r1: format 0.48 -> 0.86 while accuracy 0.16 -> 0.06). Each other component is read as
    trend_divergence's rising curve, surely (`min_rise_z`) and largely (`min_rise_share` of its range),
    against the checks as its evals, in the components' shared unit: a correctness gain under
    `max_flat_gain_rel` of the other component's rise is flat.  A component whose large climb the data can
    neither confirm nor rule out leaves the rule too noisy to tell; without both kinds of component it is
    not judged."""
    logged = {c.signal for c in checks or ()}
    is_check = [is_correctness(c.signal) or c.signal in logged for c in components]
    checks = [c for c, check in zip(components, is_check) if check]
    others = [c for c, check in zip(components, is_check) if not check]
    if not checks or not others:
        return NotJudged("needs a correctness component (or one logged with weight 0) and another component; "
                         "the run logs " + (", ".join(c.signal for c in components) or "none"))
    unjudged: list[NotJudged] = []
    judged = False
    for other in others:
        # the components are summands of one reward: their units are shared, so correctness's change is
        # read against the other component's rise (an offset on the reward moves neither), without the
        # "following" reading of curves that share no summands (its two parameters are unread there)
        result = trend_divergence(other, checks, shared_units=True, min_tracking_gain=0.0, max_flat_share=0.0,
                                  **params)
        if isinstance(result, Evidence):
            return result
        if isinstance(result, NotJudged):
            unjudged.append(result)
        else:
            judged = True
    undecided = [u for u in unjudged if u.undecided]
    if undecided:
        # a component whose large climb the data can neither confirm nor rule out: another component
        # judged clean does not clear it
        return NotJudged("; ".join(u.reason for u in undecided), undecided=True)
    return None if judged else NotJudged("; ".join(u.reason for u in unjudged))


def is_correctness(signal: str) -> bool:
    """A reward component that measures being right rather than form (by its name: signals.toml [check])."""
    return default_alias_table().is_correctness(signal)


def fraction_climb_while_rising(fraction: Curve, rising: Curve, evals: list[Curve] | None = None, *,
                                min_end_frac, fail_end_frac, min_climb, min_rise_z, edge_frac,
                                min_steps) -> Evidence | NotJudged | Quiet | None:
    """`fraction` (responses cut off at the length cap) climbs by at least `min_climb` to end at or above
    `min_end_frac` (levels of the first and last `edge_frac` of its step span) while `rising` rises: its
    level over the last `edge_frac` of the run minus its level over the first, `min_rise_z` standard errors
    clear of 0 from its own noise and at least a third of its smoothed range, with a quarter of that rise
    made by the end of the fraction's climb (nine tenths of its way) and a quarter still to make at its
    start (a tenth of its way): the reward pays for length
    even though the cap keeps length from doubling.  Ending under `fail_end_frac` warns (the answers may
    need more room); at or above it nearly every answer is cut off: it fails.  A reward rise neither
    confirmed nor ruled out is too noisy to tell; an eval in `evals` that improved surely over the climb
    makes it a note (the longer answers are buying accuracy), not a finding; a run shorter than `min_steps`
    steps is not judged.

    The reward is read over the whole run (stats/change.py), where its noise and its rise are best seen: read
    only inside the climb (a few tens of points), a reward that climbed with the cap was 'too noisy to tell'
    (z 1.8) where the whole run showed it at z 4.3 (shared/real_runs grpo_c_length_hack).  Seed 000: a
    loophole is reward up while the eval does not move."""
    f, r = fraction.finite(), rising.finite()
    if len(f.steps) < 10 or f.span < min_steps or len(r.steps) < 10:
        return NotJudged(f"{f.signal} covers {f.span} steps in {len(f.steps)} points; a climb is judged over "
                         f">= {min_steps:g} steps and 10 points")
    start = _start_level(f.steps, f.values, edge_frac)
    end = st.edge_level_by_steps(f.steps, f.values, edge_frac, end=True)
    if end < min_end_frac or end - start < min_climb:
        return None
    smooth = st.rolling_median(f.values, _smooth_window(len(f.values)))
    lo = float(f.steps[int(np.argmax(smooth >= start + 0.1 * (end - start)))])
    hi = float(f.steps[int(np.argmax(smooth >= start + 0.9 * (end - start)))])
    if hi <= lo:
        hi = float(f.steps[-1])
    rise = end_minus_start(r.steps, r.values, edge_frac)
    size = _SMALL_SHARE * max(ev.smoothed_range(r.values), abs(rise.estimate))
    decision = rise.reading.decide(size, min_rise_z)
    if decision == CLEAN or rise.estimate <= 0:
        return None             # a rise of a third of the reward's range is ruled out: judged, and clean
    said = f"{r.signal} {rise.start_level:.3g} -> {rise.end_level:.3g} ({rise.reading.text(min_rise_z)})"
    if decision != FINDING:
        return NotJudged.too_noisy(f"{f.signal} climbed {start:.0%} -> {end:.0%} while {said}: "
                                   + rise.reading.size_unsure_text(size, min_rise_z))
    made_at_lo, made_at_hi = _share_made_at(r, rise.start_level, rise.estimate, (lo, hi))
    if made_at_hi < _OVERLAP_SHARE or made_at_lo > 1.0 - _OVERLAP_SHARE:
        # the cap filled before the reward began to rise, or after it had risen: length did not pay
        return None
    improved = ev.eval_improvement(evals, float(f.steps[0]), float(f.steps[-1]))
    if improved is not None:
        return Quiet(f"truncated responses {start:.0%} -> {end:.0%} while the reward rose, but {improved.text()}: "
                     "the longer answers are buying accuracy; raise the length cap rather than penalise length")
    return Evidence(_onset(f, start, end), int(f.steps[-1]), {
        "signal": f.signal, "key": f.key, "frac_start": start, "frac_end": end, "reward_key": r.key,
        "reward_start": rise.start_level, "reward_end": rise.end_level, "reward_rise_z": rise.reading.z,
        "reward_trend": rise.reading.text(min_rise_z), "reward_during_climb": made_at_hi - made_at_lo},
        severity=None if end >= fail_end_frac else "warn")


def _share_made_at(r: Curve, start_level: float, rise: float, steps: tuple[float, float]) -> tuple[float, float]:
    """The share of a curve's rise (from `start_level`, by `rise`) its running median had made by each of
    two steps."""
    smooth = st.rolling_median(r.values, _smooth_window(len(r.values)))
    at = np.interp(steps, r.steps, smooth)
    return float((at[0] - start_level) / rise), float((at[1] - start_level) / rise)


def rise_from_best(values: Curve, falling: Curve | None = None, reward: Curve | None = None, *, min_share, min_sd,
                   sure_z, stretch_steps, min_points) -> Evidence | NotJudged | None:
    """`values` (a held-out loss) climbs back from its running best by at least `min_share` of the way it came
    down (the median of its first points minus that best) and `min_sd` sds of its own noise, and holds to the
    log's end for `stretch_steps` steps or more, surely (the mean of its points there minus the mean at its
    best `sure_z` standard errors clear of 0 and at least that large; excursions.read_climbs), while `falling`
    (the training loss) did not rise between the same steps: the model is fitting its training data, not the
    task (overfitting).  A training loss that rose too is a divergence (L3.loss-divergence), not this.  A climb
    the data can neither confirm nor rule out is too noisy to tell; in an RL run (a `reward` is logged) the
    eval loss is the surrogate on eval prompts and is not judged, nor is a curve of fewer than `min_points`
    points."""
    if reward is not None:
        return NotJudged("an RL run's eval loss is the policy loss on eval prompts, not a held-out likelihood")
    v = values.finite()
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} points; {min_points:g} are needed")
    # an eval loss is its evals alone (4-30 points: never enough to bound a memory), so the walk reading of a
    # short curve would leave every eval log too noisy to tell (4 of the rule's cases); read as a training loss
    # once was, its chance climbs of a converged eval loss are 0.2-1.0% of bench/calibrate.py's flat_loss runs
    read = read_climbs(v, min_share=min_share, min_sd=min_sd, sure_z=sure_z, stretch_steps=stretch_steps,
                       walk_when_short=False)
    d = held_climb(read)
    if d.decision == CLEAN:
        return None
    best_steps = (float(read.steps[d.reference[0]]), float(read.steps[d.reference[1] - 1]))
    if falling is not None and _rose_too(falling, best_steps, (float(read.steps[d.start]), float(read.steps[-1]))):
        return None                           # the training loss rose too: a divergence, not overfitting
    said = climb_values(read, d, v)
    if d.decision != FINDING:
        return NotJudged.too_noisy(f"{v.signal} {said['best']:.4g} at its best (step {said['best_step']}) -> "
                                   f"{said['level']:.4g} to the end, a climb of {d.reading.text(d.z)} against the "
                                   f"{d.bar:.3g} looked for")
    return Evidence(said["onset"], int(v.steps[-1]), said)


def _rose_too(falling: Curve, best: tuple[float, float], after: tuple[float, float]) -> bool:
    """Whether the training loss's level over the `after` steps is at or above its level over the `best`
    steps (each the median of its points there, at least the 3 nearest)."""
    f = falling.finite()
    if len(f.values) < 2:
        return False

    def level(lo: float, hi: float) -> float:
        inside = (f.steps >= lo) & (f.steps <= hi)
        if inside.sum() < 3:
            centre = int(np.searchsorted(f.steps, 0.5 * (lo + hi)))
            inside = np.zeros(len(f.steps), dtype=bool)
            inside[max(centre - 1, 0):centre + 2] = True
        return float(st.median(f.values[inside]))

    return level(*after) >= level(*best)


def growth_while_steady(growing: Curve, steady: Curve | None = None, *, min_growth_ratio, max_steady_rise,
                        edge_frac, min_steps) -> Evidence | NotJudged | None:
    """`growing` ends at least `min_growth_ratio` x its start level (the levels of the first and last
    `edge_frac` of its step span) while `steady` (the total loss) does not rise by more than `max_steady_rise`
    of its own level: a problem a normal-looking loss hides (MoE experts drifting out of balance while the
    total loss still falls). A loss with no level to rise from (one hovering at 0) is not read; a run shorter
    than `min_steps` steps is not judged."""
    g = growing.finite()
    if len(g.steps) < 10 or g.span < min_steps:
        return NotJudged(f"{g.signal} covers {g.span} steps in {len(g.steps)} points; growth is judged over "
                         f">= {min_steps:g} steps and 10 points")
    start = _start_level(g.steps, g.values, edge_frac)
    end = st.edge_level_by_steps(g.steps, g.values, edge_frac, end=True)
    if start <= 0:
        return NotJudged(f"{g.signal} starts at {start:.3g}; growth is read as a ratio of a positive level")
    if end / start < min_growth_ratio:
        return None
    loss_note = "no loss logged"
    if steady is not None:
        s = steady.finite()
        if len(s.values) >= 10:
            s_start = st.edge_level_by_steps(s.steps, s.values, edge_frac)
            s_end = st.edge_level_by_steps(s.steps, s.values, edge_frac, end=True)
            # a loss with a level (cross-entropy) that rose too is the loss rules' business; a
            # policy-gradient loss hovering at 0 has no level to rise from
            positive = s_start > 3.0 * st.noise_sd(s.values)
            if positive and (s_end - s_start) / s_start > max_steady_rise:
                return None
            loss_note = f"{s.key} {s_start:.3g} -> {s_end:.3g}"
    onset = _onset(g, start, end)
    return Evidence(onset, int(g.steps[-1]), {"signal": g.signal, "key": g.key, "level_start": start,
                                              "level_end": end, "growth": end / start, "loss": loss_note})


def _start_level(steps: np.ndarray, values: np.ndarray, edge_frac: float) -> float:
    """The level a climb starts from: a climb inside the first `edge_frac` of the run must not become the
    start, so the first points count too."""
    return min(st.edge_level_by_steps(steps, values, edge_frac), float(st.median(values[:3])))


def _onset(curve: Curve, start: float, end: float) -> int:
    """The step where the smoothed curve first covers a quarter of its way from `start` to `end`."""
    smooth = st.rolling_median(curve.values, _smooth_window(len(curve.values)))
    return int(curve.steps[np.argmax(smooth >= start + 0.25 * (end - start))])
