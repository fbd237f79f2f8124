"""The frozen held-out corpus: labelled runs that no detector is ever tuned on.

bench/scenarios.py is where the detectors' thresholds were set, and it builds in their assumptions: steps
1..n, rewards and evals on 0-1, KL under 0.02, one logging cadence family.  This corpus is built by
separate code (its own seed, its own curve families, its own writers) to measure how the verdicts hold up
on shapes nobody looked at while tuning:

  reward curves  staircases of plateaus, slow S-curves, power-law rises, delayed starts, dips; reward-model
                 scores that drift; sparse binary rewards averaged over a few prompts x a few samples
  noise          Gaussian, heavy-tailed (Student-t, 3 dof), AR(1), heteroscedastic
  scales         reward 0-1, +-1, reward-model logits (-3..+5), rubric sums 0-10, a*r+b; evals as a
                 fraction, in percent (0-100) or an LLM-judge score (1-10)
  cadence        logging_steps 1, 5, 10, 25, 50 or irregular; evals every 10-500 steps or only 3-6 times;
                 30 to 100,000 steps; runs resumed at step 50,000; resumed runs that rewrite steps
  formats        CSV, JSONL (flat, verl's FileLogger), Parquet, trainer_state.json, TensorBoard event files
                 (tensorboard's own RecordWriter); TRL, verl, OpenRLHF, HF Trainer, Megatron-LM, OLMo-core
                 and torchtitan metric names

It holds healthy GRPO, SFT and pretraining runs, near misses, every failure family of the tuning corpus in
new shapes, the newly reported failure patterns (instant policy collapse, frozen updates, KL level, SFT
divergence without NaN, reward components, a length loophole under a cap, a transient Inf beside a reward
hack, a rolled-back blow-up, layer 4 on two logged points), and runs that cannot be judged.  Each label says
what a careful human expert would conclude, in the Label schema of scenarios.py; `not_judged` names the
rules that must come out "not judged", and `unknown` is the verdict when no layer can be judged.

Frozen: the corpus is a pure function of SEED; DIGEST pins it (labels and a rounded fingerprint of every
curve), and `python bench/heldout.py --digest` recomputes it.  Do not edit families to suit a detector;
a change of the corpus is a new DIGEST and must be argued for on its own.

    python bench/heldout.py OUT_DIR        # writes OUT_DIR/runs/<name>/... and OUT_DIR/labels.json
    python bench/heldout.py --digest       # prints the corpus fingerprint (and whether it matches DIGEST)
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import shutil
import sys
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios import Label  # noqa: E402  (the label schema only)

SEED = 4_417_093
DIGEST = "4e0d23cb9d8920dd"   # the frozen corpus (python bench/heldout.py --digest); never changed to suit a detector

# the rule ids the labels speak about, frozen with the corpus (scenarios.ALL_RULES may grow; this may not)
ALL_RULES = ("L1.reward-eval-divergence", "L1.length-confound", "L1.zero-variance-groups",
             "L1.reward-component-divergence", "L1.truncation-climb",
             "L2.policy-moving-fast", "L2.entropy-below-floor", "L2.entropy-collapse", "L2.kl-level-high",
             "L3.nonfinite-values", "L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor",
             "L3.frozen-updates", "L3.loss-divergence", "L3.rolled-back-blowup",
             "L4.logprob-mismatch", "L4.prob-mismatch", "L4.policy-version-lag", "L4.importance-ratio-off",
             "L4.rollout-kl-high", "L4.mult-prob-error-high")
LAYER_RULES = {layer: tuple(r for r in ALL_RULES if r.startswith(f"L{layer}.")) for layer in (1, 2, 3, 4)}

# rules a run of a few logged points cannot judge, and the rules about the update itself (loss, grad norm)
SHORT_RUN_RULES = ("L1.reward-eval-divergence", "L1.length-confound", "L1.zero-variance-groups",
                   "L1.reward-component-divergence", "L1.truncation-climb",
                   "L2.policy-moving-fast", "L2.entropy-below-floor", "L2.entropy-collapse", "L2.kl-level-high",
                   "L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor", "L3.frozen-updates",
                   "L3.loss-divergence")
UPDATE_RULES = ("L3.loss-spike", "L3.grad-norm-spike", "L3.grad-norm-precursor", "L3.frozen-updates",
                "L3.loss-divergence")
EVAL_RULES = ("L1.reward-eval-divergence", "L1.length-confound")


# --- a run before it is written ---------------------------------------------------------------------

@dataclass
class Sim:
    """One held-out run in canonical roles: train roles share `steps`; evals have their own steps.

    Roles: reward, reward:<fn>, reward_std, zero_std_frac, response_length, truncation_rate, kl, kl_coef,
    entropy, clip_frac, loss, grad_norm, lr, loss_scale, logprob_delta, is_ratio_mean, prob_delta, k3_kl,
    policy_version_lag; evals: eval:<dataset> (independent), eval_loss, eval_reward (TRL's eval/reward,
    the training reward on eval prompts).  `first` = (lo, hi, values): a first attempt wrote indices
    lo..hi before the run was restarted from lo (a resumed run writes those steps twice)."""

    steps: np.ndarray
    train: dict[str, np.ndarray]
    evals: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    style: str = "trl"
    fmt: str = "csv"
    first: tuple[int, int, dict[str, np.ndarray]] | None = None
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def u(self) -> np.ndarray:
        """Progress through the run, 0 at the first logged step and 1 at the last."""
        span = max(float(self.steps[-1] - self.steps[0]), 1.0)
        return (self.steps - self.steps[0]) / span

    def independent_evals(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {k: v for k, v in self.evals.items() if k.startswith("eval:")}

    def at(self, frac: float) -> int:
        """Index of the logged step nearest a fraction of the run."""
        return int(np.clip(np.searchsorted(self.u, frac), 0, self.n - 1))


# --- curve families (this corpus's own: none is shared with scenarios.py) ----------------------------

def skill_curve(rng, u: np.ndarray, shape: str) -> np.ndarray:
    """How much of the skill is learned, 0 at the start and 1 at the end, in one of five shapes."""
    if shape == "staircase":                      # plateaus with quick transitions (curriculum stages)
        k = int(rng.integers(2, 5))
        at = np.sort(rng.uniform(0.08, 0.9, k))
        height = rng.dirichlet(np.ones(k) * 2)
        y = sum(h / (1 + np.exp(-(u - a) / rng.uniform(0.004, 0.03))) for h, a in zip(height, at))
    elif shape == "slow-s":                       # a wide S over most of the run
        y = 1 / (1 + np.exp(-(u - rng.uniform(0.35, 0.65)) / rng.uniform(0.12, 0.25)))
    elif shape == "power":                        # fast early, slow late
        y = u ** rng.uniform(0.25, 0.6)
    elif shape == "delayed":                      # nothing for a while, then a convex climb
        d = rng.uniform(0.1, 0.4)
        y = np.clip((u - d) / (1 - d), 0, 1) ** rng.uniform(1.2, 2.0)
    elif shape == "dip":                          # rises, gives a little back, rises again
        y = u - rng.uniform(0.1, 0.2) * np.sin(np.pi * np.clip((u - 0.3) / 0.4, 0, 1)) * (u > 0.3)
    else:
        raise ValueError(shape)
    y = np.asarray(y, dtype=float)
    return (y - y[0]) / max(y[-1] - y[0], 1e-9)


SHAPES = ("staircase", "slow-s", "power", "delayed", "dip")
# shapes whose rise happens in the body of the run: a failure judged against the run's start level uses
# these (a "power" rise is mostly over in the first tenth, where no start level can be read)
BODY_SHAPES = ("staircase", "slow-s", "delayed")
NOISES = ("gauss", "t3", "ar", "hetero")


def noise(rng, n: int, kind: str, sd: float, level: np.ndarray | None = None) -> np.ndarray:
    """Zero-mean noise of one of four models, with marginal sd ~ sd."""
    if kind == "t3":                              # heavy tails, capped so one draw is not a spike
        return np.clip(sd * rng.standard_t(3, n) / math.sqrt(3), -6 * sd, 6 * sd)
    if kind == "ar":
        from scipy.signal import lfilter

        phi = rng.uniform(0.5, 0.9)
        e = rng.normal(0, sd * math.sqrt(1 - phi ** 2), n)
        e[0] = rng.normal(0, sd)
        return lfilter([1.0], [1.0, -phi], e)
    if kind == "hetero":                          # larger where the level is in the middle of its range
        w = 0.5 + (np.ones(n) if level is None else 2 * np.sqrt(np.clip(level * (1 - level), 0, 0.25)))
        return rng.normal(0, sd, n) * w
    return rng.normal(0, sd, n)


def _ar_lognoise(rng, n: int, sd: float) -> np.ndarray:
    return np.exp(noise(rng, n, "ar", sd))


def grid(rng, n_steps: int, every: int = 1, irregular: bool = False, start: int = 0) -> np.ndarray:
    """Logged steps: every `every` steps, or irregular gaps (an async trainer that logs per batch)."""
    if irregular:
        gaps = rng.choice([1, 1, 1, 2, 2, 3, 4, 7], size=n_steps)
        steps = np.cumsum(gaps)
        steps = steps[steps <= n_steps]
    else:
        steps = np.arange(every, n_steps + 1, every)
    if len(steps) < 2:
        steps = np.array([1, 2]) * max(every, 1)
    return steps.astype(np.int64) + start


def eval_grid(rng, steps: np.ndarray, points: int | None = None) -> np.ndarray:
    """Eval steps: every N steps (N in 10..500, on the logging grid), or `points` spread over the run."""
    first, last = int(steps[0]), int(steps[-1])
    span = last - first
    if points is None:
        options = [e for e in (10, 20, 25, 50, 100, 200, 250, 500) if span / e >= 6]
        every = int(rng.choice(options)) if options else max(1, span // 6)
        s = np.arange(first - first % every + every, last + 1, every)
    else:
        s = np.linspace(first + span / points, last, points).round().astype(np.int64)
    s = steps[np.clip(np.searchsorted(steps, s), 0, len(steps) - 1)]     # on logged steps
    return np.unique(s)


# reward and eval scales: (name, to-scale map of a 0-1 quantity)
REWARD_SCALES = ("unit", "pm1", "rm", "rubric", "affine")
EVAL_SCALES = ("fraction", "percent", "judge")


def reward_scale(rng, kind: str):
    if kind == "unit":
        return (1.0, 0.0)
    if kind == "pm1":
        return (2.0, -1.0)
    if kind == "rm":                              # reward-model logits spanning roughly -3..+5
        lo, hi = rng.uniform(-3, -1), rng.uniform(2, 5)
        return (hi - lo, lo)
    if kind == "rubric":                          # five criteria scored 0-2
        return (10.0, 0.0)
    return (float(rng.uniform(0.2, 5.0)), float(rng.uniform(-2, 2)))


def to_eval_scale(v: np.ndarray, kind: str) -> np.ndarray:
    return {"fraction": v, "percent": 100 * v, "judge": 1 + 9 * v}[kind]


class Base:
    """A healthy GRPO/PPO run of a drawn shape, kept as parts so a family can change one of them."""

    def __init__(self, rng, *, n_steps: int | None = None, every: int | None = None, irregular: bool | None = None,
                 start: int = 0, reward_model: str | None = None, scale: str | None = None,
                 eval_scale: str | None = None, eval_points: int | None = None, n_evals: int | None = None,
                 logprob: bool | None = None, kl: bool | None = None):
        self.rng = rng
        n_steps = n_steps or int(rng.choice([30, 60, 150, 300, 500, 800, 1200, 2000, 3000, 5000]))
        if every is None:
            every = int(rng.choice([1, 1, 1, 5, 10, 25, 50]))
            while every > 1 and n_steps / every < 40:
                every = {50: 25, 25: 10, 10: 5, 5: 1}[every]
        irregular = bool(rng.random() < 0.12) if irregular is None else irregular
        self.steps = grid(rng, n_steps, every, irregular and every == 1, start)
        self.every, self.irregular = every, irregular and every == 1
        n = len(self.steps)
        u = (self.steps - self.steps[0]) / max(float(self.steps[-1] - self.steps[0]), 1.0)
        self.u = u
        self.shape = str(rng.choice(SHAPES))
        self.skill = skill_curve(rng, u, self.shape)
        self.p0 = rng.uniform(0.08, 0.5)
        self.rise = rng.uniform(0.1, 0.4) if rng.random() < 0.85 else rng.uniform(0.0, 0.03)
        self.reward_model = reward_model or str(rng.choice(["binary", "binary", "rm", "dense"]))
        self.scale = scale or str(rng.choice(REWARD_SCALES))
        self.a, self.b = reward_scale(rng, self.scale)
        self.noise_kind = str(rng.choice(NOISES))
        self.train: dict[str, np.ndarray] = {}
        self.train["reward"] = self.reward_values(self.skill)
        # independent evals track the skill: each gains 0.06-0.3 of its range over a full skill rise
        self.eval_scale = eval_scale or str(rng.choice(EVAL_SCALES))
        self.evals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        k = n_evals if n_evals is not None else int(rng.integers(1, 4))
        if eval_points is None and rng.random() < 0.15:        # evals only a handful of times
            eval_points = int(rng.integers(3, 7))
        names = rng.choice(["math500", "aime24", "gsm8k", "gpqa_diamond", "olympiadbench", "mt_bench"], k,
                           replace=False)
        es = eval_grid(rng, self.steps, eval_points) if k else np.array([], dtype=np.int64)
        self.eval_steps = es
        for name in names:
            e0, sd = rng.uniform(0.15, 0.6), rng.uniform(0.004, 0.015)
            # a real share of the reward's rise (in 0-1 terms), and clear of the eval's own noise
            gain = max(self.rise * rng.uniform(0.35, 1.2), 8 * sd) if self.rise > 0.05 else 0.0
            clean = e0 + gain * np.interp(es, self.steps, self.skill)
            self.evals[f"eval:{name}"] = (es, to_eval_scale(np.clip(clean + rng.normal(0, sd, len(es)), 0, 1),
                                                            self.eval_scale))
        # response length: drifts 0.8-1.5x, lognormal batch noise, sometimes AR
        self.l0 = rng.uniform(150, 1500)
        self.cap = float(rng.choice([2048, 4096, 8192, 16384]))
        while self.cap < 3 * self.l0:
            self.cap *= 2
        drift = rng.uniform(0.8, 1.5)
        length = self.l0 * (1 + (drift - 1) * np.interp(u, [0, 1], [0, 1]) ** rng.uniform(0.6, 1.5))
        self.train["response_length"] = length * (_ar_lognoise(rng, n, 0.03) if rng.random() < 0.4
                                                  else np.exp(rng.normal(0, rng.uniform(0.01, 0.05), n)))
        self.train["truncation_rate"] = self.clipped(self.train["response_length"])
        # KL (absent when beta = 0, TRL's default): 0 -> 0.003-0.04 nats per token
        if kl if kl is not None else rng.random() < 0.7:
            end = rng.uniform(0.003, 0.04)
            self.train["kl"] = (end * 0.02 + end * u ** rng.uniform(0.5, 1.6)) * np.exp(noise(rng, n, "gauss", 0.08))
            self.train["kl_coef"] = np.full(n, float(rng.choice([0.001, 0.01, 0.04, 0.1])))
        # entropy: start 0.3-3.9 nats, ends 0.86-1.05x, sometimes sawtoothing with the data order
        self.e0 = float(np.exp(rng.uniform(math.log(0.3), math.log(3.9))))
        e_end = self.e0 * rng.uniform(0.86, 1.05)
        ent = self.e0 + (e_end - self.e0) * u ** rng.uniform(0.5, 2.0)
        self.train["entropy"] = ent * (1 + noise(rng, n, str(rng.choice(["gauss", "ar"])), rng.uniform(0.004, 0.015)))
        self.train["clip_frac"] = np.clip(rng.uniform(0.0005, 0.01) * np.exp(rng.normal(0, 0.3, n)), 0, 1)
        # zero-variance group fraction: 0.05-0.4, highest where the reward is near its ends
        p = self.p_of(self.skill)
        z0, z1 = rng.uniform(0.05, 0.22), rng.uniform(0.0, 0.15)
        self.train["zero_std_frac"] = np.clip(z0 + z1 * (2 * p - 1) ** 2 + rng.normal(0, 0.025, n), 0, 0.45)
        # loss: a policy-gradient loss around 0, or TRL's rounded loss, or a positive total loss
        mode = str(rng.choice(["pg", "pg", "rounded", "total"]))
        if mode == "pg":
            self.train["loss"] = rng.uniform(-0.005, 0.01) + noise(rng, n, str(rng.choice(["gauss", "t3"])),
                                                                    rng.uniform(0.005, 0.04))
        elif mode == "rounded":                   # HF Trainer rounds the logged loss to 4 decimals
            raw = 0.04 * self.train.get("kl", np.full(n, 1e-4)) + rng.normal(0, rng.uniform(1e-5, 5e-5), n)
            self.loss_raw = raw
            self.train["loss"] = np.round(raw, 4) + 0.0
        else:
            self.train["loss"] = rng.uniform(0.2, 1.2) * (1 - 0.25 * u) * np.exp(rng.normal(0, 0.05, n))
        self.loss_mode = mode
        # grad norm: log-level 0.05-2, decaying a little, log-noise Gaussian or heavy-tailed (capped at 3.5x)
        g0 = float(np.exp(rng.uniform(math.log(0.05), math.log(2.0))))
        lg = noise(rng, n, str(rng.choice(["gauss", "t3", "ar"])), rng.uniform(0.1, 0.3))
        self.train["grad_norm"] = g0 * (1 - rng.uniform(0, 0.4) * u) * np.exp(np.clip(lg, -1.2, math.log(3.5)))
        # learning rate: constant, warm-up + cosine, warm-up + constant, linear decay
        peak = float(rng.choice([5e-7, 1e-6, 2e-6, 3e-6, 5e-6]))
        sched = str(rng.choice(["constant", "cosine", "warm-constant", "linear"]))
        warm = rng.uniform(0.01, 0.1)
        wu = np.minimum(1.0, (u + 1e-3) / warm) if sched != "constant" else np.ones(n)
        tail = {"cosine": 0.5 * (1 + np.cos(np.pi * np.clip((u - warm) / (1 - warm), 0, 1))),
                "linear": 1 - np.clip((u - warm) / (1 - warm), 0, 1)}.get(sched, np.ones(n))
        self.train["lr"] = peak * wu * np.maximum(tail, 0.02)
        # layer-4 signals where the stack logs them
        if logprob if logprob is not None else rng.random() < 0.35:
            self.train["logprob_delta"] = rng.uniform(0.005, 0.03) * (1 + rng.uniform(0, 0.3) * u) * \
                np.exp(rng.normal(0, 0.08, n))
            self.train["is_ratio_mean"] = 1 + rng.normal(0, 0.003, n)
            self.train["prob_delta"] = rng.uniform(0.0015, 0.004) * np.exp(rng.normal(0, 0.1, n))
            self.train["k3_kl"] = rng.uniform(2e-4, 8e-4) * np.exp(rng.normal(0, 0.15, n))
        self.info = {"shape": self.shape, "reward_model": self.reward_model, "reward_scale": self.scale,
                     "noise": self.noise_kind, "eval_scale": self.eval_scale, "every": every,
                     "irregular": self.irregular, "loss_mode": mode}

    @property
    def n(self) -> int:
        return len(self.steps)

    def p_of(self, skill: np.ndarray) -> np.ndarray:
        return np.clip(self.p0 + self.rise * skill, 0.01, 0.99)

    def reward_values(self, skill: np.ndarray, p: np.ndarray | None = None, sd: float | None = None) -> np.ndarray:
        """The logged reward for a skill curve, on this run's scale and with its noise model."""
        rng = self.rng
        p = self.p_of(skill) if p is None else p
        n = len(p)
        if self.reward_model == "binary":         # 0/1 rewards over a few prompts x a few samples
            prompts, gens = int(rng.choice([4, 8, 16])), int(rng.choice([4, 8, 16]))
            conc = rng.uniform(2, 6)
            q = rng.beta(np.repeat(p, prompts) * conc, np.repeat(1 - p, prompts) * conc)
            r = rng.binomial(gens, q).reshape(n, prompts).sum(axis=1) / (prompts * gens)
        elif self.reward_model == "rm":           # a reward-model score: noisy, drifting slowly
            drift = np.cumsum(rng.normal(0, rng.uniform(0.02, 0.04) / math.sqrt(n), n))
            drift -= np.linspace(0, drift[-1], n)                     # a wander (~0.02 of 0-1), not a trend
            r = p + drift + noise(rng, n, "t3", rng.uniform(0.02, 0.06))
        else:
            sd = rng.uniform(0.01, 0.04) if sd is None else sd
            r = p + noise(rng, n, getattr(self, "noise_kind", "gauss"), sd, level=p)
        return self.a * r + self.b

    def clipped(self, length: np.ndarray, sigma: float = 0.45) -> np.ndarray:
        """Fraction of responses over the cap when lengths are lognormal around the mean."""
        from scipy.special import ndtr
        z = (np.log(self.cap) - np.log(np.maximum(length, 1.0)) + sigma ** 2 / 2) / sigma
        return np.clip(1 - ndtr(z) + self.rng.normal(0, 0.002, len(length)), 0, 1)

    def rescale_reward(self, r01: np.ndarray) -> np.ndarray:
        return self.a * r01 + self.b

    def sim(self, style: str) -> Sim:
        train = dict(self.train)
        if getattr(self, "loss_mode", "") == "rounded" and style not in ("trl", "trl-bare") \
                and np.array_equal(train.get("loss"), np.round(self.loss_raw, 4) + 0.0):
            train["loss"] = self.loss_raw                    # only the HF Trainer rounds; verl logs the float
        info = dict(self.info)
        if info.get("loss_mode") == "rounded" and style not in ("trl", "trl-bare"):
            info["loss_mode"] = "pg-small"
        return Sim(self.steps, train, dict(self.evals), style, "", None, info)

    def flat_evals(self, drift: float = 0.0) -> None:
        """Independent evals that do not follow the reward: flat at their first level (maybe sliding)."""
        rng = self.rng
        for name, (s, v) in list(self.evals.items()):
            v01 = {"fraction": v, "percent": v / 100, "judge": (v - 1) / 9}[self.eval_scale]
            u = np.interp(s, self.steps, self.u)
            flat = float(v01[0]) + drift * u + rng.normal(0, rng.uniform(0.004, 0.012), len(s))
            self.evals[name] = (s, to_eval_scale(np.clip(flat, 0, 1), self.eval_scale))

    def eval_from_start(self) -> None:
        """An eval before training too (verl's val_before_train): the first logged step gets one."""
        if not self.evals or self.eval_steps[0] <= self.steps[0]:
            return
        es = np.unique(np.r_[self.steps[0], self.eval_steps])
        self.evals = {k: (es, np.interp(es, s, v)) for k, (s, v) in self.evals.items()}
        self.eval_steps = es

    def ensure_evals(self, points_at_least: int = 6) -> None:
        if len(self.eval_steps) >= points_at_least and self.evals:
            return
        es = eval_grid(self.rng, self.steps, max(points_at_least, 8))
        names = list(self.evals) or ["eval:math500"]
        self.evals = {}
        for name in names:
            clean = self.rng.uniform(0.2, 0.5) + 0.15 * np.interp(es, self.steps, self.skill)
            self.evals[name] = (es, to_eval_scale(clean + self.rng.normal(0, 0.008, len(es)), self.eval_scale))
        self.eval_steps = es


