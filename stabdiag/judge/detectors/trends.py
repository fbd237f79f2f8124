"""Layer-1 trend detectors: a curve rising while the checks that should follow it stay flat, a fraction
staying high, a truncation fraction climbing with the reward.

Units: a rising curve is measured against its own noise (a reward on any scale or offset gives the same
answer), and an eval's movement against its own level and noise (an eval in percent, on 0-1 or scored
1-10 by a judge gives the same answer).  Nothing compares one curve's raw units with another's.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from ... import _stats as st
from ..stats import evidence as ev
from ._base import (
    Curve,
    Evidence,
    NotJudged,
    Quiet,
    _eval_summary,
    _level_change,
    _ols_slope,
    _smooth_window,
)

_SURE_Z = 3.0            # a growth the length rule reads as sure (the divergence rule's min_rise_z)
_HELD_SHARE = 0.5        # a rise under the size bar is judged only if the run's end (edge_frac) keeps half of it
_SMALL_SHARE = 0.3       # a rise under this share of a curve's range is small (the divergence rule's min_rise_share)

_PINNED_SHARE = 0.8      # a check whose points sit at 0 (or its lowest value) this often registers nothing to follow

_CORRECTNESS = re.compile(r"acc|correct|exact|match|verif|pass|solve|right|math|answer|equiv|judge|score|test",
                          re.IGNORECASE)


def trend_divergence(rising: Curve, flat: list[Curve], *, min_steps, min_rise_z, min_rise_share,
                     min_rise_sd, max_flat_gain_rel, max_flat_upper_rel, flat_se, edge_frac, min_flat_points,
                     min_covered_frac, min_tracking_gain, max_flat_share,
                     shared_units: bool = False) -> Evidence | NotJudged | None:
    """`rising` climbs from its start level (the first `edge_frac` of its step span) to the level it holds at
    its top, and the `flat` curves do not follow it.  The rise must be sure: its trend on a two-phase fit at
    least `min_rise_z` standard errors clear of 0, corrected for autocorrelation (or, for a climb that holds,
    the points of the run's last `edge_frac` above those of its first by ranks as surely); and large: at least
    `min_rise_share` of the curve's fitted range and `min_rise_sd` of its batch-to-batch sds (a success rate
    that rose less is judged only beside an eval on 0..1 that rules out following it, and only if the run's
    end keeps half of the rise). An eval tracks the rise when its gain is `flat_se` standard errors above 0
    and over `max_flat_gain_rel` of its own scale; it is flat when its gain stays under `max_flat_gain_rel`
    and, `flat_se` standard errors higher, under `max_flat_upper_rel` (where the reward and the eval both lie
    on 0..1: under `max_flat_share` of the rise while ruling out `min_tracking_gain` of it); an eval with
    fewer than `min_flat_points` points inside the rise, or whose points see less than `min_covered_frac` of
    it, is not read.  Fires when a large, sure rise meets a flat eval and no eval tracks it.  A run shorter
    than `min_steps` steps is not judged, and a rise that peaks within its first `min_steps` is no finding (a
    large one is not judged: a format being learned looks like a loophole found); a large rise that is not
    sure, no readable eval, or evals that disagree leave it too noisy to tell, never a pass.

    Two numbers decide, as every trend here (detectors/evidence.py): how sure and how large.  The rise
    runs from the start level (first `edge_frac` of the span) to the level the curve holds at its top
    (the median of its points from where the smoothed curve first comes within 20% of its peak to where
    it last is).  It is sure when the least-squares trend over that window is `min_rise_z` standard errors
    clear of 0, the error corrected for autocorrelation and never under the binomial floor of a mean of
    few 0/1 rewards, so evidence grows with the number of points (a per-point sd never shrinks), or, for
    a rise that climbs and holds, which one bend fits badly (its misfit read as wander), when the points
    of the run's last `edge_frac` (at least 10 points) lie above those of its first by ranks, `min_rise_z`
    sds surely (_edges_shift_z).  It is
    large when it is `min_rise_share` of the range of the curve's fit (a reward that jumped early with its
    evals, learning, and then crept up a little more is a small share of it; a loophole is most of it) and
    `min_rise_sd` of its batch-to-batch sds (a standardized effect, not a test: it does not grow with data);
    a sure rise under that bar whose interval reaches it is of a size the points cannot pin (too noisy to
    tell where no eval follows it).  A success rate under that bar is still judged where an eval on 0..1
    rules out following it (in the reward's own unit, evidence that grows with the eval's points) and
    the run's last `edge_frac` keeps `_HELD_SHARE` of the rise.

    Each flat curve (an eval) is regressed on the rising curve's level at the eval's own steps, that level
    scaled 0 (start) to 1 (top): the slope is the eval's change over the whole rise, read against its own
    scale (its level, or its headroom to 1 where it lies on 0..1 and that is smaller).  It tracks the rise
    if that change is `flat_se` (autocorrelation-corrected) standard errors above 0 and over
    `max_flat_gain_rel` of its scale (sure and large, as every finding here), or if it rose that surely
    and that much from the rise's start to its later level (a jump, then a hold); it is flat if it is
    under `max_flat_gain_rel` of its scale and, `flat_se` standard errors higher, still under
    `max_flat_upper_rel`; otherwise it is too noisy to tell, and so is an eval whose points see under
    `min_covered_frac` of the rise or that sits at its floor (_pinned_at_floor: right on next to no
    batch, it registers nothing to follow).  Where the rising curve and the eval both lie on 0..1
    they are read in one unit: an eval that followed the rise would gain at least
    `min_tracking_gain` of it (no more than that share of the room the eval has left, and less for an eval
    far harder or easier than the reward: _Following), and an eval that
    gained under `max_flat_share` of the rise and, `flat_se` standard errors higher, stays under that is
    flat first: though it cannot pin its gain to `max_flat_upper_rel` of its scale (a reward that tripled
    beside an eval noisy to +-15% of its level), and though its small gain is sure (+0.03 beside +0.43).
    Where the rising curve is a success rate by its granularity (a mean of n 0/1 rewards,
    evidence.binomial_floor), flat also needs that (a creep of +0.02 beside an eval whose noise is 0.02
    cannot show whether it followed); a reward on 0..1 that is not one may not share the eval's unit (a
    reward on 0..0.1), so there a small expected gain proves nothing either way (_Following).  Each
    eval is read against the rise's progress on its two-phase fit (_rise_shape).  Fires when a large,
    sure rise meets a flat eval; not judged when the rise is large but not sure (too noisy to tell), when
    no eval could be read, or when beside a flat eval another gained as much as tracking would give it,
    not surely (the checks disagree: one flat eval among several is not the reward leaving them behind)."""
    r = rising.finite()
    if len(r.steps) < 10 or r.span < min_steps:
        return NotJudged(f"{r.signal} covers {r.span} steps in {len(r.steps)} points; a rise is judged over "
                         f">= {min_steps:g} steps and 10 points")
    smooth = st.rolling_median(r.values, _smooth_window(len(r.values)))
    start_level = st.edge_level_by_steps(r.steps, r.values, edge_frac)
    # how sure: the rise read on the whole judged run's two-phase fit (evidence.hinge_change), not on a
    # window chosen where the curve is highest (that finds "significant" rises in a wandering null)
    binomial_sd = ev.binomial_floor(r.values)
    trend = ev.hinge_change(r.steps, r.values, noise_floor=binomial_sd)
    # how large: a share of the range the fitted curve covers (a range read on the points themselves
    # grows with their noise, and would call a large rise drowned in noise small, i.e. clean)
    fitted_range = trend.fitted_range if math.isfinite(trend.fitted_range) else ev.smoothed_range(r.values)
    fit_share = ev.share(trend.estimate, max(fitted_range, trend.estimate))
    peak = int(np.argmax(smooth))
    top = start_level + 0.8 * float(smooth[peak] - start_level)
    high = np.flatnonzero(smooth[peak:] >= top)
    last = peak + int(high[-1]) if len(high) else peak
    # the level the curve holds at its top, not the smoothed maximum: a maximum of a running median is
    # biased up by noise, and by how much depends on how many points were logged
    rise = float(st.median(r.values[int(np.argmax(smooth >= top)):last + 1])) - start_level
    rose = smooth[peak] > start_level and rise > 0
    if not rose or r.steps[peak] - r.steps[0] < min_steps:
        # no rise by the points, or one that peaked within the first min_steps; where the fit sees a large
        # one the data cannot confirm, that is not a clean bill either
        if trend.estimate > 0 and fit_share >= min_rise_share and not trend.sure(min_rise_z):
            return NotJudged.too_noisy(f"{r.signal}'s fit rises {trend.text()}, its points peak "
                                       f"at step {int(r.steps[peak])}")
        if rose and fit_share >= min_rise_share and trend.sure(min_rise_z):
            # a large, sure rise that peaked within the first min_steps: the answer format being learned
            # and a loophole found at once look alike, and the points cannot tell which
            return NotJudged(f"{r.signal} rose {trend.text()} and peaked at step {int(r.steps[peak])}, within "
                             f"its first {min_steps:g} steps: a format being learned cannot be told from a "
                             "loophole found")
        return None
    rise_share = ev.share(rise, max(fitted_range, rise))
    # ... and a standardized effect (Cohen's d): the rise in the curve's own batch-to-batch sds.  Not a
    # test (it does not grow with data) but a size: a creep of a few hundredths over thousands of steps
    # is sure, and still too small for an eval beside it to be expected to show
    head = slice(0, max(last + 1, 50))
    point_sd = st.noise_sd_by_steps(r.steps[head], r.values[head])
    size = max(rise, trend.estimate)
    effect_sd = size / point_sd if point_sd > 0 else math.inf
    # a sure rise whose interval reaches the size bar though its estimate is under it: the data cannot tell
    # a small rise from a large one (20 points of a G = 8 reward: a third of its range read 2.99 sds, and
    # passed clean), so an eval that does not follow it leaves it too noisy to tell, never clean
    high_sd = (size + trend.high - trend.estimate) / point_sd if point_sd > 0 else math.inf
    size_unsure = effect_sd < min_rise_sd <= high_sd and trend.sure(min_rise_z)
    if max(rise_share, fit_share) < min_rise_share:
        return None             # small by the points and by the fit: judged, and clean
    # a reward on 0..1 and an eval on 0..1 are read in one unit: an eval that followed the rise gains at
    # least min_tracking_gain of it
    following = _Following(rise, min_tracking_gain, max_flat_share, binomial_sd > 0, start_level) \
        if not shared_units and ev.headroom(start_level, r.values) is not None else None
    # under the standardized size bar the rise may still be judged where it is a success rate: there an
    # eval on 0..1 is read in the reward's own unit (an accuracy beside an accuracy), and one that surely
    # gained less than following would add is evidence that grows with data, where batch sds never
    # shrink (bench/evidence.py: a +0.19 hack over batches of 16 prompts reads 2.5-3 sds however long)
    small = effect_sd < min_rise_sd
    if small and not size_unsure and not (following is not None and following.success_rate):
        return None             # small by the points: judged, and clean
    window = (float(r.steps[0]), float(r.steps[last]))
    shape = _rise_shape(trend, r, smooth, start_level, rise)
    changes: dict[str, float] = {}
    unread: list[str] = []
    leaning: list[str] = []
    ruled_out = False
    for curve in flat:
        kind, reading = _eval_against_rise(curve, shape, rise, window, min_flat_points, min_covered_frac,
                                           max_flat_gain_rel, max_flat_upper_rel, flat_se, following, shared_units)
        if kind == "tracks":
            return None
        if kind in ("flat", "ruled out"):
            changes[curve.signal] = reading
            ruled_out = ruled_out or kind == "ruled out"
        else:
            unread.append(reading)
            if kind == "leans":
                leaning.append(reading)
    # a small rise is judged only on a success rate (a reward on 0..1 that is not one may not share the
    # eval's unit, _Following) beside an eval that ruled out following it, and only if the run keeps it: a
    # loophole found goes on paying, a healthy run's wander of a few hundredths comes back
    # (bench/evidence.py nulls: 4 of 960 rose +0.06..0.17 and kept under half of it over the last tenth)
    small_but_judged = small and ruled_out and following.success_rate and not leaning \
        and trend.sure(min_rise_z) and rise_share >= min_rise_share \
        and st.edge_level_by_steps(r.steps, r.values, edge_frac, end=True) - start_level >= _HELD_SHARE * rise
    if small and not small_but_judged and not size_unsure:
        return None             # small by the points, and no eval rules out following it: clean
    # the rise's interval: the trend's uncertainty around the level change
    low, high_ = rise - (trend.estimate - trend.low), rise + (trend.high - trend.estimate)
    said = (f"{r.signal} {start_level:.3g} -> {start_level + rise:.3g} (+{rise:.3g}, "
            f"{trend.interval_text(shift=rise - trend.estimate)})")
    if not changes:
        # a rise of the size looked for that no eval could be read against: neither confirmed nor ruled
        # out, so a pass beside it is not a clean bill (denser or longer evals decide it)
        return NotJudged.too_noisy(f"{said} by step {int(r.steps[peak])}, but no independent check could be "
                                   "read against it: " + "; ".join(unread))
    if leaning:
        # one check flat, another up by as much as following the rise would give it but not surely: the
        # checks disagree, and the flat one alone does not show the reward left them behind
        return NotJudged.too_noisy(f"{said} while evals moved {_eval_summary(changes)}, but "
                                   + "; ".join(leaning))
    rank_z = _edges_shift_z(r.steps, r.values, edge_frac)
    if not (trend.sure(min_rise_z) or rank_z >= min_rise_z) or rise_share < min_rise_share:
        # large by one reading, but not sure (or the points and the fit disagree): never a pass
        sureness = f", trend z {trend.z:.1f} after autocorrelation (needs {min_rise_z:g}, n_eff " \
            f"{trend.n_eff:.0f})" if math.isfinite(trend.se) else ""
        return NotJudged.too_noisy(f"{said}{sureness} while evals moved {_eval_summary(changes)}")
    if size_unsure and not small_but_judged:
        return NotJudged.too_noisy(f"{said}: {effect_sd:.2f} of its batch-to-batch sds, up to {high_sd:.2f} within "
                                   f"its interval (needs {min_rise_sd:g}), while evals moved {_eval_summary(changes)}")
    onset = int(r.steps[np.argmax(smooth >= start_level + 0.25 * rise)])
    return Evidence(onset, int(r.steps[peak]), {
        "signal": r.signal, "key": r.key, "level_start": start_level, "level_peak": start_level + rise,
        "rise": rise, "rise_low": low, "rise_high": high_, "rise_z": trend.z, "n_eff": trend.n_eff,
        "sure": f"95% interval {low:.2f}..{high_:.2f}, z {trend.z:.1f}" if trend.sure(min_rise_z) else
        f"its end above its start by ranks, z {rank_z:.1f} (one bend: n_eff {trend.n_eff:.0f})",
        "rise_share": rise_share, "rise_sd": effect_sd, "eval_changes": changes, "evals": _eval_summary(changes)})


def _rise_shape(trend: ev.Change, r: Curve, smooth: np.ndarray, start_level: float,
                rise: float) -> tuple[np.ndarray, np.ndarray]:
    """How far along the rise each step is (0 at its start level, 1 at its top), as (steps, progress)
    corners: the two-phase fit's level where it has one, else the running median's.  The fit, because a
    running median keeps the curve's wander: an eval logged only after a reward had saturated seemed to
    see half of the rise, and its noise, regressed on a noisy progress, read as a fall over all of it."""
    if len(trend.knots) >= 2:
        at, levels = (np.array(v, dtype=np.float64) for v in zip(*trend.knots))
        return at, (levels - start_level) / rise
    return r.steps.astype(np.float64), (smooth - start_level) / rise


class _Following(NamedTuple):
    """How an eval on 0..1 that followed a reward on 0..1 would move: up by `follow_share` of the
    reward's `rise` at least (tuning part: healthy evals gain 0.35-1.0 of it, near misses 0.18-0.3), by
    no more than that share of the room the eval has left.  Where the reward is a success rate by its
    granularity (a mean of n 0/1 completions, the unit of an accuracy eval), an eval too coarse to show
    that gain cannot be called flat; otherwise the shared unit is a guess (a reward on 0..0.1 is not an
    accuracy), and it only lets an eval that rules the gain out, gaining under `flat_share` of the rise,
    be flat.

    An eval far harder or easier than the training reward moves less for the same gain in skill: on a
    logistic item-response curve (Rasch; LLM benchmark accuracies are logistic in a shared capability,
    Ruan et al. 2024, "Observational Scaling Laws") the reward's rise is a skill gain of logit(top) -
    logit(start), and an eval that shared it would move from its start e0 to sigmoid(logit(e0) + that
    gain).  A reward up 0.19 -> 0.31 moves an AIME-like eval at 0.043 by +0.036, not +0.12.  The gain
    expected of a following eval is the smaller of that and the rise (only a shrink: a hard training
    set's small rise is no licence to expect more of an easier eval), and no more than the room the
    eval has left."""

    rise: float
    follow_share: float
    flat_share: float
    success_rate: bool
    reward_start: float     # the reward's level where the rise began, on 0..1

    def on(self, scale: float, room: float, eval_start: float) -> tuple[float, float]:
        """The gains `follow_share` and `flat_share` of the rise (no more than those shares of `room`, or
        of the rise carried over to an eval that started at `eval_start`) as fractions of the eval's
        scale."""
        skill = _logit(self.reward_start + self.rise) - _logit(self.reward_start)
        start = _logit(eval_start)
        carried = _sigmoid(start + skill) - _sigmoid(start)
        gain = min(self.rise, room, carried) / scale
        return self.follow_share * gain, self.flat_share * gain


_EDGE = 0.01     # success rates are read off the bounds: a rate logged as 0 or 1 on a few batches still moves


def _logit(p: float) -> float:
    q = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(q / (1.0 - q))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _eval_against_rise(curve: Curve, shape: tuple[np.ndarray, np.ndarray], rise: float,
                       window: tuple[float, float], min_points: float, min_covered: float, gain_rel: float,
                       upper_rel: float, se_count: float, following: _Following | None,
                       shared_units: bool) -> tuple[str, float | str]:
    """("tracks", gain), ("flat", gain), ("ruled out", gain) for a flat eval that also, `se_count`
    standard errors higher, stays short of the gain following the rise would give it (`following`), or why
    it cannot be read: ("leans", why) when its gain is as large as tracking but not sure, ("unread", why)
    otherwise.  The change
    is read against the eval's own scale (its level, or its headroom to 1 on a 0..1 eval if smaller), or,
    for curves in the rising curve's units (components of one summed reward), against the rise itself."""
    c = curve.finite()
    keep = (c.steps >= window[0]) & (c.steps <= window[1])
    if keep.sum() < min_points:
        return "unread", f"{c.signal} has {int(keep.sum())} point(s) inside the rise (needs {min_points:g})"
    progress = np.interp(c.steps[keep], *shape)
    if float(progress.max() - progress.min()) < min_covered:
        return "unread", (f"{c.signal} sees {float(progress.max() - progress.min()):.0%} of the rise "
                          f"(needs {min_covered:.0%})")
    values = c.values[keep]
    pinned = _pinned_at_floor(c, values)
    if pinned is not None:
        return "unread", pinned
    order = np.argsort(c.steps[keep], kind="stable")
    gain, gain_se = _ols_slope(progress, values)
    # the residuals in time order carry the eval's own autocorrelation (a drifting eval set)
    rho = ev.lag1_autocorrelation((values - values.mean() - gain * (progress - progress.mean()))[order])
    n = len(values)
    n_eff = ev.effective_n(n, rho)
    gain_se = gain_se * math.sqrt((n - 2) / (n_eff - 2)) if n_eff > 2 else math.inf
    level = max(float(st.median(np.abs(values))), 1e-12)
    room = ev.headroom(level, c.values)
    scale = rise if shared_units else (min(level, room) if room is not None and room > 0 else level)
    rel, rel_se = gain / scale, gain_se / scale
    upper = rel + se_count * rel_se
    # the eval's gain read a second way: from where the rise began to its later level (a jump, then a
    # hold, which a line through the progress reads poorly).  Where the rise began: the eval's first
    # points, up to where the reward had moved a tenth of its rise since the first of them, not the first
    # point alone (an eval that stepped up from its first point while the reward was still at its start
    # level did not follow the reward)
    in_time = progress[order]
    moved = in_time >= in_time[0] + 0.1
    before_rise = int(np.argmax(moved)) if moved.any() else len(moved)
    jumped = ev.level_gain(values[order], head_points=before_rise)
    # the eval's level where the rise began: its points before the reward had moved a tenth of it
    follow_rel, flat_rel = following.on(scale, room, float(st.median(values[order][:max(before_rise, 1)]))) \
        if following is not None and room is not None else (None, None)
    small = min(flat_rel, upper_rel) if flat_rel is not None else None
    if small is not None and rel < small and upper < follow_rel \
            and not (jumped.sure(se_count) and jumped.estimate / scale >= small):
        # it gained little on its own scale and under a tenth of the rise, surely no jump of more, and
        # se_count standard errors higher it stays short of what following would add: it did not follow,
        # though it may have moved surely (+0.028 beside a reward up 0.37) or be too noisy to pin to
        # +-15% of its level.  An eval that gained 40% of its own low level moved, whatever the rise
        return "ruled out", gain
    if rel - se_count * rel_se > 0 and rel > gain_rel:
        return "tracks", gain
    if jumped.sure(se_count) and jumped.estimate / scale > gain_rel:
        return "tracks", gain
    # flat otherwise: a gain under gain_rel that, se_count standard errors higher, stays under upper_rel
    # of the eval's scale
    if rel > gain_rel or upper > upper_rel:
        # a handful of points that drift together leave no standard error to quote (n_eff <= 2)
        spread = f"{rel:+.0%} +- {rel_se:.0%} of its scale" if math.isfinite(rel_se) else \
            f"{rel:+.0%} of its scale; its {n} points drift together, n_eff {n_eff:.1f}"
        return ("leans" if rel > gain_rel else "unread"), f"{c.signal} is too noisy to call flat ({spread})"
    if follow_rel is not None and following.success_rate and upper >= follow_rel:
        return "unread", (f"{c.signal} is too coarse to tell whether it followed the rise ({rel:+.1%} +- "
                          f"{rel_se:.1%} of its scale; following it would add >= {follow_rel:.1%})")
    return ("ruled out" if follow_rel is not None and upper < follow_rel else "flat"), gain


def _pinned_at_floor(curve: Curve, values: np.ndarray) -> str | None:
    """Why a check cannot be read over a window where `_PINNED_SHARE` of its `values` sit exactly at 0 or at
    its lowest value (a correctness reward that pays 0 on nearly every batch, now and then a small penalty
    below it; an eval that solves nothing); None otherwise.  Such a check can neither fall nor show a
    gain it never registered: flat there says the task gives the policy nothing to be right about yet (a
    format learned first, the answers after, as the Unsloth GRPO notebooks train), not that the reward
    left it behind.  A continuous check never repeats a value exactly, so this reads only floors: a bound
    or a nothing-paid value the check's points pile up on."""
    if not len(values):
        return None
    for floor in dict.fromkeys((0.0, float(np.min(curve.values)))):
        at_floor = int(np.count_nonzero(values == floor))
        if at_floor >= _PINNED_SHARE * len(values):
            return (f"{curve.signal} sits at {floor:g} at {at_floor} of {len(values)} points: it registers no "
                    "success to follow or lose")
    return None


def growth_while_flat(growing: Curve, flat: list[Curve], *, min_growth_ratio, max_flat_gain_rel,
                      min_gain_se, edge_frac, min_steps, min_flat_points) -> Evidence | NotJudged | None:
    """`growing` ends at least `min_growth_ratio` x its start level (the levels of the first and last
    `edge_frac` of its step span) while no `flat` curve improves.  An eval improves when it gains more than
    `max_flat_gain_rel` of its own level and more than `min_gain_se` standard errors of that gain (corrected
    for autocorrelation and for the number of evals), or jumped that much as surely, or climbed that much with
    a rank trend as sure; an eval with fewer than `min_flat_points` points, or sitting at its floor, is not
    read.  A growth that is not sure (its two-phase trend under 3 standard errors and its edges not apart) is
    too noisy to tell, never a pass; a run shorter than `min_steps` steps is not judged.

    A growth is sure when its two-phase trend is 3 autocorrelation-corrected standard errors clear of 0
    (detectors/evidence.py) or, where one bend fits it badly (a staircase whose misfit reads as wander), every
    quartile of its last `edge_frac` lies above those of its first (_edges_apart). An eval's gain is held to
    more standard errors beside other evals (evidence.family_z: one of three flat evals clears 2 standard
    errors by chance 7% of the time); a jump is read from its first point to its later level; a rank trend is
    Mann-Kendall's (an eval that climbs in an S over 8 points fits no line, and its misfit reads as wander).
    Each eval is read from its last point at or before the growth's first step (_baseline_step); one at its
    floor (_pinned_at_floor) is not read."""
    g = growing.finite()
    if len(g.steps) < 10 or g.span < min_steps:
        return NotJudged(f"{g.signal} covers {g.span} steps in {len(g.steps)} points; growth is judged over "
                         f">= {min_steps:g} steps and 10 points")
    start_level = st.edge_level_by_steps(g.steps, g.values, edge_frac)
    end_level = st.edge_level_by_steps(g.steps, g.values, edge_frac, end=True)
    if start_level <= 0:
        return NotJudged(f"{g.signal} starts at {start_level:.3g}; growth is read as a ratio of a positive level")
    if end_level / start_level < min_growth_ratio:
        return None
    window = (float(g.steps[0]), float(g.steps[-1]))
    changes: dict[str, float] = {}
    pinned: list[str] = []
    improve_se = ev.family_z(min_gain_se, len(flat))      # one of several evals improving by chance
    for curve in flat:
        c = curve.finite()
        read = (_baseline_step(c.steps, window[0]), window[1])
        change, points = _level_change(c, *read)
        if points < min_flat_points:
            continue
        keep = (c.steps >= read[0]) & (c.steps <= read[1])
        inside = c.values[keep]
        if (why := _pinned_at_floor(c, inside)) is not None:
            pinned.append(why)
            continue
        base = max(abs(st.edge_level_by_steps(c.steps, c.values, edge_frac)), 1e-12)
        se = ev.window_change(c.steps, c.values, *read).se
        jumped = ev.level_gain(inside)
        if change / base > max_flat_gain_rel and change > improve_se * se:
            return None
        if jumped.sure(improve_se) and jumped.estimate / base > max_flat_gain_rel:
            return None
        if change / base > max_flat_gain_rel and ev.mann_kendall_z(inside) >= improve_se:
            return None
        changes[c.signal] = change
    growth = ev.hinge_change(g.steps, g.values)
    if changes and not growth.sure(_SURE_Z) and not _edges_apart(g.steps, g.values, edge_frac):
        return NotJudged.too_noisy(f"{g.signal} {start_level:.3g} -> {end_level:.3g} "
                                   f"({end_level / start_level:.1f}x), its trend {growth.text()}")
    if not changes:
        return NotJudged(f"{g.signal} grew {end_level / start_level:.1f}x, but no eval can tell whether it "
                         "improved: " + ("; ".join(pinned) if pinned else f"none has {min_flat_points:g} points"))
    onset = _onset(g, start_level, end_level)
    return Evidence(onset, int(g.steps[-1]), {
        "signal": g.signal, "key": g.key, "level_start": start_level, "level_end": end_level,
        "growth": end_level / start_level, "eval_changes": changes, "evals": _eval_summary(changes)})


def _baseline_step(steps: np.ndarray, start: float) -> float:
    """Where an eval is read from for a window that begins at `start`: its last point at or before it,
    as evidence.eval_improvement reads it (evals are sparse; verl's val_before_train scores step 0 while
    the train metrics begin at step 1), or `start` where it has none."""
    before = steps[steps <= start]
    return float(before[-1]) if len(before) else start


def _edges_apart(steps: np.ndarray, values: np.ndarray, edge_frac: float, min_points: int = 5) -> bool:
    """Every quartile apart: the lower quartile of the points in the last `edge_frac` of the step span
    stands above the upper quartile of those in the first, each edge holding `min_points` or more.  Weak
    on its own (two edges of 5 noise points part this way 10% of the time, of 10 points 1.7%), so it is
    read only beside a size bar that noise cannot reach: a level that doubled (growth_while_flat)."""
    head, tail = (values[edge] for edge in st.edge_masks(steps, edge_frac))
    if len(head) < min_points or len(tail) < min_points:
        return False
    return float(st.quantile(tail, 0.25)) > float(st.quantile(head, 0.75))


def _edges_shift_z(steps: np.ndarray, values: np.ndarray, edge_frac: float, min_side: int = 10) -> float:
    """How surely the points of the last `edge_frac` of the step span lie above those of the first, by
    ranks (evidence.rank_shift_z), each edge holding at least `min_side` points while the two take no
    more than half of them (10 a side is the least that can reach z 3: 60 logged points cut to 6 a side
    could never confirm a rise this way)."""
    head, tail = st.edge_masks(steps, edge_frac)
    side = min(min_side, len(steps) // 4)
    if head.sum() < side:
        head = np.arange(len(steps)) < side
    if tail.sum() < side:
        tail = np.arange(len(steps)) >= len(steps) - side
    return ev.rank_shift_z(values[head], values[tail])


def high_fraction_sustained(fraction: Curve, level: Curve | None = None, *, min_frac, min_stretch_steps,
                            min_stretch_frac_of_run, easy_level, hard_level) -> Evidence | NotJudged | None:
    """The running median (5 points) of `fraction` (0-1; the signals table rescales percentages) stays at or
    above `min_frac` for at least `min_stretch_steps` steps and `min_stretch_frac_of_run` of the run.  Where
    `level` lies on 0-1, the finding says whether the equal groups are mostly all-correct (its median at or
    above `easy_level`: data too easy) or mostly all-wrong (at or under `hard_level`: too hard); otherwise
    only that rewards were equal."""
    f = fraction.finite()
    need = max(min_stretch_steps, min_stretch_frac_of_run * f.span)
    if len(f.steps) < 5 or f.span < min_stretch_steps:
        return NotJudged(f"{f.signal} covers {f.span} steps in {len(f.steps)} points; a stretch of "
                         f"{min_stretch_steps:g} steps is needed")
    smooth = st.rolling_median(f.values, 5)
    stretch = st.first_long_run(f.steps, smooth >= min_frac, need)
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


def component_divergence(components: list[Curve], **params) -> Evidence | NotJudged | None:
    """A component of `components` not named for correctness (format, length, ...) climbs while those named
    for correctness (accuracy, exact match, verifier, ...) stay flat: the policy is being paid for form,
    length or format, not for being right (open-r1: format 0.48 -> 0.86 while accuracy 0.16 -> 0.06). Each
    other component is read as trend_divergence's rising curve, surely (`min_rise_z`) and largely
    (`min_rise_share` of its range), against the correctness components as its evals, in the components'
    shared unit: a correctness gain under `max_flat_gain_rel` of the other component's rise is flat.  A
    component whose large climb the data can neither confirm nor rule out leaves the rule too noisy to tell;
    without both kinds of component it is not judged."""
    checks = [c for c in components if is_correctness(c.signal)]
    others = [c for c in components if not is_correctness(c.signal)]
    if not checks or not others:
        return NotJudged("needs a correctness component and another component; the run logs "
                         + (", ".join(c.signal for c in components) or "none"))
    unjudged: list[NotJudged] = []
    judged = False
    for other in others:
        # the components are summands of one reward: their units are shared, so correctness's change is
        # read against the other component's rise (an offset on the reward moves neither)
        result = trend_divergence(other, checks, shared_units=True, **params)
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
    """A reward component that measures being right rather than form (by its name)."""
    return _CORRECTNESS.search(signal.split(":", 1)[-1]) is not None and not re.search(
        r"format|length|len\b|xml|tag|style|count", signal, re.IGNORECASE)


def fraction_climb_while_rising(fraction: Curve, rising: Curve, evals: list[Curve] | None = None, *,
                                min_end_frac, fail_end_frac, min_climb, min_rise_z, edge_frac,
                                min_steps) -> Evidence | NotJudged | Quiet | None:
    """`fraction` (responses cut off at the length cap) climbs by at least `min_climb` to end at or above
    `min_end_frac` (levels of the first and last `edge_frac` of its step span) while `rising` rises over the
    climb, its two-phase trend `min_rise_z` standard errors clear of 0 after the autocorrelation correction:
    the reward pays for length even though the cap keeps length from doubling.  Ending under `fail_end_frac`
    warns (the answers may need more room); at or above it nearly every answer is cut off: it fails.  A reward
    rise neither confirmed nor ruled out is too noisy to tell; an eval in `evals` that improved surely over
    the climb makes it a note (the longer answers are buying accuracy), not a finding; a run shorter than
    `min_steps` steps is not judged.

    The reward is read while the fraction climbs (from a tenth to nine tenths of its way), on a two-phase fit:
    a reward that climbs and then holds at the cap leaves a straight line's residuals autocorrelated by the
    misfit.  Seed 000: a loophole is reward up while the eval does not move."""
    f, r = fraction.finite(), rising.finite()
    if len(f.steps) < 10 or f.span < min_steps or len(r.steps) < 10:
        return NotJudged(f"{f.signal} covers {f.span} steps in {len(f.steps)} points; a climb is judged over "
                         f">= {min_steps:g} steps and 10 points")
    start = _start_level(f.steps, f.values, edge_frac)
    end = st.edge_level_by_steps(f.steps, f.values, edge_frac, end=True)
    if end < min_end_frac or end - start < min_climb:
        return None
    # the reward is read while the fraction climbs (from a tenth to nine tenths of its way), not over the
    # whole run: a length cap filled in the first steps while the reward rose later is not length paying
    smooth = st.rolling_median(f.values, _smooth_window(len(f.values)))
    lo = float(f.steps[int(np.argmax(smooth >= start + 0.1 * (end - start)))])
    hi = float(f.steps[int(np.argmax(smooth >= start + 0.9 * (end - start)))])
    if hi <= lo:
        hi = float(f.steps[-1])
    inside = (r.steps >= lo) & (r.steps <= hi)
    if inside.sum() < 10:
        return NotJudged(f"{f.signal} climbed {start:.0%} -> {end:.0%} within steps {int(lo)}-{int(hi)}, where "
                         f"{r.signal} has {int(inside.sum())} points: too few (10) to tell whether it paid for it")
    rv = r.values[inside]
    r_start = _start_level(r.steps[inside], rv, edge_frac)
    r_end = st.edge_level_by_steps(r.steps[inside], rv, edge_frac, end=True)
    trend = ev.hinge_change(r.steps[inside], rv, noise_floor=ev.binomial_floor(rv))
    if r_end <= r_start:
        return None
    if not trend.sure(min_rise_z):
        # a two-phase fit's rise is biased up on a flat curve (it takes the higher end): whether a rise is
        # ruled out is read on a straight line
        line = ev.linear_change(r.steps[inside], rv, noise_floor=ev.binomial_floor(rv))
        if line.high < _SMALL_SHARE * ev.smoothed_range(rv):
            return None         # the reward's rise is ruled out beyond a small share of its range: clean
        # the fraction climbed, and a rise of the reward beside it is neither confirmed nor ruled out
        return NotJudged.too_noisy(f"{f.signal} climbed {start:.0%} -> {end:.0%} while {r.signal} "
                                   f"moved {trend.text()} (needs {min_rise_z:g} standard errors, interval above 0)")
    onset = _onset(f, start, end)
    improved = ev.eval_improvement(evals, float(f.steps[0]), float(f.steps[-1]))
    if improved is not None:
        return Quiet(f"truncated responses {start:.0%} -> {end:.0%} while the reward rose, but {improved.text()}: "
                     "the longer answers are buying accuracy; raise the length cap rather than penalise length")
    return Evidence(onset, int(f.steps[-1]), {
        "signal": f.signal, "key": f.key, "frac_start": start, "frac_end": end, "reward_key": r.key,
        "reward_start": r_start, "reward_end": r_end, "reward_rise_z": trend.z, "reward_trend": trend.text()},
        severity=None if end >= fail_end_frac else "warn")


def rise_from_best(values: Curve, falling: Curve | None = None, reward: Curve | None = None, *,
                   min_rise_frac, min_points, min_points_after) -> Evidence | NotJudged | None:
    """`values` (a held-out loss) ends at least `min_rise_frac` above its best, read as the median of its last
    `min_points_after` points after the best, while `falling` (the training loss) keeps falling: the model is
    fitting its training data, not the task (overfitting). A training loss that rose too is a divergence, not
    this.  In an RL run (a `reward` is logged) the eval loss is the surrogate on eval prompts and is not
    judged, nor is a curve of fewer than `min_points` points."""
    if reward is not None:
        return NotJudged("an RL run's eval loss is the policy loss on eval prompts, not a held-out likelihood")
    v = values.finite()
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} points; {min_points:g} are needed")
    best = int(np.argmin(v.values))
    low = float(v.values[best])
    after = v.values[best + 1:]
    if low <= 0:
        return NotJudged(f"{v.signal} reaches {low:.3g}: a rise is read as a fraction of a positive loss")
    if len(after) < min_points_after:
        return None
    held = float(st.median(after[-int(min_points_after):]))
    if held < (1 + min_rise_frac) * low:
        return None
    if falling is not None:
        f = falling.finite()
        before = f.values[f.steps <= v.steps[best]]
        later = f.values[f.steps > v.steps[best]]
        if len(before) and len(later) and float(st.median(later[-3:])) >= float(st.median(before[-3:])):
            return None                       # the training loss rose too: a divergence, not overfitting
    return Evidence(int(v.steps[best]), int(v.steps[-1]), {
        "signal": v.signal, "key": v.key, "best": low, "best_step": int(v.steps[best]), "last": held,
        "rise": held / low - 1.0})


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
