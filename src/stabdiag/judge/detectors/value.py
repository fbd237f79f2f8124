"""Value-head detectors: a PPO critic whose fit is getting worse instead of better.

Two readings, each scale-free.  The value loss (a squared error, so never negative) is read against its
own early level: a critic that learns brings it down or holds it, one that diverges sends it to several
times where it started and keeps it there.  The explained variance (1 - Var(returns - values) /
Var(returns)) has a meaning of its own: near 1 the critic predicts the returns, at 0 it does no better
than their mean, below 0 worse; one that had learned (above `min_learned_explained_var`) and then stays
below `max_explained_var` has lost the returns.  Either alone warns; both together fail.  The early
level is the median of the loss's first `early_frac` of steps, warm-up included: a critic whose warm-up
descent fills more than half that window reads a higher early level, and a later climb to several times
its settled level can stay under `min_loss_ratio` x it (the rule's known limits).
"""

from __future__ import annotations

import numpy as np

from ... import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged

_Half = tuple[int, int, str] | NotJudged | None       # (start, end, what was seen) | why not | clean


def value_head_diverging(value_loss: Curve | None = None, explained_var: Curve | None = None, *,
                         min_loss_ratio, early_frac, min_stretch_steps, min_stretch_frac_of_run,
                         min_learned_explained_var, max_explained_var) -> Evidence | NotJudged | None:
    """`value_loss` holds at or above `min_loss_ratio` x its early level (the first `early_frac` of its step
    span), or `explained_var`, having reached `min_learned_explained_var`, then stays below
    `max_explained_var`, for at least `min_stretch_steps` steps and `min_stretch_frac_of_run` of the run
    (5-point running medians): the critic's fit is getting worse.  One reading warns; both fail."""
    stretch = (min_stretch_steps, min_stretch_frac_of_run)
    halves = []
    if value_loss is not None:
        halves.append(_loss_climb(value_loss, min_loss_ratio, early_frac, *stretch))
    if explained_var is not None:
        halves.append(_explained_var_lost(explained_var, min_learned_explained_var, max_explained_var, *stretch))
    seen = [h for h in halves if isinstance(h, tuple)]
    if not seen:
        reasons = [h.reason for h in halves if isinstance(h, NotJudged)]
        if halves and len(reasons) < len(halves):
            return None                  # at least one reading judged the critic and found it healthy
        return NotJudged("; ".join(reasons) or "needs a value loss or an explained variance")
    start, end = min(h[0] for h in seen), max(h[1] for h in seen)
    first = value_loss if value_loss is not None else explained_var
    return Evidence(start, end, {"signal": first.signal, "what": "; ".join(h[2] for h in seen),
                                 "readings": len(seen)},
                    severity=None if len(seen) == 2 else "warn")


def _need(curve: Curve, min_stretch_steps: float, min_stretch_frac_of_run: float) -> float:
    return max(min_stretch_steps, min_stretch_frac_of_run * curve.span)


def _loss_climb(curve: Curve, min_ratio: float, early_frac: float, min_stretch_steps: float,
                min_stretch_frac_of_run: float) -> _Half:
    v = curve.finite()
    if len(v.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{v.signal} has {len(v.values)} finite point(s); {MIN_CLEAN_POINTS} are needed")
    if float(np.min(v.values)) < 0:
        # DeepSpeed-Chat's cri_loss goes below 0: whatever it is, it is not a squared error to read as one
        return NotJudged(f"{v.key} goes negative ({float(np.min(v.values)):.3g}): not a squared error, so its "
                         "level is not read")
    early = st.edge_level_by_steps(v.steps, v.values, early_frac)
    if early <= 0:
        return NotJudged(f"{v.key} starts at {early:.3g}: no positive level to compare a climb with")
    smooth = st.rolling_median(v.values, 5)
    need = _need(v, min_stretch_steps, min_stretch_frac_of_run)
    held = _held(v, st.first_long_run(v.steps, smooth >= min_ratio * early, need))
    if held is None:
        return None
    start, end, level = held
    return start, end, (f"{v.key} {early:.3g} -> {level:.3g} ({level / early:.1f}x its early level) over steps "
                        f"{start}-{end}")


def _explained_var_lost(curve: Curve, learned: float, lost: float, min_stretch_steps: float,
                        min_stretch_frac_of_run: float) -> _Half:
    e = curve.finite()
    if len(e.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{e.signal} has {len(e.values)} finite point(s); {MIN_CLEAN_POINTS} are needed")
    if float(np.max(e.values)) > 1.0 + 1e-6:
        return NotJudged(f"{e.key} reaches {float(np.max(e.values)):.3g}: an explained variance is at most 1")
    smooth = st.rolling_median(e.values, 5)
    above = np.flatnonzero(smooth >= learned)
    if not len(above):
        return None                      # never learned: not a divergence (known limit)
    best_i = int(np.argmax(smooth))
    need = _need(e, min_stretch_steps, min_stretch_frac_of_run)
    below = smooth < lost
    below[:above[0] + 1] = False         # the fall comes after the critic had learned
    held = _held(e, st.first_long_run(e.steps, below, need))
    if held is None:
        return None
    start, end, level = held
    return start, end, (f"{e.key} {float(smooth[best_i]):.2f} (step {int(e.steps[best_i])}) -> {level:.2f} over "
                        f"steps {start}-{end}")


def _held(curve: Curve, stretch: tuple[int, int] | None) -> tuple[int, int, float] | None:
    """A stretch's first and last steps and the median level the curve holds over it (None for none)."""
    if stretch is None:
        return None
    a, b = stretch
    return int(curve.steps[a]), int(curve.steps[b]), float(st.median(curve.values[a:b + 1]))
