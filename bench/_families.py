"""Healthy runs drawn from broad null families, and failing runs drawn from failure shapes, for
bench/calibrate.py (issue 43).  Pure numpy: it never imports stabdiag, so any version can be measured on
the same runs.  Neither bench/scenarios.py (the tuning generator) nor bench/heldout.py is used.

Every run is drawn from `numpy.random.default_rng([seed, crc32(name), ...])` alone, so the same seed gives
the same runs whatever else is selected and however many jobs run them.  A run is a per-step process
i = 0 .. T-1, logged as stabdiag would read it: step labels `start + i`, the training metrics every
`cadence` steps, the evals at their own steps.

Keys (TRL's GRPOTrainer / HF Trainer names, which stabdiag's alias table maps):
  RL runs        reward, eval_math500_accuracy (+ eval_gsm8k_accuracy), completions/mean_length, kl, entropy,
                 loss, grad_norm, learning_rate -> reward, eval:math500 (eval:gsm8k), response_length, kl,
                 entropy, loss, grad_norm, lr
  pretraining    loss, grad_norm, learning_rate, eval_loss -> loss, grad_norm, lr, eval_loss
  logprob drift  sampling/sampling_logp_difference/mean (TRL) -> logprob_delta

NULL FAMILIES (a healthy run: every signal present, around a healthy mean)
Drawn per run, in every family:
  T          log-uniform on 20 .. t_max (t_max = 100,000; bench/calibrate.py caps it in --quick)
  start      0 (p 0.6), 1 (p 0.2) or 50,000 (p 0.2): a pure relabelling of the steps
  cadence    k from {1, 5, 25}, uniformly, then lowered (25 -> 5 -> 1) until the run has >= 8 logged points;
             for k > 1, mode "sub" (the value at every k-th step, i = k-1, 2k-1, ...) or "mean" (the mean of
             the k steps ending there, as TRL's logging_steps averages), with equal chance.  The learning
             rate is always the value at the logged step.
  evals      n_eval log-uniform on 8 .. 200 evaluations (at most one per two logged points), every
             e = k * max(1, round(T / (k n_eval))) steps at i = e-1, 2e-1, ..., plus i = 0 with chance 1/2
             (eval on start); a run shorter than e is evaluated at its last step.  Eval values are the
             per-step process at those steps (never averaged).
  kind       pretraining with chance 1/4 (never in `binomial`), else RL.
RL levels and noise (noise scale 1; "log" = the noise acts on log(value)):
  reward     r0 ~ U(0.15, 0.6), sd ~ U(0.01, 0.05); clipped to 0..1
  evals      one or two (chance 1/2 each); e0 ~ U(0.2, 0.7), n_items from {100, 500, 1319},
             sd = sqrt(e0 (1 - e0) / n_items); clipped to 0..1
  length     len0 log-uniform on 150 .. 1500 tokens, log sd ~ U(0.02, 0.08)
  kl         kl0 log-uniform on 0.001 .. 0.05, log sd ~ U(0.05, 0.2)
  entropy    ent0 ~ U(0.3, 2.0), log sd ~ U(0.01, 0.05)
  loss       0.04 x kl (GRPO's loss sits near 0) + sd ~ U(0.005, 0.03)
  grad_norm  g0 log-uniform on 0.05 .. 5, log sd ~ U(0.1, 0.3)
  lr         peak log-uniform on 1e-7 .. 1e-5 (pretraining 1e-4 .. 3e-3); schedule from {constant, warm-up
             then constant, warm-up then cosine to 0.1 x peak, linear decay to 0.1 x peak}, warm-up
             U(0.01, 0.1) T steps; no noise
Pretraining levels: loss L_inf ~ U(1.8, 3.5) + (L0 - L_inf)(1 - f(u)), L0 ~ U(4, 11), sd ~ U(0.01, 0.05);
  eval_loss = the loss's mean + gap ~ U(0.01, 0.15), sd ~ U(0.005, 0.02); grad_norm
  g0 (1 + h exp(-u / tg)) (1 + 0.1 u), h ~ U(0, 2), tg ~ U(0.01, 0.1), log sd ~ U(0.1, 0.3).
  u = i / (T - 1) is the run's progress.  In the noise families f is exponential saturation with
  tau ~ U(0.05, 0.3) (a pretraining loss that does not fall is not healthy); in the smooth families f is the
  family's curve; in flat_loss f = 1 (below).
Means: in the noise families an RL run's means are stationary (flat); in the smooth families they move on
  the family's curve f (0 -> 1): reward r0 + d f, d ~ U(0.1, 0.4) (at most 0.95 - r0); every eval follows,
  e0 + c d f with c ~ U(0.5, 1.0) per eval (at most 0.95 - e0); kl kl0 (0.1 + 0.9 f); entropy
  ent0 (1 - q f), q ~ U(0.03, 0.15); length len0 (1 + g f), g ~ U(-0.1, 0.3); grad norm
  g0 (1 - 0.3 f) (1 + 0.1 u) (in every family: the slow creep keeps a noise-free grad norm from repeating one
  exact value, which L3.frozen-updates rightly reads as a frozen update).
Each signal gets its own unit noise process (independent across signals), scaled by its sd:
  iid_gauss         N(0, 1)
  iid_t3            Student-t(3) / sqrt(3) (unit variance, heavy tails)
  lognormal_grad    N(0, 1), and the grad norm's log sd is sigma ~ U(0.2, 1.0) (i.i.d. log-normal grad norms)
  ar_0.5 .. ar_0.99 stationary AR(1), x_i = phi x_{i-1} + sqrt(1 - phi^2) z_i, x_0 = z_0, per step
  random_walk       z_i + a w_i, w_i = (z'_0 + ... + z'_i) / sqrt(T) (a random walk scaled so that it spreads
                    about 1 over the whole run, whatever T: it wanders but stays bounded), a ~ U(1, 3) per run
  smooth_sigmoid    f = sigmoid((u - m) / w), m ~ U(0.2, 0.5), w ~ U(0.03, 0.1), rescaled to 0 at u = 0, 1 at 1
  smooth_expsat     f = (1 - exp(-u / tau)) / (1 - exp(-1 / tau)), tau ~ U(0.05, 0.25)
  smooth_quadratic  f = 1 - (1 - min(u / p, 1))^2, p ~ U(0.3, 0.8) (a quadratic approach to a plateau)
                    The three smooth families draw N(0, 1) noise scaled by nu ~ U(0.1, 0.5) (small noise).
  smooth_noisefree  one of the three curves (chance 1/3 each), no noise at all
  flat_loss         a supervised run logged after its loss converged (a resumed or continued run, a model that
                    already fits its data): always the pretraining kind, f = 1 (the loss flat at L_inf), each
                    signal's noise of one kind drawn per run (chance 1/4 each): N(0, 1), AR(1) 0.5, AR(1) 0.9,
                    Student-t(3) / sqrt(3)
  binomial          RL only.  G from {4, 8, 16, 64, 256} completions for each of P from {8, 16, 32, 64} prompts
                    per step; prompt logits logit(r0) + rho f(u) + a_d w_i + tp z, with f exponential
                    saturation (tau ~ U(0.1, 0.5)), skill gain rho ~ U(0, 1.5) logits, the prompts'
                    difficulty drifting as the bounded random walk w above with a_d ~ U(0.1, 0.5) logits,
                    prompt spread tp ~ U(0.5, 1.5); reward = successes / (P G).  Each eval follows the skill,
                    not the training prompts' drift: Binomial(n_items, sigmoid(logit(e0) + c rho f(u))) /
                    n_items, c ~ U(0.5, 1.0).  The other signals are iid_gauss's.

FAILURE SHAPES (bench/calibrate.py: detection = root layer is the intended layer AND an intended rule fired)
Per run: T given (a few values), start 0, logged every step, evals n_eval = clip(T / 50, 8, 200) times
evenly (i = e-1, 2e-1, ...), one or two evals.  Noise is N(0, 1) per step times a noise level nu (1, 0.3, 0)
times the reference sds below (fixed, so that effects are exact in sd units): reward 0.03, evals
sqrt(e0 (1 - e0) / 500), length log 0.05, kl log 0.1, entropy log 0.03, loss 0.01, grad_norm log 0.2,
logprob_delta log 0.1.  The draws depend on (seed, shape, T, index) only: effect size and noise level
rescale the same draw (paired comparisons).  Healthy base: reward r0 ~ U(0.15, 0.5) and evals e0 ~ U(0.2, 0.7)
flat; kl kl0 (0.5 + 0.5 s), entropy ent0 (1 - 0.05 s), grad norm g0 (1 - 0.2 s), length len0 (1 + 0.05 s),
logprob_delta d0 (1 + 0.1 s), d0 ~ U(0.005, 0.02), loss 0.04 kl, s = exponential saturation (tau 0.3), so
that no signal is exactly constant without noise.  A ramp is smoothstep(a .. b) with a ~ U(0.1, 0.3),
b ~ U(0.6, 0.9) of the run.  Effects small / medium / large:
  eval_flat       reward + D on the ramp, D = 0.10 / 0.20 / 0.40 (3.3 / 6.7 / 13.3 reward sds; the rule's
                  bar is 3 sds and 30% of the reward's range); evals flat
  eval_sliding    as eval_flat, and every eval slides by -D / 3 on the same ramp (at least to 0.02)
  eval_constant   as eval_flat, and every eval is exactly e0 (rounded to 3 decimals) at every point
  length_growth   length x 2.2 / 3 / 5 on the ramp (the rule's bar: 2x); reward and evals flat
  kl_entropy      within D = min(0.3 T, 150) steps from c ~ U(0.4, 0.6) T: kl x 2.5 / 5 / 20 and entropy
                  -45% / -65% / -85% (the rule's bar: kl 2x and entropy -40% within 200 steps); they stay
  logprob_drift   logprob_delta d0 -> 0.07 / 0.15 / 0.40 nats on the ramp (the rule warns at 0.05, fails at 0.1)
  nan_precursor   grad norm x 2 / 4 / 10 (geometric climb; the rule's bar: 1.5x) over the max(0.15 T, 10)
                  steps before the last max(0.02 T, 1) steps, where loss and grad norm are NaN
  spike_kept      at c ~ U(0.4, 0.7) T the loss jumps by J = 0.2 / 0.6 / 2.0 (20 / 60 / 200 loss sds; the
                  rule's bar: 15 robust sds) with a first point at 1.5 J, and stays up (J decaying to 0.8 J by
                  the end); the grad norm jumps x 6 / 15 / 50 and stays at 0.7 of that

SUPERVISED SHAPES (issue 44: losses that climb back or depart and recover, and their healthy twins).  No reward:
loss, grad_norm, learning_rate (warm-up U(0.01, 0.05) T then cosine to 0.1 x peak) every step, eval_loss at the
eval steps above.  The loss's mean falls from L0 to L_inf as exponential saturation s(u) with tau:
  from scratch    L0 ~ U(10, 11) (ln V of a 50k vocabulary is 10.8), L_inf ~ U(2.5, 3.5), tau ~ U(0.05, 0.15)
  SFT             L0 ~ U(2.5, 4.5), L_inf ~ U(0.5, 1.2), tau ~ U(0.02, 0.1)
Noise (times the noise level nu): loss N(0, 0.02^2) per step, eval_loss 0.01, grad norm log sd 0.2; grad norm
g0 (1 + 2 exp(-u / 0.05)) (1 - 0.2 s), g0 log-uniform on 0.1 .. 3; eval_loss = the loss's mean + U(0.02, 0.1).
"Descent" below is L0 minus the loss's mean where the event starts: the way the loss came down so far.
  loss_climb_scratch  (from scratch) from c ~ U(0.5, 0.7) T the mean climbs back by share D = 0.4 / 0.7 / 1.2 of
                  the descent (smoothstep over U(0.03, 0.08) T steps) and holds to the end; the grad norm x (1 + 3 D)
                  with it (issue 44: 10.8 -> 3.0 -> 9.0 is D 0.77, grad norm 0.3 -> 3.3); the eval loss follows
  sft_loss_climb  (SFT) the same with D = 0.6 / 1.0 / 1.5 (issue 44: 4.0 -> 1.0 -> 5.5 is D 1.5)
  loss_excursion  (from scratch or SFT, chance 1/2 each) at c ~ U(0.4, 0.6) T the mean jumps by D = 0.3 / 0.6 /
                  1.0 of the descent (the 13B run: 2.77 -> 8.72 is D ~0.7) within 3 steps and decays back as
                  exp(-(t - c) / tau_e), tau_e log-uniform on 15 .. 150 steps (at most 0.05 T): back within
                  about 5 tau_e; the grad norm x (1 + 4 D) with the same decay; the eval loss follows
Healthy twins (bench/calibrate.py reports the share that ends fail / warn; targets 1% / 5%):
  loss_plateau    (from scratch or SFT) the mean reaches L_inf by p T and is flat after, p = 0.7 / 0.4 / 0.1
                  (a longer plateau with each effect: more room for a "best" chosen by chance)
  noisy_loss      (from scratch or SFT) the loss's noise is Student-t(3) / sqrt(3) with sd 0.02 / 0.05 / 0.1 of the
                  total descent, the grad norm's log noise t(3) / sqrt(3) with sd 0.3 (both times nu)
  cosine_restart  (from scratch or SFT) the lr restarts its cosine (SGDR, Loshchilov & Hutter 2017) 3 times, at
                  1/4, 1/2 and 3/4 of the run, back to its peak and down to 0.05 x peak; at each restart the
                  mean bumps by B = 0.05 / 0.1 / 0.2 of the descent so far, back within the cycle
                  (exp(-(t - r) / (0.03 T))), the grad norm x (1 + 2 B) the same way
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import numpy as np

RL_KEYS = {"reward": "reward", "eval:math500": "eval_math500_accuracy", "eval:gsm8k": "eval_gsm8k_accuracy",
           "response_length": "completions/mean_length", "kl": "kl", "entropy": "entropy", "loss": "loss",
           "grad_norm": "grad_norm", "lr": "learning_rate"}
PRETRAIN_KEYS = {"loss": "loss", "grad_norm": "grad_norm", "lr": "learning_rate", "eval_loss": "eval_loss"}
LOGPROB_KEY = "sampling/sampling_logp_difference/mean"
EVAL_SIGNALS = ("eval:math500", "eval:gsm8k")

NOISE_FAMILIES = {"iid_gauss": ("gauss", 0.0), "iid_t3": ("t3", 0.0), "lognormal_grad": ("gauss", 0.0),
                  "ar_0.5": ("ar", 0.5), "ar_0.9": ("ar", 0.9), "ar_0.97": ("ar", 0.97), "ar_0.99": ("ar", 0.99),
                  "random_walk": ("rw", 0.0)}
SMOOTH_FAMILIES = {"smooth_sigmoid": "sigmoid", "smooth_expsat": "expsat", "smooth_quadratic": "quadratic",
                   "smooth_noisefree": None}
FLAT_LOSS_NOISES = (("gauss", 0.0), ("ar", 0.5), ("ar", 0.9), ("t3", 0.0))
FAMILIES = (*NOISE_FAMILIES, *SMOOTH_FAMILIES, "binomial", "flat_loss")
T_MIN, T_MAX = 20, 100_000
CADENCES = (1, 5, 25)
STARTS = (0, 1, 50_000)


@dataclass(frozen=True)
class Shape:
    """A failure shape: the layer and rules that should catch it, and its three effect sizes."""

    layer: int
    rules: tuple[str, ...]
    effects: tuple[float, float, float]    # small, medium, large, in the units the module docstring states
    healthy: bool = False                  # a healthy twin: its rate of fail / warn verdicts is what counts


SHAPES = {
    "eval_flat": Shape(1, ("L1.reward-eval-divergence",), (0.10, 0.20, 0.40)),
    "eval_sliding": Shape(1, ("L1.reward-eval-divergence",), (0.10, 0.20, 0.40)),
    "eval_constant": Shape(1, ("L1.reward-eval-divergence",), (0.10, 0.20, 0.40)),
    "length_growth": Shape(1, ("L1.length-confound",), (2.2, 3.0, 5.0)),
    "kl_entropy": Shape(2, ("L2.policy-moving-fast",), (0.45, 0.65, 0.85)),
    "logprob_drift": Shape(4, ("L4.logprob-mismatch",), (0.07, 0.15, 0.40)),
    "nan_precursor": Shape(3, ("L3.grad-norm-precursor",), (2.0, 4.0, 10.0)),
    "spike_kept": Shape(3, ("L3.loss-spike", "L3.grad-norm-spike"), (0.2, 0.6, 2.0)),
    "loss_climb_scratch": Shape(3, ("L3.loss-divergence",), (0.4, 0.7, 1.2)),
    "sft_loss_climb": Shape(3, ("L3.loss-divergence",), (0.6, 1.0, 1.5)),
    "loss_excursion": Shape(3, ("L3.loss-excursion", "L3.grad-norm-excursion"), (0.3, 0.6, 1.0)),
    "loss_plateau": Shape(0, (), (0.7, 0.4, 0.1), healthy=True),
    "noisy_loss": Shape(0, (), (0.02, 0.05, 0.1), healthy=True),
    "cosine_restart": Shape(0, (), (0.05, 0.1, 0.2), healthy=True),
}
SUPERVISED_SHAPES = ("loss_climb_scratch", "sft_loss_climb", "loss_excursion", "loss_plateau", "noisy_loss",
                     "cosine_restart")
EFFECTS = ("small", "medium", "large")
KL_RATIO = {0.45: 2.5, 0.65: 5.0, 0.85: 20.0}        # kl_entropy: entropy drop -> kl ratio
GRAD_JUMP = {0.2: 6.0, 0.6: 15.0, 2.0: 50.0}          # spike_kept: loss jump -> grad norm ratio


@dataclass(frozen=True)
class Generated:
    """One drawn run: the training metrics at their logged steps, the evals at theirs, which canonical
    signal each key should read as, and what was drawn (JSON-able)."""

    train: dict[str, np.ndarray]
    evals: dict[str, np.ndarray]
    signals: dict[str, str]
    info: dict = field(default_factory=dict)


def rng_for(seed: int, name: str, *parts: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode()), *parts])


# ---------------------------------------------------------------- unit noise processes

def ar1(z: np.ndarray, phi: float, block: int = 256) -> np.ndarray:
    """Stationary AR(1) driven by `z` (rows are steps): x_0 = z_0, x_i = phi x_{i-1} + sqrt(1 - phi^2) z_i.
    Block by block, x_{b+j} = phi^(j+1) x_{b-1} + sum_m phi^(j-m) v_{b+m} as one lower-triangular matrix
    product, so there is no Python loop over steps."""
    z = np.asarray(z, dtype=np.float64)
    flat = z.ndim == 1
    v = (z[:, None] if flat else z) * math.sqrt(1.0 - phi * phi)
    v[0] = z[0]                          # the stationary start: x_0 = z_0
    lag = np.arange(block)[:, None] - np.arange(block)[None, :]
    powers = np.where(lag >= 0, phi ** np.maximum(lag, 0), 0.0)
    carry = phi ** (np.arange(block) + 1.0)
    out = np.empty_like(v)
    prev = np.zeros(v.shape[1])
    for b in range(0, len(v), block):
        m = len(v[b:b + block])
        out[b:b + m] = powers[:m, :m] @ v[b:b + m] + carry[:m, None] * prev
        prev = out[b + m - 1]
    return out[:, 0] if flat else out


def bounded_walk(rng: np.random.Generator, n: int, cols: int) -> np.ndarray:
    """A random walk scaled by 1/sqrt(n): its spread over the whole run is about 1, whatever n."""
    return np.cumsum(rng.standard_normal((n, cols)), axis=0) / math.sqrt(n)


def unit_noise(rng: np.random.Generator, kind: str, n: int, cols: int, phi: float = 0.0) -> np.ndarray:
    """(n, cols) noise, one independent column per signal: gauss, t3, ar (phi) or rw (see the docstring)."""
    if kind == "gauss":
        return rng.standard_normal((n, cols))
    if kind == "t3":
        return rng.standard_t(3, (n, cols)) / math.sqrt(3.0)
    if kind == "ar":
        return ar1(rng.standard_normal((n, cols)), phi)
    if kind == "rw":
        amplitude = rng.uniform(1.0, 3.0)
        return rng.standard_normal((n, cols)) + amplitude * bounded_walk(rng, n, cols)
    raise ValueError(f"unknown noise kind {kind!r}")


# ---------------------------------------------------------------- mean curves

def curve(kind: str, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A smooth curve from 0 at u = 0 to 1 at u = 1 that converges (its parameters drawn from rng)."""
    if kind == "sigmoid":
        mid, width = rng.uniform(0.2, 0.5), rng.uniform(0.03, 0.1)
        lo, hi = _sigmoid(-mid / width), _sigmoid((1 - mid) / width)
        return (_sigmoid((u - mid) / width) - lo) / (hi - lo)
    if kind == "expsat":
        return expsat(u, rng.uniform(0.05, 0.25))
    if kind == "quadratic":
        plateau = rng.uniform(0.3, 0.8)
        return 1.0 - (1.0 - np.minimum(u / plateau, 1.0)) ** 2
    raise ValueError(f"unknown curve {kind!r}")