def sft(rng, *, n_steps: int | None = None, pretrain: bool | None = None, every: int | None = None,
        start: int = 0) -> Base:
    """A healthy SFT or pretraining run (loss, grad norm, LR, eval loss), with this corpus's shapes."""
    b = Base.__new__(Base)
    b.rng = rng
    pretrain = bool(rng.random() < 0.4) if pretrain is None else pretrain
    n_steps = n_steps or int(rng.choice([80, 200, 500, 1000, 3000, 8000] + ([20_000, 60_000] if pretrain else [])))
    every = every or int(rng.choice([1, 1, 5, 10, 25, 50] if n_steps >= 2000 else [1, 1, 5]))
    while every > 1 and n_steps / every < 40:
        every = {50: 25, 25: 10, 10: 5, 5: 1}[every]
    b.steps = grid(rng, n_steps, every, False, start)
    b.every, b.irregular = every, False
    n = len(b.steps)
    b.u = (b.steps - b.steps[0]) / max(float(b.steps[-1] - b.steps[0]), 1.0)
    t = (b.steps - b.steps[0]).astype(float)
    if pretrain:                                   # 10.5 -> 2.5-3.5 nats, fast then a long power-law tail
        l0, floor, tau = rng.uniform(10.0, 11.0), rng.uniform(2.3, 3.4), rng.uniform(20, 200)
    else:
        l0, floor, tau = rng.uniform(1.6, 3.2), rng.uniform(0.4, 1.3), rng.uniform(0.03, 0.3) * n_steps
    alpha = rng.uniform(0.4, 1.0)
    clean = floor + (l0 - floor) * (1 + t / tau) ** -alpha
    b.loss_clean = clean
    b.train = {"loss": clean * np.exp(noise(rng, n, str(rng.choice(["gauss", "ar", "t3"])), rng.uniform(0.008, 0.03)))}
    g0 = rng.uniform(0.2, 2.5)
    lg = np.clip(noise(rng, n, str(rng.choice(["gauss", "ar"])), rng.uniform(0.06, 0.2)), -1, math.log(3))
    b.train["grad_norm"] = g0 * (0.4 + 0.6 * (1 + t / tau) ** -0.3) * np.exp(lg)
    peak = rng.uniform(3e-4, 3e-3) if pretrain else rng.uniform(5e-6, 1e-4)
    warm = rng.uniform(0.005, 0.04)
    sched = np.where(b.u < warm, (b.u + 1e-3) / warm,
                     np.maximum(0.5 * (1 + np.cos(np.pi * np.clip((b.u - warm) / (1 - warm), 0, 1))), 0.1))
    b.train["lr"] = peak * sched
    es = eval_grid(rng, b.steps)
    gap = rng.uniform(0.01, 0.2)
    b.evals = {"eval_loss": (es, np.interp(es, b.steps, clean) + gap + rng.normal(0, 0.004, len(es)))}
    b.eval_steps = es
    b.info = {"pretrain": pretrain, "every": every}
    return b


