"""Numeric-update detectors that read levels, not spikes: the first NaN/Inf (and whether the run came
back from it), updates frozen at an exact value, and a blow-up in the part of a resumed run that was rolled
back.  A loss that climbs back from its best is excursions.py's."""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged

CHAIN = ("reward", "logprob_delta", "loss", "grad_norm")   # seed 002's finite-status chain, in order
_UPDATE_SIGNALS = ("loss", "grad_norm")                       # what a layer-3 "finite" verdict rests on


def first_nonfinite(**curves: Curve | None) -> Evidence | NotJudged | None:
    """The first step at which any curve holds NaN or Inf, and which one turned first (ties follow
    the reward -> logprob -> loss -> grad-norm chain).  Non-finite values the run came back from (a
    loss-scale overflow, a skipped step) only warn; one it does not come back from fails.  A clean
    answer needs the loss or the grad norm: finite rewards say nothing about the update."""
    firsts: dict[str, tuple[int, float, str, int, bool]] = {}
    for curve in curves.values():
        if curve is None:
            continue
        bad = ~np.isfinite(curve.values)
        if bad.any():
            i = int(np.argmax(bad))
            persistent = st.persistent_nonfinite_index(curve.values) is not None
            firsts[curve.signal] = (int(curve.steps[i]), float(curve.values[i]), curve.key, int(bad.sum()),
                                    persistent)
    if not firsts:
        update = [c for name in _UPDATE_SIGNALS if (c := curves.get(name)) is not None]
        if not update:
            return NotJudged("no loss or grad norm logged: finite rewards say nothing about the update")
        if max(len(c.values) for c in update) < MIN_CLEAN_POINTS:
            return NotJudged(f"{max(len(c.values) for c in update)} logged update point(s); "
                             f"{MIN_CLEAN_POINTS} finite ones are needed to call the update finite")
        return None
    order = sorted(firsts, key=lambda s: (firsts[s][0], CHAIN.index(s) if s in CHAIN else len(CHAIN)))
    first = order[0]
    step, value, key, count, _ = firsts[first]
    then = ", ".join(f"{s} at {firsts[s][0]}" for s in order[1:]) or "no other signal"
    persistent = any(v[4] for v in firsts.values())
    return Evidence(step, max(v[0] for v in firsts.values()), {
        "signal": first, "key": key, "step": step, "kind": "NaN" if math.isnan(value) else "Inf",
        "count": count, "then": then, "first_steps": {s: firsts[s][0] for s in order},
        "recovered": "did not recover" if persistent else "the run came back: finite again right after"},
        severity=None if persistent else "warn")


def frozen_values(grad_norm: Curve | None = None, loss: Curve | None = None, lr: Curve | None = None,
                  reward: Curve | None = None, *, min_frozen_steps, min_frozen_frac_of_run,
                  min_points) -> Evidence | NotJudged | None:
    """The update stopped: `grad_norm` holds exactly one value (0, or a constant) over at least `min_points`
    logged points spanning `min_frozen_steps` steps and `min_frozen_frac_of_run` of the run (a stretch that
    runs to the log's end, `min_frozen_steps` alone: the run is frozen now, however long it ran before), or,
    in a supervised run with no grad norm logged, `loss` holds a nonzero constant so.  A stretch where `lr` is
    0 is a pause on purpose.  In an RL run (a `reward` is logged) the loss is a surrogate that TRL prints
    rounded to 4 decimals, so only the grad norm is read."""
    target = grad_norm if grad_norm is not None else loss
    if target is None:
        return NotJudged("needs grad_norm or loss")
    if grad_norm is None and reward is not None:
        return NotJudged("an RL run's loss is a rounded surrogate that repeats; the grad norm is needed")
    v = target.finite()
    if len(v.values) < min_points:
        return NotJudged(f"{v.signal} has {len(v.values)} points; {min_points:g} are needed")
    need = max(min_frozen_steps, min_frozen_frac_of_run * v.span)
    same = np.concatenate([[False], np.diff(v.values) == 0])
    for a, b in st.true_runs(same):
        a -= 1                                     # the run of equal values starts one point earlier
        # the share of the run is asked of a stretch the run came out of; one still frozen at the log's end
        # is the run's state (issue 13's 76 zero steps counted only because that log was 80 steps long)
        at_end = b == len(v.values) - 1
        if b - a + 1 < min_points or v.steps[b] - v.steps[a] < (min_frozen_steps if at_end else need):
            continue
        value = float(v.values[a])
        if target is loss and value == 0.0:
            continue
        if lr is not None and _lr_is_zero(lr, int(v.steps[a]), int(v.steps[b])):
            continue
        return Evidence(int(v.steps[a]), int(v.steps[b]), {
            "signal": v.signal, "key": v.key, "value": value, "points": int(b - a + 1),
            "steps": int(v.steps[b] - v.steps[a])})
    if len(v.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{v.signal} has {len(v.values)} points; {MIN_CLEAN_POINTS} are needed to call the "
                         "update live")
    return None