def expsat(u: np.ndarray, tau: float) -> np.ndarray:
    return (1.0 - np.exp(-u / tau)) / (1.0 - math.exp(-1.0 / tau))


def smoothstep(u: np.ndarray, a: float, b: float) -> np.ndarray:
    x = np.clip((u - a) / (b - a), 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def lr_schedule(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    peak = math.exp(rng.uniform(math.log(1e-7), math.log(1e-5)) if kind == "rl"
                    else rng.uniform(math.log(1e-4), math.log(3e-3)))
    schedule = rng.choice(["constant", "warmup_constant", "warmup_cosine", "linear"])
    warm = max(1, round(rng.uniform(0.01, 0.1) * n))
    i = np.arange(n, dtype=np.float64)
    if schedule == "constant":
        return np.full(n, peak)
    if schedule == "linear":
        return peak * (1.0 - 0.9 * i / max(n - 1, 1))
    ramp = np.minimum((i + 1) / warm, 1.0)
    if schedule == "warmup_constant":
        return peak * ramp
    after = np.clip((i - warm) / max(n - warm, 1), 0.0, 1.0)
    return peak * np.where(i < warm, ramp, 0.1 + 0.9 * 0.5 * (1.0 + np.cos(math.pi * after)))


# ---------------------------------------------------------------- logging

def logged_index(n: int, cadence: int) -> np.ndarray:
    """The per-step indices a run logged every `cadence` steps writes: the end of each window."""
    return np.arange(cadence - 1, n, cadence)


def log_every(values: np.ndarray, cadence: int, mode: str) -> np.ndarray:
    """Per-step values as logged every `cadence` steps: the value at the step ("sub") or the mean of the
    `cadence` steps ending there ("mean", TRL's logging_steps)."""
    if cadence == 1:
        return values
    if mode == "sub":
        return values[logged_index(len(values), cadence)]
    m = len(values) // cadence
    return values[:m * cadence].reshape(m, cadence, *values.shape[1:]).mean(axis=1)


def eval_index(rng: np.random.Generator, n: int, cadence: int, n_eval: int) -> np.ndarray:
    every = cadence * max(1, round(n / (cadence * n_eval)))
    idx = np.arange(every - 1, n, every)
    if rng.random() < 0.5:
        idx = np.concatenate([[0], idx])
    return np.unique(idx) if len(idx) else np.array([n - 1])


def draw_log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


# ---------------------------------------------------------------- null runs

def _plain_null_run(family: str, index: int, seed: int, t_max: int = T_MAX) -> Generated:
    """Run `index` of a null family (a healthy run), as the module docstring draws it."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
    rng = rng_for(seed, family, index)
    n = _draw_steps(rng, t_max)
    start = int(rng.choice(STARTS, p=[0.6, 0.2, 0.2]))
    cadence = int(rng.choice(CADENCES))
    while cadence > 1 and n // cadence < 8:
        cadence = CADENCES[CADENCES.index(cadence) - 1]
    mode = str(rng.choice(["sub", "mean"])) if cadence > 1 else "sub"
    n_eval = max(1, min(round(draw_log_uniform(rng, 8, 200)), n // (2 * cadence)))
    evals_at = eval_index(rng, n, cadence, n_eval)
    kind = "pretrain" if family == "flat_loss" else "rl" if family == "binomial" or rng.random() >= 0.25 else \
        "pretrain"
    u = np.arange(n) / max(n - 1, 1)
    info = {"family": family, "index": index, "steps": n, "start": start, "cadence": cadence, "mode": mode,
            "kind": kind, "eval_points": len(evals_at)}
    build = _rl_null if kind == "rl" else _pretrain_null
    per_step, evals, signals = build(rng, family, u, evals_at, info)
    logged = logged_index(n, cadence)
    train = {"step": start + logged}
    for key, values in per_step.items():
        train[key] = values[logged] if key == RL_KEYS["lr"] else log_every(values, cadence, mode)
    return Generated(train, {"step": start + evals_at, **evals}, signals, info)


def null_run_steps(family: str, index: int, seed: int, t_max: int = T_MAX) -> int:
    """The number of steps of `null_run(family, index, seed, t_max)`, without drawing the rest."""
    return _draw_steps(rng_for(seed, family, index), t_max)


def _draw_steps(rng: np.random.Generator, t_max: int) -> int:
    return int(round(draw_log_uniform(rng, T_MIN, max(t_max, T_MIN))))


def _family_noise(rng: np.random.Generator, family: str, n: int, cols: int, info: dict) -> np.ndarray:
    """Unit noise for the family's signals, times its noise level (small for the smooth families)."""
    if family in SMOOTH_FAMILIES:
        level = 0.0 if family == "smooth_noisefree" else rng.uniform(0.1, 0.5)
        info["noise_level"] = round(level, 4)
        return unit_noise(rng, "gauss", n, cols) * level
    if family == "flat_loss":
        kind, phi = FLAT_LOSS_NOISES[int(rng.integers(len(FLAT_LOSS_NOISES)))]
        info["noise"] = f"{kind} {phi:g}" if kind == "ar" else kind
        return unit_noise(rng, kind, n, cols, phi)
    kind, phi = NOISE_FAMILIES.get(family, ("gauss", 0.0))
    return unit_noise(rng, kind, n, cols, phi)


def _family_curve(rng: np.random.Generator, family: str, u: np.ndarray, info: dict) -> np.ndarray | None:
    """The smooth family's mean curve f (0 -> 1), 1 for flat_loss (converged before the log), or None for a
    family whose means are stationary."""
    if family == "flat_loss":
        return np.ones(len(u))
    if family not in SMOOTH_FAMILIES:
        return None
    kind = SMOOTH_FAMILIES[family] or str(rng.choice(["sigmoid", "expsat", "quadratic"]))
    info["curve"] = kind
    return curve(kind, u, rng)


def _rl_null(rng, family, u, evals_at, info):
    n = len(u)
    r0, sd_r = rng.uniform(0.15, 0.6), rng.uniform(0.01, 0.05)
    n_evals = 1 + int(rng.random() < 0.5)
    e0, items = rng.uniform(0.2, 0.7, 2), rng.choice([100, 500, 1319], 2)
    len0, len_s = draw_log_uniform(rng, 150, 1500), rng.uniform(0.02, 0.08)
    kl0, kl_s = draw_log_uniform(rng, 0.001, 0.05), rng.uniform(0.05, 0.2)
    ent0, ent_s = rng.uniform(0.3, 2.0), rng.uniform(0.01, 0.05)
    loss_s = rng.uniform(0.005, 0.03)
    g0, g_s = draw_log_uniform(rng, 0.05, 5.0), rng.uniform(0.1, 0.3)
    rise, follow = rng.uniform(0.1, 0.4), rng.uniform(0.5, 1.0, 2)
    len_g, ent_q = rng.uniform(-0.1, 0.3), rng.uniform(0.03, 0.15)
    if family == "lognormal_grad":
        g_s = rng.uniform(0.2, 1.0)
        info["grad_sigma"] = round(g_s, 4)
    lr = lr_schedule(rng, n, "rl")
    f = _family_curve(rng, family, u, info)
    z = _family_noise(rng, family, n, 8, info)
    f = np.zeros(n) if f is None else f
    rise = min(rise, 0.95 - r0) if family in SMOOTH_FAMILIES else 0.0
    gains = [min(c * rise, 0.95 - e) for c, e in zip(follow, e0)]
    kl_mean = kl0 * (0.1 + 0.9 * f) if family in SMOOTH_FAMILIES else np.full(n, kl0)
    kl = kl_mean * np.exp(kl_s * z[:, 4])
    per_step = {"reward": np.clip(r0 + rise * f + sd_r * z[:, 0], 0.0, 1.0),
                RL_KEYS["response_length"]: len0 * (1 + len_g * f) * np.exp(len_s * z[:, 3]),
                "kl": kl, "entropy": ent0 * (1 - ent_q * f) * np.exp(ent_s * z[:, 5]),
                "loss": 0.04 * kl + loss_s * z[:, 6],
                "grad_norm": g0 * (1 - 0.3 * f) * (1 + 0.1 * u) * np.exp(g_s * z[:, 7]), "learning_rate": lr}
    eval_keys = [RL_KEYS[s] for s in EVAL_SIGNALS[:n_evals]]
    evals = {}
    for j, key in enumerate(eval_keys):
        sd = math.sqrt(e0[j] * (1 - e0[j]) / items[j])
        evals[key] = np.clip(e0[j] + gains[j] * f + sd * z[:, 1 + j], 0.0, 1.0)[evals_at]
    if family == "binomial":
        per_step["reward"], evals = _binomial(rng, u, r0, e0, follow, items, eval_keys, evals_at, info)
    signals = {s: RL_KEYS[s] for s in RL_KEYS if not s.startswith("eval:")}
    signals.update({s: RL_KEYS[s] for s in EVAL_SIGNALS[:n_evals]})
    info.update(n_evals=n_evals, rise=round(rise, 4))
    return per_step, evals, signals


def _binomial(rng, u, r0, e0, follow, items, eval_keys, evals_at, info):
    """The success-rate reward of P prompts x G completions per step, and evals that follow the skill."""
    n = len(u)
    group, prompts = int(rng.choice([4, 8, 16, 64, 256])), int(rng.choice([8, 16, 32, 64]))
    skill = rng.uniform(0.0, 1.5) * expsat(u, rng.uniform(0.1, 0.5))
    drift = rng.uniform(0.1, 0.5) * bounded_walk(rng, n, 1)[:, 0]
    spread = rng.uniform(0.5, 1.5)
    logits = _logit(r0) + (skill + drift)[:, None] + spread * rng.standard_normal((n, prompts))
    reward = rng.binomial(group, _sigmoid(logits)).sum(axis=1) / (prompts * group)
    evals = {key: rng.binomial(int(items[j]), _sigmoid(_logit(e0[j]) + follow[j] * skill[evals_at])) / items[j]
             for j, key in enumerate(eval_keys)}
    info.update(group=group, prompts=prompts)
    return reward, evals


def _pretrain_null(rng, family, u, evals_at, info):
    n = len(u)
    l_inf, l0, loss_s = rng.uniform(1.8, 3.5), rng.uniform(4.0, 11.0), rng.uniform(0.01, 0.05)
    gap, eval_s = rng.uniform(0.01, 0.15), rng.uniform(0.005, 0.02)
    g0, g_h, g_tau, g_s = draw_log_uniform(rng, 0.05, 5.0), rng.uniform(0, 2), rng.uniform(0.01, 0.1), \
        rng.uniform(0.1, 0.3)
    tau = rng.uniform(0.05, 0.3)
    if family == "lognormal_grad":
        g_s = rng.uniform(0.2, 1.0)
        info["grad_sigma"] = round(g_s, 4)
    lr = lr_schedule(rng, n, "pretrain")
    f = _family_curve(rng, family, u, info)
    z = _family_noise(rng, family, n, 3, info)
    f = expsat(u, tau) if f is None else f
    loss_mean = l_inf + (l0 - l_inf) * (1 - f)
    per_step = {"loss": loss_mean + loss_s * z[:, 0],
                "grad_norm": g0 * (1 + g_h * np.exp(-u / g_tau)) * (1 + 0.1 * u) * np.exp(g_s * z[:, 2]),
                "learning_rate": lr}
    evals = {"eval_loss": (loss_mean + gap + eval_s * z[:, 1])[evals_at]}
    return per_step, evals, dict(PRETRAIN_KEYS)


# ---------------------------------------------------------------- failure shapes

SHAPE_SD = {"reward": 0.03, "length": 0.05, "kl": 0.1, "entropy": 0.03, "loss": 0.01, "grad_norm": 0.2,
            "logprob_delta": 0.1, "eval_items": 500}


def _plain_shape_run(shape: str, effect: str, noise: float, steps: int, index: int, seed: int) -> Generated:
    """Run `index` of a failure shape at one effect size and noise level (module docstring)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; shapes: {', '.join(SHAPES)}")
    size = SHAPES[shape].effects[EFFECTS.index(effect)]
    rng = rng_for(seed, shape, steps, index)
    if shape in SUPERVISED_SHAPES:
        return _supervised_shape(rng, shape, effect, size, noise, steps, index)
    n = steps
    i = np.arange(n, dtype=np.float64)
    u = i / max(n - 1, 1)
    r0, n_evals, e0 = rng.uniform(0.15, 0.5), 1 + int(rng.random() < 0.5), rng.uniform(0.2, 0.7, 2)
    len0, kl0, ent0 = draw_log_uniform(rng, 150, 1500), draw_log_uniform(rng, 0.001, 0.05), rng.uniform(0.3, 2.0)
    g0, d0 = draw_log_uniform(rng, 0.05, 5.0), rng.uniform(0.005, 0.02)
    a, b, c = rng.uniform(0.1, 0.3), rng.uniform(0.6, 0.9), rng.uniform(0.4, 0.6)
    c_spike = rng.uniform(0.4, 0.7)
    lr = lr_schedule(rng, n, "rl")
    z = rng.standard_normal((n, 10)) * noise
    sd = SHAPE_SD
    s, ramp = expsat(u, 0.3), smoothstep(u, a, b)
    reward, length = np.full(n, r0), len0 * (1 + 0.05 * s)
    kl, entropy = kl0 * (0.5 + 0.5 * s), ent0 * (1 - 0.05 * s)
    grad, delta = g0 * (1 - 0.2 * s), d0 * (1 + 0.1 * s)
    eval_means = [np.full(n, e) for e in e0]
    eval_noise = [1.0, 1.0]
    loss_jump = np.zeros(n)
    if shape.startswith("eval_"):
        reward = reward + size * ramp
        if shape == "eval_sliding":
            eval_means = [e - min(size / 3, e[0] - 0.02) * ramp for e in eval_means]
        if shape == "eval_constant":
            eval_means, eval_noise = [np.full(n, round(float(e), 3)) for e in e0], [0.0, 0.0]
    elif shape == "length_growth":
        length = length * (1 + (size - 1) * ramp)
    elif shape == "kl_entropy":
        window = min(0.3 * n, 150.0)
        joint = smoothstep(i, c * n, c * n + window)
        kl, entropy = kl * (1 + (KL_RATIO[size] - 1) * joint), entropy * (1 - size * joint)
    elif shape == "logprob_drift":
        delta = delta + (size - delta) * ramp
    elif shape == "spike_kept":
        at = int(c_spike * n)
        after = np.where(i > at, 1 - 0.2 * (i - at) / max(n - at, 1), 0.0)
        loss_jump = size * (after + 1.5 * (i == at))
        grad = grad * np.where(i == at, GRAD_JUMP[size], np.where(i > at, 0.7 * GRAD_JUMP[size], 1.0))
    kl = kl * np.exp(sd["kl"] * z[:, 4])
    train = {"step": i.astype(np.int64), "reward": np.clip(reward + sd["reward"] * z[:, 0], 0.0, 1.0),
             RL_KEYS["response_length"]: length * np.exp(sd["length"] * z[:, 3]), "kl": kl,
             "entropy": entropy * np.exp(sd["entropy"] * z[:, 5]),
             "loss": 0.04 * kl + loss_jump + sd["loss"] * z[:, 6],
             "grad_norm": grad * np.exp(sd["grad_norm"] * z[:, 7]), "learning_rate": lr}
    signals = {s: RL_KEYS[s] for s in RL_KEYS if not s.startswith("eval:")}
    if shape == "logprob_drift":
        train[LOGPROB_KEY] = delta * np.exp(sd["logprob_delta"] * z[:, 8])
        signals["logprob_delta"] = LOGPROB_KEY
    if shape == "nan_precursor":
        blown, lead = max(1, round(0.02 * n)), max(round(0.15 * n), 10)
        climb = np.clip((i - (n - blown - lead)) / lead, 0.0, 1.0)
        train["grad_norm"] = train["grad_norm"] * size ** climb
        train["loss"][n - blown:] = np.nan
        train["grad_norm"][n - blown:] = np.nan
    every = max(1, n // int(np.clip(n / 50, 8, 200)))
    evals_at = np.arange(every - 1, n, every)
    evals = {"step": evals_at.astype(np.int64)}
    for j, name in enumerate(EVAL_SIGNALS[:n_evals]):
        eval_sd = math.sqrt(e0[j] * (1 - e0[j]) / sd["eval_items"]) * eval_noise[j]
        evals[RL_KEYS[name]] = np.clip(eval_means[j] + eval_sd * z[:, 1 + j], 0.0, 1.0)[evals_at]
        signals[name] = RL_KEYS[name]
    info = {"shape": shape, "effect": effect, "size": size, "noise": noise, "steps": n, "index": index,
            "n_evals": n_evals}
    return Generated(train, evals, signals, info)


SUPERVISED_SD = {"loss": 0.02, "eval_loss": 0.01, "grad_norm": 0.2}


def _supervised_shape(rng, shape: str, effect: str, size: float, noise: float, n: int, index: int) -> Generated:
    """A supervised run (pretraining from scratch or SFT) of one of SUPERVISED_SHAPES (module docstring)."""
    i = np.arange(n, dtype=np.float64)
    u = i / max(n - 1, 1)
    kind = {"loss_climb_scratch": "scratch", "sft_loss_climb": "sft"}.get(shape) or \
        ("scratch" if rng.random() < 0.5 else "sft")
    if kind == "scratch":
        l0, l_inf, tau = rng.uniform(10.0, 11.0), rng.uniform(2.5, 3.5), rng.uniform(0.05, 0.15)
    else:
        l0, l_inf, tau = rng.uniform(2.5, 4.5), rng.uniform(0.5, 1.2), rng.uniform(0.02, 0.1)
    g0, gap = draw_log_uniform(rng, 0.1, 3.0), rng.uniform(0.02, 0.1)
    start_event, ramp = rng.uniform(0.5, 0.7), rng.uniform(0.03, 0.08)
    c_excursion, tau_e = rng.uniform(0.4, 0.6), draw_log_uniform(rng, 15.0, 150.0)
    warm = max(1, round(rng.uniform(0.01, 0.05) * n))
    z = rng.standard_normal((n, 3))
    t3 = rng.standard_t(3, (n, 2)) / math.sqrt(3.0)
    s = expsat(u, tau)
    if shape == "loss_plateau":
        s = np.minimum(expsat(np.minimum(u / size, 1.0), 0.2) / expsat(np.ones(1), 0.2)[0], 1.0)
    loss_mean = l_inf + (l0 - l_inf) * (1.0 - s)
    grad_mean = g0 * (1 + 2 * np.exp(-u / 0.05)) * (1 - 0.2 * s)
    peak = draw_log_uniform(rng, 1e-5, 3e-4)
    after = np.clip((i - warm) / max(n - warm, 1), 0.0, 1.0)
    lr = peak * np.where(i < warm, (i + 1) / warm, 0.1 + 0.9 * 0.5 * (1.0 + np.cos(math.pi * after)))
    loss_sd, grad_sd = SUPERVISED_SD["loss"], SUPERVISED_SD["grad_norm"]
    loss_noise, grad_noise = z[:, 0], z[:, 2]
    info = {"shape": shape, "effect": effect, "size": size, "noise": noise, "steps": n, "index": index,
            "kind": kind}
    if shape in ("loss_climb_scratch", "sft_loss_climb"):
        at = int(start_event * n)
        climb = smoothstep(i, at, at + max(ramp * n, 2.0))
        descent = l0 - loss_mean[at]
        loss_mean = loss_mean + size * descent * climb
        grad_mean = grad_mean * (1 + 3 * size * climb)
        info["event_step"] = at
    elif shape == "loss_excursion":
        at = int(c_excursion * n)
        width = min(tau_e, 0.05 * n)
        bump = np.where(i >= at, np.exp(-np.maximum(i - at - 2, 0.0) / width), 0.0) * np.clip((i - at + 1) / 3, 0, 1)
        descent = l0 - loss_mean[at]
        loss_mean = loss_mean + size * descent * bump
        grad_mean = grad_mean * (1 + 4 * size * bump)
        info.update(event_step=at, decay_steps=round(width, 1))
    elif shape == "noisy_loss":
        loss_sd = size * (l0 - l_inf)
        loss_noise, grad_noise, grad_sd = t3[:, 0], t3[:, 1], 0.3
    elif shape == "cosine_restart":
        restarts = [int(f * n) for f in (0.25, 0.5, 0.75)]
        bumps, shares = np.zeros(n), np.zeros(n)
        for r in restarts:
            decay = np.where(i >= r, np.exp(-(i - r) / (0.03 * n)), 0.0)
            bumps += size * (l0 - loss_mean[r]) * decay
            shares += size * decay
        loss_mean = loss_mean + bumps
        grad_mean = grad_mean * (1 + 2 * shares)
        cycle = np.searchsorted(restarts, i, side="right")
        edges = np.array([0, *restarts, n], dtype=np.float64)
        within = (i - edges[cycle]) / (edges[cycle + 1] - edges[cycle])
        lr = np.where(i < warm, peak * (i + 1) / warm, peak * (0.05 + 0.95 * 0.5 * (1.0 + np.cos(math.pi * within))))
    train = {"step": i.astype(np.int64), "loss": loss_mean + loss_sd * noise * loss_noise,
             "grad_norm": grad_mean * np.exp(grad_sd * noise * grad_noise), "learning_rate": lr}
    every = max(1, n // int(np.clip(n / 50, 8, 200)))
    evals_at = np.arange(every - 1, n, every)
    evals = {"step": evals_at.astype(np.int64),
             "eval_loss": (loss_mean + gap + SUPERVISED_SD["eval_loss"] * noise * z[:, 1])[evals_at]}
    return Generated(train, evals, dict(PRETRAIN_KEYS), info)


# ======================================================================================================
# Layer-1 shapes and a twin family of issue 44 items 4-6 (branch l1checks).  A section of its own: it adds
# to SHAPES and FAMILIES and wraps shape_run / null_run for its own names only, so that shapes added above
# (another branch's layer-3 shapes) merge without touching it.
# ======================================================================================================

_L1_DOC = """
LAYER-1 SHAPES OF ISSUE 44 (l1checks section at the end of bench/_families.py)
As the shapes above (T given, start 0, every step logged, evals n_eval = clip(T / 50, 8, 200) times, the
same reference sds, the draws depend on (seed, shape, T, index) only):
  eval_early_collapse  every eval, scored before training (i = 0) too, falls by s = 20% / 30% / 50% of e0 over
                       the first d ~ U(0.03, 0.1) T steps (a reward that pays a wrong answer), then recovers a
                       third of that by the end (ends 13% / 20% / 33% under e0), while the reward rises by 0.3 on
                       the ramp (from after the collapse) -> L1.eval-below-start (its bar: a drop sure at 3.5 se
                       and a tenth of the start)
  weight0_check_flat   no eval; the reward is the format reward alone (rewards/format_reward/mean, logged as
                       the same numbers), rising by D = 0.10 / 0.20 / 0.40 on the ramp; a reward function logged
                       with weight 0 (rewards/exact_match/mean) stays at c0 ~ U(0.2, 0.6) with the eval's sd
                       -> L1.reward-eval-divergence or L1.reward-component-divergence
  truncation_climb     completions/clipped_ratio 0.1 -> 0.1 + F, F = 0.45 / 0.65 / 0.85, on the ramp while the
                       reward rises by 0.2 on the same ramp; evals flat -> L1.truncation-climb

TWIN FAMILY
  rl_checks            a run of one of iid_gauss, ar_0.9, smooth_expsat, smooth_sigmoid, binomial (chance 1/5
                       each, drawn as that family; pretraining draws stay pretraining, without the columns below)
                       whose reward is logged as one reward function too (rewards/format_reward/mean, the same
                       numbers), beside a weight-0 reward function that follows the reward like an eval
                       (rewards/exact_match/mean = c0 + c (reward - its first tenth's mean) + N(0, sd), c ~ U(0.5,
                       1), c0 ~ U(0.2, 0.6), sd = sqrt(c0 (1 - c0) / 500)) and a truncation fraction that does not
                       climb (completions/clipped_ratio ~ U(0.01, 0.2) + N(0, 0.01), clipped to 0..1): the healthy
                       twins of the three shapes above
"""
__doc__ = (__doc__ or "") + _L1_DOC

SHAPES.update({
    "eval_early_collapse": Shape(1, ("L1.eval-below-start",), (0.20, 0.30, 0.50)),
    "weight0_check_flat": Shape(1, ("L1.reward-eval-divergence", "L1.reward-component-divergence"),
                                (0.10, 0.20, 0.40)),
    "truncation_climb": Shape(1, ("L1.truncation-climb",), (0.45, 0.65, 0.85)),
})
_L1_SHAPES = ("eval_early_collapse", "weight0_check_flat", "truncation_climb")
_L1_TWIN_BASES = ("iid_gauss", "ar_0.9", "smooth_expsat", "smooth_sigmoid", "binomial")
FORMAT_KEY, CHECK_KEY, CLIPPED_KEY = ("rewards/format_reward/mean", "rewards/exact_match/mean",
                                      "completions/clipped_ratio")
FAMILIES = (*FAMILIES, "rl_checks")


def _l1_shape_start(shape: str, effect: str, noise: float, steps: int, index: int, seed: int) -> tuple:
    """What every shape on the layer-1 base draws first, in this order: its size, its generator, the
    steps and their place in the run (0..1), the healthy base (_l1_base), and where its change starts and
    ends (a, b)."""
    size = SHAPES[shape].effects[EFFECTS.index(effect)]
    rng = rng_for(seed, shape, steps, index)
    u = np.arange(steps) / max(steps - 1, 1)
    base = _l1_base(rng, steps, noise)
    return size, rng, steps, u, base, (rng.uniform(0.1, 0.3), rng.uniform(0.6, 0.9))


def _l1_shape_run(shape: str, effect: str, noise: float, steps: int, index: int, seed: int) -> Generated:
    """This section's layer-1 shapes (eval_early_collapse, weight0_check_flat, truncation_climb) on a healthy
    base of their own (_l1_base)."""
    size, rng, n, u, (train, eval_means, signals, z), (a, b) = _l1_shape_start(shape, effect, noise, steps,
                                                                                index, seed)
    ramp = smoothstep(u, a, b)
    reward_noise = SHAPE_SD["reward"] * z[:, 0]
    reward_mean = np.full(n, rng.uniform(0.15, 0.5))
    keep_evals = True
    if shape == "eval_early_collapse":
        d = rng.uniform(0.03, 0.1)
        fall = smoothstep(u, 0.0, d) - smoothstep(u, d, 1.0) / 3.0
        eval_means = [e - size * e[0] * fall for e in eval_means]
        reward_mean = reward_mean + 0.3 * smoothstep(u, max(a, d + 0.05), b)
    elif shape == "weight0_check_flat":
        reward_mean = reward_mean + size * ramp
        c0 = rng.uniform(0.2, 0.6)
        train[CHECK_KEY] = np.clip(c0 + math.sqrt(c0 * (1 - c0) / SHAPE_SD["eval_items"]) * z[:, 8], 0.0, 1.0)
        signals.update({"reward:format_reward": FORMAT_KEY, "reward:exact_match": CHECK_KEY})
        keep_evals = False
    else:
        reward_mean = reward_mean + 0.2 * ramp
        train[CLIPPED_KEY] = np.clip(0.1 + size * ramp + 0.02 * z[:, 8], 0.0, 1.0)
        signals["truncation_rate"] = CLIPPED_KEY
    train["reward"] = np.clip(reward_mean + reward_noise, 0.0, 1.0)
    if shape == "weight0_check_flat":
        train[FORMAT_KEY] = train["reward"].copy()          # the reward is this function alone
    every = max(1, n // int(np.clip(n / 50, 8, 200)))
    evals_at = np.arange(every - 1, n, every)
    if shape == "eval_early_collapse":
        evals_at = np.concatenate([[0], evals_at])             # scored before training (verl val_before_train)
    evals = {"step": evals_at.astype(np.int64)}
    for j, name in enumerate(EVAL_SIGNALS[:len(eval_means)] if keep_evals else ()):
        e0 = float(eval_means[j][0])
        sd = math.sqrt(max(e0 * (1 - e0), 1e-6) / SHAPE_SD["eval_items"])
        evals[RL_KEYS[name]] = np.clip(eval_means[j] + sd * z[:, 1 + j], 0.0, 1.0)[evals_at]
        signals[name] = RL_KEYS[name]
    info = {"shape": shape, "effect": effect, "size": size, "noise": noise, "steps": n, "index": index,
            "n_evals": len(eval_means) if keep_evals else 0}
    return Generated(train, evals, signals, info)


def _l1_base(rng: np.random.Generator, n: int, noise: float):
    """The healthy base of the shapes above (as shape_run's: kl, entropy, grad norm and length settle on
    exponential saturation; loss 0.04 kl; one or two evals flat at e0), without the reward, which each
    shape sets: (training columns, the evals' means, signals, the (n, 10) unit noise times `noise`)."""
    n_evals, e0 = 1 + int(rng.random() < 0.5), rng.uniform(0.2, 0.7, 2)
    len0, kl0, ent0 = draw_log_uniform(rng, 150, 1500), draw_log_uniform(rng, 0.001, 0.05), rng.uniform(0.3, 2.0)
    g0 = draw_log_uniform(rng, 0.05, 5.0)
    lr = lr_schedule(rng, n, "rl")
    z = rng.standard_normal((n, 10)) * noise
    sd = SHAPE_SD
    s = expsat(np.arange(n) / max(n - 1, 1), 0.3)
    kl = kl0 * (0.5 + 0.5 * s) * np.exp(sd["kl"] * z[:, 4])
    train = {"step": np.arange(n, dtype=np.int64), RL_KEYS["response_length"]:
             len0 * (1 + 0.05 * s) * np.exp(sd["length"] * z[:, 3]), "kl": kl,
             "entropy": ent0 * (1 - 0.05 * s) * np.exp(sd["entropy"] * z[:, 5]),
             "loss": 0.04 * kl + sd["loss"] * z[:, 6],
             "grad_norm": g0 * (1 - 0.2 * s) * np.exp(sd["grad_norm"] * z[:, 7]), "learning_rate": lr}
    signals = {s_: RL_KEYS[s_] for s_ in RL_KEYS if not s_.startswith("eval:")}
    return train, [np.full(n, e) for e in e0[:n_evals]], signals, z


def _twin_base(family: str, bases: tuple[str, ...], index: int, seed: int,
               t_max: int) -> tuple[np.random.Generator, Generated, dict]:
    """A twin family's draw: its generator, the plain family's run it is made from (one of `bases`, drawn
    by that generator) and the run's info, naming both families."""
    rng = rng_for(seed, family, index)
    base_family = str(rng.choice(bases))
    base = _plain_null_run(base_family, index, seed, t_max)
    return rng, base, {**base.info, "family": family, "base_family": base_family}


def _rl_checks_null_run(family: str, index: int, seed: int, t_max: int = T_MAX) -> Generated:
    """This section's twin family rl_checks (module docstring) on a plain family's run."""
    rng, base, info = _twin_base(family, _L1_TWIN_BASES, index, seed, t_max)
    if "reward" not in base.train:
        return Generated(base.train, base.evals, base.signals, info)
    train, signals = dict(base.train), dict(base.signals)
    reward = np.asarray(train["reward"], dtype=np.float64)
    c, c0 = rng.uniform(0.5, 1.0), rng.uniform(0.2, 0.6)
    first = reward[: max(1, len(reward) // 10)].mean()
    sd = math.sqrt(c0 * (1 - c0) / SHAPE_SD["eval_items"])
    train[FORMAT_KEY] = reward.copy()
    train[CHECK_KEY] = np.clip(c0 + c * (reward - first) + sd * rng.standard_normal(len(reward)), 0.0, 1.0)
    train[CLIPPED_KEY] = np.clip(rng.uniform(0.01, 0.2) + 0.01 * rng.standard_normal(len(reward)), 0.0, 1.0)
    signals.update({"reward:format_reward": FORMAT_KEY, "reward:exact_match": CHECK_KEY,
                    "truncation_rate": CLIPPED_KEY})
    return Generated(train, base.evals, signals, info)


# ======================================================================================================
# Data too easy (issue 44 item 4, branch easy): a failure shape and its healthy twin family.  A section of its
# own, as the l1checks one: it adds to SHAPES and FAMILIES and wraps shape_run / null_run for its names only.
# ======================================================================================================

_EASY_DOC = """
DATA TOO EASY (easy section at the end of bench/_families.py)
  easy_data   shape, as the shapes above (T given, start 0, every step logged, one or two evals flat at e0, the
              same reference sds): the reward is a success rate at h ~ U(0.88, 0.97) from the first step (its
              noise clipped to 0..1), no zero-variance fraction logged, and the entropy falls by F = 30% / 50% /
              80% on the ramp (the policy settling on the answers it already gets right); kl, grad norm,
              length and loss as the healthy base -> L1.data-too-easy (its bar: a success rate surely above
              0.85 at the start, an entropy fall sure at 3 se and a fifth of its start), the entropy findings
              its consequence
  rl_easy     twin family: a run of one of iid_gauss, iid_t3, ar_0.9, ar_0.99, random_walk, smooth_expsat
              (chance 1/6 each, drawn as that family; pretraining draws stay pretraining) whose reward is moved
              to start at h ~ U(0.87, 0.97) (reward - its first tenth's mean + h, clipped to 0..1): a success
              rate near its ceiling whose entropy does not fall by a fifth (the family's own entropy: flat, or
              down 3-15% on the smooth curve) - data that may be easy but with nothing falling under it
"""
__doc__ = (__doc__ or "") + _EASY_DOC

SHAPES["easy_data"] = Shape(1, ("L1.data-too-easy",), (0.30, 0.50, 0.80))
_EASY_TWIN_BASES = ("iid_gauss", "iid_t3", "ar_0.9", "ar_0.99", "random_walk", "smooth_expsat")
FAMILIES = (*FAMILIES, "rl_easy")


def _easy_shape_run(shape: str, effect: str, noise: float, steps: int, index: int, seed: int) -> Generated:
    """easy_data on the layer-1 shapes' healthy base (_l1_base)."""
    size, rng, n, u, (train, eval_means, signals, z), (a, b) = _l1_shape_start(shape, effect, noise, steps,
                                                                                index, seed)
    h = rng.uniform(0.88, 0.97)
    train["reward"] = np.clip(h + SHAPE_SD["reward"] * z[:, 0], 0.0, 1.0)
    train["entropy"] = train["entropy"] * (1 - size * smoothstep(u, a, b))
    every = max(1, n // int(np.clip(n / 50, 8, 200)))
    evals_at = np.arange(every - 1, n, every)
    evals = {"step": evals_at.astype(np.int64)}
    for j, name in enumerate(EVAL_SIGNALS[:len(eval_means)]):
        e0 = float(eval_means[j][0])
        sd = math.sqrt(max(e0 * (1 - e0), 1e-6) / SHAPE_SD["eval_items"])
        evals[RL_KEYS[name]] = np.clip(eval_means[j] + sd * z[:, 1 + j], 0.0, 1.0)[evals_at]
        signals[name] = RL_KEYS[name]
    info = {"shape": shape, "effect": effect, "size": size, "noise": noise, "steps": n, "index": index,
            "n_evals": len(eval_means), "reward_level": round(h, 4)}
    return Generated(train, evals, signals, info)


def _rl_easy_null_run(family: str, index: int, seed: int, t_max: int = T_MAX) -> Generated:
    """The twin family rl_easy (the section's docstring) on a plain family's run."""
    rng, base, info = _twin_base(family, _EASY_TWIN_BASES, index, seed, t_max)
    if "reward" not in base.train:
        return Generated(base.train, base.evals, base.signals, info)
    train = dict(base.train)
    reward = np.asarray(train["reward"], dtype=np.float64)
    h = rng.uniform(0.87, 0.97)
    first = reward[: max(1, len(reward) // 10)].mean()
    train["reward"] = np.clip(reward - first + h, 0.0, 1.0)
    info["reward_level"] = round(h, 4)
    return Generated(train, base.evals, base.signals, info)


# --- one door: each family and shape drawn by the section that defines it -------------------------------

_NULL_RUNS = {"rl_checks": _rl_checks_null_run, "rl_easy": _rl_easy_null_run}
_SHAPE_RUNS = {**{s: _l1_shape_run for s in _L1_SHAPES}, "easy_data": _easy_shape_run}


def null_run(family: str, index: int, seed: int, t_max: int = T_MAX) -> Generated:
    """Run `index` of null family `family` (the module docstring and each section's say how it is drawn)."""
    return _NULL_RUNS.get(family, _plain_null_run)(family, index, seed, t_max)


def shape_run(shape: str, effect: str, noise: float, steps: int, index: int, seed: int) -> Generated:
    """Run `index` of failure shape `shape` at `effect`, `noise` and `steps`."""
    return _SHAPE_RUNS.get(shape, _plain_shape_run)(shape, effect, noise, steps, index, seed)
