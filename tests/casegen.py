"""Build small runs from the generator specs used by tests/rule_cases/*.toml.

A series spec is a table: steps (default 400) or every (log every N steps), ramp = [start, end] (linear;
more levels with as many ramp_steps are the corners of a piecewise-linear curve),
exp = {from = step, tau = steps} (multiply by exp((t-from)/tau) after `from`), noise (normal sd),
lognoise (multiplicative sd), binomial = n (the mean of n 0/1 samples at that level, after the noise: a
success rate of n completions), seed, set = {step = value} (single points; "nan"/"inf" allowed),
nan_from (NaN from that step on), values = [...] (explicit, one per logged step),
superseded = {step = value} (an earlier attempt's writes of those steps, replaced by a restart).
"""

from __future__ import annotations

import math

import numpy as np

from stabdiag.read.ending import Ending
from stabdiag.read.run import Run, Series

_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _num(v) -> float:
    return _SPECIAL[v] if isinstance(v, str) else float(v)


def make_series(key: str, spec: dict, default_seed: int = 0) -> Series:
    total = int(spec.get("steps", 400))
    every = int(spec.get("every", 1))
    steps = np.arange(every, total + 1, every)
    rng = np.random.default_rng(int(spec.get("seed", default_seed)))
    if "values" in spec:
        values = np.array([_num(v) for v in spec["values"]], dtype=float)
        steps = np.arange(1, len(values) + 1) * every
    else:
        levels = [float(v) for v in spec.get("ramp", [0.0, 0.0])]
        corners = [float(v) for v in spec.get("ramp_steps", np.linspace(steps[0], steps[-1], len(levels)))]
        values = np.interp(steps.astype(float), corners, levels)
        if "exp" in spec:
            after = steps >= spec["exp"]["from"]
            values[after] *= np.exp((steps[after] - spec["exp"]["from"]) / spec["exp"]["tau"])
        if "lognoise" in spec:
            values = values * np.exp(rng.normal(0, spec["lognoise"], len(values)))
        if "noise" in spec:
            values = values + rng.normal(0, spec["noise"], len(values))
        if "binomial" in spec:
            n = int(spec["binomial"])
            values = rng.binomial(n, np.clip(values, 0.0, 1.0)) / n
    for step, value in spec.get("set", {}).items():
        values[steps == int(step)] = _num(value)
    if "nan_from" in spec:
        values[steps >= spec["nan_from"]] = math.nan
    first = spec.get("superseded", {})
    old_steps = np.array([int(s) for s in first], dtype=np.int64)
    old_values = np.array([_num(v) for v in first.values()], dtype=float)
    return Series.from_points(key, np.concatenate([old_steps, steps]), np.concatenate([old_values, values]))


def make_run(name: str, series_specs: dict[str, dict], ending: dict | None = None,
             config: dict | None = None, draw: int = 0) -> Run:
    """A run from series specs; `ending` ({kind, message, planned}) is how its console said it ended,
    `config` the run's configuration (as read from its config files).  `draw` > 0 gives every series a
    noise draw of its own other than the spec's (the same draw number gives the same run)."""
    def seeded(spec: dict, i: int) -> dict:
        return spec if draw == 0 else {**spec, "seed": 7919 * draw + int(spec.get("seed", i))}

    series = {key: make_series(key, seeded(spec, i), i) for i, (key, spec) in enumerate(series_specs.items())}
    meta = {}
    if ending is not None:
        last = max(int(s.steps[-1]) for s in series.values()) if series else None
        meta["ending"] = Ending(ending["kind"], ending.get("message", ""), "console.log", last, ending.get("planned"))
    if config is not None:
        meta["config"] = config
    return Run(name, series, meta=meta)


def wandering_noise(rng: np.random.Generator, n: int, sd: float, phi: float = 0.9) -> np.ndarray:
    """AR(1) noise of marginal sd `sd`: each batch's value leans on the last (data order, a policy that
    drifts between updates), so neighbouring points are closer than points far apart."""
    from scipy.signal import lfilter

    shocks = rng.normal(0, sd * math.sqrt(1 - phi ** 2), n)
    shocks[0] = rng.normal(0, sd)
    return lfilter([1.0], [1.0, -phi], shocks)
