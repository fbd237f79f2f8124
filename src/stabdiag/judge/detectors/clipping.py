"""Clip-fraction detectors: the share of tokens the PPO clip cuts off, held high over a stretch.

A clipped token contributes no gradient (the min() of the clipped surrogate is flat there), so a clip
fraction that stays high means most of each update is spent pushing tokens that are already outside
the trust region, and the rest of the batch moves the policy: updates too large for the clip range.
The fraction is a 0-1 quantity with a meaning of its own, so it is judged on an absolute level (the
signals table rescales a percentage first); one high point, or a high first step, is not a stretch.
"""

from __future__ import annotations

import numpy as np

from ... import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged


def fraction_held_high(fraction: Curve, *, high_frac, min_stretch_steps,
                       min_stretch_frac_of_run) -> Evidence | NotJudged | None:
    """The running median (5 points) of `fraction`, a 0-1 share, stays at or above `high_frac` for at least
    `min_stretch_steps` steps and `min_stretch_frac_of_run` of the run; values outside 0-1 are not judged."""
    f = fraction.finite()
    if len(f.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{f.signal} has {len(f.values)} finite point(s); {MIN_CLEAN_POINTS} are needed")
    if float(np.min(f.values)) < 0 or float(np.max(f.values)) > 1.0 + 1e-6:
        return NotJudged(f"{f.key} runs {float(np.min(f.values)):.3g}-{float(np.max(f.values)):.3g}: not a 0-1 "
                         "fraction, so its level is not read")
    need = max(min_stretch_steps, min_stretch_frac_of_run * f.span)
    if f.span < need:
        return NotJudged(f"{f.signal} covers {f.span} steps; a stretch of {need:g} steps is needed")
    smooth = st.rolling_median(f.values, 5)
    best = None
    for a, b in st.true_runs(smooth >= high_frac):
        if f.steps[b] - f.steps[a] >= need and (best is None or b - a > best[1] - best[0]):
            best = (a, b)
    if best is None:
        return None
    a, b = best
    return Evidence(int(f.steps[a]), int(f.steps[b]), {
        "signal": f.signal, "key": f.key, "fraction": float(st.median(f.values[a:b + 1])),
        "peak": float(np.max(f.values[a:b + 1])), "threshold": high_frac,
        "stretch": int(f.steps[b] - f.steps[a]), "run_frac": float(f.steps[b] - f.steps[a]) / max(f.span, 1)})