# --- naming: roles -> the metric keys each framework writes ------------------------------------------

TRL_KEYS = {"reward": "reward", "reward_std": "reward_std", "zero_std_frac": "frac_reward_zero_std",
            "response_length": "completions/mean_length", "truncation_rate": "completions/clipped_ratio",
            "kl": "kl", "entropy": "entropy", "clip_frac": "clip_ratio/region_mean", "loss": "loss",
            "grad_norm": "grad_norm", "lr": "learning_rate",
            "logprob_delta": "sampling/sampling_logp_difference/mean",
            "is_ratio_mean": "sampling/importance_sampling_ratio/mean"}
VERL_KEYS = {"reward": "critic/score/mean", "response_length": "response_length/mean",
             "truncation_rate": "response_length/clip_ratio", "kl": "actor/kl_loss", "kl_coef": "actor/kl_coef",
             "entropy": "actor/entropy", "clip_frac": "actor/pg_clipfrac", "loss": "actor/pg_loss",
             "grad_norm": "actor/grad_norm", "lr": "actor/lr", "prob_delta": "training/rollout_probs_diff_mean",
             "k3_kl": "rollout_corr/k3_kl", "logprob_delta": "rollout_corr/log_ppl_abs_diff",
             "is_ratio_mean": "rollout_corr/rollout_is_mean",
             "policy_version_lag": "training/off_policy/trajectory_staleness/mean"}
OPENRLHF_KEYS = {"reward": "train/reward", "response_length": "train/response_length",
                 "truncation_rate": "train/truncated", "kl": "train/kl", "entropy": "train/entropy_loss",
                 "clip_frac": "train/ppo_clip_ratio", "loss": "train/policy_loss",
                 "grad_norm": "train/actor_grad_norm", "lr": "train/actor_lr"}
SFT_KEYS = {
    "hf": {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/learning_rate",
           "eval_loss": "eval/loss"},
    "hf-state": {"loss": "loss", "grad_norm": "grad_norm", "lr": "learning_rate", "eval_loss": "eval_loss"},
    "megatron": {"loss": "lm loss", "grad_norm": "grad-norm", "lr": "learning-rate", "loss_scale": "loss-scale",
                 "eval_loss": "lm loss validation"},
    "olmo-core": {"loss": "train/CE loss", "grad_norm": "optim/total grad norm", "lr": "optim/LR (group 0)",
                  "eval_loss": "eval/c4_en-validation/CE loss"},
    "torchtitan": {"loss": "loss_metrics/global_avg_loss", "grad_norm": "grad_norm", "lr": "lr",
                   "eval_loss": "validation_metrics/loss"},
}
GRPO_STYLES = ("trl", "trl-bare", "verl", "openrlhf")
SFT_STYLES = tuple(SFT_KEYS)
FORMATS = {"trl": ("csv", "jsonl", "parquet", "tb"), "trl-bare": ("trainer_state", "jsonl"),
           "verl": ("verl-jsonl", "parquet", "tb", "csv"), "openrlhf": ("tb", "csv"),
           "hf": ("tb", "csv"), "hf-state": ("trainer_state",), "megatron": ("tb",),
           "olmo-core": ("csv", "parquet"), "torchtitan": ("tb", "jsonl")}
STEP_COLUMN = {"trl": "train/global_step", "trl-bare": "step", "verl": "training/global_step",
               "openrlhf": "step", "hf": "train/global_step", "hf-state": "step", "megatron": "step",
               "olmo-core": "_step", "torchtitan": "step"}


def key_for(style: str, role: str, eval_scale: str = "fraction") -> str | None:
    """The key a framework writes for a role, or None when it does not log it."""
    bare = style == "trl-bare"
    if role.startswith("eval:"):
        ds = role[5:]
        if style in ("trl", "trl-bare"):
            suffix = "score" if eval_scale == "judge" else "accuracy"
            return f"eval_{ds}_{suffix}" if bare else f"eval/{ds}_{suffix}"
        if style == "verl":
            ds_path = {"gsm8k": "openai/gsm8k", "math500": "HuggingFaceH4/MATH-500"}.get(ds, ds)
            stat = "reward/mean@1" if eval_scale == "judge" else "acc/mean@4"
            return f"val-core/{ds_path}/{stat}"
        if style == "openrlhf":
            return f"eval/eval_{ds}_pass1"
        return None
    if role == "eval_reward":
        return ("eval_reward" if bare else "eval/reward") if style in ("trl", "trl-bare") else None
    if role.startswith("reward:"):
        fn = role.split(":", 1)[1]
        if style == "trl":
            return f"train/rewards/{fn}/mean"
        return f"rewards/{fn}/mean" if bare else None
    if style in ("trl", "trl-bare"):
        k = TRL_KEYS.get(role)
        return None if k is None else (k if bare else f"train/{k}")
    if style == "verl":
        return VERL_KEYS.get(role)
    if style == "openrlhf":
        return OPENRLHF_KEYS.get(role)
    return SFT_KEYS[style].get(role)


# --- writing ----------------------------------------------------------------------------------------

def records(sim: Sim) -> tuple[list[tuple[int, dict[str, float], bool]], int | None]:
    """(step, {key: value}, is_eval) in write order, and the index of the row where a restarted run's
    second write begins (None if it was never restarted).  A first attempt's rows come before it."""
    scale = sim.info.get("eval_scale", "fraction")
    tkeys = {role: k for role in sim.train if (k := key_for(sim.style, role, scale)) is not None}
    evals: dict[int, dict[str, float]] = {}
    for role, (s, v) in sim.evals.items():
        k = key_for(sim.style, role, scale)
        if k is None:
            continue
        for step, value in zip(s.tolist(), v.tolist()):
            evals.setdefault(int(step), {})[k] = float(value)
    order = list(range(sim.n))
    lo = hi = -1
    if sim.first is not None:
        lo, hi, attempt = sim.first
        order = list(range(hi + 1)) + list(range(lo, sim.n))
    rows: list[tuple[int, dict, bool]] = []
    restart = None
    seen: set[int] = set()
    for i in order:
        step = int(sim.steps[i])
        first_try = lo <= i <= hi and i not in seen
        if i in seen and restart is None:
            restart = len(rows)
        seen.add(i)
        if first_try:
            rows.append((step, {tkeys[r]: float(attempt[r][i - lo]) for r in tkeys if r in attempt}, False))
            continue
        rows.append((step, {tkeys[r]: float(sim.train[r][i]) for r in tkeys}, False))
        if step in evals:
            rows.append((step, evals.pop(step), True))
    if evals:                                     # evals between logged train steps
        extra = [(s, evals[s], True) for s in sorted(evals)]
        if restart is None:
            rows = sorted(rows + extra, key=lambda r: r[0])     # stable: a step's train row stays first
        else:
            rows.extend(extra)
    return rows, restart


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.7g}"


def _wide(rows: list[tuple[int, dict, bool]]) -> list[tuple[int, dict]]:
    """Merge each eval row into the train row of its step (wide tables have one row per step write)."""
    out: list[tuple[int, dict]] = []
    for step, vals, is_eval in rows:
        if is_eval and out and out[-1][0] == step:
            out[-1][1].update(vals)
        else:
            out.append((step, dict(vals)))
    return out


