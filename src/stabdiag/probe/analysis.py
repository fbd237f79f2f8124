"""From records and recomputed logprobs to the probe's findings: metrics, tables and verdict per precision.

The first precision is the primary one (the training precision being judged): the verdict, the exit
code and the `--series-out` file come from it. An fp32 precision in the same run is also used as the
reference that the others are compared against, which separates "my training precision is noisy"
from "the engine disagrees with any precision" (probe.md §6.2, per-dtype comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import metrics as M
from .records import RolloutRecord
from .thresholds import DEFAULT_THRESHOLDS, Threshold, Verdict, judge

MAX_BAD_ENGINE_FRAC = 0.01     # §6.1: more than 1 % of −inf/NaN engine logprobs → inconclusive
REFERENCE_KEYS = ("mean_abs_dlogp", "max_abs_dlogp", "mean_dlogp", "k3_kl", "mult_prob_error",
                  "frac_extreme_tau2")


@dataclass(slots=True)
class PrecisionResult:
    """Everything measured for one training-side precision (or a sidecar) against the engine."""

    label: str
    pairs: M.TokenPairs
    seq_stats: M.SequenceStats
    metrics: dict[str, float]
    by_prob: list[dict]
    by_position: list[dict]
    by_length: list[dict]
    by_entropy: list[dict]
    worst_tokens: list[dict]
    worst_sequences: list[dict]
    verdict: Verdict
    n_nonfinite_train: int = 0
    vs_reference: dict[str, float] | None = None


@dataclass(slots=True)
class ProbeResult:
    """The probe's findings over all precisions, plus input counts and likely causes."""

    results: list[PrecisionResult]
    counts: dict[str, float]
    reference: str | None = None
    hints: list[str] = field(default_factory=list)

    @property
    def primary(self) -> PrecisionResult:
        return self.results[0]


def engine_counts(records: list[RolloutRecord]) -> dict[str, float]:
    """Token counts over the inputs: how many are scored, masked out, or carry an unusable engine logprob."""
    total = sum(len(r.response_ids) for r in records)
    in_mask = np.concatenate([r.loss_mask for r in records])
    lp = np.concatenate([r.logprobs for r in records])[in_mask]
    return {
        "n_records": float(len(records)),
        "n_response_tokens": float(total),
        "frac_masked_out": 1.0 - float(in_mask.mean()) if total else math.nan,
        "n_neg_inf_engine": float(np.count_nonzero(np.isneginf(lp))),
        "n_nan_engine": float(np.count_nonzero(np.isnan(lp))),
    }


def token_pairs(records: list[RolloutRecord], train: list[np.ndarray],
                entropy: list[np.ndarray | None] | None) -> tuple[M.TokenPairs, int]:
    """Scored tokens (loss_mask, finite engine and training logprobs) and the count of non-finite
    training logprobs that were left out."""
    seq, pos, tok, roll, tr, ent = [], [], [], [], [], []
    bad_train = 0
    for i, rec in enumerate(records):
        lt = train[i]
        finite_train = np.isfinite(lt)
        bad_train += int(np.count_nonzero(rec.loss_mask & ~finite_train))
        keep = rec.loss_mask & np.isfinite(rec.logprobs) & finite_train
        idx = np.flatnonzero(keep)
        seq.append(np.full(len(idx), i, dtype=np.int64))
        pos.append(idx.astype(np.int64))
        tok.append(rec.response_ids[idx])
        roll.append(rec.logprobs[idx])
        tr.append(lt[idx])
        if entropy is not None and entropy[i] is not None:
            ent.append(entropy[i][idx])
    pairs = M.TokenPairs(
        seq=np.concatenate(seq), pos=np.concatenate(pos), token_id=np.concatenate(tok),
        lp_roll=np.concatenate(roll), lp_train=np.concatenate(tr),
        entropy=np.concatenate(ent) if entropy is not None and len(ent) == len(records) else None,
    )
    return pairs, bad_train


def measure(label: str, records: list[RolloutRecord], train: list[np.ndarray],
            entropy: list[np.ndarray | None] | None, counts: dict[str, float], *,
            thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS, worst: int = 20) -> PrecisionResult:
    """Metrics, tables and verdict of one precision."""
    pairs, bad_train = token_pairs(records, train, entropy)
    seq_stats = M.sequence_stats(pairs)
    metrics = {**M.token_metrics(pairs), **M.sequence_metrics(seq_stats)}
    metrics["frac_masked_out"] = counts["frac_masked_out"]
    metrics["n_neg_inf_engine"] = counts["n_neg_inf_engine"]
    by_prob = M.by_probability(pairs)
    metrics["tail_anomaly_ratio"] = M.tail_anomaly_ratio(by_prob)
    ids = [r.id for r in records]
    problems = _inconclusive(counts, len(pairs), bad_train)
    return PrecisionResult(
        label=label, pairs=pairs, seq_stats=seq_stats, metrics=metrics, by_prob=by_prob,
        by_position=M.by_position(pairs), by_entropy=M.by_entropy(pairs),
        by_length=M.by_length(pairs, np.array([len(r.response_ids) for r in records])),
        worst_tokens=M.worst_tokens(pairs, ids, worst), worst_sequences=M.worst_sequences(seq_stats, ids),
        verdict=judge(metrics, thresholds, problems), n_nonfinite_train=bad_train,
    )


