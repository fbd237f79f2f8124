"""Where a run still going is heading: how many steps until entropy reaches its floor, until the KL to
the reference passes its budget, until a climbing grad norm blows up.

A forecast extrapolates the robust (Theil-Sen) trend of the last quarter of the run, with an interval
from the middle half of its pairwise slopes, and is shown only when the trend is clear (three in four
pairwise slopes point the same way) and the level is reached within a quarter of the run's length again: a
gentle drift that would take thousands of steps is not a forecast, it is a healthy run.  A forecast
never changes a verdict.  Runs that finished or crashed get none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import _stats as st
from ..signals.resolve import Signals

_RECENT_FRAC = 0.25
_MIN_POINTS = 10
_HORIZON_FRAC = 0.25
_BLOWUP_RATIO = 10.0       # a grad norm at 10x its baseline: the size of the spikes L3.grad-norm-spike fails on


@dataclass(frozen=True, slots=True)
class Forecast:
    """A level a signal's recent trend reaches, at a step, with an interval."""

    what: str
    signal: str
    key: str
    level: float
    now: float
    now_step: int
    at_step: int
    earliest: int
    latest: int | None          # None: at the slow end of the interval the trend never gets there

    def to_dict(self) -> dict:
        return {"what": self.what, "signal": self.signal, "key": self.key, "level": self.level, "now": self.now,
                "now_step": self.now_step, "at_step": self.at_step, "earliest": self.earliest,
                "latest": self.latest}

    def describe(self) -> str:
        latest = "never at the slow end" if self.latest is None else f"by {self.latest}"
        return (f"forecast: {self.what}: {self.signal} {self.now:.3g} at step {self.now_step} reaches "
                f"{self.level:.3g} near step {self.at_step} (between {self.earliest} and {latest}), if its "
                "trend holds")


def forecasts(signals: Signals, params: dict[str, dict[str, float]], ending=None) -> list[Forecast]:
    """Forecasts for a run still going; `params` are the resolved rule parameters by rule id."""
    if ending is not None and ending.kind != "unfinished":
        return []
    out = []
    entropy, kl, grad = signals.get("entropy"), signals.get("kl"), signals.get("grad_norm")
    if entropy is not None:
        floor = params.get("L2.entropy-below-floor", {}).get("floor_frac", 0.8)
        values = _finite(entropy)
        if values is not None:
            early = max(float(st.median(values[1][: max(3, len(values[1]) // 10)])), float(np.max(values[1][:3])))
            out.append(_reaching("entropy floor", "entropy", entropy.key, values, floor * early, falling=True))
    if kl is not None:
        budget = params.get("L2.kl-level-high", {}).get("warn_above", 0.3)
        values = _finite(kl)
        if values is not None:
            out.append(_reaching("KL budget", "kl", kl.key, values, budget, falling=False))
    if grad is not None:
        values = _finite(grad)
        if values is not None and (values[1] > 0).all():
            steps, v = values
            baseline = float(st.median(v[: len(v) // 2]))
            recent = _recent(steps, v)
            if recent is not None and float(st.median(recent[1][-3:])) >= 1.5 * baseline:
                logs = (steps, np.log(v))
                hit = _reaching("grad-norm blow-up", "grad_norm", grad.key, logs, math.log(_BLOWUP_RATIO * baseline),
                                falling=False)
                if hit is not None:
                    hit = replace(hit, level=_BLOWUP_RATIO * baseline, now=math.exp(hit.now))
                out.append(hit)
    return [f for f in out if f is not None]


def _finite(series) -> tuple[np.ndarray, np.ndarray] | None:
    ok = np.isfinite(series.values)
    count = int(ok.sum())
    if count < 2 * _MIN_POINTS:
        return None
    if count == len(ok):            # every point finite (the usual case): no copy of a million to select them
        return series.steps.astype(np.float64), series.values
    return series.steps[ok].astype(np.float64), series.values[ok]


def _recent(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    inside = steps >= steps[-1] - _RECENT_FRAC * (steps[-1] - steps[0])
    if inside.sum() < _MIN_POINTS:
        return None
    return steps[inside], values[inside]


def _reaching(what: str, signal: str, key: str, values: tuple[np.ndarray, np.ndarray], level: float, *,
              falling: bool) -> Forecast | None:
    steps, v = values
    recent = _recent(steps, v)
    if recent is None:
        return None
    rs, rv = recent
    now = float(st.median(rv[-3:]))
    gap = (now - level) if falling else (level - now)
    if gap <= 0:
        return None                                  # already there: a finding's business, not a forecast
    q25, q50, q75 = st.slope_quantiles(rs, rv, (0.25, 0.5, 0.75))
    toward = (-q75, -q50, -q25) if falling else (q25, q50, q75)   # slowest, typical, fastest speed toward it
    if toward[0] <= 0:
        return None                                  # not a clear trend toward the level
    span = float(steps[-1] - steps[0])
    at = gap / toward[1]
    if at > _HORIZON_FRAC * span:
        return None
    last = int(steps[-1])
    return Forecast(what, signal, key, level, now, last, last + int(round(at)), last + int(round(gap / toward[2])),
                    last + int(round(gap / toward[0])) if gap / toward[0] <= 10 * span else None)
