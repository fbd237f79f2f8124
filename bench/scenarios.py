"""A labelled corpus of synthetic training runs for calibrating stabdiag's detectors.

Every run is a healthy run of a randomly drawn shape (length 50 to 50,000 steps, LR warm-up and
cosine/linear decay, reward that saturates early or climbs late, evals every 10-200 steps,
heavy-tailed grad norms, slowly rising KL, gently falling entropy, bf16-level logprob drift) with, for
the failing families, one failure injected at a drawn strength, onset and noise level.  Runs are written
as users have them: CSV (wide, long, and split train/eval files), JSONL (flat and verl's FileLogger) and
Parquet, under TRL's or verl's metric names.  Each run carries a label: its family, the expected verdict
and root layer, and the rules that must and must not fire.

Besides the original families (all GRPO, steps 1..n, rewards and evals on 0-1) the corpus holds newer
shapes - SFT/pretraining runs (loss, grad norm, LR, eval loss only), a run resumed at step 50,000, rewards
on a +-1 or reward-model scale with evals in percent, sparse evals, and the ways real logs are sampled (a 0/1
reward averaged over a batch, logging_steps=k averaged as TRL logs it, outlier batches, uneven gaps) - and the
newly reported failure patterns, each with a quiet near miss: instant policy collapse, frozen updates, a high
KL level, SFT divergence without NaN, diverging reward components, a length loophole under a cap, a transient Inf
beside a reward hack, a rolled-back blow-up, and a layer-4 mismatch seen on two logged steps.  A label's
`not_judged` names the rules that must come out "not judged" (too little data, a missing signal), and
the verdict may be `unknown` (no layer could be judged): the "not-judged" families (a 45-step run, an
eval logged 3 times, a reward-only run, a crash after 2 steps) check that missing evidence is said.
bench/heldout.py is the frozen held-out corpus, built by separate code: never tune on it.

Seeded and reproducible: the same (seed, counts) gives the same files byte for byte.

    python bench/scenarios.py OUT_DIR          # writes OUT_DIR/runs/<name>/... and OUT_DIR/labels.json
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

SEED = 20261130
# every rule id the labels speak about: the shipped rules and the ones announced for the newly reported
# failure patterns (frozen updates, KL level, ...), which the detector work implements under these ids
ALL_RULES = ("L1.reward-eval-divergence", "L1.length-confound", "L1.zero-variance-groups",
             "L1.reward-component-divergence", "L1.truncation-climb",
             "L2.policy-moving-fast", "L2.entropy-below-floor", "L2.entropy-collapse", "L2.kl-level-high",
             "L3.nonfinite-values", "L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor",
             "L3.frozen-updates", "L3.loss-divergence", "L3.rolled-back-blowup",
             "L4.logprob-mismatch", "L4.prob-mismatch", "L4.policy-version-lag", "L4.importance-ratio-off",
             "L4.rollout-kl-high", "L4.mult-prob-error-high",
             "L1.eval-loss-rising", "L3.attention-logit-growth", "L4.moe-imbalance-rising", "L4.moe-dead-experts")
LAYER_RULES = {layer: tuple(r for r in ALL_RULES if r.startswith(f"L{layer}.")) for layer in (1, 2, 3, 4)}


# --- labels -----------------------------------------------------------------------------------------

@dataclass
class Label:
    """What a run is and what the diagnosis must say about it."""

    name: str
    family: str
    kind: str                         # "healthy", "near-miss", "failing" or "not-judged"
    verdict: str                      # expected verdict: pass, warn, fail or unknown (no layer judged)
    root_layer: int | None
    must_fire: list[str] = field(default_factory=list)
    must_not_fire: list[str] = field(default_factory=list)
    not_judged: list[str] = field(default_factory=list)   # rules that must come out "not judged"
    nan_step: int | None = None       # first non-finite step written, if any
    nan_signal: str | None = None     # the canonical signal that turned first
    precursor: bool = False           # a climb before the blow-up was written in
    params: dict = field(default_factory=dict)


# --- curves -----------------------------------------------------------------------------------------

@dataclass
class Curves:
    """A run in canonical signal names: every train signal has one value per step."""

    steps: np.ndarray
    sig: dict[str, np.ndarray]
    evals: dict[str, tuple[np.ndarray, np.ndarray]]
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.steps)


def _ramp(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """0 before lo, 1 after hi, linear between (x and lo/hi as fractions or steps alike)."""
    return np.clip((x - lo) / max(hi - lo, 1e-12), 0.0, 1.0)


def _choose_n(rng: np.random.Generator, lo: int = 50, hi: int = 50_000) -> int:
    options = [n for n in (50, 80, 120, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000, 5000, 8000)
               if lo <= n <= hi]
    return int(rng.choice(options))


def _eval_steps(rng: np.random.Generator, n: int, min_points: int = 1) -> np.ndarray:
    choices = [e for e in (10, 20, 25, 50, 100, 200) if n // e >= max(min_points, 2)] or [max(1, n // 5)]
    every = int(rng.choice(choices))
    steps = np.arange(every, n + 1, every)
    if steps[-1] != n:
        steps = np.append(steps, n)
    return steps


def reward_shape(rng: np.random.Generator, x: np.ndarray, shape: str | None = None) -> np.ndarray:
    """0 -> 1 over the run: saturating early, climbing late (logistic), or linear."""
    shape = shape or str(rng.choice(["saturate", "late", "linear"]))
    if shape == "saturate":
        tau = rng.uniform(0.04, 0.2)
        y = 1 - np.exp(-x / tau)
    elif shape == "late":
        mid, width = rng.uniform(0.45, 0.8), rng.uniform(0.04, 0.12)
        y = 1 / (1 + np.exp(-(x - mid) / width))
    else:
        y = x.copy()
    return (y - y[0]) / max(y[-1] - y[0], 1e-9)


def healthy(rng: np.random.Generator, n: int | None = None, *, logprob: bool | None = None,
            lag: bool | None = None, zero_std: bool = True) -> Curves:
    """A healthy run of a random shape, in canonical names."""
    n = n or _choose_n(rng)
    steps = np.arange(1, n + 1)
    x = (steps - 1) / max(n - 1, 1)
    sig: dict[str, np.ndarray] = {}
    info: dict = {}

    # reward: learning, tracked by every eval
    r0, rise = rng.uniform(0.1, 0.45), rng.uniform(0.05, 0.35)
    shape = str(rng.choice(["saturate", "late", "linear"]))
    clean = r0 + rise * reward_shape(rng, x, shape)
    r_noise = rng.uniform(0.01, 0.04)
    # batch noise plus a slow wander (data order): AR(1), phi 0.98, stationary sd up to the batch noise
    phi, wander_sd = 0.98, rng.uniform(0, 1.0) * r_noise
    from scipy.signal import lfilter
    wander = lfilter([1.0], [1.0, -phi], rng.normal(0, wander_sd * math.sqrt(1 - phi ** 2), n))
    sig["reward"] = clean + wander + rng.normal(0, r_noise, n)
    info.update(reward_shape=shape, reward_rise=round(rise, 3), reward_noise=round(r_noise, 3))

    evals = {}
    ev_steps = _eval_steps(rng, n)
    for name in rng.choice(["math500", "aime24", "gsm8k", "gpqa"], size=int(rng.integers(1, 4)), replace=False):
        gain = rng.uniform(0.35, 1.0)                      # eval gain per unit of reward gain
        e0 = rng.uniform(0.15, 0.6)
        noise = rng.uniform(0.005, 0.03)             # 500-item benchmark: sd ~0.02
        ec = e0 + gain * (np.interp(ev_steps, steps, clean) - r0)
        evals[str(name)] = (ev_steps, ec + rng.normal(0, noise, len(ev_steps)))

    # response length: drifts gently; may grow with real learning (then the evals improve too)
    l0 = rng.uniform(200, 900)
    growth = rng.uniform(0.8, 1.6)
    sig["response_length"] = l0 * (1 + (growth - 1) * x) * np.exp(rng.normal(0, rng.uniform(0.01, 0.04), n))

    # KL to the reference: rises slowly from ~0, stays under the 0.02 target (seed 002)
    kl_end = rng.uniform(0.002, 0.018)
    p = rng.uniform(0.6, 1.2)
    sig["kl"] = (kl_end * 0.05 + kl_end * x ** p) * np.exp(rng.normal(0, rng.uniform(0.03, 0.12), n))

    # entropy: declines gently, ends at 0.86-1.0x its start (the floor is 0.8x, seed 002)
    e_start = rng.uniform(0.3, 2.5)
    e_end = e_start * rng.uniform(0.86, 1.0)
    ent_curve = x if rng.random() < 0.5 else (1 - np.exp(-x / 0.3)) / (1 - math.exp(-1 / 0.3))
    sig["entropy"] = (e_start + (e_end - e_start) * ent_curve) * (1 + rng.normal(0, rng.uniform(0.005, 0.02), n))

    # loss: a policy-gradient loss hovering near 0, or a positive total loss
    if rng.random() < 0.6:
        sd = rng.uniform(0.005, 0.05)
        sig["loss"] = rng.uniform(-0.01, 0.03) + sd * rng.standard_t(8, n)
    else:
        level = rng.uniform(0.2, 1.5)
        sig["loss"] = level * (1 - 0.3 * x) * np.exp(rng.normal(0, rng.uniform(0.03, 0.12), n))

    # grad norm: heavy-tailed, often decaying, with a few harmless isolated bumps (< 5x, seed 002)
    g0 = float(np.exp(rng.uniform(math.log(0.05), math.log(2.0))))
    sigma = rng.uniform(0.1, 0.35)
    trend = g0 * (1 - rng.uniform(0, 0.5) * x)
    gn = trend * np.exp(rng.normal(0, sigma, n))
    for _ in range(int(rng.integers(0, 4))):
        i = int(rng.integers(n // 10 + 1, n))
        gn[i] = trend[i] * rng.uniform(2.0, 3.5)
    sig["grad_norm"] = gn
    info.update(grad_level=round(g0, 3), grad_sigma=round(sigma, 3))

    # learning rate: warm-up, then cosine, linear or constant
    lr = rng.choice([1e-6, 2e-6, 5e-7, 3e-6])
    warm = rng.uniform(0, 0.1)
    wu = np.minimum(1.0, (x + 1e-9) / max(warm, 1e-9)) if warm > 0.005 else np.ones(n)
    decay = str(rng.choice(["cosine", "linear", "constant"]))
    post = _ramp(x, warm, 1.0)
    d = {"cosine": 0.5 * (1 + np.cos(np.pi * post)), "linear": 1 - post, "constant": np.ones(n)}[decay]
    sig["lr"] = lr * wu * np.maximum(d, 0.05)

    if zero_std:
        sig["zero_std_frac"] = np.clip(rng.uniform(0.05, 0.35) + rng.normal(0, 0.03, n), 0, 1)
    if logprob if logprob is not None else rng.random() < 0.4:
        # bf16 engines: mean |delta logprob| ~0.01-0.03, slowly drifting (under the 0.05 warning)
        base = rng.uniform(0.005, 0.025)
        drift = rng.uniform(0, 0.01)
        sig["logprob_delta"] = (base + drift * x) * np.exp(rng.normal(0, 0.1, n))
    if lag if lag is not None else rng.random() < 0.15:
        sig["policy_version_lag"] = np.clip(rng.uniform(0.5, 1.2) + rng.normal(0, 0.2, n), 0, None)
    return Curves(steps, sig, evals, info)


# --- failure injections -----------------------------------------------------------------------------

def _strength(rng, weak, strong, level: str) -> float:
    lo, hi = {"weak": (0.0, 0.33), "medium": (0.33, 0.66), "strong": (0.66, 1.0)}[level]
    return weak + (strong - weak) * rng.uniform(lo, hi)


def flatten_evals(rng, c: Curves, drift: float = 0.0) -> None:
    """Evals that do not follow the reward: flat at their start level (optionally drifting down)."""
    x_of = lambda s: (s - 1) / max(c.n - 1, 1)   # noqa: E731
    for name, (s, v) in list(c.evals.items()):
        e0 = float(v[0]) if len(v) else 0.4
        c.evals[name] = (s, e0 + drift * x_of(s) + rng.normal(0, rng.uniform(0.004, 0.02), len(s)))


def inject_reward_hack(rng, c: Curves, level: str, wander_phi: float | None = None) -> dict:
    """Reward climbs A over the run's later part while every eval stays flat (seed 000: 0.30 -> 0.80).
    With `wander_phi` the reward's noise is AR(1) with that coefficient (same marginal sd)."""
    x = (c.steps - 1) / max(c.n - 1, 1)
    noise = rng.uniform(0.01, 0.04)
    rise = max(_strength(rng, 5.5, 20, level) * noise, 0.08)
    onset = rng.uniform(0.0, 0.4)
    r0 = float(np.median(c.sig["reward"][: max(3, c.n // 10)]))
    c.sig["reward"] = r0 + rise * _ramp(x, onset, rng.uniform(onset + 0.3, 1.0)) + (
        rng.normal(0, noise, c.n) if wander_phi is None else wandering_noise(rng, c.n, noise, wander_phi))
    flatten_evals(rng, c, drift=-rng.uniform(0, 0.04))
    return {"rise": round(rise, 3), "noise": round(noise, 3), "onset": round(onset, 2)}


def inject_length_growth(rng, c: Curves, level: str) -> dict:
    x = (c.steps - 1) / max(c.n - 1, 1)
    growth = _strength(rng, 2.1, 4.0, level)
    onset = rng.uniform(0.0, 0.3)
    l0 = float(np.median(c.sig["response_length"][: max(3, c.n // 10)]))
    c.sig["response_length"] = l0 * (1 + (growth - 1) * _ramp(x, onset, 0.9)) * \
        np.exp(rng.normal(0, rng.uniform(0.01, 0.04), c.n))
    flatten_evals(rng, c)
    return {"growth": round(growth, 2), "onset": round(onset, 2)}


def flat_reward(rng, c: Curves) -> None:
    c.sig["reward"] = rng.uniform(0.2, 0.6) + rng.normal(0, rng.uniform(0.01, 0.04), c.n)


def inject_zero_variance(rng, c: Curves, level: str, easy: bool | None = None) -> dict:
    x = (c.steps - 1) / max(c.n - 1, 1)
    frac = _strength(rng, 0.54, 0.92, level)
    onset = rng.uniform(0.0, 0.5)
    easy = bool(rng.random() < 0.6) if easy is None else easy
    lo = rng.uniform(0.1, 0.3)
    c.sig["zero_std_frac"] = np.clip(lo + (frac - lo) * _ramp(x, onset, onset + 0.1) + rng.normal(0, 0.03, c.n), 0, 1)
    level_r = rng.uniform(0.85, 0.97) if easy else rng.uniform(0.02, 0.12)
    c.sig["reward"] = np.clip(level_r + rng.normal(0, 0.015, c.n), 0, 1)
    flatten_evals(rng, c)
    return {"fraction": round(frac, 2), "onset": round(onset, 2), "easy": easy}


def inject_kl_entropy_collapse(rng, c: Curves, level: str) -> dict:
    """Within a window of 60-200 steps KL grows 2.5-20x and entropy falls 45-80% (seed 000)."""
    n = c.n
    dur = int(rng.integers(60, 200))
    onset = int(rng.uniform(0.2, 0.6) * n)
    kl_mult = _strength(rng, 2.3, 20, level)
    drop = _strength(rng, 0.45, 0.8, level)
    t = c.steps
    k_on = float(np.median(c.sig["kl"][max(0, onset - 20): onset + 1]))
    k_on = max(k_on, 0.003)
    frac = _ramp(t, onset, onset + dur)
    noise = np.exp(rng.normal(0, 0.05, n))
    kl = np.where(t < onset, c.sig["kl"], k_on * np.exp(np.log(kl_mult) * frac) * noise)
    e_on = float(np.median(c.sig["entropy"][max(0, onset - 20): onset + 1]))
    ent = np.where(t < onset, c.sig["entropy"],
                   e_on * (1 - drop * frac) * (1 + rng.normal(0, 0.01, n)))
    c.sig["kl"], c.sig["entropy"] = kl, ent
    # the reward stalls and slides; evals slide with it (no layer-1 divergence)
    r_on = float(np.median(c.sig["reward"][max(0, onset - 20): onset + 1]))
    c.sig["reward"] = np.where(t < onset, c.sig["reward"],
                               r_on - 0.1 * frac + rng.normal(0, 0.02, n))
    for name, (s, v) in list(c.evals.items()):
        c.evals[name] = (s, np.where(s < onset, v, v - 0.05 * _ramp(s, onset, onset + dur)))
    return {"kl_mult": round(kl_mult, 2), "entropy_drop": round(drop, 2), "window": dur, "onset": onset}


def inject_entropy_floor(rng, c: Curves, level: str) -> dict:
    """Entropy sinks slowly (over half the run) to 0.4-0.7x its early level; KL stays slow."""
    x = (c.steps - 1) / max(c.n - 1, 1)
    end = 1 - _strength(rng, 0.25, 0.6, level)
    onset = rng.uniform(0.05, 0.25)
    e0 = float(np.median(c.sig["entropy"][: max(5, c.n // 10)]))
    c.sig["entropy"] = e0 * (1 - (1 - end) * _ramp(x, onset, onset + rng.uniform(0.5, 0.65))) * \
        (1 + rng.normal(0, 0.01, c.n))
    # the evals stop improving where the entropy starts to sink: entropy falling while an eval improves
    # is sharpening (issue 25), so a floor failure has evals that do not gain from it
    at = int(onset * (c.n - 1))
    _hold(rng, c, "reward", at)      # ... and the reward stalls with them (seed 002's entropy collapse)
    _hold_evals(rng, c, int(c.steps[at]))
    return {"end_frac": round(end, 2), "onset": round(onset, 2)}


def inject_loss_spikes(rng, c: Curves, level: str) -> dict:
    n = c.n
    k = int(rng.integers(1, 6))
    where = np.sort(rng.choice(np.arange(max(25, n // 10), n), size=k, replace=False))
    loss = c.sig["loss"]
    lvl = float(np.median(loss))
    if lvl > 0.1:                                   # a positive loss: jump 12-100x (seed 000: 1.0 -> 10+)
        mult = _strength(rng, 11, 100, level)
        loss[where] = lvl * mult
        size = mult
    else:                                           # a loss near 0: jump 18-80 robust sds and stay up
        sd = 1.4826 * float(np.median(np.abs(loss - np.median(loss))))
        size = _strength(rng, 18, 80, level)
        for at in where:                            # a burst the run comes back from is healthy there
            loss[at:at + 12] = lvl + size * sd * np.exp(rng.normal(0, 0.1, len(loss[at:at + 12])))
        # (12 points up is longer than a spike: the rule reads it as a level shift the run did not shake off)
    return {"spikes": k, "size": round(size, 1), "first": int(c.steps[where[0]]), "positive": lvl > 0.1}


def _blow_up(rng, c: Curves, at: int, first: str) -> None:
    """From step `at` the run is gone: `first` turns NaN/Inf at `at`, the others 0-3 steps later."""
    t = c.steps
    order = {"reward": 0, "logprob_delta": 0, "loss": 0, "grad_norm": 0}
    for s in order:
        order[s] = 0 if s == first else int(rng.integers(1, 4))
    for s, lag in order.items():
        if s not in c.sig:
            continue
        bad = t >= at + lag
        value = math.nan
        if s == "grad_norm" and rng.random() < 0.3:
            value = math.inf
        if s == "logprob_delta" and rng.random() < 0.3:
            value = math.inf
        c.sig[s] = np.where(bad, value, c.sig[s])
    # what the logger writes for the rest once the model is gone
    after = t >= at
    for s in ("kl", "entropy"):
        if rng.random() < 0.5:
            c.sig[s] = np.where(after, math.nan, c.sig[s])
    c.sig["response_length"] = np.where(after, c.sig["response_length"].max() * 3, c.sig["response_length"])
    for name, (s, v) in list(c.evals.items()):
        c.evals[name] = (s, np.where(s > at, 0.0, v))     # evals after the blow-up score 0


def inject_explosion(rng, c: Curves, level: str, *, precursor: bool, first: str = "loss") -> dict:
    """Grad norm climbs over `lead` steps (precursor) or not at all, then the run turns non-finite."""
    n = c.n
    t = c.steps
    at = int(rng.uniform(0.55, 0.9) * n)
    info: dict = {"nan_step": at, "first": first}
    if precursor:
        lead = int(min(rng.integers(25, 200), at * 0.5))
        mult = _strength(rng, 3, 1000, level)
        start = at - lead
        g = c.sig["grad_norm"]
        climb = (t >= start) & (t < at)
        g[climb] *= np.exp(np.log(mult) * (t[climb] - start) / lead)
        g[t == at - 1] = max(g[t == at - 1].max(), 1e3) if rng.random() < 0.5 else g[t == at - 1]
        loss = c.sig["loss"]
        sd = max(float(np.std(loss[: max(10, start // 2)])), 1e-3)
        for i in np.flatnonzero(climb):
            if rng.random() < 0.08 * (t[i] - start) / lead:
                loss[i] += sd * rng.uniform(5, 30)
        info.update(climb_steps=lead, grad_mult=round(mult, 1))
    else:
        c.sig["grad_norm"][t == at - 1] = rng.uniform(1e3, 1e5) if rng.random() < 0.5 \
            else c.sig["grad_norm"][t == at - 1]
    _blow_up(rng, c, at, first)
    return info


def inject_grad_spikes(rng, c: Curves, level: str) -> dict:
    """Grad norm bursts > 5x its EMA and > 5.0 several times (seed 002 would skip each), no NaN."""
    n = c.n
    g = c.sig["grad_norm"]
    lvl = float(np.median(g))
    k = int(rng.integers(3, 10))
    start = int(rng.uniform(0.2, 0.7) * n)
    where = np.unique(np.clip(start + np.sort(rng.integers(0, max(10, n // 5), size=k)), 0, n - 1))
    mult = _strength(rng, 5.5, 200, level)
    g[where] = np.maximum(lvl * mult, rng.uniform(6, 30) * (1 + mult / 50))
    return {"spikes": int(len(where)), "mult": round(mult, 1), "first": int(c.steps[where[0]])}


def inject_logprob_mismatch(rng, c: Curves, level: str, mode: str) -> dict:
    """Rollout and trainer logprobs disagree: a level from the start, from an onset (sync bug), or a drift."""
    x = (c.steps - 1) / max(c.n - 1, 1)
    base = c.sig.get("logprob_delta")
    if base is None:
        base = rng.uniform(0.005, 0.025) * np.exp(rng.normal(0, 0.1, c.n))
    if mode == "warn":
        lvl = rng.uniform(0.055, 0.095)
        onset = 0.0
    else:
        lvl = _strength(rng, 0.11, 0.4, level)
        onset = rng.uniform(0.1, 0.6) if mode == "onset" else 0.0
    if mode == "drift":
        val = base + (lvl - float(np.median(base))) * _ramp(x, 0.1, 0.8) * np.exp(rng.normal(0, 0.05, c.n))
    else:
        val = np.where(x >= onset, lvl * np.exp(rng.normal(0, 0.08, c.n)), base)
    c.sig["logprob_delta"] = val
    return {"level": round(lvl, 3), "mode": mode, "onset": round(onset, 2)}


def inject_prob_mismatch(rng, c: Curves, level: str) -> dict:
    lvl = _strength(rng, 0.011, 0.05, level)
    c.sig["prob_delta"] = lvl * np.exp(rng.normal(0, 0.1, c.n))
    return {"level": round(lvl, 4)}


def inject_version_lag(rng, c: Curves, level: str) -> dict:
    lvl = _strength(rng, 2.2, 6, level)
    x = (c.steps - 1) / max(c.n - 1, 1)
    onset = rng.uniform(0.0, 0.5)
    c.sig["policy_version_lag"] = np.where(x >= onset, lvl + rng.normal(0, 0.3, c.n),
                                           np.clip(1 + rng.normal(0, 0.2, c.n), 0, None))
    return {"level": round(lvl, 2), "onset": round(onset, 2)}


# --- scenario families ------------------------------------------------------------------------------

LEVELS = ("weak", "medium", "strong")


def _shallower(layer: int) -> list[str]:
    return [r for lay in range(1, layer) for r in LAYER_RULES[lay]]


def _healthy_label() -> dict:
    """A fresh label dict for a healthy run (each Label gets its own lists)."""
    return dict(kind="healthy", verdict="pass", root_layer=None, must_not_fire=list(ALL_RULES))


def family_healthy(rng, i):
    n = None
    if i < 4:
        n = (50, 50_000, 10_000, 20_000)[i]
    c = healthy(rng, n)
    label = _healthy_label()
    if rng.random() < 0.2:
        c.info["resume"] = True
    return c, label, c.info


def family_absorbed_spike(rng, i):
    """Healthy, with one grad-norm spike > 5x its EMA and > 5.0 that the run absorbs (seed 002 skips it)."""
    c = healthy(rng)
    g = c.sig["grad_norm"]
    lvl = float(np.median(g))
    at = int(rng.integers(max(25, c.n // 10), c.n - 6))
    g[at] = max(lvl * rng.uniform(6, 40), rng.uniform(5.5, 12))
    label = dict(kind="healthy", verdict="warn", root_layer=3, must_fire=["L3.grad-norm-spike"],
                 must_not_fire=[r for r in ALL_RULES if r != "L3.grad-norm-spike"])
    return c, label, {**c.info, "spike_step": at, "spike": round(float(g[at]), 2)}


def family_pg_loss_bursts(rng, i):
    """Healthy GRPO with a policy-gradient loss near 0 that bursts 15-200 robust sds for single steps
    (the batch's KL) and comes straight back: the shape of both Unsloth/TRL GRPO runs in real_logs."""
    c = healthy(rng, _choose_n(rng, 250, 3000))
    sd = rng.uniform(0.0003, 0.003)
    loss = np.abs(sd * rng.normal(0, 1, c.n)) + sd
    where = rng.choice(np.arange(max(25, c.n // 10), c.n - 8), size=int(rng.integers(2, 9)), replace=False)
    loss[where] = sd * rng.uniform(15, 200, len(where))
    c.sig["loss"] = loss
    label = _healthy_label()
    return c, label, {**c.info, "bursts": len(where)}


def family_long_answers(rng, i):
    """Healthy reasoning RL: response length grows 2-3x and the evals improve with it."""
    c = healthy(rng, _choose_n(rng, 300, 5000))
    x = (c.steps - 1) / (c.n - 1)
    g = rng.uniform(2.0, 3.0)
    c.sig["response_length"] = rng.uniform(300, 800) * (1 + (g - 1) * x) * np.exp(rng.normal(0, 0.02, c.n))
    clean = 0.25 + rng.uniform(0.2, 0.4) * reward_shape(rng, x, "linear")
    c.sig["reward"] = clean + rng.normal(0, rng.uniform(0.01, 0.03), c.n)
    s = _eval_steps(rng, c.n, 6)
    c.evals = {name: (s, rng.uniform(0.2, 0.5) + rng.uniform(0.35, 0.8) * (np.interp(s, c.steps, clean) - 0.25)
                      + rng.normal(0, rng.uniform(0.005, 0.02), len(s)))
               for name in ("math500", "aime24")[: int(rng.integers(1, 3))]}
    label = _healthy_label()
    return c, label, {**c.info, "length_growth": round(g, 2)}


def _near(rule, fn):
    def family(rng, i):
        c, info = fn(rng, i)
        if rule == "L2.policy-moving-fast":       # the entropy drop stays: under the 0.8x floor, a warning
            return c, dict(kind="near-miss", verdict="warn", root_layer=2, must_fire=["L2.entropy-below-floor"],
                           must_not_fire=[r for r in ALL_RULES if not r.startswith("L2.")]), info
        return c, dict(kind="near-miss", verdict="pass", root_layer=None, must_not_fire=list(ALL_RULES)), info
    family.rule = rule
    return family


def nm_divergence(rng, i):
    """Reward rises clearly; evals gain 18-30% of the rise (the rule needs < 10%)."""
    c = healthy(rng, _choose_n(rng, 300, 3000))
    x = (c.steps - 1) / (c.n - 1)
    rise, noise = rng.uniform(0.2, 0.4), rng.uniform(0.01, 0.03)
    clean = 0.3 + rise * reward_shape(rng, x)
    c.sig["reward"] = clean + rng.normal(0, noise, c.n)
    s = _eval_steps(rng, c.n, 6)
    gain = rng.uniform(0.18, 0.3)
    c.evals = {"math500": (s, 0.4 + gain * (np.interp(s, c.steps, clean) - 0.3) + rng.normal(0, 0.005, len(s)))}
    return c, {"eval_gain_frac": round(gain, 2)}


def nm_length(rng, i):
    """Length grows 1.5-1.8x (the rule needs 2x) while evals stay flat."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    x = (c.steps - 1) / (c.n - 1)
    g = rng.uniform(1.5, 1.8)
    c.sig["response_length"] = 400 * (1 + (g - 1) * x) * np.exp(rng.normal(0, 0.02, c.n))
    flat_reward(rng, c)
    flatten_evals(rng, c)
    return c, {"growth": round(g, 2)}


def nm_zero_std(rng, i):
    """Zero-variance fraction sits at 0.32-0.42 (the rule needs 0.5)."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    f = rng.uniform(0.32, 0.42)
    c.sig["zero_std_frac"] = np.clip(f + rng.normal(0, 0.03, c.n), 0, 1)
    return c, {"fraction": round(f, 2)}


def nm_entropy(rng, i):
    """Entropy ends at 0.84-0.9x its early level (the floor is 0.8x); KL linear."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    x = (c.steps - 1) / (c.n - 1)
    end = rng.uniform(0.84, 0.9)
    c.sig["entropy"] = 1.5 * (1 - (1 - end) * x) * (1 + rng.normal(0, 0.01, c.n))
    return c, {"end_frac": round(end, 2)}


def nm_kl_entropy(rng, i):
    """Within 100-200 steps KL grows 1.4-1.8x and entropy falls 23-32% (the rule needs 2x and 40%); the
    entropy stays down, under seed 002's 0.8x floor, so the run warns (layer 2) but must not fail."""
    c = healthy(rng, _choose_n(rng, 400, 3000))
    n, t = c.n, c.steps
    dur = int(rng.integers(100, 200))
    onset = int(rng.uniform(0.3, 0.6) * n)
    frac = _ramp(t, onset, onset + dur)
    k_on = max(float(np.median(c.sig["kl"][onset - 20: onset + 1])), 0.003)
    mult, drop = rng.uniform(1.4, 1.8), rng.uniform(0.23, 0.32)
    c.sig["kl"] = np.where(t < onset, c.sig["kl"], k_on * mult ** frac * np.exp(rng.normal(0, 0.04, n)))
    e_on = float(np.median(c.sig["entropy"][onset - 20: onset + 1]))
    c.sig["entropy"] = np.where(t < onset, c.sig["entropy"], e_on * (1 - drop * frac) * (1 + rng.normal(0, 0.01, n)))
    _hold(rng, c, "reward", int(np.searchsorted(t, onset)))    # the reward and the evals stall: the drop
    _hold_evals(rng, c, onset)                                  # is not sharpening (issue 25)
    return c, {"kl_mult": round(mult, 2), "entropy_drop": round(drop, 2), "window": dur}


def nm_loss(rng, i):
    """A positive loss with one bump of 3-6x (the rule needs 10x)."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    lvl = rng.uniform(0.3, 1.2)
    c.sig["loss"] = lvl * np.exp(rng.normal(0, 0.05, c.n))
    m = rng.uniform(3, 6)
    c.sig["loss"][int(rng.integers(c.n // 4, c.n))] = lvl * m
    return c, {"bump": round(m, 1)}


def nm_loss_near_zero(rng, i):
    """A policy-gradient loss near 0 with one outlier of 8-11 robust sds (the rule needs 15)."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    sd = rng.uniform(0.005, 0.05)
    c.sig["loss"] = sd * rng.normal(0, 1, c.n)
    z = rng.uniform(8, 11)
    c.sig["loss"][int(rng.integers(c.n // 4, c.n))] = z * sd
    return c, {"bump_sd": round(z, 1)}


def nm_grad(rng, i):
    """Grad-norm bumps just under seed 002's skip test: < 5x the EMA, or > 5x but under 5.0."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    g = c.sig["grad_norm"]
    lvl = float(np.median(g))
    where = rng.choice(np.arange(c.n // 5, c.n), size=int(rng.integers(1, 4)), replace=False)
    if rng.random() < 0.5 and lvl < 0.7:
        g[where] = min(4.5, lvl * rng.uniform(5.5, 6.5))       # > 5x EMA but under 5.0
        kind = "under-5.0"
    else:
        g[where] = lvl * rng.uniform(3.0, 4.2)                 # > 5.0 may be, but < 5x EMA
        kind = "under-5x"
    return c, {"kind": kind, "level": round(lvl, 3)}


def nm_logprob(rng, i):
    """Mean |logprob delta| at 0.03-0.045 (warning at 0.05)."""
    c = healthy(rng, _choose_n(rng, 200, 3000), logprob=True)
    lvl = rng.uniform(0.03, 0.042)
    c.sig["logprob_delta"] = lvl * np.exp(rng.normal(0, 0.06, c.n))
    return c, {"level": round(lvl, 3)}


def nm_lag(rng, i):
    """One-step async by design: lag 1.0-1.7 versions (warning above 2)."""
    c = healthy(rng, _choose_n(rng, 200, 3000), lag=True)
    lvl = rng.uniform(1.0, 1.7)
    c.sig["policy_version_lag"] = np.clip(lvl + rng.normal(0, 0.1, c.n), 0, None)
    return c, {"level": round(lvl, 2)}


def nm_prob(rng, i):
    """verl rollout_probs_diff_mean at 0.002-0.0045 (warning at 0.005)."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    lvl = rng.uniform(0.002, 0.0042)
    c.sig["prob_delta"] = lvl * np.exp(rng.normal(0, 0.06, c.n))
    return c, {"level": round(lvl, 4)}


def _fail(root, verdict, must_fire, extra_not=(), **kw):
    return dict(kind="failing", verdict=verdict, root_layer=root, must_fire=list(must_fire),
                must_not_fire=sorted(set(_shallower(root)) | set(extra_not)), **kw)


def f_reward_hack(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000))
    level = LEVELS[i % 3]
    info = inject_reward_hack(rng, c, level)
    c.evals = {k: v for k, v in c.evals.items()}
    _ensure_evals(rng, c, 6)
    flatten_evals(rng, c, drift=-rng.uniform(0, 0.03))
    return c, _fail(1, "fail", ["L1.reward-eval-divergence"]), {**info, "level": level}


def _ensure_evals(rng, c: Curves, min_points: int) -> None:
    s = _eval_steps(rng, c.n, min_points)
    for name in list(c.evals):
        c.evals[name] = (s, np.interp(s, *c.evals[name]))


def f_length(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000))
    level = LEVELS[i % 3]
    flat_reward(rng, c)
    _ensure_evals(rng, c, 6)
    info = inject_length_growth(rng, c, level)
    return c, _fail(1, "warn", ["L1.length-confound"]), {**info, "level": level}


def f_hack_length(rng, i):
    c = healthy(rng, _choose_n(rng, 300, 5000))
    level = LEVELS[i % 3]
    _ensure_evals(rng, c, 6)
    info = inject_reward_hack(rng, c, level)
    info.update(inject_length_growth(rng, c, level))
    return c, _fail(1, "fail", ["L1.reward-eval-divergence", "L1.length-confound"]), {**info, "level": level}


def f_zero_variance(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000))
    level = LEVELS[i % 3]
    info = inject_zero_variance(rng, c, level)
    return c, _fail(1, "warn", ["L1.zero-variance-groups"]), {**info, "level": level}


def f_difficulty_trap(rng, i):
    """All-correct groups, and entropy collapses with a KL surge: the policy is not the cause."""
    c = healthy(rng, _choose_n(rng, 400, 3000))
    level = LEVELS[i % 3]
    info = inject_kl_entropy_collapse(rng, c, level)
    info.update(inject_zero_variance(rng, c, level, easy=True), onset=info["onset"])
    # most groups are already all-correct when the collapse starts
    high_from = max(1, info["onset"] - int(rng.uniform(0.05, 0.2) * c.n))
    c.sig["zero_std_frac"] = np.where(c.steps >= high_from,
                                      np.clip(info["fraction"] + rng.normal(0, 0.03, c.n), 0, 1),
                                      c.sig["zero_std_frac"])
    return c, _fail(1, "warn", ["L1.zero-variance-groups", "L2.policy-moving-fast"]), {**info, "level": level}


def f_collapse(rng, i):
    c = healthy(rng, _choose_n(rng, 400, 5000))
    level = LEVELS[i % 3]
    info = inject_kl_entropy_collapse(rng, c, level)
    return c, _fail(2, "fail", ["L2.policy-moving-fast"]), {**info, "level": level}


def f_entropy_floor(rng, i):
    c = healthy(rng, _choose_n(rng, 1000, 8000))
    level = LEVELS[i % 3]
    info = inject_entropy_floor(rng, c, level)
    return c, _fail(2, "warn", ["L2.entropy-below-floor"]), {**info, "level": level}


def f_loss_spike(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000))
    level = LEVELS[i % 3]
    info = inject_loss_spikes(rng, c, level)
    # on a positive (cross-entropy) loss one spike the run absorbs is a warning (like seed 002's skipped
    # grad-norm spike) and two or more fail; near 0 the injected jumps stay up, and that fails
    severe = info["spikes"] > 1 or not info["positive"]
    return c, _fail(3, "fail" if severe else "warn", ["L3.loss-spike"]), {**info, "level": level}


def f_grad_spikes(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000))
    level = LEVELS[i % 3]
    info = inject_grad_spikes(rng, c, level)
    return c, _fail(3, "fail", ["L3.grad-norm-spike"]), {**info, "level": level}


def f_explosion_precursor(rng, i):
    c = healthy(rng, _choose_n(rng, 300, 5000), logprob=bool(rng.random() < 0.3))
    level = LEVELS[i % 3]
    info = inject_explosion(rng, c, level, precursor=True, first=str(rng.choice(["loss", "grad_norm"])))
    return c, _fail(3, "fail", ["L3.nonfinite-values", "L3.grad-norm-precursor"],
                    nan_step=info["nan_step"], nan_signal=info["first"], precursor=True), {**info, "level": level}


def f_explosion_sudden(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 5000), logprob=bool(rng.random() < 0.3))
    level = LEVELS[i % 3]
    info = inject_explosion(rng, c, level, precursor=False, first=str(rng.choice(["loss", "grad_norm"])))
    return c, _fail(3, "fail", ["L3.nonfinite-values"], extra_not=["L3.grad-norm-precursor"],
                    nan_step=info["nan_step"], nan_signal=info["first"]), {**info, "level": level}


def _nan_origin(first):
    def family(rng, i):
        c = healthy(rng, _choose_n(rng, 100, 5000), logprob=first == "logprob_delta" or None)
        at = int(rng.uniform(0.3, 0.95) * c.n)
        _blow_up(rng, c, at, first)
        return c, _fail(3, "fail", ["L3.nonfinite-values"], extra_not=["L3.grad-norm-precursor"],
                        nan_step=at, nan_signal=first), {"nan_step": at, "first": first}
    return family


def f_logprob(mode):
    def family(rng, i):
        c = healthy(rng, _choose_n(rng, 100, 5000), logprob=True)
        level = LEVELS[i % 3]
        info = inject_logprob_mismatch(rng, c, level, mode)
        return c, _fail(4, "warn" if mode == "warn" else "fail", ["L4.logprob-mismatch"]), {**info, "level": level}
    return family


def f_prob(rng, i):
    c = healthy(rng, _choose_n(rng, 100, 5000))
    level = LEVELS[i % 3]
    info = inject_prob_mismatch(rng, c, level)
    return c, _fail(4, "fail", ["L4.prob-mismatch"]), {**info, "level": level}


def f_lag(rng, i):
    c = healthy(rng, _choose_n(rng, 100, 5000))
    level = LEVELS[i % 3]
    info = inject_version_lag(rng, c, level)
    return c, _fail(4, "warn", ["L4.policy-version-lag"]), {**info, "level": level}


def f_hack_then_blowup(rng, i):
    """Top-down: a layer-1 cause (reward hacking) with layer-3 symptoms later (seed 000, step 312)."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    level = LEVELS[i % 3]
    _ensure_evals(rng, c, 12)                     # enough evals before the blow-up to see the hack
    info = inject_reward_hack(rng, c, "strong")
    info.update(inject_explosion(rng, c, level, precursor=bool(rng.random() < 0.6)))
    # the hack must show before the blow-up: evals flat up to it, reward already up
    return c, _fail(1, "fail", ["L1.reward-eval-divergence", "L3.nonfinite-values"],
                    nan_step=info["nan_step"], nan_signal=info["first"]), {**info, "level": level}


def f_collapse_then_blowup(rng, i):
    c = healthy(rng, _choose_n(rng, 600, 5000))
    level = LEVELS[i % 3]
    info = inject_kl_entropy_collapse(rng, c, "strong")
    at = min(c.n - 5, info["onset"] + info["window"] + int(rng.integers(20, 200)))
    _blow_up(rng, c, at, str(rng.choice(["loss", "grad_norm"])))
    return c, _fail(2, "fail", ["L2.policy-moving-fast", "L3.nonfinite-values"], nan_step=at), \
        {**info, "level": level, "nan_step": at}


def f_lag_and_mismatch(rng, i):
    c = healthy(rng, _choose_n(rng, 200, 3000), logprob=True)
    level = LEVELS[i % 3]
    info = inject_version_lag(rng, c, level)
    info.update(inject_logprob_mismatch(rng, c, level, "onset"))
    return c, _fail(4, "fail", ["L4.logprob-mismatch", "L4.policy-version-lag"]), {**info, "level": level}


# --- newly reported failure patterns, new shapes, and honest "not judged" -------------------------------
#
# Labels follow the same conventions as above: the root is the first failing layer; rules of layers above
# the root must not fire; rules below it may (a consequence reported as downstream).  `not_judged` lists
# the rules whose signals are absent or too short to judge, which must say so instead of passing.

# rules that cannot judge a run of a few logged points: trends, floors, spikes, sustained fractions, and a
# KL level (KL is 0 at the start of every run: two points of it say nothing)
SHORT_RUN_RULES = ("L1.reward-eval-divergence", "L1.length-confound", "L1.zero-variance-groups",
                   "L1.reward-component-divergence", "L1.truncation-climb",
                   "L2.policy-moving-fast", "L2.entropy-below-floor", "L2.entropy-collapse", "L2.kl-level-high",
                   "L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor", "L3.frozen-updates",
                   "L3.loss-divergence")
# rules about the update itself: a run without loss and grad norm leaves them all unjudged
UPDATE_RULES = ("L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor", "L3.frozen-updates",
                "L3.loss-divergence")


def _quiet_label(not_judged=()) -> dict:
    return dict(kind="near-miss", verdict="pass", root_layer=None,
                must_not_fire=[r for r in ALL_RULES if r not in not_judged], not_judged=list(not_judged))


def _not_judged_label(verdict: str, not_judged, must_fire=(), root=None) -> dict:
    """A run the diagnosis cannot (fully) judge: the listed rules must say "not judged"."""
    return dict(kind="not-judged", verdict=verdict, root_layer=root, must_fire=list(must_fire),
                must_not_fire=[r for r in ALL_RULES if r not in not_judged and r not in must_fire],
                not_judged=list(not_judged))


def _only(c: Curves, keep: tuple[str, ...]) -> None:
    c.sig = {k: v for k, v in c.sig.items() if k in keep}


def _head(c: Curves, k: int) -> None:
    """Keep the first k logged points (the run stopped there); evals after them go too."""
    c.steps = c.steps[:k]
    c.sig = {s: v[:k] for s, v in c.sig.items()}
    last = c.steps[-1]
    c.evals = {name: (s[s <= last], v[s <= last]) for name, (s, v) in c.evals.items() if np.any(s <= last)}


def _point_noise(v: np.ndarray) -> float:
    """Point-to-point noise sd of a curve (robust: the MAD of its differences)."""
    d = np.diff(v[np.isfinite(v)])
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2)) if len(d) > 2 else 0.0


def _hold(rng, c: Curves, name: str, at: int, value: float | None = None) -> None:
    """From index `at` on the signal stops moving: its level at `at`, with its own batch noise."""
    v = c.sig[name]
    lvl = float(np.median(v[max(0, at - 10): at + 1])) if value is None else value
    noise = rng.normal(0, _point_noise(v), c.n)
    c.sig[name] = np.where(np.arange(c.n) >= at, lvl + noise, v)


def _hold_evals(rng, c: Curves, step: int) -> None:
    for name, (s, v) in list(c.evals.items()):
        before = v[s <= step]
        lvl = float(before[-1]) if len(before) else float(v[0])
        c.evals[name] = (s, np.where(s > step, lvl + rng.normal(0, 0.008, len(s)), v))


def f_instant_collapse(rng, i):
    """Entropy 3.9 -> 0.4 -> 0.07 -> 0.0 in 3 steps, at the start of the run or later; from then on every
    group is equal (zero_std_frac 1.0), grad norm and loss are exactly 0.0 and the LR schedule runs on.
    The policy collapsed (layer 2); the equal groups are its consequence, not easy or hard data, so
    L1.zero-variance-groups must not fire (layer 1 is above the root); frozen updates below may."""
    c = healthy(rng, _choose_n(rng, 120, 3000))
    n = c.n
    at = 0 if i % 2 == 0 else int(rng.uniform(0.2, 0.7) * n)
    e0 = 3.9 if at == 0 or rng.random() < 0.5 else float(np.median(c.sig["entropy"][max(0, at - 10): at + 1]))
    if at > 0:
        c.sig["entropy"] = c.sig["entropy"] * e0 / float(np.median(c.sig["entropy"][max(0, at - 10): at + 1]))
    ent = c.sig["entropy"]
    ent[at:at + 3] = e0 * np.array([1.0, 0.4 / 3.9, 0.07 / 3.9])
    ent[at + 3:] = 0.0
    gone = np.arange(n) >= at + 3
    c.sig["zero_std_frac"] = np.where(gone, 1.0, c.sig["zero_std_frac"])
    c.sig["grad_norm"] = np.where(gone, 0.0, c.sig["grad_norm"])
    c.sig["loss"] = np.where(gone, 0.0, c.sig["loss"])
    r_after = 0.0 if rng.random() < 0.7 else float(rng.choice([0.1, 0.2]))   # all wrong, or a constant format credit
    c.sig["reward"] = np.where(gone, r_after, c.sig["reward"])
    k_after = rng.uniform(0.3, 3.0)                                         # the policy sits far from the reference
    kl_ramp = np.interp(np.arange(n), [at, at + 3], [float(c.sig["kl"][at]), k_after])
    c.sig["kl"] = np.where(np.arange(n) > at, kl_ramp * np.exp(rng.normal(0, 0.02, n)), c.sig["kl"])
    c.sig["response_length"] = np.where(gone, float(rng.choice([1, 2, 3, 5])), c.sig["response_length"])
    step_at = int(c.steps[at + 3])
    for name, (s, v) in list(c.evals.items()):
        c.evals[name] = (s, np.where(s >= step_at, rng.uniform(0.0, 0.01, len(s)), v))
    return c, _fail(2, "fail", ["L2.entropy-collapse"], extra_not=["L1.zero-variance-groups"]), \
        {"collapse_step": int(c.steps[at]), "entropy_from": round(e0, 2), "reward_after": r_after}


def nm_instant_collapse(rng, i):
    """Entropy sharpens 10-15% over the first 3-5 steps, then holds level: above 0.8x of even the very
    first value (seed 002's floor), however "early" is read."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    k = int(rng.integers(3, 6))
    drop = rng.uniform(0.10, 0.15)
    ent = float(np.median(c.sig["entropy"][:10])) * (1 + rng.normal(0, 0.006, c.n))
    ent[:k] = ent[k] * np.linspace(1 / (1 - drop), 1.0, k + 1)[:k]
    c.sig["entropy"] = ent
    return c, {"early_drop": round(drop, 2), "over_steps": k}


def f_frozen_updates(rng, i):
    """From an onset (step 1, or 10-60% in) grad norm is exactly 0.0 and the loss exactly 0.0 or exactly
    constant, while the LR is > 0 and groups are mixed as before: nothing updates the weights (a loss
    that multiplies the advantages by 0, a frozen parameter group, every step skipped).  Reward, entropy
    and KL stop moving but look normal.  Layer 3."""
    c = healthy(rng, _choose_n(rng, 200, 5000))
    n = c.n
    at = 0 if i % 3 == 0 else int(rng.uniform(0.1, 0.6) * n)
    mode = "zero" if i % 2 == 0 else "constant"
    after = np.arange(n) >= at
    c.sig["grad_norm"] = np.where(after, 0.0, c.sig["grad_norm"])
    const = 0.0 if mode == "zero" else (round(float(np.median(c.sig["loss"][max(0, at - 10): at + 1])), 4)
                                        if at > 0 else 0.6931)
    c.sig["loss"] = np.where(after, const, c.sig["loss"])
    for name in ("reward", "entropy", "response_length"):
        _hold(rng, c, name, at)
    if at == 0:
        c.sig["kl"] = np.zeros(n)                                   # the policy is still the reference
    else:
        _hold(rng, c, "kl", at)
    _hold_evals(rng, c, int(c.steps[at]))
    return c, _fail(3, "fail", ["L3.frozen-updates"]), {"frozen_from": int(c.steps[at]), "mode": mode,
                                                         "loss_value": const}


def nm_frozen(rng, i):
    """Healthy TRL GRPO whose loss is logged rounded to 4 decimals (beta * KL ~ 1e-5): 0.0 on most steps,
    as in the Unsloth notebook runs of shared/real_logs; the grad norm moves (or is not in the export), or
    is 0.0 on 1-3 isolated steps whose groups were all equal."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    raw = 0.04 * c.sig["kl"] + rng.normal(0, rng.uniform(1e-5, 6e-5), c.n)
    c.sig["loss"] = np.round(raw, 4) + 0.0                           # + 0.0 turns -0.0 into 0.0
    variant = ("no-grad-norm", "isolated-zero", "moving")[i % 3]
    if variant == "no-grad-norm":
        del c.sig["grad_norm"]
    elif variant == "isolated-zero":
        where = rng.choice(np.arange(c.n // 5, c.n), size=int(rng.integers(1, 4)), replace=False)
        c.sig["grad_norm"][where] = 0.0
        c.sig["zero_std_frac"][where] = 1.0
    c.info["framework"] = "trl"
    return c, {"variant": variant}


def f_kl_level(rng, i):
    """Per-token KL to the reference climbs from ~0 to 0.7-1.3 nats (beta 0.1: the penalty is not holding
    the policy), entropy only 5-12% down, reward and evals healthy.  Layer 2."""
    c = healthy(rng, _choose_n(rng, 300, 5000))
    n = c.n
    x = (c.steps - 1) / max(n - 1, 1)
    end, onset, p = rng.uniform(0.7, 1.3), rng.uniform(0.0, 0.3), rng.uniform(1.0, 2.0)
    c.sig["kl"] = (0.001 + end * _ramp(x, onset, 1.0) ** p) * np.exp(rng.normal(0, 0.05, n))
    e0, drop = float(np.median(c.sig["entropy"][: max(3, n // 10)])), rng.uniform(0.05, 0.12)
    c.sig["entropy"] = e0 * (1 - drop * x) * (1 + rng.normal(0, 0.01, n))
    c.sig["kl_coef"] = np.full(n, 0.1)
    return c, _fail(2, "fail", ["L2.kl-level-high"]), {"kl_end": round(end, 2), "entropy_drop": round(drop, 2)}


def nm_kl_level(rng, i):
    """KL climbs from ~0 to 0.02-0.04 nats per token: around seed 002's adaptive target, not far above it."""
    c = healthy(rng, _choose_n(rng, 300, 5000))
    x = (c.steps - 1) / max(c.n - 1, 1)
    end = rng.uniform(0.02, 0.04)
    c.sig["kl"] = (0.0005 + end * x ** rng.uniform(0.7, 1.5)) * np.exp(rng.normal(0, 0.06, c.n))
    return c, {"kl_end": round(end, 3)}


def sft_curves(rng, n: int | None = None, pretrain: bool | None = None) -> Curves:
    """A healthy SFT or pretraining run: loss, grad norm, LR and an eval loss, nothing else (HF names)."""
    n = n or _choose_n(rng, 100, 20_000)
    pretrain = bool(rng.random() < 0.3) if pretrain is None else pretrain
    steps = np.arange(1, n + 1)
    if pretrain:
        l0, floor, tau = rng.uniform(9.5, 11.0), rng.uniform(2.2, 3.5), rng.uniform(0.002, 0.02) * n
    else:
        l0, floor, tau = rng.uniform(1.8, 4.2), rng.uniform(0.5, 1.5), rng.uniform(0.02, 0.3) * n
    alpha = rng.uniform(0.5, 1.2)
    clean = floor + (l0 - floor) * (1 + (steps - 1) / max(tau, 1.0)) ** -alpha
    sig = {"loss": clean * np.exp(rng.normal(0, rng.uniform(0.01, 0.04), n))}
    g0 = rng.uniform(0.3, 3.0)
    sig["grad_norm"] = g0 * (0.5 + 0.5 * (1 + (steps - 1) / max(tau, 1.0)) ** -0.5) * \
        np.exp(rng.normal(0, rng.uniform(0.08, 0.25), n))
    peak = rng.uniform(1e-5, 2e-4) if not pretrain else rng.uniform(1e-4, 6e-4)
    x = (steps - 1) / max(n - 1, 1)
    warm = rng.uniform(0.01, 0.05)
    cosine = 0.5 * (1 + np.cos(np.pi * _ramp(x, warm, 1)))
    sig["lr"] = peak * np.minimum(1.0, (x + 1e-9) / warm) * np.maximum(cosine, 0.1)
    ev = _eval_steps(rng, n)
    gap = rng.uniform(0.02, 0.15)
    evals = {"eval/loss": (ev, np.interp(ev, steps, clean) + gap + rng.normal(0, 0.005, len(ev)))}
    return Curves(steps, sig, evals, {"framework": "trl", "pretrain": pretrain})


def family_healthy_sft(rng, i):
    c = sft_curves(rng)
    return c, _healthy_label(), {"pretrain": c.info["pretrain"]}


def f_sft_divergence(rng, i):
    """SFT loss 4.0 -> ~546 within 10 steps, then 50-150x its start for 25+ steps, with no NaN (the
    user stops the run): a diverged update, layer 3.  Early (the LR warm-up overshoots at step 3-12) or
    mid-run."""
    early = i % 2 == 0
    if early:
        at = int(rng.integers(3, 12))
        c = sft_curves(rng, at + 10 + int(rng.integers(25, 150)), pretrain=False)
        c.sig["loss"] *= 4.0 / float(np.median(c.sig["loss"][max(0, at - 3): at + 1]))
    else:
        c = sft_curves(rng, _choose_n(rng, 400, 5000))
        at = int(rng.uniform(0.3, 0.7) * c.n)
        _head(c, min(c.n, at + 10 + int(rng.integers(25, 300))))
    n = c.n
    lvl = float(np.median(c.sig["loss"][max(0, at - 5): at + 1]))
    peak = lvl * rng.uniform(100, 150)                 # 4.0 -> 546 is 136x
    j = np.arange(n) - at
    climb = (j >= 0) & (j <= 10)
    loss = c.sig["loss"]
    loss[climb] = lvl * np.exp(np.log(peak / lvl) * j[climb] / 10)
    after = j > 10
    wander = np.clip(np.cumsum(rng.normal(0, 0.05, n)), -0.6, 0.3)
    loss[after] = np.clip(peak * np.exp(wander[after]) * np.exp(rng.normal(0, 0.05, after.sum())), 50 * lvl, 150 * lvl)
    g = c.sig["grad_norm"]
    glvl = float(np.median(g[max(0, at - 10): at + 1]))
    g[j > 0] = glvl * rng.uniform(50, 1000) * np.exp(rng.normal(0, 0.4, int((j > 0).sum())))
    s, v = c.evals["eval/loss"]
    broken = lvl * rng.uniform(50, 150) * np.exp(rng.normal(0, 0.1, len(s)))
    c.evals["eval/loss"] = (s, np.where(s > c.steps[at], broken, v))
    return c, _fail(3, "fail", ["L3.loss-divergence"]), {"from_step": int(c.steps[at]), "level": round(lvl, 2),
                                                         "peak": round(peak, 1)}


def nm_sft_bump(rng, i):
    """A healthy SFT loss that bumps to 1.5x over a few steps and comes back within 6-20 steps."""
    c = sft_curves(rng, _choose_n(rng, 200, 5000), pretrain=False)
    b = int(rng.uniform(0.2, 0.8) * c.n)
    w = int(rng.integers(6, 21))
    shape = np.sin(np.linspace(0, np.pi, w)) * rng.uniform(0.45, 0.55)
    seg = slice(b, min(c.n, b + w))
    c.sig["loss"][seg] *= 1 + shape[: seg.stop - seg.start]
    c.sig["grad_norm"][seg] *= 1 + shape[: seg.stop - seg.start]
    return c, {"bump_step": int(c.steps[b]), "width": w}


def _components(rng, c: Curves, fmt: tuple[float, float], acc: tuple[float, float]) -> None:
    """TRL's per-function rewards (rewards/<fn>/mean): format and accuracy, averaged over 256-512
    completions a step; the logged reward is their sum."""
    x = (c.steps - 1) / max(c.n - 1, 1)
    batch = int(rng.choice([256, 384, 512]))
    shape_f = reward_shape(rng, x, str(rng.choice(["saturate", "linear"])))
    shape_a = reward_shape(rng, x, "linear")
    pf = np.clip(fmt[0] + (fmt[1] - fmt[0]) * shape_f, 0.001, 0.999)
    pa = np.clip(acc[0] + (acc[1] - acc[0]) * shape_a, 0.001, 0.999)
    c.sig["reward:format_reward"] = rng.binomial(batch, pf) / batch
    c.sig["reward:accuracy_reward"] = rng.binomial(batch, pa) / batch
    c.sig["reward"] = c.sig["reward:format_reward"] + c.sig["reward:accuracy_reward"]
    c.info["framework"] = "trl"


def f_reward_components(rng, i):
    """open-r1's numbers: format reward 0.48 -> 0.86 while accuracy reward 0.16 -> 0.06; the summed
    reward climbs.  With an independent eval (falling with the accuracy) the divergence fires too."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    _components(rng, c, (rng.uniform(0.45, 0.5), rng.uniform(0.84, 0.88)),
                (rng.uniform(0.15, 0.17), rng.uniform(0.05, 0.07)))
    must = ["L1.reward-component-divergence"]
    if i % 2 == 0:
        c.evals = {}
    else:
        _ensure_evals(rng, c, 6)
        flatten_evals(rng, c, drift=-rng.uniform(0.03, 0.06))
        must.append("L1.reward-eval-divergence")
    return c, _fail(1, "fail", must), {"evals": bool(c.evals)}


def nm_reward_components(rng, i):
    """Format reward 0.48 -> 0.86 learned first, accuracy 0.16 -> 0.22-0.30 behind it, evals rising."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    a_end = rng.uniform(0.22, 0.30)
    _components(rng, c, (0.48, 0.86), (0.16, a_end))
    s = _eval_steps(rng, c.n, 6)
    acc_clean = np.interp(s, c.steps, 0.16 + (a_end - 0.16) * (c.steps - 1) / max(c.n - 1, 1))
    c.evals = {"math500": (s, 0.3 + rng.uniform(0.6, 1.0) * (acc_clean - 0.16) + rng.normal(0, 0.006, len(s)))}
    return c, {"accuracy_end": round(a_end, 2)}


def _length_hack(rng, c: Curves, r: tuple[float, float], cap: float, l_from: float, l_to: float,
                 clip: tuple[float, float]) -> None:
    """Reward paid for length: reward, mean length and truncated fraction climb together."""
    x = (c.steps - 1) / max(c.n - 1, 1)
    shape = reward_shape(rng, x, str(rng.choice(["saturate", "late", "linear"])))
    c.sig["reward"] = r[0] + (r[1] - r[0]) * shape + rng.normal(0, rng.uniform(0.01, 0.03), c.n)
    c.sig["response_length"] = np.minimum(cap, (l_from + (l_to - l_from) * shape) * np.exp(rng.normal(0, 0.02, c.n)))
    c.sig["truncation_rate"] = np.clip(clip[0] + (clip[1] - clip[0]) * shape + rng.normal(0, 0.015, c.n), 0, 1)


def f_eval_reward_length(rng, i):
    """A length hack under a cap, TRL, and no independent eval: TRL's eval/reward is the training reward
    on eval prompts and rises with it.  The truncation climb is judged (layer 1, fail); the divergence
    and the length confound are not judged (no independent eval), and eval/reward must not pass them."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    cap = float(rng.choice([1024, 2048, 4096]))
    _length_hack(rng, c, (0.3, 0.8), cap, 0.6 * cap, cap, (rng.uniform(0.05, 0.1), rng.uniform(0.9, 1.0)))
    _eval_reward(rng, c)
    return c, dict(_fail(1, "fail", ["L1.truncation-climb"]),
                   not_judged=["L1.reward-eval-divergence", "L1.length-confound"]), {"cap": cap}


def _eval_reward(rng, c: Curves) -> None:
    s = _eval_steps(rng, c.n, 6)
    c.evals = {"eval/reward": (s, np.interp(s, c.steps, c.sig["reward"]) + rng.normal(0, 0.02, len(s)))}
    c.info["framework"] = "trl"


def nj_eval_reward_length(rng, i):
    """Reward 0.3 -> 0.8 with length growing 2-3x well under the cap, TRL's eval/reward rising with the
    reward, no independent eval: nothing in layer 1 can say whether the gain is real.  Layers 2-3 are
    healthy and judged, so the verdict is pass - with the divergence and length rules not judged."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    l0 = rng.uniform(200, 500)
    _length_hack(rng, c, (0.3, 0.8), 16384, l0, l0 * rng.uniform(2.0, 3.0), (0.0, rng.uniform(0.0, 0.02)))
    _eval_reward(rng, c)
    return c, _not_judged_label("pass", ["L1.reward-eval-divergence", "L1.length-confound"]), {}


def f_truncation_climb(rng, i):
    """A length loophole under a cap: reward (= length) 0.60 -> 0.97 while the clipped ratio goes
    0.50 -> 1.00 and the length can only grow 1.5x, to the cap (under the 2x of the length rule).
    With an independent eval (flat) the divergence fires too."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    cap = float(rng.choice([1024, 2048, 4096, 8192]))
    _length_hack(rng, c, (0.60, 0.97), cap, cap / 1.5, cap, (0.5, 1.0))
    must = ["L1.truncation-climb"]
    if i % 2 == 0:
        c.evals = {}
    else:
        _ensure_evals(rng, c, 6)
        flatten_evals(rng, c)
        must.append("L1.reward-eval-divergence")
    return c, _fail(1, "fail", must), {"cap": cap, "evals": bool(c.evals)}


def nm_truncation(rng, i):
    """The clipped ratio creeps 0.02 -> 0.08 as answers lengthen 1.2-1.4x and the evals improve."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    x = (c.steps - 1) / max(c.n - 1, 1)
    g = rng.uniform(1.2, 1.4)
    c.sig["response_length"] = rng.uniform(300, 900) * (1 + (g - 1) * x) * np.exp(rng.normal(0, 0.02, c.n))
    c.sig["truncation_rate"] = np.clip(0.02 + 0.06 * x + rng.normal(0, 0.008, c.n), 0, 1)
    return c, {"growth": round(g, 2)}


def f_transient_inf_hack(rng, i):
    """A clear reward hack (reward up, evals flat), and one fp16 loss-scale overflow at step 3: loss and
    grad norm Inf at that step only.  The run recovers at once; the verdict comes from layer 1 and the
    non-finite step is a warning that must not cut the run short."""
    c = healthy(rng, _choose_n(rng, 200, 3000))
    _ensure_evals(rng, c, 6)
    info = inject_reward_hack(rng, c, ("medium", "strong")[i % 2])
    c.sig["loss"][2] = math.inf
    c.sig["grad_norm"][2] = math.inf
    return c, _fail(1, "fail", ["L1.reward-eval-divergence", "L3.nonfinite-values"], nan_step=int(c.steps[2]),
                    nan_signal="loss"), {**info, "rule_severity": {"L3.nonfinite-values": "warn"}}


def _first_attempt(rng, c: Curves, lo: int, hi: int, blow_up: bool) -> dict:
    """The values a crashed first attempt wrote for indices lo..hi before the restart from lo."""
    seg = slice(lo, hi + 1)
    attempt = {s: v[seg] * (1 + 0.01 * rng.normal(0, 1, hi - lo + 1)) for s, v in c.sig.items()}
    if blow_up:
        k = hi - lo + 1
        start = k // 3
        ramp = np.exp(np.log(rng.uniform(10, 1000)) * _ramp(np.arange(k), start, k - 1))
        attempt["grad_norm"] = attempt["grad_norm"] * ramp
        loss = attempt["loss"]
        sd = max(float(np.std(c.sig["loss"][: max(10, lo)])), 1e-3)
        for j in range(start, k - 1):
            if rng.random() < 0.1 * (j - start) / max(k - start, 1):
                loss[j] += sd * rng.uniform(10, 40)
        attempt["loss"][-1] = math.nan
        attempt["grad_norm"][-1] = math.nan if rng.random() < 0.7 else math.inf
        for s in ("kl", "entropy"):
            if s in attempt and rng.random() < 0.5:
                attempt[s][-1] = math.nan
    return attempt


def f_rolled_back(rng, i):
    """A resumed run whose first attempt blew up (grad norm climbing, NaN at, e.g., step 295) and was
    restarted from an earlier checkpoint (step 200): steps 200-295 are written twice, first blowing up,
    then healthy.  The surviving run is healthy, so the blow-up is a warning (layer 3) and the rules that
    read the kept values (NaN, spikes) must not fire."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    lo = int(rng.uniform(0.25, 0.7) * c.n)
    hi = lo + int(rng.integers(40, max(41, min(150, c.n - lo - 20))))
    c.info["rollback"] = (lo, hi, _first_attempt(rng, c, lo, hi, blow_up=True))
    lab = _fail(3, "warn", ["L3.rolled-back-blowup"],
                extra_not=["L3.nonfinite-values", "L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor",
                           "L3.loss-divergence"])
    return c, lab, {"restart_step": int(c.steps[lo]), "first_attempt_nan_step": int(c.steps[hi])}


def nm_rolled_back(rng, i):
    """A resumed run (preempted, restarted from a checkpoint) whose rewritten steps were healthy."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    lo = int(rng.uniform(0.25, 0.7) * c.n)
    hi = lo + int(rng.integers(20, max(21, min(150, c.n - lo - 20))))
    c.info["rollback"] = (lo, hi, _first_attempt(rng, c, lo, hi, blow_up=False))
    return c, {"restart_step": int(c.steps[lo]), "first_attempt_end": int(c.steps[hi])}


def f_l4_few_points(rng, i):
    """Two logged steps, then the run was stopped: mean |logprob delta| ~0.81 and a mean importance ratio
    ~3e-7 (TRL's sampling/* keys): the rollout engine is not sampling from the trained weights.  Layer 4
    is judged on two points because the mismatch is there from the first step; nothing else can be."""
    c = healthy(rng, 60, logprob=True, lag=False)
    c.steps = c.steps * int(rng.choice([1, 5, 10]))
    c.evals = {name: (s * (c.steps[1] // 2), v) for name, (s, v) in c.evals.items()}
    _head(c, 2)
    c.sig["logprob_delta"] = rng.uniform(0.75, 0.87) * np.exp(rng.normal(0, 0.03, 2))
    c.sig["is_ratio_mean"] = 3e-7 * np.exp(rng.normal(0, 1.0, 2))
    c.info["framework"] = "trl"
    lab = _fail(4, "fail", ["L4.logprob-mismatch", "L4.importance-ratio-off"])
    lab["must_not_fire"] = [r for r in lab["must_not_fire"] if r not in SHORT_RUN_RULES]
    lab["not_judged"] = list(SHORT_RUN_RULES)
    return c, lab, {"logged_steps": [int(s) for s in c.steps]}


def nm_l4_levels(rng, i):
    """Matched engines: mean |logprob delta| ~0.02 and a mean importance ratio 0.99-1.01."""
    c = healthy(rng, _choose_n(rng, 100, 3000), logprob=True)
    c.sig["logprob_delta"] = rng.uniform(0.015, 0.025) * np.exp(rng.normal(0, 0.08, c.n))
    c.sig["is_ratio_mean"] = rng.uniform(0.994, 1.006) + rng.normal(0, 0.002, c.n)
    return c, {}


def nj_short_reward_rise(rng, i):
    """45 steps: reward 0.30 -> 0.80 and one eval flat - nothing else exported.  Too short to call a hack
    (the rise may be the format being learned): the divergence is not judged, the length rule has no
    length, no other layer has a signal, so the verdict is unknown, not pass."""
    c = healthy(rng, 45)
    x = (c.steps - 1) / 44
    c.sig["reward"] = 0.3 + 0.5 * reward_shape(rng, x, str(rng.choice(["saturate", "linear"]))) + \
        rng.normal(0, 0.02, 45)
    ev = np.array([10, 20, 30, 40, 45]) if i % 2 == 0 else np.array([15, 30, 45])
    c.evals = {"math500": (ev, 0.42 + rng.normal(0, 0.01, len(ev)))}
    _only(c, ("reward",))
    return c, _not_judged_label("unknown", ["L1.reward-eval-divergence", "L1.length-confound"]), {}


def nj_eval_3_points(rng, i):
    """A healthy run whose reward rises clearly (0.25-0.4, noise 0.02) and whose evals were logged 3
    times, rising with it: 3 points cannot judge a divergence (the rule needs 4).  The length did not
    grow, which needs no eval to say; layers 2-3 are judged and clean: pass."""
    c = healthy(rng, _choose_n(rng, 300, 3000))
    x = (c.steps - 1) / max(c.n - 1, 1)
    clean = 0.3 + rng.uniform(0.25, 0.4) * reward_shape(rng, x, "linear")
    c.sig["reward"] = clean + rng.normal(0, 0.02, c.n)
    s = np.array([c.n // 3, 2 * c.n // 3, c.n])
    c.evals = {name: (s, rng.uniform(0.2, 0.5) + 0.6 * (np.interp(s, c.steps, clean) - 0.3)
                      + rng.normal(0, 0.005, 3)) for name in c.evals}
    return c, _not_judged_label("pass", ["L1.reward-eval-divergence"]), {}


def nj_reward_only(rng, i):
    """Only the reward was exported.  Layer 3 is not judged (it needs a loss or a grad norm: that the
    reward is finite says nothing about the update), layer 1 has no eval: unknown."""
    c = healthy(rng, _choose_n(rng, 100, 3000))
    _only(c, ("reward",))
    c.evals = {}
    return c, _not_judged_label("unknown", ["L1.reward-eval-divergence", *UPDATE_RULES]), {}


def nj_crash_2_steps(rng, i):
    """A GRPO run that crashed after 2 logged steps, every value finite: nothing can be judged."""
    c = healthy(rng, 50, logprob=False, lag=False)
    c.steps = c.steps * int(rng.choice([1, 5, 10]))
    c.evals = {}
    _head(c, 2)
    return c, _not_judged_label("unknown", SHORT_RUN_RULES), {"logged_steps": [int(s) for s in c.steps]}


def family_healthy_offset(rng, i):
    """A run resumed at step 50,000 that logs 50,001..52,000 (or a few thousand steps past it)."""
    c = healthy(rng, int(rng.choice([500, 1000, 2000, 3000])))
    c.info["step_offset"] = 50_000
    return c, _healthy_label(), {"offset": 50_000}


SCALES = ((2.0, -1.0), (8.0, -3.0), (10.0, 0.0), (0.5, 0.25))    # +-1, reward-model logits, rubric 0-10, a*r+b


def _rescale(rng, c: Curves, i: int) -> dict:
    """Reward on another scale, and every eval in percent on odd runs."""
    a, b = SCALES[i % len(SCALES)]
    c.sig["reward"] = a * c.sig["reward"] + b
    pct = i % 2 == 1
    if pct:
        c.evals = {k: (s, 100 * v) for k, (s, v) in c.evals.items()}
    return {"reward_scale": [a, b], "evals_percent": pct}


def family_healthy_scaled(rng, i):
    c = healthy(rng)
    return c, _healthy_label(), _rescale(rng, c, i)


def f_reward_hack_scaled(rng, i):
    c, lab, info = f_reward_hack(rng, i)
    return c, lab, {**info, **_rescale(rng, c, i)}


def family_healthy_sparse_evals(rng, i):
    """Evals every few hundred steps: 4-6 points over the run, tracking the reward."""
    c = healthy(rng, _choose_n(rng, 600, 5000))
    k = int(rng.integers(4, 7))
    s = np.linspace(c.n / k, c.n, k).astype(int)
    c.evals = {name: (s, np.interp(s, *sv)) for name, sv in c.evals.items()}
    return c, _healthy_label(), {"eval_points": k}


# --- how real logs are sampled: batch rewards, averaged logging, outlier batches, irregular steps ---------

def _batch_mean(rng, p: np.ndarray, size: int) -> np.ndarray:
    """The mean of `size` 0/1 rewards with success probability p: what a GRPO step logs for a correctness
    reward (TRL: per_device_batch x num_generations completions), on a grid of 1/size."""
    return rng.binomial(size, np.clip(p, 0.0, 1.0)) / size


def family_healthy_batch_reward(rng, i):
    """A 0/1 correctness reward averaged over a batch of 32-512 completions, and evals that are pass rates
    on 100-1,319 items: binomial noise, quantised values (a small batch logs multiples of 1/32)."""
    c = healthy(rng, _choose_n(rng, 300, 5000))
    size = int(rng.choice([32, 64, 128, 256, 512]))
    c.sig["reward"] = _batch_mean(rng, c.sig["reward"], size)
    items = int(rng.choice([100, 500, 1319]))
    c.evals = {k: (s, _batch_mean(rng, v, items)) for k, (s, v) in c.evals.items()}
    return c, _healthy_label(), {"batch": size, "eval_items": items}


def f_reward_hack_batch(rng, i):
    """A reward hack logged as a batch mean of 0/1 rewards (256-1,024 completions: the batch noise stays
    under the injected noise, so the hack is as strong as its level says)."""
    c, lab, info = f_reward_hack(rng, i)
    size = int(rng.choice([256, 512, 1024]))
    c.sig["reward"] = np.round(np.clip(c.sig["reward"], 0.0, 1.0) * size) / size
    return c, lab, {**info, "batch": size}


def family_healthy_averaged_logging(rng, i):
    """logging_steps = k as TRL and the HF Trainer do it: reward, KL, entropy, length and loss are the mean
    of the k steps since the last log, grad norm and learning rate the last step's value."""
    c = healthy(rng, _choose_n(rng, 1000, 8000))
    k = int(rng.choice([4, 5, 10, 20, 25]))
    _average(c, k)
    c.info["framework"] = "trl"                  # written as TRL writes it
    return c, _healthy_label(), {"averaged_every": k}


def wandering_noise(rng, n: int, sd: float, phi: float) -> np.ndarray:
    """AR(1) noise of marginal sd `sd`: each batch leans on the last (data order, a policy drifting between
    updates), so neighbouring logged points are closer than points far apart."""
    from scipy.signal import lfilter

    shocks = rng.normal(0, sd * math.sqrt(1 - phi ** 2), n)
    shocks[0] = rng.normal(0, sd)
    return lfilter([1.0], [1.0, -phi], shocks)


def family_healthy_wandering(rng, i):
    """Reward, KL and entropy whose noise wanders (AR(1), phi 0.6-0.97) on top of the batch noise."""
    c = healthy(rng, _choose_n(rng, 500, 5000))
    phi = float(rng.uniform(0.6, 0.97))
    c.sig["reward"] = c.sig["reward"] + wandering_noise(rng, c.n, rng.uniform(0.01, 0.03), phi)
    c.sig["kl"] = c.sig["kl"] * np.exp(wandering_noise(rng, c.n, rng.uniform(0.05, 0.2), phi))
    c.sig["entropy"] = c.sig["entropy"] * (1 + wandering_noise(rng, c.n, rng.uniform(0.005, 0.015), phi))
    return c, _healthy_label(), {"phi": round(phi, 2)}


def f_reward_hack_wandering(rng, i):
    """A reward hack whose reward noise wanders (AR(1), phi 0.6-0.97): as strong as its level says in
    marginal noise sds."""
    c = healthy(rng, _choose_n(rng, 500, 5000))
    level = LEVELS[i % 3]
    phi = float(rng.uniform(0.6, 0.97))
    info = inject_reward_hack(rng, c, level, wander_phi=phi)
    _ensure_evals(rng, c, 6)
    flatten_evals(rng, c, drift=-rng.uniform(0, 0.03))
    return c, _fail(1, "fail", ["L1.reward-eval-divergence"]), {**info, "level": level, "phi": round(phi, 2)}


def family_healthy_outlier_batches(rng, i):
    """A reward model that misjudges a batch now and then: 2-5% of steps carry 4-8x the batch noise."""
    c = healthy(rng, _choose_n(rng, 300, 5000))
    hit = rng.random(c.n) < rng.uniform(0.02, 0.05)
    sd = float(np.std(np.diff(c.sig["reward"]))) / math.sqrt(2)
    c.sig["reward"] = c.sig["reward"] + np.where(hit, rng.normal(0, rng.uniform(4, 8) * sd, c.n), 0.0)
    return c, _healthy_label(), {"outlier_steps": int(hit.sum())}


def family_healthy_irregular(rng, i):
    """Steps logged at uneven gaps (1-8 steps; a time-based logger, dropped writes)."""
    c = healthy(rng, _choose_n(rng, 600, 8000))
    idx = np.cumsum(rng.integers(1, 9, c.n)) - 1
    idx = idx[idx < c.n]
    c.steps = c.steps[idx]
    c.sig = {name: v[idx] for name, v in c.sig.items()}
    _drop_evals_after_last_step(c)
    return c, _healthy_label(), {"logged_points": len(idx)}


def _moe(rng, c: Curves, imbalance_end: float) -> None:
    """MoE router statistics beside a healthy run: a max load violation drifting from ~0.3 toward
    `imbalance_end`, and (healthy) no dead experts."""
    n = c.n
    x = (c.steps - 1) / max(n - 1, 1)
    start = rng.uniform(0.2, 0.4)
    onset = rng.uniform(0.1, 0.5)
    c.sig["moe_imbalance"] = (start + (imbalance_end - start) * _ramp(x, onset, 1.0)) * np.exp(rng.normal(0, 0.04, n))
    c.sig["moe_dead_expert_frac"] = np.zeros(n)


def family_healthy_moe(rng, i):
    """A healthy MoE GRPO run: router load imbalance steady, no expert dead."""
    c = healthy(rng, _choose_n(rng, 300, 3000))
    _moe(rng, c, float(rng.uniform(0.25, 0.45)))
    label = _healthy_label()
    return c, label, {}


def f_moe_imbalance(rng, i):
    """GLM-4.5's warning: the busiest experts' share climbs 2.5-5x while the total loss stays normal."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    mult = rng.uniform(2.5, 5.0)
    _moe(rng, c, 0.3 * mult)
    return c, _fail(4, "warn", ["L4.moe-imbalance-rising"]), {"imbalance_mult": round(mult, 2)}


def nm_moe_imbalance(rng, i):
    """Imbalance drifting up 20-50%: specialisation, not a collapse."""
    c = healthy(rng, _choose_n(rng, 400, 3000))
    _moe(rng, c, 0.3 * rng.uniform(1.2, 1.5))
    return c, {}


def f_moe_dead(rng, i):
    """From some step on, 25-50% of the experts get no tokens."""
    c = healthy(rng, _choose_n(rng, 300, 3000))
    _moe(rng, c, 0.35)
    frac = rng.uniform(0.25, 0.5)
    at = int(rng.uniform(0.2, 0.6) * c.n)
    c.sig["moe_dead_expert_frac"][at:] = frac
    return c, _fail(4, "fail", ["L4.moe-dead-experts"]), {"dead_frac": round(frac, 2), "from": at}


def f_attention_logits(rng, i):
    """Kimi K2's warning: the max attention logit grows from ~30 past QK-clip's 100 (to 300-3,000)."""
    c = healthy(rng, _choose_n(rng, 400, 5000))
    x = (c.steps - 1) / max(c.n - 1, 1)
    end = float(np.exp(rng.uniform(np.log(300), np.log(3000))))
    onset = rng.uniform(0.1, 0.5)
    c.sig["attention_logit_max"] = (30 + (end - 30) * _ramp(x, onset, 1.0) ** 1.5) * np.exp(rng.normal(0, 0.03, c.n))
    verdict = "fail" if end > 1200 else "warn"
    return c, _fail(3, verdict, ["L3.attention-logit-growth"]), {"logit_end": round(end)}


def nm_attention_logits(rng, i):
    """Max attention logit drifting 25 -> 60-90: under QK-clip's threshold."""
    c = healthy(rng, _choose_n(rng, 400, 3000))
    x = (c.steps - 1) / max(c.n - 1, 1)
    c.sig["attention_logit_max"] = (25 + rng.uniform(35, 65) * x) * np.exp(rng.normal(0, 0.03, c.n))
    return c, {}


def _quiet(fn):
    def family(rng, i):
        c, info = fn(rng, i)
        return c, _quiet_label(), info
    return family



# family name -> (generator, how many runs)
FAMILIES: dict[str, tuple] = {
    "healthy": (family_healthy, 110),
    "healthy-absorbed-spike": (family_absorbed_spike, 10),
    "healthy-long-answers": (family_long_answers, 10),
    "healthy-pg-loss-bursts": (family_pg_loss_bursts, 8),
    "near-divergence": (_near("L1.reward-eval-divergence", nm_divergence), 8),
    "near-length": (_near("L1.length-confound", nm_length), 6),
    "near-zero-std": (_near("L1.zero-variance-groups", nm_zero_std), 6),
    "near-kl-entropy": (_near("L2.policy-moving-fast", nm_kl_entropy), 6),
    "near-entropy-floor": (_near("L2.entropy-below-floor", nm_entropy), 6),
    "near-loss-spike": (_near("L3.loss-spike", nm_loss), 6),
    "near-loss-spike-zero": (_near("L3.loss-spike", nm_loss_near_zero), 6),
    "near-grad-spike": (_near("L3.grad-norm-spike", nm_grad), 8),
    "near-logprob": (_near("L4.logprob-mismatch", nm_logprob), 6),
    "near-prob": (_near("L4.prob-mismatch", nm_prob), 4),
    "near-lag": (_near("L4.policy-version-lag", nm_lag), 4),
    "reward-hack": (f_reward_hack, 12),
    "length-confound": (f_length, 9),
    "hack-with-length": (f_hack_length, 6),
    "zero-variance": (f_zero_variance, 9),
    "difficulty-trap": (f_difficulty_trap, 9),
    "kl-entropy-collapse": (f_collapse, 12),
    "entropy-floor": (f_entropy_floor, 9),
    "loss-spike": (f_loss_spike, 9),
    "grad-spikes": (f_grad_spikes, 9),
    "explosion-precursor": (f_explosion_precursor, 24),
    "explosion-sudden": (f_explosion_sudden, 9),
    "nan-in-reward": (_nan_origin("reward"), 6),
    "nan-in-logprob": (_nan_origin("logprob_delta"), 6),
    "nan-in-loss": (_nan_origin("loss"), 6),
    "nan-in-grad-norm": (_nan_origin("grad_norm"), 6),
    "logprob-level": (f_logprob("level"), 6),
    "logprob-onset": (f_logprob("onset"), 6),
    "logprob-drift": (f_logprob("drift"), 6),
    "logprob-warn": (f_logprob("warn"), 4),
    "prob-mismatch": (f_prob, 4),
    "version-lag": (f_lag, 6),
    "lag-and-mismatch": (f_lag_and_mismatch, 3),
    "hack-then-blowup": (f_hack_then_blowup, 9),
    "collapse-then-blowup": (f_collapse_then_blowup, 6),
    # new shapes
    "healthy-sft": (family_healthy_sft, 12),
    "healthy-offset": (family_healthy_offset, 6),
    "healthy-scaled": (family_healthy_scaled, 8),
    "healthy-sparse-evals": (family_healthy_sparse_evals, 6),
    "reward-hack-scaled": (f_reward_hack_scaled, 6),
    "healthy-batch-reward": (family_healthy_batch_reward, 10),
    "reward-hack-batch": (f_reward_hack_batch, 6),
    "healthy-averaged-logging": (family_healthy_averaged_logging, 10),
    "healthy-outlier-batches": (family_healthy_outlier_batches, 8),
    "healthy-irregular": (family_healthy_irregular, 8),
    "healthy-wandering": (family_healthy_wandering, 10),
    "reward-hack-wandering": (f_reward_hack_wandering, 6),
    # newly reported failure patterns, each with its quiet near miss
    "instant-collapse": (f_instant_collapse, 8),
    "near-instant-collapse": (_quiet(nm_instant_collapse), 5),
    "frozen-updates": (f_frozen_updates, 9),
    "near-frozen": (_quiet(nm_frozen), 6),
    "healthy-moe": (family_healthy_moe, 6),
    "moe-imbalance": (f_moe_imbalance, 6),
    "near-moe-imbalance": (_quiet(nm_moe_imbalance), 5),
    "moe-dead-experts": (f_moe_dead, 5),
    "attention-logit-growth": (f_attention_logits, 6),
    "near-attention-logits": (_quiet(nm_attention_logits), 5),
    "kl-level-high": (f_kl_level, 6),
    "near-kl-level": (_quiet(nm_kl_level), 5),
    "sft-divergence": (f_sft_divergence, 8),
    "near-sft-bump": (_quiet(nm_sft_bump), 5),
    "reward-components": (f_reward_components, 8),
    "near-reward-components": (_quiet(nm_reward_components), 5),
    "eval-reward-length-capped": (f_eval_reward_length, 4),
    "truncation-climb": (f_truncation_climb, 6),
    "near-truncation": (_quiet(nm_truncation), 5),
    "transient-inf-hack": (f_transient_inf_hack, 6),
    "rolled-back-blowup": (f_rolled_back, 6),
    "near-rolled-back": (_quiet(nm_rolled_back), 5),
    "l4-few-points": (f_l4_few_points, 4),
    "near-l4-levels": (_quiet(nm_l4_levels), 5),
    # honest "not judged"
    "short-reward-rise": (nj_short_reward_rise, 4),
    "eval-3-points": (nj_eval_3_points, 4),
    "reward-only": (nj_reward_only, 4),
    "crash-after-2-steps": (nj_crash_2_steps, 4),
    "eval-reward-length-uncapped": (nj_eval_reward_length, 4),
}


# --- writing ----------------------------------------------------------------------------------------

TRL = {"reward": "train/reward", "zero_std_frac": "train/frac_reward_zero_std",
       "response_length": "train/completions/mean_length", "kl": "train/kl", "entropy": "train/entropy",
       "loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/learning_rate",
       "logprob_delta": "train/sampling/sampling_logp_difference/mean",
       "prob_delta": "training/rollout_probs_diff_mean",
       "policy_version_lag": "training/off_policy/trajectory_staleness/mean",
       "truncation_rate": "train/completions/clipped_ratio",
       "is_ratio_mean": "train/sampling/importance_sampling_ratio/mean",
       "moe_imbalance": "train/load imbalance", "moe_dead_expert_frac": "train/dead_expert_frac",
       "attention_logit_max": "train/max_logit"}
VERL = {"reward": "critic/score/mean", "response_length": "response_length/mean", "kl": "actor/kl_loss",
        "entropy": "actor/entropy", "loss": "actor/pg_loss", "grad_norm": "actor/grad_norm", "lr": "actor/lr",
        "logprob_delta": "train_rollout_logprob_abs_diff", "prob_delta": "training/rollout_probs_diff_mean",
        "policy_version_lag": "training/off_policy/trajectory_staleness/mean",
        "truncation_rate": "response_length/clip_ratio", "kl_coef": "actor/kl_coef",
        "is_ratio_mean": "rollout_corr/rollout_is_mean", "moe_imbalance": "rollout/moe/max_vio/max",
        "moe_dead_expert_frac": "dead_expert_frac", "attention_logit_max": "max_attention_logit"}
FORMATS = ("csv", "csv-split", "jsonl", "parquet", "long")


def eval_key(framework: str, name: str) -> str:
    """An independent eval's key; a name holding '/' is already a key (eval/loss, TRL's eval/reward)."""
    if "/" in name:
        return name
    return f"val-core/{name}/acc/mean@1" if framework == "verl" else f"eval/{name}_accuracy"


def train_key(framework: str, signal: str) -> str | None:
    """A train signal's key under the framework's names; reward:<fn> is TRL's per-function reward."""
    if signal.startswith("reward:"):
        return f"train/rewards/{signal.split(':', 1)[1]}/mean" if framework == "trl" else None
    return (VERL if framework == "verl" else TRL).get(signal)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.6g}"


def _rows(c: Curves, framework: str, resume: tuple[int, int] | None, rng) -> tuple[list[int], list[dict], dict]:
    """Per-step train rows (each a dict key -> value) in write order, and eval rows by step.

    A rolled-back run (c.info["rollback"] = (first, last, values)) writes its rows up to index `last`
    with the first attempt's values from `first` on, then again from `first` with the kept values."""
    keys = {k: v for s, v in c.sig.items() if (k := train_key(framework, s)) is not None}
    order = list(range(c.n))
    replay: set[int] = set()
    if resume is not None:                        # rows up to `at`, then again from `at - overlap`
        at, overlap = resume
        order = list(range(at)) + list(range(at - overlap, c.n))
        replay = set(range(at - overlap, at))
    first_try: dict[str, np.ndarray] = {}
    lo = hi = -1
    if c.info.get("rollback") is not None:
        lo, hi, attempt = c.info["rollback"]
        order = list(range(hi + 1)) + list(range(lo, c.n))
        first_try = {k: attempt[s] for s in attempt if (k := train_key(framework, s)) is not None}
    seen: set[int] = set()
    steps, rows = [], []
    for i in order:
        wobble = 1.0 + (0.01 * rng.normal() if i in replay and i in seen else 0.0)
        again = i in seen
        seen.add(i)
        steps.append(int(c.steps[i]))
        row = {k: float(v[i]) * wobble for k, v in keys.items()}
        if first_try and lo <= i <= hi and not again:
            row.update({k: float(v[i - lo]) for k, v in first_try.items()})
        rows.append(row)
    evals: dict[int, dict] = {}
    for name, (s, v) in c.evals.items():
        for step, value in zip(s.tolist(), v.tolist()):
            evals.setdefault(int(step), {})[eval_key(framework, name)] = float(value)
    return steps, rows, evals


def _add_eval_only_rows(steps: list[int], rows: list[dict], evals: dict[int, dict]) -> None:
    """An eval logged at a step with no train row (train logged every k steps) gets a row of its own,
    in step order, as the trackers write it; runs whose evals fall on train steps are unchanged."""
    extra = sorted(set(evals) - set(steps))
    if not extra:
        return
    if any(b < a for a, b in zip(steps, steps[1:])):      # a resumed run: append, the loader sorts
        steps.extend(extra)
        rows.extend({} for _ in extra)
        return
    merged = sorted([(s, 0, i) for i, s in enumerate(steps)] + [(s, 1, -1) for s in extra])
    old_rows = list(rows)
    steps[:] = [s for s, _, _ in merged]
    rows[:] = [old_rows[i] if i >= 0 else {} for _, _, i in merged]


def write_run(folder: Path, c: Curves, framework: str, fmt: str, resume, rng) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    steps, rows, evals = _rows(c, framework, resume, rng)
    train_keys = list(dict.fromkeys(k for r in rows for k in r))
    _add_eval_only_rows(steps, rows, evals)
    eval_keys = sorted({k for e in evals.values() for k in e})
    step_col = "training/global_step" if framework == "verl" and fmt != "jsonl" else "step"
    if fmt in ("csv", "csv-split"):
        split = fmt == "csv-split"
        header = [step_col, *train_keys, *([] if split else eval_keys)]
        with (folder / "train.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            for s, r in zip(steps, rows):
                e = {} if split else evals.get(s, {})
                w.writerow([s, *(_fmt(r[k]) if k in r else "" for k in train_keys),
                            *(_fmt(e[k]) if k in e else "" for k in ([] if split else eval_keys))])
        if split and eval_keys:
            with (folder / "eval.csv").open("w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow([step_col, *eval_keys])
                for s in sorted(evals):
                    w.writerow([s, *(_fmt(evals[s][k]) if k in evals[s] else "" for k in eval_keys)])
        return ["train.csv"] + (["eval.csv"] if split and eval_keys else [])
    if fmt == "jsonl":
        lines = []
        done_evals: set[int] = set()
        for s, r in zip(steps, rows):
            data = dict(r)
            if s in evals and s not in done_evals:
                data.update(evals[s])
                done_evals.add(s)
            if framework == "verl":
                data["training/global_step"] = s
                lines.append(json.dumps({"step": s, "data": data}))
            else:
                lines.append(json.dumps({"train/global_step": s, **data}))
        (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        return ["metrics.jsonl"]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols: dict[str, list] = {step_col: steps}
        for k in train_keys:
            cols[k] = [r.get(k) for r in rows]
        for k in eval_keys:
            cols[k] = [evals.get(s, {}).get(k) for s in steps]
        pq.write_table(pa.table(cols), folder / "metrics.parquet")
        return ["metrics.parquet"]
    if fmt == "long":
        with (folder / "metrics_long.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["step", "key", "value"])
            for s, r in zip(steps, rows):
                for k in train_keys:
                    if k in r:
                        w.writerow([s, k, _fmt(r[k])])
            for s in sorted(evals):
                for k, v in evals[s].items():
                    w.writerow([s, k, _fmt(v)])
        return ["metrics_long.csv"]
    raise ValueError(f"unknown format {fmt!r}")


# --- the corpus -------------------------------------------------------------------------------------

def specs(seed: int = SEED, scale: float = 1.0) -> list[tuple[str, str, int]]:
    """(run name, family, index) for the whole corpus; `scale` shrinks every family (at least 1 run)."""
    out = []
    for family, (_, count) in FAMILIES.items():
        k = max(1, int(round(count * scale)))
        out.extend((f"{family}-{i:03d}", family, i) for i in range(k))
    return out


# families whose failure is a trend, not a single step, so logging every 5 or 10 steps keeps it visible
TREND_FAMILIES = ("reward-hack", "length-confound", "zero-variance", "kl-entropy-collapse", "entropy-floor",
                  "logprob-level", "logprob-onset", "logprob-drift", "version-lag", "healthy-long-answers",
                  "reward-hack-wandering")


# families whose label rests on a few steps (a rolled-back segment, a 3-step collapse, an isolated
# zero-gradient step): they always log every step, and the metamorphic check does not thin them out
POINT_EVENT_FAMILIES = ("healthy-absorbed-spike", "near-loss-spike", "near-loss-spike-zero", "near-grad-spike",
                        "instant-collapse", "near-instant-collapse", "near-frozen", "transient-inf-hack",
                        "rolled-back-blowup", "near-rolled-back", "sft-divergence", "near-sft-bump",
                        "l4-few-points", "crash-after-2-steps", "short-reward-rise", "eval-3-points")


# families that set their own logging (averaged every k steps, uneven gaps): never subsampled again
OWN_LOGGING_FAMILIES = ("healthy-averaged-logging", "healthy-irregular")


def _logging_interval(rng, c: Curves, family: str, lab: dict) -> int:
    """TRL's logging_steps: most runs log every step, some every 5 or 10 (a divisor of the eval interval)."""
    if family in OWN_LOGGING_FAMILIES:
        return 1
    if not (lab.get("kind") in ("healthy", "near-miss") or family in TREND_FAMILIES) \
            or family in ("healthy-absorbed-spike", "near-loss-spike", "near-loss-spike-zero", "near-grad-spike") \
            or family in POINT_EVENT_FAMILIES or c.n < 200 or rng.random() > 0.3:
        return 1
    ev = np.concatenate([s for s, _ in c.evals.values()]) if c.evals else np.array([], dtype=int)
    ok = [k for k in (5, 10) if np.all((ev % k == 0) | (ev == c.n))]
    return int(rng.choice(ok)) if ok else 1


LAST_STEP_SIGNALS = ("grad_norm", "lr")       # logged at the step itself, not averaged over the interval


def average_logging(steps: np.ndarray, sig: dict, every: int) -> tuple[np.ndarray, dict]:
    """TRL's logging_steps: each logged value is the mean of the `every` steps since the last log (the loss
    too, by the HF Trainer); grad norm and learning rate are the last step's.  An unfinished interval at
    the end is not logged."""
    n = len(steps) // every * every
    return steps[every - 1:n:every], {k: v[every - 1:n:every] if k in LAST_STEP_SIGNALS
                                      else v[:n].reshape(-1, every).mean(axis=1) for k, v in sig.items()}


def _average(c: Curves, every: int) -> None:
    c.steps, c.sig = average_logging(c.steps, c.sig, every)
    _drop_evals_after_last_step(c)


def _drop_evals_after_last_step(c: Curves) -> None:
    c.evals = {k: (s[s <= c.steps[-1]], v[s <= c.steps[-1]]) for k, (s, v) in c.evals.items()}


def _subsample(c: Curves, every: int) -> None:
    keep = (c.steps % every == 0) | (c.steps == c.steps[-1])
    c.steps = c.steps[keep]
    c.sig = {k: v[keep] for k, v in c.sig.items()}


def build_one(name: str, family: str, index: int, seed: int = SEED) -> tuple[Curves, Label, str, str, tuple | None]:
    """Generate one run's curves and label (no I/O): deterministic in (seed, family, index)."""
    fam_seed = zlib.crc32(family.encode())       # stable across runs and Python versions
    rng = np.random.default_rng([seed, fam_seed, index])
    fn = FAMILIES[family][0]
    out = fn(rng, index)
    if len(out) == 3:
        c, lab, info = out
    else:
        c, info = out
        lab = {}
    has_zero = "zero_std_frac" in c.sig
    forced = c.info.get("framework")              # new families: TRL-only keys (reward components, SFT)
    framework = forced or ("trl" if has_zero and (family in ("zero-variance", "difficulty-trap", "near-zero-std")
                                                  or rng.random() < 0.6) else "verl")
    if framework == "verl":
        c.sig.pop("zero_std_frac", None)          # verl core does not log it
    every = _logging_interval(rng, c, family, lab)
    if every > 1:
        (_average if framework == "trl" else _subsample)(c, every)
    fmt = "parquet" if c.n >= 10_000 else str(rng.choice(FORMATS))
    if c.info.get("rollback") is not None and fmt not in ("csv", "jsonl", "long"):
        fmt = {"csv-split": "csv", "parquet": "jsonl"}[fmt]     # formats that keep a step written twice
    resume = None
    if c.info.get("resume") and fmt in ("csv", "jsonl", "long") and c.n >= 100:
        at = int(rng.uniform(0.3, 0.8) * c.n)
        resume = (at, int(rng.integers(1, max(2, min(50, at // 4)))))
    if c.info.get("step_offset"):                 # a run resumed at step 50,000 logs 50,001 on
        offset = int(c.info["step_offset"])
        c.steps = c.steps + offset
        c.evals = {k: (s + offset, v) for k, (s, v) in c.evals.items()}
    label = Label(name=name, family=family, params={**{k: v for k, v in info.items() if k != "resume"},
                                                    "n_steps": int(c.steps[-1]), "log_every": every,
                                                    "framework": framework, "format": fmt,
                                                    "resumed": resume is not None}, **lab)
    return c, label, framework, fmt, resume


def build(out: str | Path, seed: int = SEED, scale: float = 1.0, names: list[str] | None = None) -> list[Label]:
    """Write the corpus under out/runs/<name>/ and its labels to out/labels.json."""
    out = Path(out)
    if names is None and (out / "runs").exists():
        shutil.rmtree(out / "runs")              # a run's format may change between builds: no stale files
    labels = []
    for name, family, index in specs(seed, scale):
        if names is not None and name not in names:
            continue
        c, label, framework, fmt, resume = build_one(name, family, index, seed)
        wrng = np.random.default_rng([seed, index, 7])
        write_run(out / "runs" / name, c, framework, fmt, resume, wrng)
        labels.append(label)
    (out / "labels.json").write_text(json.dumps([asdict(lab) for lab in labels], indent=1) + "\n")
    return labels


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/scenarios.py OUT_DIR")
    target = Path(sys.argv[1])
    written = build(target)
    print(f"wrote {len(written)} runs under {target / 'runs'}")