def write_sim(folder: Path, sim: Sim, tag: int = 0) -> list[str]:
    """Write one run in its style and format; returns the file names written."""
    folder.mkdir(parents=True, exist_ok=True)
    rows, restart = records(sim)
    step_col = STEP_COLUMN[sim.style]
    fmt = sim.fmt
    if fmt == "csv":
        wide = _wide(rows)
        keys = list(dict.fromkeys(k for _, r in wide for k in r))
        with (folder / "metrics.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([step_col, *keys])
            for step, r in wide:
                w.writerow([step, *(_fmt(r[k]) if k in r else "" for k in keys)])
        return ["metrics.csv"]
    if fmt == "jsonl":
        with (folder / "log.jsonl").open("w") as fh:
            for step, r in _wide(rows):
                fh.write(json.dumps({step_col: step, **r}) + "\n")
        return ["log.jsonl"]
    if fmt == "verl-jsonl":
        with (folder / f"{sim.info.get('experiment', 'grpo')}.jsonl").open("w") as fh:
            for step, r in _wide(rows):
                fh.write(json.dumps({"step": step, "data": {**r, "training/global_step": step}}) + "\n")
        return [f"{sim.info.get('experiment', 'grpo')}.jsonl"]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        wide = _wide(rows)
        keys = list(dict.fromkeys(k for _, r in wide for k in r))
        cols = {step_col: pa.array([s for s, _ in wide], pa.int64())}
        for k in keys:
            cols[k] = pa.array([r.get(k) for _, r in wide], pa.float64())
        pq.write_table(pa.table(cols), folder / "metrics.parquet")
        return ["metrics.parquet"]
    if fmt == "trainer_state":
        history = []
        for step, r, _ in rows:
            history.append({**r, "step": step})
        state = {"global_step": int(sim.steps[-1]), "max_steps": int(sim.steps[-1]),
                 "logging_steps": int(sim.info.get("every", 1)), "log_history": history}
        text = json.dumps(state, indent=1)              # NaN / Infinity tokens, as HF writes them
        (folder / "trainer_state.json").write_text(text + "\n")
        return ["trainer_state.json"]
    if fmt == "tb":
        return _write_tb(folder, rows, restart, tag)
    raise ValueError(f"unknown format {fmt!r}")


def _write_tb(folder: Path, rows, restart: int | None, tag: int) -> list[str]:
    """Event files with tensorboard's own record writer; a restart starts a second file, as trainers do."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    parts = [rows] if restart is None else [rows[:restart], rows[restart:]]
    names = []
    for j, part in enumerate(parts):
        wall0 = 1_750_000_000.0 + 10_000 * tag + 5_000 * j
        name = f"events.out.tfevents.{int(wall0)}.heldout-node.{1000 + tag}.{j}"
        with (folder / name).open("wb") as fh:
            w = RecordWriter(fh)
            w.write(event_pb2.Event(wall_time=wall0, file_version="brain.Event:2").SerializeToString())
            for i, (step, r, _) in enumerate(part):
                for k, v in r.items():
                    ev = event_pb2.Event(wall_time=wall0 + 0.5 * i, step=step, summary=summary_pb2.Summary(
                        value=[summary_pb2.Summary.Value(tag=k, simple_value=v)]))
                    w.write(ev.SerializeToString())
        names.append(name)
    return names


# --- labels -----------------------------------------------------------------------------------------

def _shallower(layer: int) -> list[str]:
    return [r for lay in range(1, layer) for r in LAYER_RULES[lay]]


def healthy_label(not_judged=()) -> dict:
    return dict(kind="healthy", verdict="pass", root_layer=None, not_judged=list(not_judged),
                must_not_fire=[r for r in ALL_RULES if r not in not_judged])


def quiet_label(not_judged=()) -> dict:
    return {**healthy_label(not_judged), "kind": "near-miss"}


def fail_label(root: int, verdict: str, must_fire, extra_not=(), not_judged=(), **kw) -> dict:
    must_not = sorted((set(_shallower(root)) | set(extra_not)) - set(not_judged) - set(must_fire))
    return dict(kind="failing", verdict=verdict, root_layer=root, must_fire=list(must_fire),
                must_not_fire=must_not, not_judged=list(not_judged), **kw)


def not_judged_label(verdict: str, not_judged, root=None, must_fire=()) -> dict:
    return dict(kind="not-judged", verdict=verdict, root_layer=root, must_fire=list(must_fire),
                must_not_fire=[r for r in ALL_RULES if r not in not_judged and r not in must_fire],
                not_judged=list(not_judged))


def rises(v: np.ndarray | None, sds: float = 5.0) -> bool:
    """A clear rise: some tenth of the run sits more than `sds` point-to-point noise sds above the first."""
    if v is None:
        return False
    v = v[np.isfinite(v)]
    if len(v) < 20:
        return False
    levels = [float(np.median(c)) for c in np.array_split(v, 10)]
    return max(levels[1:]) - levels[0] > sds * max(_point_sd(v), 1e-12)


def expected_not_judged(sim: Sim) -> list[str]:
    """Rules a careful reader cannot judge on this run's data: no independent eval at all (both eval
    rules), evals of fewer than 4 points against a clearly rising reward (the divergence; a reward that
    did not rise, or a length that did not grow, needs no eval to be cleared), no loss and no grad norm,
    or fewer than 10 logged points."""
    out: list[str] = []
    ev = sim.independent_evals()
    if not ev:
        out += EVAL_RULES
    elif max(len(s) for s, _ in ev.values()) < 4 and rises(sim.train.get("reward")):
        out.append("L1.reward-eval-divergence")
    if "loss" not in sim.train and "grad_norm" not in sim.train:
        out += UPDATE_RULES
    if sim.n < 10:
        out += SHORT_RUN_RULES
    return list(dict.fromkeys(out))


# --- families ---------------------------------------------------------------------------------------
# Each returns (Sim, label dict, info dict).  Styles are drawn among those that log every signal the
# label rests on; a role a style does not log is simply not written (verl has no zero-variance fraction).

def _style(rng, b_or_sim, allowed=GRPO_STYLES) -> str:
    return str(rng.choice(allowed))


def h_grpo(rng, i):
    b = Base(rng)
    return b.sim(_style(rng, b)), healthy_label(), {}


def h_grpo_long(rng, i):
    b = Base(rng, n_steps=int(rng.choice([20_000, 50_000, 100_000])), every=int(rng.choice([1, 5, 10])),
             irregular=False, reward_model="dense")
    s = b.sim(str(rng.choice(["trl", "verl"])))
    s.fmt = "parquet"
    return s, healthy_label(), {}


def h_grpo_offset(rng, i):
    """Resumed at step 50,000: logs 50,000..52,000 (or to 53,000), nothing before."""
    b = Base(rng, n_steps=int(rng.choice([2001, 3001])), start=50_000 - 1, every=int(rng.choice([1, 5, 10])))
    return b.sim(_style(rng, b)), healthy_label(), {"first_step": int(b.steps[0])}


def h_long_answers(rng, i):
    """Reasoning RL that grows its answers 2-3x while every eval improves with the reward."""
    b = Base(rng, n_steps=int(rng.choice([500, 1000, 2000, 4000])))
    b.rise = max(b.rise, 0.15)
    b.train["reward"] = b.reward_values(b.skill)
    g = rng.uniform(2.0, 3.0)
    b.train["response_length"] = b.l0 * (1 + (g - 1) * b.skill) * np.exp(rng.normal(0, 0.03, b.n))
    b.cap = max(b.cap, 4 * g * b.l0)
    b.train["truncation_rate"] = b.clipped(b.train["response_length"])
    b.ensure_evals(8)
    for name, (s, _) in list(b.evals.items()):
        clean = rng.uniform(0.2, 0.45) + rng.uniform(0.12, 0.25) * np.interp(s, b.steps, b.skill)
        b.evals[name] = (s, to_eval_scale(clean + rng.normal(0, 0.006, len(s)), b.eval_scale))
    return b.sim(_style(rng, b)), healthy_label(), {"length_growth": round(g, 2)}


def h_sft(rng, i):
    b = sft(rng, pretrain=False)
    style = str(rng.choice(["hf", "hf-state", "hf", "torchtitan"]))
    return b.sim(style), healthy_label(), {"pretrain": False}


def h_pretrain(rng, i):
    b = sft(rng, pretrain=True)
    style = str(rng.choice(["megatron", "olmo-core", "torchtitan", "hf"]))
    s = b.sim(style)
    if style == "megatron":                          # fp16 dynamic loss scale: halves on overflow, grows back
        s.train["loss_scale"] = 2.0 ** np.clip(16 + np.floor(np.cumsum(rng.normal(0.02, 0.3, s.n)) / 3), 10, 24)
    return s, healthy_label(), {"pretrain": True}


# near misses ------------------------------------------------------------------------------------------

def nm_instant_collapse(rng, i):
    """Entropy sharpens 10-15% within the first 2-6 logged steps, then holds level: not a collapse, and
    above 0.8x of even the very first value (seed 002's floor), however "early" is read."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000])), every=1)
    k = int(rng.integers(2, 7))
    drop = rng.uniform(0.10, 0.15)
    e = b.e0 * (1 + rng.normal(0, 0.006, b.n))
    e[:k] = e[k] * np.linspace(1 / (1 - drop), 1, k + 1)[:k]
    b.train["entropy"] = e
    return b.sim(_style(rng, b)), quiet_label(), {"early_drop": round(drop, 2)}


def nm_frozen(rng, i):
    """TRL GRPO with its loss rounded to 4 decimals (0.0 on most steps), grad norm moving - or not
    exported at all (a notebook's progress table), or 0.0 on isolated all-equal-group steps."""
    b = Base(rng, n_steps=int(rng.choice([200, 500, 1000])), every=int(rng.choice([1, 1, 5])))
    raw = 0.04 * b.train.get("kl", np.full(b.n, 5e-4)) + rng.normal(0, rng.uniform(1e-5, 4e-5), b.n)
    b.train["loss"] = np.round(raw, 4) + 0.0
    variant = ("no-grad-norm", "isolated-zero", "moving")[i % 3]
    if variant == "no-grad-norm":
        del b.train["grad_norm"]
    elif variant == "isolated-zero":
        where = rng.choice(np.arange(b.n // 5, b.n), size=int(rng.integers(1, 4)), replace=False)
        b.train["grad_norm"][where] = 0.0
        b.train["zero_std_frac"][where] = 1.0
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), quiet_label(), {"variant": variant}


def nm_kl_level(rng, i):
    """KL to the reference ends at 0.02-0.04 nats per token."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), kl=True)
    end = rng.uniform(0.02, 0.04)
    b.train["kl"] = (3e-4 + end * skill_curve(rng, b.u, str(rng.choice(SHAPES)))) * np.exp(rng.normal(0, 0.07, b.n))
    return b.sim(str(rng.choice(["trl", "verl", "openrlhf"]))), quiet_label(), {"kl_end": round(end, 3)}


def nm_sft_bump(rng, i):
    """A loss bump to 1.4-1.6x over a few steps that comes back within 5-25 steps."""
    b = sft(rng, n_steps=int(rng.choice([300, 1000, 3000])), pretrain=bool(i % 2), every=1)
    at = b_at = int(rng.uniform(0.2, 0.8) * b.n)
    w = int(rng.integers(5, 26))
    bump = np.interp(np.arange(w), [0, w // 3, w - 1], [0, rng.uniform(0.4, 0.6), 0])
    seg = slice(at, min(b.n, at + w))
    b.train["loss"][seg] *= 1 + bump[: seg.stop - seg.start]
    b.train["grad_norm"][seg] *= 1 + 1.5 * bump[: seg.stop - seg.start]
    style = str(rng.choice(["hf", "hf-state", "torchtitan"] if i % 2 == 0 else ["megatron", "olmo-core"]))
    return b.sim(style), quiet_label(), {"bump_step": int(b.steps[b_at]), "width": w}


def _components(rng, b: Base, fmt: tuple[float, float], acc: tuple[float, float], fns=None) -> None:
    """Per-function TRL rewards: format and accuracy (open-r1 names), each a mean over the batch."""
    fns = fns or (str(rng.choice(["format_reward", "tag_count_reward"])), "accuracy_reward")
    batch = int(rng.choice([128, 256, 512]))
    sf = skill_curve(rng, b.u, str(rng.choice(BODY_SHAPES)))
    sa = skill_curve(rng, b.u, str(rng.choice(["slow-s", "delayed"])))
    pf = np.clip(fmt[0] + (fmt[1] - fmt[0]) * sf, 0.001, 0.999)
    pa = np.clip(acc[0] + (acc[1] - acc[0]) * sa, 0.001, 0.999)
    f = rng.binomial(batch, pf) / batch
    a = rng.binomial(batch, pa) / batch
    b.train[f"reward:{fns[0]}"] = f
    b.train[f"reward:{fns[1]}"] = a
    b.train["reward"] = f + a
    b.info["components"] = list(fns)


def nm_components(rng, i):
    """Format learned first (0.48 -> 0.86) and accuracy rising behind it (0.16 -> 0.24-0.32), the evals
    following the accuracy."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000])), scale="unit")
    a_end = rng.uniform(0.24, 0.32)
    _components(rng, b, (0.48, 0.86), (0.16, a_end))
    b.ensure_evals(6)
    acc_skill = (b.train["reward:accuracy_reward"] - 0.16)
    for name, (s, _) in list(b.evals.items()):
        base = rng.uniform(0.2, 0.4) + rng.uniform(1.2, 1.6) * np.interp(s, b.steps, np.convolve(
            acc_skill, np.ones(9) / 9, mode="same"))
        b.evals[name] = (s, to_eval_scale(np.clip(base + rng.normal(0, 0.006, len(s)), 0, 1), b.eval_scale))
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), quiet_label(), {"accuracy_end": round(a_end, 2)}


def nm_truncation(rng, i):
    """Answers lengthen 1.2-1.4x, the clipped ratio creeps 0.02 -> 0.08, evals improve."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 2500])))
    g = rng.uniform(1.2, 1.4)
    b.train["response_length"] = b.l0 * (1 + (g - 1) * b.skill) * np.exp(rng.normal(0, 0.02, b.n))
    b.train["truncation_rate"] = np.clip(0.02 + 0.06 * b.skill + rng.normal(0, 0.006, b.n), 0, 1)
    return b.sim(str(rng.choice(["trl", "verl"]))), quiet_label(), {"growth": round(g, 2)}


def _attempt(rng, sim: Sim, lo: int, hi: int, blow_up: bool) -> dict[str, np.ndarray]:
    """What a first attempt wrote for indices lo..hi before the restart: the same run with other batch
    noise, and - when it blew up - a grad norm climbing 10-1000x, loss spikes, then NaN."""
    k = hi - lo + 1
    att = {r: v[lo:hi + 1] * np.exp(rng.normal(0, 0.02, k)) for r, v in sim.train.items()}
    for r in ("lr", "kl_coef", "loss_scale"):
        if r in sim.train:
            att[r] = sim.train[r][lo:hi + 1].copy()
    if "loss" in att:
        att["loss"] = sim.train["loss"][lo:hi + 1] + rng.normal(0, 0.5 * _point_sd(sim.train["loss"]), k)
    if blow_up:
        start = int(k * rng.uniform(0.3, 0.6))
        climb = np.exp(np.log(rng.uniform(10, 1000)) * np.clip((np.arange(k) - start) / max(k - 1 - start, 1), 0, 1))
        att["grad_norm"] = att["grad_norm"] * climb
        sd = max(_point_sd(sim.train["loss"]), 1e-3)
        for j in range(start, k - 1):
            if rng.random() < 0.15 * (j - start) / max(k - start, 1):
                att["loss"][j] += sd * rng.uniform(10, 50)
        att["loss"][-1] = math.nan
        att["grad_norm"][-1] = math.nan if rng.random() < 0.6 else math.inf
        if "entropy" in att and rng.random() < 0.5:
            att["entropy"][-1] = math.nan
    return att


def _point_sd(v: np.ndarray) -> float:
    d = np.diff(v[np.isfinite(v)])
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2)) if len(d) > 2 else 0.0


def nm_rolled_back(rng, i):
    """Preempted and resumed from a checkpoint: 20-150 steps written twice, both times healthy."""
    b = Base(rng, n_steps=int(rng.choice([500, 1000, 3000])), every=int(rng.choice([1, 5])))
    s = b.sim(str(rng.choice(["trl", "verl"])))
    lo = s.at(rng.uniform(0.2, 0.7))
    hi = min(s.n - 10, lo + int(rng.integers(20, 150)) // b.every)
    s.first = (lo, hi, _attempt(rng, s, lo, hi, blow_up=False))
    s.info["resume_formats"] = True
    return s, quiet_label(), {"restart_step": int(s.steps[lo]), "rewritten_to": int(s.steps[hi])}


def nm_l4_levels(rng, i):
    """Matched rollout and training engines: |logprob delta| ~0.02, importance ratio 0.99-1.01."""
    b = Base(rng, n_steps=int(rng.choice([50, 300, 1500])), logprob=True)
    b.train["logprob_delta"] = rng.uniform(0.015, 0.025) * np.exp(rng.normal(0, 0.1, b.n))
    b.train["is_ratio_mean"] = rng.uniform(0.993, 1.007) + rng.normal(0, 0.002, b.n)
    return b.sim(str(rng.choice(["trl", "trl-bare", "verl"]))), quiet_label(), {}


def nm_divergence(rng, i):
    """The reward rises clearly; each eval gains a third to a half of it (normalised): slower, but real."""
    b = Base(rng, n_steps=int(rng.choice([500, 1500, 3000])), n_evals=int(rng.integers(1, 3)))
    b.rise = rng.uniform(0.25, 0.4)
    b.train["reward"] = b.reward_values(b.skill)
    b.ensure_evals(8)
    for name, (s, _) in list(b.evals.items()):
        clean = rng.uniform(0.25, 0.5) + rng.uniform(0.33, 0.5) * b.rise * np.interp(s, b.steps, b.skill)
        b.evals[name] = (s, to_eval_scale(clean + rng.normal(0, 0.005, len(s)), b.eval_scale))
    return b.sim(_style(rng, b)), quiet_label(), {"rise": round(b.rise, 2)}


def nm_length(rng, i):
    """Length grows 1.4-1.8x with a flat reward and flat evals."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])))
    b.rise = 0.0
    b.train["reward"] = b.reward_values(b.skill)
    b.ensure_evals(6)
    b.flat_evals()
    g = rng.uniform(1.4, 1.8)
    grow = skill_curve(rng, b.u, "slow-s")
    b.train["response_length"] = b.l0 * (1 + (g - 1) * grow) * np.exp(rng.normal(0, 0.02, b.n))
    b.train["truncation_rate"] = b.clipped(b.train["response_length"])
    return b.sim(_style(rng, b)), quiet_label(), {"growth": round(g, 2)}


def nm_zero_std(rng, i):
    """A zero-variance fraction of 0.28-0.42: many groups wasted, most still learning."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])))
    f = rng.uniform(0.28, 0.42)
    b.train["zero_std_frac"] = np.clip(f + noise(rng, b.n, "ar", 0.03), 0, 0.47)
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), quiet_label(), {"fraction": round(f, 2)}


def nm_entropy(rng, i):
    """Entropy ends at 0.84-0.9x its early level, sliding slowly."""
    b = Base(rng, n_steps=int(rng.choice([500, 2000, 5000])))
    end = rng.uniform(0.84, 0.9)
    b.train["entropy"] = b.e0 * (1 - (1 - end) * skill_curve(rng, b.u, "slow-s")) * (1 + rng.normal(0, 0.008, b.n))
    return b.sim(_style(rng, b)), quiet_label(), {"end_frac": round(end, 2)}


def nm_loss(rng, i):
    """A positive loss with one bump of 3-6x its level that is gone the next step."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), every=1)
    lvl = rng.uniform(0.3, 1.5)
    b.train["loss"] = lvl * np.exp(rng.normal(0, 0.05, b.n))
    at = int(rng.uniform(0.3, 0.9) * b.n)
    m = rng.uniform(3, 6)
    b.train["loss"][at] = lvl * m
    return b.sim(_style(rng, b)), quiet_label(), {"bump": round(m, 1), "step": int(b.steps[at])}


def nm_grad(rng, i):
    """Grad-norm bumps just short of seed 002's skip test (< 5x its average, or over 5x but under 5.0)."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), every=1)
    g = b.train["grad_norm"]
    lvl = float(np.median(g))
    where = rng.choice(np.arange(b.n // 5, b.n - 3), size=int(rng.integers(1, 3)), replace=False)
    if lvl < 0.6:
        g[where] = min(4.2, lvl * rng.uniform(5.5, 7))
    else:
        g[where] = lvl * rng.uniform(2.5, 3.8)
    return b.sim(_style(rng, b)), quiet_label(), {"level": round(lvl, 3)}


def nm_logprob(rng, i):
    """bf16 engines a little apart: |logprob delta| 0.028-0.042."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), logprob=True)
    lvl = rng.uniform(0.028, 0.042)
    b.train["logprob_delta"] = lvl * np.exp(rng.normal(0, 0.06, b.n))
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), quiet_label(), {"level": round(lvl, 3)}