def _lr_is_zero(lr: Curve, lo: int, hi: int) -> bool:
    inside = (lr.steps >= lo) & (lr.steps <= hi) & np.isfinite(lr.values)
    return bool(inside.any()) and float(st.median(np.abs(lr.values[inside]))) == 0.0


def superseded_blowup(loss: Curve | None = None, grad_norm: Curve | None = None, *,
                      min_ratio, min_jump_sd) -> Evidence | NotJudged | None:
    """A resumed run's rolled-back segment blew up: a write of `loss` or `grad_norm` that a restart replaced
    was NaN/Inf, or `min_ratio` x the value the rerun wrote at that step and `min_jump_sd` of the curve's
    robust point-to-point sds above it (an RL loss near 0 is 18x its rerun's value by batch noise alone). The
    restart hid it; the cause is still there."""
    present = [c for c in (loss, grad_norm) if c is not None]
    if not present:
        return NotJudged("needs loss or grad_norm")
    if not any(len(c.superseded_steps) for c in present) and max(len(c.values) for c in present) < MIN_CLEAN_POINTS:
        return NotJudged("too few points to say nothing was rolled back")
    for curve in present:
        if not len(curve.superseded_steps):
            continue
        sup_steps, sup = curve.superseded_steps, curve.superseded_values
        at = np.searchsorted(curve.steps, sup_steps).clip(0, len(curve.steps) - 1)
        kept = np.where(curve.steps[at] == sup_steps, curve.values[at], np.nan)
        noise = st.noise_sd(curve.finite().values)
        bad = ~np.isfinite(sup) | (np.isfinite(kept) & (kept > 0) & (sup >= min_ratio * np.abs(kept))
                                   & (sup - kept >= min_jump_sd * noise))
        if bad.any():
            i = int(np.argmax(bad))
            return Evidence(int(sup_steps[i]), int(sup_steps.max()), {
                "signal": curve.signal, "key": curve.key, "step": int(sup_steps[i]),
                "value": float(sup[i]), "kind": "NaN" if math.isnan(sup[i]) else
                ("Inf" if not math.isfinite(sup[i]) else f"{sup[i] / abs(kept[i]):.0f}x the rerun's value"),
                "restart": int(sup_steps.min()), "rolled_back": int(len(np.unique(sup_steps)))})
    return None


_SYSTEM_ENDINGS = {"hardware": "a GPU hardware fault", "oom": "out of memory",      # kind -> what happened
                   "collective": "a collective / worker failure", "killed": "killed by a signal",
                   "exception": "an exception"}


def ended_on_nonfinite(ending=None) -> Evidence | None:
    """The run died on a NaN/Inf (a sampling error on NaN probabilities, a "loss is nan" guard): a
    numeric failure at its last logged step, whatever the logged metrics still showed."""
    if ending is None or ending.kind != "nonfinite":
        return None
    step = ending.step if ending.step is not None else 0
    return Evidence(step, step, {"message": ending.message, "source": ending.source, "step": step})


def ended_on_failure(ending=None) -> Evidence | None:
    """The job died of something other than a NaN: a GPU hardware fault, out of memory, a collective timeout
    or lost worker, a kill signal, an exception (as the run's `ending` reads it from the console's tail or the
    tracker's exit status). The logs stop; whatever they showed is not the whole story."""
    what = _SYSTEM_ENDINGS.get(ending.kind) if ending is not None else None
    if what is None:
        return None
    step = ending.step if ending.step is not None else 0
    return Evidence(step, step, {"message": ending.message, "source": ending.source, "step": step, "what": what})
