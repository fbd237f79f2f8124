"""The sentences of the sample forensics: one per feature effect and a headline per finding."""

from __future__ import annotations

import math


def _amount(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def _p(p: float) -> str:
    """A p value as read: the normal tail underflows to 0 far out, which is not a probability of 0."""
    return "p < 1e-16" if p < 1e-16 else f"p {p:.2g}"


def effect(e) -> str:
    """"'certainly' in 94% of high-reward answers vs 12% of low ones; 19% early -> 97% late" (a share) or
    "characters 2.1x in high-reward answers (118 vs 56); 61 early -> 120 late" (an amount)."""
    if math.isfinite(e.high) and math.isfinite(e.low):
        if e.binary:
            reward = f"{e.label}: {e.high:.0%} of high-reward answers vs {e.low:.0%} of low ones"
        else:
            ratio = e.high / e.low if e.low else math.inf
            times = f"{ratio:.1f}x" if math.isfinite(ratio) else "more"
            reward = f"{e.label}: {times} in high-reward answers ({_amount(e.high)} vs {_amount(e.low)})"
    else:
        reward = e.label
    if e.binary:
        moved = f"{e.early:.0%} early -> {e.late:.0%} late" if math.isfinite(e.early) and math.isfinite(e.late) else ""
    else:
        moved = f"{_amount(e.early)} early -> {_amount(e.late)} late"
    tests = [f"{_p(e.p_reward)} within groups" if math.isfinite(e.p_reward) else "",
             f"{_p(e.p_steps)} over steps" if e.p_steps is not None else ""]
    tests = [t for t in tests if t]
    return f"{reward}; {moved}" + (f" ({', '.join(tests)})" if tests else "")


def headline(f) -> str:
    """One line on what the samples show for the finding, or why they show nothing."""
    where = f"steps {f.first_step}-{f.last_step}" if f.first_step is not None else "all steps"
    if f.not_judged:
        return f"samples ({f.kind}): not judged: {f.not_judged}"
    named = f.named
    size = f"{f.samples} samples at {f.steps} steps, {where}"
    if f.layer == 2:
        if not named:
            return f"samples ({f.kind}, {size}): no rise in repetition or identical answers"
        return f"samples ({f.kind}, {size}): the answers narrowed: " + "; ".join(e.describe() for e in named)
    if not named:
        return f"samples ({f.kind}, {size}): no feature moved with the reward"
    return f"samples ({f.kind}, {size}): the reward pays for " + ", ".join(e.label for e in named)