# the newly reported failure patterns -----------------------------------------------------------------

def f_instant_collapse(rng, i):
    """Entropy 3.9 -> 0.4 -> 0.07 -> 0.0 over three logged steps, at the first step or later; afterwards
    every group is equal, the reward a constant, grad norm and loss exactly 0.0 while the LR schedule
    runs on.  Root layer 2; the equal groups are a consequence and L1.zero-variance-groups must not fire
    (layer 1 is above the root); the frozen update below it may be reported as downstream."""
    b = Base(rng, n_steps=int(rng.choice([100, 300, 800, 2000])), every=int(rng.choice([1, 1, 5])), kl=True,
             irregular=False)
    n = b.n
    at = 0 if i % 2 == 0 else int(rng.uniform(0.15, 0.75) * n)
    e0 = 3.9 if at == 0 or i % 4 == 1 else float(rng.uniform(1.0, 3.0))
    ent = b.train["entropy"] * e0 / float(np.median(b.train["entropy"][max(0, at - 5): at + 1]))
    ent[at:at + 3] = e0 * np.array([1.0, 0.4 / 3.9, 0.07 / 3.9]) * np.exp(rng.normal(0, 0.03, 3))
    ent[at + 3:] = 0.0
    b.train["entropy"] = ent
    gone = np.arange(n) >= at + 3
    b.train["zero_std_frac"] = np.where(gone, 1.0, b.train["zero_std_frac"])
    b.train["grad_norm"] = np.where(gone, 0.0, b.train["grad_norm"])
    b.train["loss"] = np.where(gone, 0.0, b.train["loss"])
    const = b.rescale_reward(np.array(0.0 if rng.random() < 0.6 else float(rng.choice([0.05, 0.1]))))
    b.train["reward"] = np.where(gone, float(const), b.train["reward"])
    b.train["response_length"] = np.where(gone, float(rng.choice([1, 2, 4])), b.train["response_length"])
    b.train["truncation_rate"] = np.where(gone, 0.0, b.train["truncation_rate"])   # EOS at once: never cut
    k_after = rng.uniform(0.5, 4.0)
    kl = b.train["kl"]
    kl[at + 1: at + 3] = np.linspace(kl[at], k_after, 4)[1:3]
    kl[at + 3:] = k_after * np.exp(rng.normal(0, 0.01, n - at - 3))
    step_gone = int(b.steps[min(at + 3, n - 1)])
    for name, (s, v) in list(b.evals.items()):
        b.evals[name] = (s, np.where(s >= step_gone, to_eval_scale(rng.uniform(0, 0.01, len(s)), b.eval_scale), v))
    s = b.sim(str(rng.choice(["trl", "trl-bare"])))
    return s, fail_label(2, "fail", ["L2.entropy-collapse"], extra_not=["L1.zero-variance-groups"]), \
        {"collapse_step": int(b.steps[at]), "entropy_from": round(e0, 2)}


def f_frozen_updates(rng, i):
    """Grad norm exactly 0.0 and the loss exactly 0.0 (or one repeated value) from an onset on, LR > 0,
    mixed groups: nothing reaches the weights.  Reward, entropy and KL hold their level.  Root 3."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000, 5000])))
    n = b.n
    at = 0 if i % 3 == 0 else int(rng.uniform(0.1, 0.6) * n)
    after = np.arange(n) >= at
    b.train["grad_norm"] = np.where(after, 0.0, b.train["grad_norm"])
    last = round(float(abs(b.train["loss"][max(at - 1, 0)])), 4)
    const = 0.0 if i % 2 == 0 else float(rng.choice([0.6931, 1.0986, last]))      # ln 2, ln 3, or stuck
    b.train["loss"] = np.where(after, const, b.train["loss"])
    held = b.skill.copy()
    held[after] = b.skill[at]
    b.train["reward"] = np.where(after, b.reward_values(held), b.train["reward"])
    for role in ("entropy", "response_length", "kl"):
        if role in b.train:
            v = b.train[role]
            lvl = float(np.median(v[max(0, at - 5): at + 1]))
            b.train[role] = np.where(after, lvl * np.exp(rng.normal(0, 0.01, n)), v)
    if at == 0 and "kl" in b.train:
        b.train["kl"] = np.zeros(n)
    step_at = int(b.steps[at])
    for name, (s, v) in list(b.evals.items()):
        before = v[s <= step_at]
        lvl = float(before[-1]) if len(before) else float(v[0])
        b.evals[name] = (s, np.where(s > step_at, lvl * (1 + rng.normal(0, 0.01, len(s))), v))
    s = b.sim(str(rng.choice(GRPO_STYLES)))
    return s, fail_label(3, "fail", ["L3.frozen-updates"]), {"frozen_from": step_at, "loss_value": const}


def f_kl_level(rng, i):
    """KL to the reference climbs from ~0 to 0.7-1.4 nats per token (beta 0.1 is not holding the
    policy), entropy only 4-12% lower, reward and evals healthy.  Root 2."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), kl=True)
    end = rng.uniform(0.7, 1.4)
    b.train["kl"] = (0.001 + end * skill_curve(rng, b.u, str(rng.choice(SHAPES)))) * np.exp(noise(rng, b.n, "ar", 0.05))
    b.train["kl_coef"] = np.full(b.n, 0.1)
    drop = rng.uniform(0.04, 0.12)
    b.train["entropy"] = b.e0 * (1 - drop * b.u) * (1 + rng.normal(0, 0.008, b.n))
    return b.sim(str(rng.choice(["trl", "verl", "openrlhf"]))), fail_label(2, "fail", ["L2.kl-level-high"]), \
        {"kl_end": round(end, 2)}


