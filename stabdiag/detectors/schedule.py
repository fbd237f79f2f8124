"""Learning-rate schedule detectors: a schedule that reached ~0 long before the run ended.

A learning rate is read as a fraction of its own peak, never in absolute units (1e-6 is a normal RL
rate and a dead pretraining one).  Warm-up from 0 comes before the peak and is never read; a cosine or
linear decay to 0 spends only its last few percent under 1% of the peak (cosine: the last 6.4%,
linear: the last 1%), so a collapse has to hold for a large share of the run to count.  An lr logged
as exactly 0 at every step is not a schedule at all: some verl engines log `actor/lr` as 0 while the
run trains (../shared/real_healthy/verl_baseline_ext), so that is not judged.
"""

from __future__ import annotations

import numpy as np

from .. import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged


def lr_collapsed_early(lr: Curve, *, collapse_frac, min_after_frac_of_run,
                       min_after_steps) -> Evidence | NotJudged | None:
    """After its peak the learning rate falls to <= `collapse_frac` x that peak and stays there for a
    stretch of at least `min_after_frac_of_run` of the run (and `min_after_steps`): the optimizer has
    stopped updating while the run still spends compute."""
    v = lr.finite()
    if len(v.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{v.signal} has {len(v.values)} finite point(s); {MIN_CLEAN_POINTS} are needed to "
                         "read a schedule")
    if float(np.min(v.values)) < 0:
        return NotJudged(f"{v.key} has negative values: not a learning rate")
    # the peak of a 3-point running median: one stray write does not become the schedule's peak
    smooth = st.rolling_median(v.values, 3)
    peak_i = int(np.argmax(smooth))
    peak = float(smooth[peak_i])
    if peak <= 0:
        return NotJudged(f"{v.key} is 0 at every logged step while the run trains: a logging artefact "
                         "(some verl engines log actor/lr as 0), not a schedule")
    need = max(min_after_steps, min_after_frac_of_run * v.span)
    collapsed = smooth <= collapse_frac * peak
    collapsed[:peak_i + 1] = False                       # warm-up from 0 comes before the peak
    for a, b in st.true_runs(collapsed):
        if v.steps[b] - v.steps[a] >= need:
            level = float(np.median(v.values[a:b + 1]))
            return Evidence(int(v.steps[a]), int(v.steps[b]), {
                "signal": v.signal, "key": v.key, "peak": peak, "peak_step": int(v.steps[peak_i]),
                "level": level, "frac_of_peak": level / peak,
                "stretch": int(v.steps[b] - v.steps[a]),
                "run_frac": float(v.steps[b] - v.steps[a]) / max(v.span, 1)})
    return None
