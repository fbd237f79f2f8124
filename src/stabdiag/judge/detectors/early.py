"""Where a curve starts: its early level read as a window's median, and the placeholder a recorder writes
before it has a value.

A baseline taken from one point is as noisy as that point: an instruct model whose entropy reads 2.0 at
its first logged step and 0.9 ever after has a flat entropy, not one that fell to under half of where it
started.  And some recorders write 0.0 for every metric at their first step (a logger initialised before
the first batch, a callback at step 0): read as data, that 0 becomes a start level, a "rise" and an onset
at the first step.
"""

from __future__ import annotations

import numpy as np

from ... import _stats as st

_PLACEHOLDER_NEXT = 5     # the points after the first that it is read against
_PLACEHOLDER_MIN_NEXT = 3
# the signals a step cannot measure as exactly 0: a policy's entropy, a response's length, a cross-entropy
# loss, a gradient's norm.  A fraction or a reward of 0 at the first step is data (every group still mixed
# before a collapse at step 2: TRL's frac_reward_zero_std 0 -> 1), and a KL to the reference is 0 before the
# first update; a learning rate may start at 0 (warm-up)
PLACEHOLDER_SIGNALS = ("entropy", "response_length", "terminated_length", "loss", "grad_norm", "eval_loss")


def placeholder_at_start(values: np.ndarray) -> bool:
    """The first value is a recorder's placeholder, not data: exactly 0.0, while the next few finite values
    (up to 5, at least 3) all lie on one side of 0 and further from it than they spread among themselves.
    A KL that grows from 0 (0, 1e-4, 3e-4, 8e-4, ...) keeps its 0: its next points are nearer 0 than they
    are apart; an entropy that reads 0.0 and then 1.21, 1.19, 1.20 does not."""
    if len(values) < 1 + _PLACEHOLDER_MIN_NEXT or values[0] != 0.0:
        return False
    after = values[1:1 + 4 * _PLACEHOLDER_NEXT]
    after = after[np.isfinite(after)][:_PLACEHOLDER_NEXT]
    if len(after) < _PLACEHOLDER_MIN_NEXT:
        return False
    low, high = float(np.min(after)), float(np.max(after))
    gap = low if low > 0 else (-high if high < 0 else 0.0)
    return gap > high - low


def early_level(steps: np.ndarray, values: np.ndarray, early_frac: float, *, first_points: int = 3) -> float:
    """The level a curve starts from, robust to one point: the higher of the median over the first
    `early_frac` of its step span and the median of its first `first_points` points (a fall inside the
    first window must not lower the baseline, and one high point must not raise it)."""
    return max(st.edge_level_by_steps(steps, values, early_frac),
               float(st.median(values[:first_points])))
