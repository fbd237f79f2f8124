"""Independent checks a run logs beside its reward: a reward function it logs but does not train on (weight
0), and an accuracy it logs under its own key.  The rules that ask whether an eval followed the reward (or
the length) read them beside the `eval:*` signals (judge/engine.py wires them into `eval:*`).

Which component is trained on is read from the log itself: TRL's `reward` is the weighted sum of its
reward functions' means (GRPOTrainer: rewards_per_func * reward_weights, summed, then averaged), so a
least-squares fit of the reward on the components is exact and gives every weight that the data can tell
apart (a component always 0, or one that moves in step with another, has none).  Where no such fit holds
(no total reward logged, or one that is not a sum of the components), a component named for correctness
is read as a check, said to be a guess; where the fit holds, a component with a weight other than 0 is
part of the reward, not a check of it, whatever its name.
"""

from __future__ import annotations

import re

import numpy as np

from ..read.run import Series

CHECK_PREFIX = "check:"
COMPONENT_PREFIX = "reward:"
_EXACT = 1e-5           # relative RMS residual of an exact fit (float32 logging leaves ~1e-7)
_ZERO_WEIGHT = 1e-3     # a weight under this share of the largest is 0
_MIN_POINTS = 8
_MAX_ROWS = 20_000


def component_weights(reward: Series | None, components: dict[str, Series]) -> dict[str, float | None] | None:
    """The weight of each component in the logged reward (None where the data cannot tell it apart), or None
    where the reward is not exactly a weighted sum of the components over their common steps."""
    if reward is None or not components:
        return None
    names = list(components)
    steps = reward.steps
    for name in names:
        steps = np.intersect1d(steps, components[name].steps)
    if len(steps) < max(_MIN_POINTS, 2 * len(names) + 2):
        return None
    y = reward.values[np.searchsorted(reward.steps, steps)]
    x = np.column_stack([components[n].values[np.searchsorted(components[n].steps, steps)] for n in names])
    ok = np.isfinite(y) & np.isfinite(x).all(axis=1)
    y, x = y[ok], x[ok]
    if len(y) > _MAX_ROWS:              # an exact sum holds on any subset: the fit's cost stays bounded
        pick = np.linspace(0, len(y) - 1, _MAX_ROWS).astype(np.int64)
        y, x = y[pick], x[pick]
    if len(y) < max(_MIN_POINTS, 2 * len(names) + 2) or not np.any(y):
        return None
    weights, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ weights
    if float(np.sqrt(np.mean(resid ** 2))) > _EXACT * float(np.sqrt(np.mean(y ** 2))):
        return None
    rank = np.linalg.matrix_rank(x)
    top = float(np.max(np.abs(weights))) or 1.0
    out: dict[str, float | None] = {}
    for i, name in enumerate(names):
        # a weight is told apart when its column is not in the span of the others
        identified = np.linalg.matrix_rank(np.delete(x, i, axis=1)) < rank if x.shape[1] > 1 else bool(np.any(x))
        w = float(weights[i])
        out[name] = (0.0 if abs(w) < _ZERO_WEIGHT * top else w) if identified else None
    return out


def find_checks(series: dict[str, Series], keys: dict[str, Series], used: set[str], correctness: re.Pattern,
                form: re.Pattern, accuracy_patterns: tuple[re.Pattern, ...],
                not_accuracy: tuple[str, ...]) -> dict[str, str]:
    """The run's independent checks (signal name -> why it is read as one), adding a `check:<name>` series for
    each accuracy logged under its own key (an RL run's only: an SFT run's accuracy is its token accuracy,
    a training metric)."""
    components = {n: s for n, s in series.items() if n.startswith(COMPONENT_PREFIX)}
    weights = component_weights(series.get("reward"), components)
    checks: dict[str, str] = {}
    for name in components:
        if weights is not None:
            if weights.get(name) == 0.0:
                checks[name] = "weight 0 in the logged reward"
        elif is_correctness_name(name, correctness, form):
            checks[name] = "a guess from its name: its weight in the reward is not logged"
    if "reward" not in series:
        return checks
    for key in keys:
        if key in used:
            continue
        for pattern in accuracy_patterns:
            match = pattern.match(key)
            if match is None or any(word in match.group("name").lower() for word in not_accuracy):
                continue
            signal = CHECK_PREFIX + match.group("name").rsplit("/", 1)[-1]     # train/gsm8k_accuracy: gsm8k
            if signal not in series:
                series[signal] = keys[key]
                used.add(key)
                checks[signal] = "a guess from its name (an accuracy logged beside the reward)"
            break
    return checks


def is_correctness_name(signal: str, correctness: re.Pattern, form: re.Pattern) -> bool:
    """A reward function named for being right (accuracy, exact match, a verifier), not for form."""
    name = signal.split(":", 1)[-1]
    return correctness.search(name) is not None and form.search(name) is None