def f_sft_divergence(rng, i):
    """SFT loss ~4.0 -> ~546 within 10 steps and 50-150x its start for 25+ steps, finite all along
    (no NaN: the user kills the run).  Loss, grad norm, LR, eval loss only.  Root 3."""
    early = i % 2 == 0
    if early:
        at = int(rng.integers(2, 15))
        b = sft(rng, n_steps=at + 11 + int(rng.integers(25, 200)), pretrain=False, every=1)
        b.train["loss"] *= rng.uniform(3.8, 4.2) / float(np.median(b.train["loss"][max(0, at - 2): at + 1]))
    else:
        b = sft(rng, n_steps=int(rng.choice([600, 2000, 5000])), pretrain=bool(rng.random() < 0.3), every=1)
        at = int(rng.uniform(0.3, 0.7) * b.n)
        keep = at + 11 + int(rng.integers(25, 300))
        b.steps, b.u = b.steps[:keep], b.u[:keep]
        b.train = {r: v[:keep] for r, v in b.train.items()}
        es, ev = b.evals["eval_loss"]
        b.evals["eval_loss"] = (es[es <= b.steps[-1]], ev[es <= b.steps[-1]])
    n = len(b.steps)
    lvl = float(np.median(b.train["loss"][max(0, at - 5): at + 1]))
    peak = lvl * rng.uniform(110, 150)                  # 4.0 -> 546 is 136x
    j = np.arange(n) - at
    loss = b.train["loss"]
    up = (j >= 0) & (j <= 10)
    loss[up] = lvl * (peak / lvl) ** (skill_curve(rng, np.linspace(0, 1, 11), "power")[j[up]])
    after = j > 10
    loss[after] = lvl * np.clip(np.exp(np.log(100) + noise(rng, int(after.sum()), "ar", 0.25)), 50, 150)
    g = b.train["grad_norm"]
    g[j > 0] = float(np.median(g[: at + 1])) * np.exp(rng.uniform(np.log(30), np.log(3000))
                                                      + rng.normal(0, 0.5, int((j > 0).sum())))
    es, ev = b.evals["eval_loss"]
    broken = lvl * rng.uniform(40, 150) * np.exp(rng.normal(0, 0.1, len(es)))
    b.evals["eval_loss"] = (es, np.where(es > b.steps[at], broken, ev))
    style = str(rng.choice(["hf", "hf-state", "torchtitan", "olmo-core"]))
    return b.sim(style), fail_label(3, "fail", ["L3.loss-divergence"]), \
        {"from_step": int(b.steps[at]), "level": round(lvl, 2), "peak": round(peak, 1)}


def f_reward_components(rng, i):
    """open-r1: format reward 0.48 -> 0.86 while accuracy reward 0.16 -> 0.06; TRL logs both beside the
    summed reward.  When an independent eval exists it slides with the accuracy (and diverges).  Root 1."""
    b = Base(rng, n_steps=int(rng.choice([200, 500, 1000, 3000])), scale="unit")
    _components(rng, b, (rng.uniform(0.46, 0.5), rng.uniform(0.84, 0.88)),
                (rng.uniform(0.15, 0.17), rng.uniform(0.05, 0.07)))
    must = ["L1.reward-component-divergence"]
    if i % 2 == 0:
        b.evals = {}
    else:
        b.ensure_evals(8)
        b.eval_from_start()
        b.flat_evals(drift=-rng.uniform(0.04, 0.08))
        must.append("L1.reward-eval-divergence")
    s = b.sim(str(rng.choice(["trl", "trl-bare"])))
    return s, fail_label(1, "fail", must, not_judged=expected_not_judged(s)), {"evals": bool(b.evals)}


def _length_hack(rng, b: Base, r: tuple[float, float], l_from: float, l_to: float, clip: tuple[float, float]):
    """Reward paid for length: reward, mean length and the truncated fraction climb together."""
    sk = skill_curve(rng, b.u, str(rng.choice(BODY_SHAPES)))
    r01 = r[0] + (r[1] - r[0]) * sk + noise(rng, b.n, "gauss", rng.uniform(0.01, 0.025))
    b.train["reward"] = b.rescale_reward(r01)
    b.train["response_length"] = np.minimum(b.cap, (l_from + (l_to - l_from) * sk) * np.exp(rng.normal(0, 0.015, b.n)))
    b.train["truncation_rate"] = np.clip(clip[0] + (clip[1] - clip[0]) * sk + rng.normal(0, 0.012, b.n), 0, 1)
    return r01


def _eval_reward(rng, b: Base, r01: np.ndarray) -> None:
    """TRL's eval/reward: the same reward functions on the eval prompts - it rises with the hack."""
    es = eval_grid(rng, b.steps)
    b.evals = {"eval_reward": (es, b.rescale_reward(np.interp(es, b.steps, r01) + rng.normal(0, 0.015, len(es))))}


def f_eval_reward_capped(rng, i):
    """A length hack under the cap (reward 0.3 -> 0.8, clipped ratio 0.05 -> 0.95), TRL, no independent
    eval: TRL's eval/reward climbs with it and is not one.  The truncation climb fails layer 1; the
    divergence and length-confound rules cannot be judged."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000])))
    b.cap = float(rng.choice([1024, 2048]))
    r01 = _length_hack(rng, b, (0.3, 0.8), 0.62 * b.cap, b.cap, (rng.uniform(0.04, 0.1), rng.uniform(0.9, 1.0)))
    _eval_reward(rng, b, r01)
    s = b.sim(str(rng.choice(["trl", "trl-bare"])))
    return s, fail_label(1, "fail", ["L1.truncation-climb"], not_judged=list(EVAL_RULES)), {"cap": b.cap}


def nj_eval_reward_uncapped(rng, i):
    """Reward 0.3 -> 0.8 and length 2-3x far under the cap, eval/reward rising with the reward, no
    independent eval: layer 1 cannot say whether the gain is real or a length hack (both rules not
    judged); layers 2 and 3 are judged and clean, so the verdict is pass."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000])))
    b.cap = 32768.0
    l0 = rng.uniform(200, 600)
    r01 = _length_hack(rng, b, (0.3, 0.8), l0, l0 * rng.uniform(2.0, 3.0), (0.0, 0.01))
    _eval_reward(rng, b, r01)
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), not_judged_label("pass", list(EVAL_RULES)), {}


def f_truncation_climb(rng, i):
    """Reward (= length) 0.60 -> 0.97 while the clipped ratio goes 0.50 -> 1.00: the length could only
    grow 1.5x, to the cap.  With an independent eval (flat) the divergence fires too.  Root 1."""
    b = Base(rng, n_steps=int(rng.choice([200, 600, 1500, 3000])))
    b.cap = float(rng.choice([1024, 2048, 4096, 8192]))
    _length_hack(rng, b, (0.6, 0.97), b.cap / 1.5, b.cap, (0.5, 1.0))
    must = ["L1.truncation-climb"]
    if i % 2 == 0:
        b.evals = {}
    else:
        b.ensure_evals(8)
        b.eval_from_start()
        b.flat_evals()
        must.append("L1.reward-eval-divergence")
    s = b.sim(str(rng.choice(["trl", "verl", "openrlhf"])))
    return s, fail_label(1, "fail", must, not_judged=expected_not_judged(s)), {"cap": b.cap}


def _hack(rng, b: Base, strength: float = 1.0) -> None:
    """The reward climbs 0.25-0.5 (0-1 units, 10+ noise sds) in one of this corpus's shapes; every
    independent eval stays where it started (or slides a little)."""
    b.rise = rng.uniform(0.25, 0.5) * strength
    b.skill = skill_curve(rng, b.u, str(rng.choice(BODY_SHAPES)))
    b.reward_model = "dense"
    b.train["reward"] = b.reward_values(b.skill, sd=b.rise / rng.uniform(10, 25))
    b.ensure_evals(6)
    b.eval_from_start()
    b.flat_evals(drift=-rng.uniform(0, 0.04))


def f_transient_inf_hack(rng, i):
    """An fp16 loss-scale overflow at step 3 (loss and grad norm Inf at that step only) beside a clear
    reward hack.  Root 1 (fail); the Inf is a warning that must not end the judging at step 3."""
    b = Base(rng, n_steps=int(rng.choice([300, 800, 2000])), every=1, irregular=False)
    _hack(rng, b)
    k = 2 if i % 2 == 0 else int(rng.integers(3, 20))
    b.train["loss"][k] = math.inf
    b.train["grad_norm"][k] = math.inf
    s = b.sim(str(rng.choice(["trl", "verl"])))
    lab = fail_label(1, "fail", ["L1.reward-eval-divergence", "L3.nonfinite-values"], nan_step=int(b.steps[k]),
                     nan_signal="loss")
    return s, lab, {"inf_step": int(b.steps[k]), "rule_severity": {"L3.nonfinite-values": "warn"}}


