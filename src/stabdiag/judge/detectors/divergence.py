"""A curve that moved while the independent checks beside it did not: the reward that rose while the evals
stayed (trend_divergence), the response that grew while they stayed (growth_while_flat).

Both read every curve the same model-free way (stats/change.py): its level over the last `edge_frac` of
the stretch minus its level over the first, with the standard error of that contrast under the curve's
own noise (read apart from its mean, stats/noise.py), and decide three ways - a finding (sure and
large), clean (a change that large ruled out), or too noisy to tell.  An eval is asked one question: did
it follow?  It followed when it surely gained at least what following would give it, it did not when its
gain, `sure_z` standard errors higher, still falls short of that (a non-inferiority test; a constant or
falling eval rules it out at any noise level), and otherwise the data cannot tell.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _stats as st
from ..stats.change import CLEAN, FINDING, Change, change_between, end_minus_start, thirds
from ..stats.evidence import family_z
from ._base import Curve, Evidence, NotJudged, _smooth_window

_PINNED_SHARE = 0.8      # a check whose points sit at 0 (or, moving, at its lowest value) this often registers nothing
_SMOOTH_POINTS = 20_000  # longer curves are smoothed on block means (a cost bound, not a verdict parameter)
_EDGE = 0.01             # success rates are read off the bounds: a rate logged as 0 or 1 on a few batches still moves


def trend_divergence(rising: Curve, flat: list[Curve], *, min_steps, min_rise_z, min_rise_share, min_rise_sd,
                     max_flat_gain_rel, max_flat_upper_rel, flat_se, edge_frac, min_flat_points,
                     min_covered_frac, min_tracking_gain, max_flat_share,
                     shared_units: bool = False) -> Evidence | NotJudged | None:
    """`rising` ends surely and largely above where it started while the `flat` curves did not follow it.
    The rise is the mean of `rising` over the last `edge_frac` of its step span minus the mean over the
    first; it is sure when its interval of `min_rise_z` standard errors (from the curve's own noise,
    autocorrelation and slow wander allowed for) clears 0, and large when it is at least `min_rise_share`
    of the curve's smoothed range and `min_rise_sd` of its noise's sd.  Each eval is read over the run
    (from its last point at or before the run's first step), its points after the reward had made half of
    its rise against those before, where they see `min_covered_frac` of the rise, `flat_se`
    standard errors either side (more beside other evals, for their number): it followed when it surely
    gained `max_flat_gain_rel` of its own scale, and did not when, that many standard errors higher, it
    stays under what following would give it - where the rise and the eval both lie on 0..1,
    `min_tracking_gain` of the reward's change between the same steps, carried over on the logit scale
    into the room left (its gain also under `max_flat_share` of that change and `max_flat_upper_rel` of
    its own scale), else `max_flat_upper_rel` of its scale.  Fires when a
    sure, large rise meets an eval that surely did not follow and none that did; not judged (too noisy
    to tell) when the rise or the evals cannot be decided, when no eval has `min_flat_points` points, or
    when the run is shorter than `min_steps` steps or the rise was done within its first `min_steps` (a
    format learned and a loophole found look alike)."""
    r = rising.finite()
    if len(r.steps) < 10 or r.span < min_steps:
        return NotJudged(f"{r.signal} covers {r.span} steps in {len(r.steps)} points; a rise is judged over "
                         f">= {min_steps:g} steps and 10 points")
    rise = end_minus_start(r.steps, r.values, edge_frac)
    smooth = _smoothed(r)
    bar, range_, sd = _size_bar(smooth, rise, min_rise_share, min_rise_sd)
    decision = rise.reading.decide(bar, min_rise_z)
    if decision == CLEAN:
        return None                     # a rise of the size looked for is ruled out: judged, and clean
    # the evals are read over the whole run, from their last point at or before its first step (a score
    # before training); where they stepped up is judged by the split at the rise's midpoint (_split)
    window = (float(r.steps[0]), float(r.steps[-1]))
    following = _Following(min_tracking_gain, rise.start_level) \
        if not shared_units and _on_unit_interval(rise.start_level, r.values) else None
    bars = _Bars(flat_se, family_z(flat_se, len(flat)), min_flat_points, max_flat_gain_rel, max_flat_upper_rel,
                 max_flat_share)
    against = _Against(r, smooth, rise.start_level, rise.estimate, min_covered_frac, following, shared_units)
    readings = [_read_eval(c, window, bars, against) for c in flat]
    if any(kind == "tracks" for kind, _, _ in readings):
        return None                     # an independent check followed the rise: learning
    done = _first_step_at(r.steps, smooth, rise.start_level + 0.8 * rise.estimate)
    if decision == FINDING and done - r.steps[0] < min_steps:
        return NotJudged(f"{r.signal} rose {rise.reading.text(min_rise_z)} by step {int(done)}, within its first "
                         f"{min_steps:g} steps: a format being learned cannot be told from a loophole found")
    flats = {name: change for kind, name, change in readings if kind == "flat"}
    said = (f"{r.signal} {rise.start_level:.3g} -> {rise.end_level:.3g} "
            f"({rise.reading.text(min_rise_z)})")
    if decision != FINDING:
        # a rise of the size looked for is neither confirmed nor ruled out, and no eval followed it
        moved = f", while evals moved {_eval_summary(flats)}" if flats else ""
        unread = [why for kind, why, _ in readings if kind != "flat"]
        return NotJudged.too_noisy(f"{said}: {rise.reading.size_unsure_text(bar, min_rise_z)} (the size looked for)"
                                   f"{moved}" + ("; " + "; ".join(unread) if unread else ""))
    if not flats:
        unread = [why for kind, why, _ in readings if kind != "flat"]
        return NotJudged.too_noisy(f"{said}, but no independent check could be read against it: "
                                   + ("; ".join(unread) if unread else "none logged"))
    leaning = [why for kind, why, change in readings if kind == "undecided" and change is not None]
    if leaning:
        # one check flat, another up by as much as following would give it but not surely: the checks
        # disagree, and the flat one alone does not show that the reward left them behind
        return NotJudged.too_noisy(f"{said} while evals moved {_eval_summary(flats)}, but " + "; ".join(leaning))
    onset = _first_step_at(r.steps, smooth, rise.start_level + 0.25 * rise.estimate)
    low, high = rise.reading.low(min_rise_z), rise.reading.high(min_rise_z)
    return Evidence(int(onset), int(r.steps[-1]), {
        "signal": r.signal, "key": r.key, "level_start": rise.start_level, "level_peak": rise.end_level,
        "rise": rise.estimate, "rise_low": low, "rise_high": high, "rise_z": rise.reading.z,
        "sure": rise.reading.interval_text(min_rise_z), "rise_share": rise.estimate / range_ if range_ > 0 else 1.0,
        "rise_sd": rise.estimate / sd if sd > 0 else math.inf, "eval_changes": flats, "evals": _eval_summary(flats)})


def growth_while_flat(growing: Curve, flat: list[Curve], *, min_growth_ratio, max_flat_gain_rel,
                      max_flat_upper_rel, min_gain_se, edge_frac, min_steps,
                      min_flat_points) -> Evidence | NotJudged | None:
    """`growing` ends at least `min_growth_ratio` x its start level, surely (its end-minus-start change
    `min_gain_se` standard errors clear of 0), while the `flat` curves did not improve: none surely gained
    `max_flat_gain_rel` of its own scale, and one, `min_gain_se` standard errors higher, stays under
    `max_flat_upper_rel` of it.  The levels are the means over the first and last `edge_frac` of the step
    span; each eval with `min_flat_points` points or more is read over the same stretch, from its last
    point at or before it, its points after the growth was half done against those before.  A growth or
    an eval the data cannot decide is too noisy to tell, never a pass; a run shorter than `min_steps`
    steps is not judged."""
    g = growing.finite()
    if len(g.steps) < 10 or g.span < min_steps:
        return NotJudged(f"{g.signal} covers {g.span} steps in {len(g.steps)} points; growth is judged over "
                         f">= {min_steps:g} steps and 10 points")
    growth = end_minus_start(g.steps, g.values, edge_frac)
    if growth.start_level <= 0:
        return NotJudged(f"{g.signal} starts at {growth.start_level:.3g}; growth is read as a ratio of a "
                         "positive level")
    decision = growth.reading.decide((min_growth_ratio - 1.0) * growth.start_level, min_gain_se)
    if decision == CLEAN:
        return None
    window = (float(g.steps[0]), float(g.steps[-1]))
    bars = _Bars(min_gain_se, family_z(min_gain_se, len(flat)), min_flat_points, max_flat_gain_rel,
                 max_flat_upper_rel)
    smooth = _smoothed(g)
    against = _Against(g, smooth, growth.start_level, growth.estimate, 0.0, None, False)
    readings = [_read_eval(c, window, bars, against) for c in flat]
    if any(kind == "tracks" for kind, _, _ in readings):
        return None
    flats = {name: change for kind, name, change in readings if kind == "flat"}
    ratio = growth.end_level / growth.start_level
    said = f"{g.signal} {growth.start_level:.3g} -> {growth.end_level:.3g} ({ratio:.1f}x)"
    if decision != FINDING:
        if flats:
            return NotJudged.too_noisy(f"{said}, its change {growth.reading.text(min_gain_se)}")
        return None
    if not flats:
        unread = [why for kind, why, _ in readings if kind != "flat"]
        return NotJudged(f"{g.signal} grew {ratio:.1f}x, but no eval can tell whether it improved: "
                         + ("; ".join(unread) if unread else "none logged"))
    onset = _first_step_at(g.steps, smooth, growth.start_level + 0.25 * growth.estimate)
    return Evidence(int(onset), int(g.steps[-1]), {
        "signal": g.signal, "key": g.key, "level_start": growth.start_level, "level_end": growth.end_level,
        "growth": ratio, "eval_changes": flats, "evals": _eval_summary(flats)})


def _smoothed(curve: Curve) -> np.ndarray:
    """The curve's running median (over up to 21 points): where it stands, for its range, the steps it
    reaches a level at, and how far along its move an eval's points are.  A curve of more than
    `_SMOOTH_POINTS` points is smoothed on block means and read back at every point (a running median of a
    million points is a tenth of a second and says no more)."""
    values = curve.values
    if len(values) <= _SMOOTH_POINTS:
        return st.rolling_median(values, _smooth_window(len(values)))
    block = -(-len(values) // _SMOOTH_POINTS)
    whole = len(values) // block * block
    means = values[:whole].reshape(-1, block).mean(axis=1)
    coarse = st.rolling_median(means, _smooth_window(len(means)))
    return np.interp(np.arange(len(values)), np.arange(len(means)) * block + (block - 1) / 2, coarse)


def _size_bar(smooth: np.ndarray, rise: Change, min_share: float, min_sd: float) -> tuple[float, float, float]:
    """(the size a rise must reach, the curve's smoothed range, its noise's sd): `min_share` of the range
    and `min_sd` noise sds, the sd read between the two windows' centres (a noise that wanders slowly is
    as wide as it wanders over that stretch)."""
    range_ = float(np.ptp(smooth))
    noise = rise.noise
    lag = max(len(smooth) - (rise.start_points + rise.end_points) // 2, 1)
    sd = noise.sd_over(lag // noise.block or 1) if noise is not None else 0.0
    return max(min_share * max(range_, abs(rise.estimate)), min_sd * sd), range_, sd


def _split(against: _Against | None, steps: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]] | str:
    """The eval's points before and after the rising curve had made half of its move, as index ranges;
    or why they cannot be split so (they see too little of the move, or all of it lies on one side)."""
    if against is None or not against.rise > 0:
        return thirds(len(steps))
    progress = against.progress(steps)
    seen = float(np.max(progress) - np.min(progress))
    if seen < against.covered:
        return f"sees {max(seen, 0.0):.0%} of the rise (needs {against.covered:.0%})"
    after = int(np.argmax(progress > 0.5)) if (progress > 0.5).any() else len(steps)
    if after == 0 or after == len(steps):
        return "has no point on one side of the rise's midpoint"
    return (0, after), (after, len(steps))


def _change_over(rising: Curve, steps: np.ndarray, first: tuple[int, int], last: tuple[int, int]) -> float:
    """The rising curve's mean over the steps of the eval's last window minus its mean over those of its
    first (each at least the rising curve's nearest point)."""
    def level(lo: float, hi: float) -> float:
        at = (rising.steps >= lo) & (rising.steps <= hi)
        if not at.any():
            at = np.zeros(len(rising.steps), dtype=bool)
            at[min(int(np.searchsorted(rising.steps, lo)), len(rising.steps) - 1)] = True
        return float(np.mean(rising.values[at]))

    return level(steps[last[0]], steps[last[1] - 1]) - level(steps[first[0]], steps[first[1] - 1])


def _first_step_at(steps: np.ndarray, smooth: np.ndarray, level: float) -> float:
    """The first step at which the smoothed curve reaches `level` (the last step where it never does)."""
    hit = np.flatnonzero(smooth >= level)
    return float(steps[hit[0]] if len(hit) else steps[-1])


class _Bars(NamedTuple):
    """How an eval is read: `sure_z` standard errors either side for "did not follow", `family_z` for "did
    follow" (one of several evals rises by chance more often than one), `min_points` to read it at all,
    `gain_rel` of its own scale a gain, `upper_rel` of it the most a flat eval may have gained, and
    `flat_share` of the reward's change the most it may have gained in their shared unit."""

    sure_z: float
    family_z: float
    min_points: float
    gain_rel: float
    upper_rel: float
    flat_share: float = 1.0


class _Against(NamedTuple):
    """The curve an eval is read beside (its `smooth` running median, which moved by `rise` from
    `start_level`): the eval's points are split where that curve had made half of its move, and the curve's
    change between the two parts is what the eval may follow (`following`, where both share the 0..1 unit
    of an accuracy, or `shared_units`: components of one reward); an eval whose points see under `covered`
    of the move is not read."""

    rising: Curve
    smooth: np.ndarray
    start_level: float
    rise: float
    covered: float
    following: "_Following | None"
    shared_units: bool

    def progress(self, steps: np.ndarray) -> np.ndarray:
        """How far along its move the curve was at `steps` (0 at its start level, 1 at its end level)."""
        return (np.interp(steps, self.rising.steps, self.smooth) - self.start_level) / self.rise


def _read_eval(curve: Curve, window: tuple[float, float], bars: _Bars,
               against: _Against | None) -> tuple[str, str, float | None]:
    """("tracks" | "flat" | "undecided" | "unread", the eval's name or why it is not decided, its change or
    None).  The eval's change is the mean of its points after the rising curve had made half of its move
    minus the mean of those before (beside no such curve, its last third against its first: a sparse
    eval's edges would hold a point or two), and what following would give is read on the rising curve
    between the same steps.  It tracks when it surely gained `gain_rel` of its scale; it
    is flat when its gain, `sure_z` standard errors higher, stays under what following would give, else
    under `upper_rel` of its scale.  An undecided reading carries its change when that reached the flat
    bar (the checks lean toward following), None otherwise."""
    c = curve.finite()
    start = _baseline_step(c.steps, window[0])
    inside = (c.steps >= start) & (c.steps <= window[1])
    if inside.sum() < bars.min_points:
        return "unread", f"{c.signal} has {int(inside.sum())} point(s) over the stretch (needs {bars.min_points:g})", \
            None
    steps, values = c.steps[inside], c.values[inside]
    pinned = _pinned_at_floor(c, values)
    if pinned is not None:
        return "unread", pinned, None
    split = _split(against, steps)
    if isinstance(split, str):
        return "unread", f"{c.signal} {split}", None
    first, last = split
    rise = _change_over(against.rising, steps, first, last) if against is not None else None
    change = change_between(values, first, last, cautious=False)
    level = max(float(st.median(np.abs(values))), 1e-12)
    room = _room(level, c.values)
    shared = against is not None and against.shared_units and rise
    scale = rise if shared else (min(level, room) if room is not None and room > 0 else level)
    following = against.following if against is not None and room is not None else None
    # the halves see part of the move (half of a straight ramp's): bars on the eval's own scale, set for
    # the whole move, are read at that part, as what following would give is read between the same steps;
    # in a shared unit the scale is already the move between those steps
    seen = min(max(rise / against.rise, against.covered, 1e-9), 1.0) if against is not None and rise is not None \
        and against.rise > 0 and not shared else 1.0
    flat_bar = following.gain(rise, room, change.start_level) if following is not None \
        else bars.upper_rel * scale * seen
    reading = change.reading
    tracks = reading.sure(bars.family_z) and change.estimate >= bars.gain_rel * scale * seen
    if following is not None:
        # in the reward's own unit the gain following would give is known: an eval that rules it out did
        # not follow, though it moved surely by a little (+0.035 beside a reward up 0.5) - unless that
        # little is large on its own scale (an eval at 0.05 gaining 0.02 moved)
        flat = reading.high(bars.sure_z) < flat_bar and change.estimate < bars.upper_rel * scale * seen \
            and change.estimate < bars.flat_share * rise
        if flat or tracks:
            return ("flat" if flat else "tracks"), c.signal, change.estimate
    elif tracks or reading.high(bars.sure_z) < flat_bar:
        return ("tracks" if tracks else "flat"), c.signal, change.estimate
    why = (f"{c.signal} cannot tell whether it followed ({reading.text(bars.sure_z)}; following would add "
           f"{flat_bar:.3g})")
    return "undecided", why, change.estimate if change.estimate >= flat_bar else None


class _Following(NamedTuple):
    """How an eval on 0..1 that followed a reward on 0..1 would move: by `share` of the reward's `rise` at
    least, no more than that share of the room the eval has left, and less for an eval far harder or easier
    than the reward: on a logistic item-response curve (Rasch; LLM benchmark accuracies are logistic in a
    shared capability, Ruan et al. 2024, "Observational Scaling Laws") the rise is a skill gain of
    logit(top) - logit(start), and an eval sharing it moves from e0 to sigmoid(logit(e0) + that gain).  A
    reward up 0.19 -> 0.31 moves an AIME-like eval at 0.043 by +0.036, not +0.12."""

    share: float
    reward_start: float

    def gain(self, rise: float, room: float, eval_start: float) -> float:
        """What an eval starting at `eval_start` with `room` left gains when the reward rises by `rise`."""
        rise = max(rise, 0.0)
        skill = _logit(self.reward_start + rise) - _logit(self.reward_start)
        start = _logit(eval_start)
        carried = _sigmoid(start + skill) - _sigmoid(start)
        return self.share * min(rise, room, carried)


def _logit(p: float) -> float:
    q = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(q / (1.0 - q))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _on_unit_interval(level: float, values: np.ndarray) -> bool:
    """The curve lies on 0..1 (a rate)."""
    return bool(len(values)) and float(np.min(values)) >= 0.0 and float(np.max(values)) <= 1.0 and 0 <= level <= 1


def _room(level: float, values: np.ndarray) -> float | None:
    """The room a 0..1 curve has left above `level`; None for a curve not on 0..1."""
    return 1.0 - level if _on_unit_interval(level, values) else None


def _baseline_step(steps: np.ndarray, start: float) -> float:
    """Where an eval is read from for a stretch that begins at `start`: its last point at or before it
    (evals are sparse; verl's val_before_train scores step 0 while the train metrics begin at step 1), or
    `start` where it has none."""
    before = steps[steps <= start]
    return float(before[-1]) if len(before) else start


def _pinned_at_floor(curve: Curve, values: np.ndarray) -> str | None:
    """Why a check cannot be read where `_PINNED_SHARE` of its `values` sit exactly at 0, or at its lowest
    value while it moves (a correctness reward that pays 0 on nearly every batch; an eval that solves
    nothing): it can neither fall nor show a gain it never registered.  A check constant at any other level
    is read: an eval that does not move is the plainest evidence that it did not follow."""
    if not len(values):
        return None
    moving = float(np.max(curve.values)) > float(np.min(curve.values))
    for floor in dict.fromkeys((0.0, float(np.min(curve.values)) if moving else 0.0)):
        at_floor = int(np.count_nonzero(values == floor))
        if at_floor >= _PINNED_SHARE * len(values):
            return (f"{curve.signal} sits at {floor:g} at {at_floor} of {len(values)} points: it registers no "
                    "success to follow or lose")
    return None


def _eval_summary(changes: dict[str, float]) -> str:
    return ", ".join(f"{name} {change:+.3g}" for name, change in changes.items())
