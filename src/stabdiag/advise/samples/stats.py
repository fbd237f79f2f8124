"""The two tests the sample forensics rests on, both respecting how samples are grouped in training steps.

`within_strata`: is a feature associated with the reward inside the groups the samples were drawn in?  The
reward enters as an indicator (above / below its stratum's median; ties left out) and the statistic is
T = sum over strata of sum_i (x_i - mean_s x)(h_i - mean_s h): the Mantel (1963) extension of the
Cochran-Mantel-Haenszel statistic, which is exactly the CMH statistic when the feature is binary.  Its null
distribution is the permutation of the indicator within each stratum (a step, or a prompt's group inside a
step): rewards are only compared among samples that competed for them, so neither a policy that changes
from step to step nor prompts of different difficulty can fake an association.  Exact permutation moments
give the z (E[T] = 0, Var[T] = sum_s Sxx_s Shh_s / (n_s - 1)); below MONTE_CARLO_BELOW samples the p value
is a Monte Carlo permutation p instead (Phipson & Smyth 2010: (1 + hits) / (1 + draws)).

`over_steps`: did a feature move between the early and the late steps?  The unit is the step (samples of
one step share one policy and are not independent), so the test compares per-step means of the early half
of the steps with those of the late half, by permuting which steps are early: exact over every split when
there are few, Monte Carlo otherwise (Good, Permutation Tests, 2005, ch. 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

MONTE_CARLO_BELOW = 200          # samples: below, a Monte Carlo permutation p; above, the normal z
DRAWS = 1999
EXACT_SPLITS = 20000             # enumerate every early/late split of the steps up to this many


@dataclass(frozen=True, slots=True)
class Association:
    """A feature against the reward within strata: group means, the statistic's z and two-sided p."""

    high: float                  # mean of the feature over samples above their stratum's median reward
    low: float                   # ... below it
    z: float
    p: float
    n: int                       # samples in strata that hold both a high and a low one


@dataclass(frozen=True, slots=True)
class Shift:
    """A feature's per-step mean, early steps against late steps, and the one-sided p of the move."""

    early: float
    late: float
    p: float
    steps: int


def reward_halves(scores: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """1 above the stratum's median score, 0 below, NaN at the median or where the score is unknown."""
    out = np.full(len(scores), np.nan)
    order = np.argsort(strata, kind="stable")
    bounds = np.flatnonzero(np.diff(strata[order])) + 1
    for idx in np.split(order, bounds):
        vals = scores[idx]
        ok = np.isfinite(vals)
        if ok.sum() < 2:
            continue
        med = np.median(vals[ok])
        out[idx[ok & (vals > med)]] = 1.0
        out[idx[ok & (vals < med)]] = 0.0
    return out


def within_strata(x: np.ndarray, high: np.ndarray, strata: np.ndarray, *, seed: int = 0) -> Association | None:
    """The stratified association of feature `x` with the reward indicator `high` (see the module)."""
    ok = np.isfinite(x) & np.isfinite(high)
    x, h, s = x[ok], high[ok], strata[ok]
    if len(x) == 0:
        return None
    order = np.argsort(s, kind="stable")
    x, h, s = x[order], h[order], s[order]
    starts = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
    sizes = np.diff(np.r_[starts, len(s)])
    ids = np.repeat(np.arange(len(starts)), sizes)
    h_sum = np.bincount(ids, h)
    both = (h_sum > 0) & (h_sum < sizes)              # a stratum with both a high and a low sample
    keep = both[ids]
    if keep.sum() < 4:
        return None
    x, h, s, ids = x[keep], h[keep], s[keep], ids[keep]
    _, ids = np.unique(ids, return_inverse=True)
    sizes = np.bincount(ids)
    xc = x - (np.bincount(ids, x) / sizes)[ids]
    hc = h - (np.bincount(ids, h) / sizes)[ids]
    t = float(xc @ hc)
    var = float(np.sum(np.bincount(ids, xc * xc) * np.bincount(ids, hc * hc) / np.maximum(sizes - 1, 1)))
    z = t / math.sqrt(var) if var > 0 else 0.0
    if len(x) < MONTE_CARLO_BELOW and var > 0:
        rng = np.random.default_rng(seed)
        hits = 0
        for start in range(0, DRAWS, 256):     # ids are sorted: sorting ids + U(0,1) shuffles inside strata
            keys = ids + rng.random((min(256, DRAWS - start), len(h)))
            hits += int(np.sum(np.abs(h[np.argsort(keys, axis=1)] @ xc) >= abs(t) - 1e-12))
        p = (1 + hits) / (1 + DRAWS)
    else:
        p = math.erfc(abs(z) / math.sqrt(2)) if var > 0 else 1.0
    return Association(float(x[h == 1].mean()), float(x[h == 0].mean()), z, p, int(len(x)))


def step_halves(x: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The per-step means of `x` (where it is known) of the early half of the steps and of the late half, the
    middle step of an odd count left out."""
    ok = np.isfinite(x)
    _, inverse = np.unique(steps[ok], return_inverse=True)
    means = np.bincount(inverse, x[ok]) / np.bincount(inverse) if ok.any() else np.zeros(0)
    half = len(means) // 2
    return means[:half], means[len(means) - half:]


def over_steps(x: np.ndarray, steps: np.ndarray, *, direction: int, seed: int = 0) -> Shift | None:
    """Per-step means of `x`, the early half of the steps against the late half (step_halves), one-sided in
    `direction` (+1: late higher); None with fewer than two steps a half."""
    early, late = step_halves(x, steps)
    half = len(early)
    if half < 2:
        return None
    pooled = np.r_[early, late]
    observed = direction * (late.mean() - early.mean())
    total = len(pooled)
    whole = pooled.sum()
    if math.comb(total, half) <= EXACT_SPLITS:           # every choice of `half` steps as the early ones
        early_sums = pooled[np.array(list(combinations(range(total), half)))].sum(axis=1)
        diffs = direction * ((whole - early_sums) / half - early_sums / half)
        p = float(np.mean(diffs >= observed - 1e-12))
    else:
        rng = np.random.default_rng(seed)
        early_sums = np.concatenate([pooled[np.argsort(rng.random((min(256, DRAWS - start), total)), axis=1)[:, :half]]
                                     .sum(axis=1) for start in range(0, DRAWS, 256)])    # 256 random splits at once
        hits = int(np.sum(direction * ((whole - early_sums) / half - early_sums / half) >= observed - 1e-12))
        p = (1 + hits) / (1 + DRAWS)
    return Shift(float(early.mean()), float(late.mean()), p, total)


def holm(pvalues: list[float], alpha: float) -> list[bool]:
    """Which of the p values Holm's (1979) step-down procedure rejects at family-wise level `alpha`."""
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    out = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        out[i] = True
    return out