def _inconclusive(counts: dict[str, float], n_scored: int, bad_train: int) -> list[str]:
    problems = []
    n_loss = counts["n_response_tokens"] * (1.0 - counts["frac_masked_out"])
    bad = counts["n_neg_inf_engine"] + counts["n_nan_engine"]
    if n_loss and bad / n_loss > MAX_BAD_ENGINE_FRAC:
        problems.append(f"{bad / n_loss:.1%} of scored tokens have an engine logprob of -inf or NaN "
                        f"(more than {MAX_BAD_ENGINE_FRAC:.0%}): check the dump for masking bugs or sentinels")
    if n_loss and bad_train / n_loss > MAX_BAD_ENGINE_FRAC:
        problems.append(f"{bad_train / n_loss:.1%} of recomputed logprobs are not finite (overflow in this "
                        "precision?)")
    if n_scored == 0:
        problems.append("no scored tokens (every token masked out or unusable)")
    return problems


def compare_to_reference(result: PrecisionResult, reference: PrecisionResult) -> dict[str, float]:
    """Drift of one precision against the fp32 reference on the same tokens (d = lp_dtype − lp_fp32)."""
    a, b = result.pairs, reference.pairs
    key_a = a.seq * (1 << 32) + a.pos
    key_b = b.seq * (1 << 32) + b.pos
    common, ia, ib = np.intersect1d(key_a, key_b, return_indices=True)
    pairs = M.TokenPairs(seq=a.seq[ia], pos=a.pos[ia], token_id=a.token_id[ia], lp_roll=b.lp_train[ib],
                         lp_train=a.lp_train[ia])
    m = M.token_metrics(pairs)
    out = {k: m[k] for k in REFERENCE_KEYS}
    low = M.by_probability(pairs)
    out["k3_kl_p_lt_1e-2"] = _pooled_k3(low[:3])
    out["k3_kl_p_ge_0.1"] = _pooled_k3(low[4:])
    return out


def _pooled_k3(rows: list[dict]) -> float:
    n = sum(r["n_tokens"] for r in rows)
    return sum(r["k3_kl"] * r["n_tokens"] for r in rows if r["n_tokens"]) / n if n else math.nan


def analyze(records: list[RolloutRecord], train: dict[str, list[np.ndarray]],
            entropy: dict[str, list[np.ndarray | None] | None], *,
            thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS, worst: int = 20) -> ProbeResult:
    """Measure every precision (in the order given; the first is primary) and compare to fp32."""
    counts = engine_counts(records)
    results = [measure(label, records, lps, entropy.get(label), counts, thresholds=thresholds, worst=worst)
               for label, lps in train.items()]
    reference = next((r for r in results if r.label == "fp32"), None)
    if reference is not None:
        for r in results:
            if r is not reference:
                r.vs_reference = compare_to_reference(r, reference)
    return ProbeResult(results=results, counts=counts,
                       reference=None if reference is None else reference.label)


def step_series(records: list[RolloutRecord], result: PrecisionResult) -> dict[str, np.ndarray]:
    """Per-rollout-step layer-4 signals under stabdiag's canonical names (one row per step; records
    without a step count as step 0)."""
    pairs = result.pairs
    rec_step = np.array([r.step if r.step is not None else 0 for r in records], dtype=np.int64)
    tok_step = rec_step[pairs.seq]
    d = pairs.lp_train - pairs.lp_roll
    rho = np.exp(np.clip(d, -M.SAFETY_BOUND, M.SAFETY_BOUND))
    dp = np.abs(np.exp(pairs.lp_train) - np.exp(pairs.lp_roll))
    steps = np.unique(rec_step)
    inverse = np.searchsorted(steps, tok_step)
    n = np.bincount(inverse, minlength=len(steps)).astype(np.float64)

    def per_step(x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):     # a step with no scored token → NaN
            return np.bincount(inverse, weights=x, minlength=len(steps)) / n

    out = {
        "step": steps,
        "logprob_delta": per_step(np.abs(d)),
        "logprob_k3_kl": per_step(M.k3_terms(d)),
        "is_ratio_mean": per_step(rho),
        "mult_prob_error": per_step(np.exp(np.minimum(np.abs(d), M.SAFETY_BOUND))),
        "prob_delta": per_step(dp),
    }
    lag = _version_lag(records, pairs, rec_step)
    if lag is not None:
        known = np.isfinite(lag)
        n_known = np.bincount(inverse[known], minlength=len(steps)).astype(np.float64)
        total = np.bincount(inverse[known], weights=lag[known], minlength=len(steps))
        with np.errstate(invalid="ignore", divide="ignore"):
            out["policy_version_lag"] = np.where(n_known > 0, total / n_known, np.nan)
    return out


def _version_lag(records: list[RolloutRecord], pairs: M.TokenPairs, rec_step: np.ndarray) -> np.ndarray | None:
    """Per scored token: how many policy versions behind the trainer its weights were. The trainer's
    version is the record's step when records carry steps (one update per step), else the newest
    policy_version in the input."""
    if not any(r.policy_version is not None for r in records):
        return None
    version = np.full(len(pairs), np.nan)
    bounds = np.searchsorted(pairs.seq, np.arange(len(records) + 1))   # pairs are in record order
    for i, rec in enumerate(records):
        if rec.policy_version is not None:
            lo, hi = bounds[i], bounds[i + 1]
            version[lo:hi] = rec.policy_version[pairs.pos[lo:hi]]
    has_steps = any(r.step is not None for r in records)
    current = rec_step[pairs.seq].astype(float) if has_steps else np.nanmax(version)
    return current - version