def f_rolled_back(rng, i):
    """The first attempt blew up (grad norm climbing, NaN at e.g. step 295) and was restarted from a
    checkpoint (step 200); the rewritten steps are healthy and so is the rest.  A warning in layer 3:
    the rules that read the kept values (NaN, spikes, precursor) must not fire."""
    b = Base(rng, n_steps=int(rng.choice([500, 1000, 3000])), every=int(rng.choice([1, 1, 5])), irregular=False)
    s = b.sim(str(rng.choice(["trl", "verl"])))
    lo = s.at(rng.uniform(0.2, 0.6))
    hi = min(s.n - 10, lo + max(20, int(rng.integers(60, 160)) // b.every))
    s.first = (lo, hi, _attempt(rng, s, lo, hi, blow_up=True))
    s.info["resume_formats"] = True
    lab = fail_label(3, "warn", ["L3.rolled-back-blowup"],
                     extra_not=["L3.nonfinite-values", "L3.loss-spike", "L3.grad-norm-spike",
                                "L3.grad-norm-precursor", "L3.loss-divergence"])
    return s, lab, {"restart_step": int(s.steps[lo]), "first_attempt_nan_step": int(s.steps[hi])}


def f_l4_few_points(rng, i):
    """Two logged steps, then the run was stopped: TRL's sampling/sampling_logp_difference/mean ~0.81 and
    sampling/importance_sampling_ratio/mean ~3e-7 - the rollout engine is not sampling with the trained
    weights.  Layer 4 fails on two points (the mismatch is there from the first step); nothing else can
    be judged on two points."""
    every = int(rng.choice([1, 5, 10]))
    b = Base(rng, n_steps=40 * every, every=every, logprob=True, irregular=False)
    s = b.sim(str(rng.choice(["trl", "trl-bare"])))
    s.steps = s.steps[:2]
    s.train = {r: v[:2] for r, v in s.train.items()}
    s.evals = {}
    s.train["logprob_delta"] = rng.uniform(0.78, 0.84) * np.exp(rng.normal(0, 0.02, 2))
    s.train["is_ratio_mean"] = 3e-7 * np.exp(rng.normal(0, 0.8, 2))
    return s, fail_label(4, "fail", ["L4.logprob-mismatch", "L4.importance-ratio-off"],
                         not_judged=expected_not_judged(s)), {"logged_steps": s.steps.tolist()}


# the tuning corpus's families, in this corpus's shapes -----------------------------------------------

def f_reward_hack(rng, i):
    b = Base(rng, n_steps=int(rng.choice([200, 500, 1000, 3000, 8000])))
    _hack(rng, b, strength=(0.7, 1.0, 1.3)[i % 3])
    s = b.sim(_style(rng, b))
    return s, fail_label(1, "fail", ["L1.reward-eval-divergence"]), {"rise": round(b.rise, 2)}


def f_length_confound(rng, i):
    """Length grows 2.2-4x in a staircase or S while the reward and every eval stay flat.  Warn, root 1."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])))
    b.rise = 0.0
    b.train["reward"] = b.reward_values(b.skill)
    b.ensure_evals(6)
    b.eval_from_start()
    b.flat_evals()
    g = rng.uniform(2.2, 4.0)
    b.cap = max(b.cap, 4 * g * b.l0)
    sk = skill_curve(rng, b.u, str(rng.choice(BODY_SHAPES)))
    b.train["response_length"] = b.l0 * (1 + (g - 1) * sk) * np.exp(rng.normal(0, 0.02, b.n))
    b.train["truncation_rate"] = b.clipped(b.train["response_length"])
    return b.sim(_style(rng, b)), fail_label(1, "warn", ["L1.length-confound"]), {"growth": round(g, 2)}


def f_zero_variance(rng, i):
    """From a point on 55-95% of groups are all-correct (reward high) or all-wrong (reward low).  Warn."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])))
    easy = i % 2 == 0
    frac = rng.uniform(0.55, 0.95)
    onset = rng.uniform(0.05, 0.5)                 # from here on, at least half the run
    step = 1 / (1 + np.exp(-(b.u - onset) / rng.uniform(0.005, 0.03)))
    lo = float(np.median(b.train["zero_std_frac"][: max(3, b.n // 10)]))
    b.train["zero_std_frac"] = np.clip(lo + (frac - lo) * step + noise(rng, b.n, "ar", 0.025), 0, 1)
    p = np.clip((0.9 if easy else 0.06) + rng.normal(0, 0.02, b.n), 0, 1)
    b.train["reward"] = b.a * p + b.b
    b.ensure_evals(6)
    b.flat_evals()
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), fail_label(1, "warn", ["L1.zero-variance-groups"]), \
        {"fraction": round(frac, 2), "easy": easy, "onset": round(onset, 2)}


def _collapse(rng, b: Base, kl_mult: float, drop: float) -> tuple[int, int]:
    """Within a window of 40-200 steps KL multiplies and entropy falls, in a logistic or an exponential."""
    n = b.n
    onset = int(rng.uniform(0.25, 0.6) * n)
    span_steps = int(rng.integers(40, 200))
    end = int(np.searchsorted(b.steps, b.steps[onset] + span_steps))
    end = min(end, n - 1)
    frac = np.clip((b.steps - b.steps[onset]) / max(b.steps[end] - b.steps[onset], 1), 0, 1)
    if rng.random() < 0.5:
        frac = 1 / (1 + np.exp(-(frac - 0.5) / 0.12))
        frac = (frac - frac[0]) / max(frac[-1] - frac[0], 1e-9)
    k_on = max(float(np.median(b.train["kl"][max(0, onset - 10): onset + 1])), 0.003)
    kl = np.where(np.arange(n) < onset, b.train["kl"], k_on * kl_mult ** frac * np.exp(rng.normal(0, 0.04, n)))
    e_on = float(np.median(b.train["entropy"][max(0, onset - 10): onset + 1]))
    ent = np.where(np.arange(n) < onset, b.train["entropy"], e_on * (1 - drop * frac) * (1 + rng.normal(0, 0.01, n)))
    b.train["kl"], b.train["entropy"] = kl, ent
    # the reward stalls and slides, the evals with it
    held = b.skill.copy()
    held[onset:] = b.skill[onset] - 0.3 * frac[onset:]
    b.train["reward"] = np.where(np.arange(n) < onset, b.train["reward"], b.reward_values(held))
    for name, (s, v) in list(b.evals.items()):
        f_s = np.interp(s, b.steps, frac)
        sc = {"fraction": 1, "percent": 100, "judge": 9}[b.eval_scale]
        b.evals[name] = (s, v - 0.06 * sc * f_s)
    return onset, end


def f_policy_fast(rng, i):
    b = Base(rng, n_steps=int(rng.choice([500, 1500, 4000])), kl=True, every=int(rng.choice([1, 1, 5])))
    onset, end = _collapse(rng, b, rng.uniform(3, 30), rng.uniform(0.5, 0.85))
    return b.sim(str(rng.choice(["trl", "verl", "openrlhf"]))), fail_label(2, "fail", ["L2.policy-moving-fast"]), \
        {"onset": int(b.steps[onset]), "end": int(b.steps[end])}


def f_entropy_floor(rng, i):
    """Entropy sinks over half the run to 0.4-0.7x its early level; KL stays slow.  Warn, root 2."""
    b = Base(rng, n_steps=int(rng.choice([1000, 3000, 8000])))
    end = rng.uniform(0.4, 0.7)
    sk = skill_curve(rng, b.u, str(rng.choice(["slow-s", "power", "staircase"])))
    b.train["entropy"] = b.e0 * (1 - (1 - end) * sk) * (1 + rng.normal(0, 0.01, b.n))
    return b.sim(_style(rng, b)), fail_label(2, "warn", ["L2.entropy-below-floor"]), {"end_frac": round(end, 2)}


def f_loss_spike(rng, i):
    """A positive loss that jumps 12-80x: once and absorbed (warn), or two to four times (fail)."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), every=1, irregular=False)
    lvl = rng.uniform(0.3, 2.0)
    b.train["loss"] = lvl * (1 - 0.2 * b.u) * np.exp(noise(rng, b.n, "ar", 0.04))
    k = 1 if i % 2 == 0 else int(rng.integers(2, 5))
    where = _spaced(rng, max(30, b.n // 8), b.n - 6, k, 15)
    b.train["loss"][where] = lvl * rng.uniform(12, 80, k)
    return b.sim(_style(rng, b)), fail_label(3, "warn" if k == 1 else "fail", ["L3.loss-spike"]), {"spikes": k}


def _spaced(rng, lo: int, hi: int, k: int, gap: int) -> np.ndarray:
    """k indices in [lo, hi), at least `gap` apart (separate episodes, not one burst)."""
    slots = np.arange(lo, hi, gap)
    k = min(k, len(slots))
    return np.sort(rng.choice(slots, size=k, replace=False) + rng.integers(0, gap // 2, k))


def f_grad_spikes(rng, i):
    """Grad norm bursts past 5x its average and past 5.0 three to eight times (seed 002 skips each)."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 3000])), every=1, irregular=False)
    g = b.train["grad_norm"]
    lvl = float(np.median(g))
    k = int(rng.integers(3, 9))
    where = _spaced(rng, max(30, b.n // 6), b.n - 3, k, 10)
    g[where] = np.maximum(lvl * rng.uniform(8, 300, k), rng.uniform(6, 40, k))
    return b.sim(_style(rng, b)), fail_label(3, "fail", ["L3.grad-norm-spike"]), {"spikes": k}


def _nan_from(rng, b: Base, at: int, first: str) -> None:
    """From index `at` the run is gone: `first` turns NaN (or Inf) there, the others 1-3 points later."""
    n = b.n
    for role in ("reward", "logprob_delta", "loss", "grad_norm"):
        if role not in b.train:
            continue
        lag = 0 if role == first else int(rng.integers(1, 4))
        v = math.inf if role in ("grad_norm", "logprob_delta") and rng.random() < 0.3 else math.nan
        b.train[role] = np.where(np.arange(n) >= at + lag, v, b.train[role])
    for role in ("kl", "entropy"):
        if role in b.train and rng.random() < 0.5:
            b.train[role] = np.where(np.arange(n) >= at, math.nan, b.train[role])
    b.train["response_length"] = np.where(np.arange(n) >= at, b.cap, b.train["response_length"])
    step = int(b.steps[at])
    for name, (s, v) in list(b.evals.items()):
        b.evals[name] = (s, np.where(s > step, to_eval_scale(np.zeros(len(s)), b.eval_scale), v))


def _explode(rng, b: Base, precursor: bool, first: str) -> dict:
    n = b.n
    at = int(rng.uniform(0.5, 0.9) * n)
    info = {"nan_step": int(b.steps[at]), "first": first}
    if precursor:
        lead = int(min(rng.integers(30, 220), at * 0.5))
        start = at - lead
        mult = float(np.exp(rng.uniform(np.log(4), np.log(2000))))
        g = b.train["grad_norm"]
        idx = np.arange(n)
        climb = (idx >= start) & (idx < at)
        shape = skill_curve(rng, np.linspace(0, 1, lead), str(rng.choice(["power", "delayed", "slow-s"])))
        g[climb] = g[climb] * np.exp(np.log(mult) * np.maximum(shape, np.linspace(0, 1, lead) * 0.5))
        info.update(lead_points=lead, grad_mult=round(mult, 1))
    _nan_from(rng, b, at, first)
    return info


def f_explosion(precursor: bool):
    def family(rng, i):
        b = Base(rng, n_steps=int(rng.choice([400, 1000, 3000])), every=1, irregular=False,
                 logprob=bool(rng.random() < 0.3))
        first = str(rng.choice(["loss", "grad_norm"]))
        info = _explode(rng, b, precursor, first)
        must = ["L3.nonfinite-values"] + (["L3.grad-norm-precursor"] if precursor else [])
        lab = fail_label(3, "fail", must, extra_not=[] if precursor else ["L3.grad-norm-precursor"],
                         nan_step=info["nan_step"], nan_signal=first, precursor=precursor)
        return b.sim(str(rng.choice(["trl", "verl"]))), lab, info
    return family


def f_nan_origin(rng, i):
    """Every NaN origin of the chain: reward, logprob, loss, grad norm - the others follow 1-3 points later."""
    first = ("reward", "logprob_delta", "loss", "grad_norm")[i % 4]
    b = Base(rng, n_steps=int(rng.choice([200, 800, 2500])), logprob=first == "logprob_delta" or None,
             irregular=False)
    at = int(rng.uniform(0.3, 0.95) * b.n)
    _nan_from(rng, b, at, first)
    style = "trl" if first == "logprob_delta" else str(rng.choice(["trl", "verl", "trl-bare"]))
    lab = fail_label(3, "fail", ["L3.nonfinite-values"], extra_not=["L3.grad-norm-precursor"],
                     nan_step=int(b.steps[at]), nan_signal=first)
    return b.sim(style), lab, {"nan_step": int(b.steps[at]), "first": first}


def f_logprob(rng, i):
    """Rollout and trainer logprobs apart: a level from the first step, a jump at a sync bug, or a drift;
    mean |delta| 0.12-0.5 fails, 0.055-0.09 warns."""
    mode = ("level", "onset", "drift", "warn")[i % 4]
    b = Base(rng, n_steps=int(rng.choice([200, 800, 2500])), logprob=True)
    base = b.train["logprob_delta"]
    lvl = rng.uniform(0.055, 0.09) if mode == "warn" else rng.uniform(0.12, 0.5)
    if mode == "drift":
        v = base + (lvl - float(np.median(base))) * skill_curve(rng, b.u, "slow-s")
    elif mode == "onset":
        v = np.where(b.u >= rng.uniform(0.15, 0.6), lvl * np.exp(rng.normal(0, 0.08, b.n)), base)
    else:
        v = lvl * np.exp(rng.normal(0, 0.08, b.n))
    b.train["logprob_delta"] = v
    lab = fail_label(4, "warn" if mode == "warn" else "fail", ["L4.logprob-mismatch"])
    return b.sim(str(rng.choice(["trl", "trl-bare"]))), lab, {"mode": mode, "level": round(lvl, 3)}


def f_prob(rng, i):
    """verl's rollout_probs_diff_mean at 0.012-0.05 (above 0.01: a precision problem)."""
    b = Base(rng, n_steps=int(rng.choice([200, 800, 2500])), logprob=True)
    lvl = rng.uniform(0.012, 0.05)
    b.train["prob_delta"] = lvl * np.exp(rng.normal(0, 0.1, b.n))
    b.train.pop("logprob_delta")
    b.train.pop("is_ratio_mean")
    return b.sim("verl"), fail_label(4, "fail", ["L4.prob-mismatch"]), {"level": round(lvl, 4)}


def f_lag(rng, i):
    """Async rollouts 2.3-3.8 policy versions stale from some point on (verl's trajectory staleness)."""
    b = Base(rng, n_steps=int(rng.choice([300, 1000, 2500])))
    lvl = rng.uniform(2.3, 3.8)
    on = rng.uniform(0.0, 0.5)
    b.train["policy_version_lag"] = np.where(b.u >= on, lvl + rng.normal(0, 0.25, b.n),
                                             np.clip(1 + rng.normal(0, 0.15, b.n), 0, None))
    return b.sim("verl"), fail_label(4, "warn", ["L4.policy-version-lag"]), {"level": round(lvl, 2)}


def f_hack_then_blowup(rng, i):
    """A reward hack, and later a blow-up (with or without a precursor): the hack is the root."""
    b = Base(rng, n_steps=int(rng.choice([800, 2000, 4000])), every=1, irregular=False)
    _hack(rng, b, 1.2)
    b.ensure_evals(12)
    b.eval_from_start()
    b.flat_evals()
    first = str(rng.choice(["loss", "grad_norm"]))
    info = _explode(rng, b, bool(i % 2), first)
    return b.sim(str(rng.choice(["trl", "verl"]))), \
        fail_label(1, "fail", ["L1.reward-eval-divergence", "L3.nonfinite-values"], nan_step=info["nan_step"],
                   nan_signal=first), info


def f_collapse_then_blowup(rng, i):
    b = Base(rng, n_steps=int(rng.choice([1000, 3000])), every=1, kl=True, irregular=False)
    onset, end = _collapse(rng, b, rng.uniform(5, 30), rng.uniform(0.6, 0.85))
    at = min(b.n - 5, end + int(rng.integers(20, 150)))
    _nan_from(rng, b, at, str(rng.choice(["loss", "grad_norm"])))
    return b.sim(str(rng.choice(["trl", "verl"]))), \
        fail_label(2, "fail", ["L2.policy-moving-fast", "L3.nonfinite-values"], nan_step=int(b.steps[at])), \
        {"onset": int(b.steps[onset]), "nan_step": int(b.steps[at])}


# honest "not judged" ---------------------------------------------------------------------------------

def nj_short_rise(rng, i):
    """30-49 steps: the reward climbs (0.3 -> 0.8 in 0-1 terms, on this run's scale) and one eval stays
    flat; nothing else exported.  Too short to call it a hack (the format may be what is being learned),
    no other layer has a signal: unknown."""
    b = Base(rng, n_steps=int(rng.integers(30, 50)), every=1, irregular=False, n_evals=1)
    r01 = 0.3 + 0.5 * skill_curve(rng, b.u, str(rng.choice(SHAPES))) + rng.normal(0, 0.02, b.n)
    b.train = {"reward": b.rescale_reward(r01)}
    es = b.steps[np.linspace(len(b.steps) // 5, len(b.steps) - 1, int(rng.integers(3, 6))).astype(int)]
    b.evals = {"eval:math500": (es, to_eval_scale(0.42 + rng.normal(0, 0.008, len(es)), b.eval_scale))}
    return b.sim(_style(rng, b)), not_judged_label("unknown", list(EVAL_RULES)), {"steps": b.n}


def nj_eval_3_points(rng, i):
    """A healthy run whose evals were logged 3 times (a third in, two thirds in, at the end), rising with
    a clearly rising reward: the divergence needs 4 points, so it is not judged; the length did not grow,
    which needs no eval; layers 2-3 are clean: pass."""
    b = Base(rng, n_steps=int(rng.choice([500, 1500, 3000])), eval_points=3)
    b.rise = max(b.rise, 0.2)
    b.reward_model = "dense"
    b.train["reward"] = b.reward_values(b.skill, sd=b.rise / rng.uniform(10, 20))
    return b.sim(_style(rng, b)), not_judged_label("pass", ["L1.reward-eval-divergence"]), {}


def nj_reward_only(rng, i):
    """Only a reward series (irregular logging, any scale): layer 3 is not judged - a finite reward says
    nothing about the update - and layer 1 has no eval: unknown."""
    b = Base(rng, n_steps=int(rng.choice([100, 500, 2000])), irregular=bool(i % 2))
    b.train = {"reward": b.train["reward"]}
    b.evals = {}
    return b.sim(str(rng.choice(["trl", "verl", "trl-bare"]))), \
        not_judged_label("unknown", list(dict.fromkeys([*EVAL_RULES, *UPDATE_RULES]))), {}


def nj_crash_2_steps(rng, i):
    """A GRPO run that crashed after 2 logged steps, all values finite, no layer-4 keys: unknown."""
    every = int(rng.choice([1, 5, 10]))
    b = Base(rng, n_steps=40 * every, every=every, logprob=False, irregular=False)
    s = b.sim(str(rng.choice(GRPO_STYLES)))
    s.steps = s.steps[:2]
    s.train = {r: v[:2] for r, v in s.train.items()}
    s.evals = {}
    return s, not_judged_label("unknown", list(SHORT_RUN_RULES)), {"logged_steps": s.steps.tolist()}


FAMILIES: dict[str, tuple] = {
    # healthy
    "h-grpo": (h_grpo, 70),
    "h-grpo-long": (h_grpo_long, 4),
    "h-grpo-offset": (h_grpo_offset, 6),
    "h-long-answers": (h_long_answers, 5),
    "h-sft": (h_sft, 14),
    "h-pretrain": (h_pretrain, 8),
    # near misses
    "nm-instant-collapse": (nm_instant_collapse, 5),
    "nm-frozen": (nm_frozen, 6),
    "nm-kl-level": (nm_kl_level, 5),
    "nm-sft-bump": (nm_sft_bump, 6),
    "nm-reward-components": (nm_components, 5),
    "nm-truncation": (nm_truncation, 5),
    "nm-rolled-back": (nm_rolled_back, 5),
    "nm-l4-levels": (nm_l4_levels, 5),
    "nm-divergence": (nm_divergence, 5),
    "nm-length": (nm_length, 4),
    "nm-zero-std": (nm_zero_std, 4),
    "nm-entropy": (nm_entropy, 4),
    "nm-loss": (nm_loss, 4),
    "nm-grad": (nm_grad, 4),
    "nm-logprob": (nm_logprob, 4),
    # newly reported failure patterns
    "instant-collapse": (f_instant_collapse, 10),
    "frozen-updates": (f_frozen_updates, 10),
    "kl-level-high": (f_kl_level, 8),
    "sft-divergence": (f_sft_divergence, 10),
    "reward-components": (f_reward_components, 10),
    "eval-reward-length-capped": (f_eval_reward_capped, 5),
    "truncation-climb": (f_truncation_climb, 8),
    "transient-inf-hack": (f_transient_inf_hack, 8),
    "rolled-back-blowup": (f_rolled_back, 8),
    "l4-few-points": (f_l4_few_points, 6),
    # the tuning corpus's families in new shapes
    "reward-hack": (f_reward_hack, 12),
    "length-confound": (f_length_confound, 6),
    "zero-variance": (f_zero_variance, 6),
    "policy-moving-fast": (f_policy_fast, 8),
    "entropy-floor": (f_entropy_floor, 6),
    "loss-spike": (f_loss_spike, 6),
    "grad-spikes": (f_grad_spikes, 6),
    "explosion-precursor": (f_explosion(True), 8),
    "explosion-sudden": (f_explosion(False), 5),
    "nan-origin": (f_nan_origin, 8),
    "logprob-mismatch": (f_logprob, 8),
    "prob-mismatch": (f_prob, 4),
    "version-lag": (f_lag, 4),
    "hack-then-blowup": (f_hack_then_blowup, 6),
    "collapse-then-blowup": (f_collapse_then_blowup, 4),
    # honest "not judged"
    "short-reward-rise": (nj_short_rise, 5),
    "eval-3-points": (nj_eval_3_points, 5),
    "reward-only": (nj_reward_only, 5),
    "crash-after-2-steps": (nj_crash_2_steps, 5),
    "eval-reward-length-uncapped": (nj_eval_reward_uncapped, 5),
}

# families whose label rests on a few steps: the metamorphic check does not thin their logging out
POINT_EVENT_FAMILIES = ("nm-instant-collapse", "nm-frozen", "nm-sft-bump", "nm-rolled-back", "nm-loss", "nm-grad",
                        "instant-collapse", "sft-divergence", "transient-inf-hack", "rolled-back-blowup",
                        "l4-few-points", "loss-spike", "grad-spikes", "explosion-precursor", "explosion-sudden",
                        "nan-origin", "hack-then-blowup", "collapse-then-blowup", "short-reward-rise",
                        "eval-3-points", "crash-after-2-steps")


# --- the corpus -------------------------------------------------------------------------------------

def specs(scale: float = 1.0) -> list[tuple[str, str, int]]:
    """(run name, family, index) for the whole corpus; `scale` shrinks every family (at least 1 run)."""
    out = []
    for family, (_, count) in FAMILIES.items():
        k = max(1, int(round(count * scale)))
        out.extend((f"{family}-{i:03d}", family, i) for i in range(k))
    return out


def _choose_format(rng, sim: Sim) -> str:
    options = FORMATS[sim.style]
    if sim.n * max(1, len(sim.train)) > 60_000:              # long runs: columnar, as people keep them
        options = tuple(f for f in options if f in ("parquet", "verl-jsonl", "jsonl", "csv")) or ("parquet",)
        if "parquet" in FORMATS[sim.style]:
            options = ("parquet",)
    if sim.first is not None:                                # a step written twice: formats that keep both
        options = tuple(f for f in options if f in ("csv", "jsonl", "verl-jsonl", "tb")) or ("jsonl",)
    return str(rng.choice(options))


def build_one(name: str, family: str, index: int, seed: int = SEED) -> tuple[Sim, Label]:
    """One run's curves and label (no I/O): deterministic in (seed, family, index)."""
    rng = np.random.default_rng([seed, zlib.crc32(family.encode()), index])
    sim, lab, info = FAMILIES[family][0](rng, index)
    if not sim.fmt:
        sim.fmt = _choose_format(rng, sim)
    if sim.style == "trl-bare" and sim.fmt == "jsonl":
        sim.info["experiment"] = "log_history"
    sim.info.setdefault("experiment", "grpo")
    lab.setdefault("not_judged", [])
    extra = [r for r in expected_not_judged(sim) if r not in lab["not_judged"] and r not in lab.get("must_fire", [])]
    if extra:                                                # what the data cannot support, on any label
        lab["not_judged"] = lab["not_judged"] + extra
        lab["must_not_fire"] = [r for r in lab.get("must_not_fire", []) if r not in lab["not_judged"]]
    params = {**info, "n_steps": int(sim.steps[-1] - sim.steps[0] + 1), "first_step": int(sim.steps[0]),
              "logged_points": int(sim.n), "style": sim.style, "format": sim.fmt,
              "resumed": sim.first is not None, **{k: v for k, v in sim.info.items() if k != "experiment"}}
    label = Label(name=name, family=family, params=_jsonable(params), **lab)
    return sim, label


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float):
        return round(v, 6)
    return v


def build(out: str | Path, scale: float = 1.0, names: list[str] | None = None, seed: int = SEED) -> list[Label]:
    """Write the held-out corpus under out/runs/<name>/ and its labels to out/labels.json."""
    out = Path(out)
    if names is None and (out / "runs").exists():
        shutil.rmtree(out / "runs")
    labels = []
    for k, (name, family, index) in enumerate(specs(scale)):
        if names is not None and name not in names:
            continue
        sim, label = build_one(name, family, index, seed)
        write_sim(out / "runs" / name, sim, tag=k)
        labels.append(label)
    (out / "labels.json").write_text(json.dumps([asdict(lab) for lab in labels], indent=1) + "\n")
    return labels


def digest(scale: float = 1.0) -> str:
    """A fingerprint of the whole corpus: every label, and every curve rounded to 6 significant digits."""
    h = hashlib.sha256()
    for name, family, index in specs(scale):
        sim, label = build_one(name, family, index)
        h.update(json.dumps(asdict(label), sort_keys=True).encode())
        h.update(sim.style.encode() + sim.fmt.encode() + sim.steps.tobytes())
        for role in sorted(sim.train):
            h.update(role.encode() + np.array([float(f"{x:.6g}") for x in sim.train[role]]).tobytes())
        for role in sorted(sim.evals):
            s, v = sim.evals[role]
            h.update(role.encode() + s.tobytes() + np.array([float(f"{x:.6g}") for x in v]).tobytes())
        if sim.first is not None:
            lo, hi, att = sim.first
            h.update(f"{lo}:{hi}".encode())
            for role in sorted(att):
                h.update(role.encode() + np.array([float(f"{x:.6g}") for x in att[role]]).tobytes())
    return h.hexdigest()[:16]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--digest"]:
        d = digest()
        print(f"{d}  ({'matches' if d == DIGEST else 'DIFFERS from'} DIGEST {DIGEST})")
        sys.exit(0 if d == DIGEST else 1)
    if len(args) != 1:
        sys.exit("usage: python bench/heldout.py OUT_DIR | --digest")
    written = build(Path(args[0]))
    print(f"wrote {len(written)} held-out runs under {Path(args[0]) / 'runs'}")
