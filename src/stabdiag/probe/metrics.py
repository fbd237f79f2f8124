"""Drift metrics between engine and training logprobs (probe.md §6.2), in numpy float64.

Notation: over scored response tokens (loss_mask = 1 and an engine logprob that is finite),
d = lp_train − lp_roll = log ρ, ρ = π/μ the token importance ratio, p = e^{lp_roll}. Every framework
measures d; they differ in how they reduce it, so each metric here is named once and `ALIASES` maps it
to the keys verl, slime, TRL, NeMo-RL, OpenRLHF, ROLL and AReaL log for the same number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SAFETY_BOUND = 20.0          # verl rollout_corr_helper: every exp() is clamped to [e^-20, e^20]
IS_CLAMP = 2.0               # C for the clamped IS std and ESS (verl TIS default)
PROB_EDGES = (0.0, 1e-4, 1e-3, 1e-2, 0.1, 0.5, 0.9, 1.0 + 1e-12)
POSITION_EDGES = (0, 256, 1024, 4096, 16384, math.inf)

ALIASES: dict[str, list[str]] = {
    "mean_abs_dlogp": ["TRL sampling/sampling_logp_difference/mean"],
    "seq_mean_abs_dlogp": ["slime train_rollout_logprob_abs_diff"],
    "max_abs_dlogp": ["TRL sampling/sampling_logp_difference/max"],
    "mean_dlogp": ["-verl rollout_corr/kl", "-OpenRLHF vllm_kl", "AReaL behave_approx_kl"],
    "k3_kl": ["verl rollout_corr/k3_kl", "NeMo-RL gen_kl_error", "slime mismatch_k3_kl", "vllm-kl"],
    "k3_kl_rev": ["NeMo-RL policy_kl_error"],
    "js": ["NeMo-RL js_divergence_error"],
    "k2": ["verl token_k2"],
    "mult_prob_error": ["NeMo-RL token_mult_prob_error"],
    "mean_abs_dprob": ["verl training/rollout_probs_diff_mean"],
    "max_abs_dprob": ["verl training/rollout_probs_diff_max"],
    "std_abs_dprob": ["verl training/rollout_probs_diff_std"],
    "prob_pearson": ["verl training/rollout_actor_probs_pearson_corr"],
    "is_mean": ["TRL sampling/importance_sampling_ratio/mean", "verl rollout_corr/rollout_is_mean",
                "NeMo-RL sampling_importance_ratio"],
    "is_ess": ["verl rollout_corr/rollout_is_eff_sample_size"],
    "chi2_token": ["verl rollout_corr/chi2_token"],
    "chi2_seq": ["verl rollout_corr/chi2_seq"],
    "log_ppl_diff": ["verl rollout_corr/log_ppl_diff"],
    "frac_ratio_out[0.8,1.2]": ["ROLL ratio filter default"],
    "frac_ratio_out[0.5,2]": ["verl TIS cap / RS 0.5_2.0", "slime tis_clipfrac"],
    "frac_ratio_gt3": ["TRL C_max 3.0"],
    "frac_ratio_out[0.5,5]": ["OpenRLHF / AReaL defaults"],
}


@dataclass(frozen=True, slots=True)
class TokenPairs:
    """Scored tokens of all records, flattened: which record, where, and both logprobs."""

    seq: np.ndarray          # int64 record index
    pos: np.ndarray          # int64 position in the response
    token_id: np.ndarray     # int64
    lp_roll: np.ndarray      # float64
    lp_train: np.ndarray     # float64
    entropy: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.seq)


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else math.nan


def _frac(mask: np.ndarray) -> float:
    return float(np.mean(mask)) if len(mask) else math.nan


def token_metrics(t: TokenPairs) -> dict[str, float]:
    """Batch aggregates over tokens (§6.2 token-level table)."""
    d = t.lp_train - t.lp_roll
    ad = np.abs(d)
    rho = np.exp(np.clip(d, -SAFETY_BOUND, SAFETY_BOUND))
    w = np.clip(rho, 1.0 / IS_CLAMP, IS_CLAMP)
    p_roll, p_train = np.exp(t.lp_roll), np.exp(t.lp_train)
    dp = np.abs(p_train - p_roll)
    log_m = np.logaddexp(t.lp_train, t.lp_roll) - math.log(2.0)
    js = 0.5 * (k3_terms(log_m - t.lp_train) + k3_terms(log_m - t.lp_roll))
    q = np.quantile(ad, [0.5, 0.9, 0.99, 0.999]) if len(ad) else [math.nan] * 4
    m: dict[str, float] = {
        "n_tokens": float(len(d)),
        "mean_abs_dlogp": _mean(ad),
        "max_abs_dlogp": float(ad.max()) if len(ad) else math.nan,
        "abs_dlogp_q50": float(q[0]), "abs_dlogp_q90": float(q[1]),
        "abs_dlogp_q99": float(q[2]), "abs_dlogp_q99.9": float(q[3]),
        "mean_dlogp": _mean(d),
        "k3_kl": _mean(k3_terms(d)),
        "k3_kl_rev": _mean(k3_terms(-d)),
        "js": _mean(js),
        "k2": _mean(0.5 * d * d),
        "mult_prob_error": _mean(np.exp(np.minimum(ad, SAFETY_BOUND))),
        "mean_abs_dprob": _mean(dp),
        "max_abs_dprob": float(dp.max()) if len(dp) else math.nan,
        "std_abs_dprob": float(np.std(dp)) if len(dp) else math.nan,
        "prob_pearson": _pearson(p_train, p_roll),
        "is_mean": _mean(rho),
        "is_min": float(rho.min()) if len(rho) else math.nan,
        "is_max": float(rho.max()) if len(rho) else math.nan,
        "is_std": float(np.std(w)) if len(w) else math.nan,
        "is_ess": 1.0 / _mean((w / np.mean(w)) ** 2) if len(w) else math.nan,
        "chi2_token": _mean(rho * rho) - 1.0,
        "frac_ratio_out[0.8,1.2]": _frac((rho < 0.8) | (rho > 1.2)),
        "frac_ratio_out[0.5,2]": _frac((rho < 0.5) | (rho > 2.0)),
        "frac_ratio_gt2": _frac(rho > 2.0),
        "frac_ratio_lt0.5": _frac(rho < 0.5),
        "frac_ratio_gt3": _frac(rho > 3.0),
        "frac_ratio_out[0.5,5]": _frac((rho < 0.5) | (rho > 5.0)),
        "frac_extreme_tau2": _frac(ad > math.log(2.0)),
        "frac_extreme_tau5": _frac(ad > math.log(5.0)),
        "frac_extreme_tau10": _frac(ad > math.log(10.0)),
        "frac_veto_1e-4": _frac(d < math.log(1e-4)),
        "frac_exact": _frac(d == 0.0),
    }
    m["abs_mean_dlogp"] = abs(m["mean_dlogp"])
    return m


def k3_terms(log_ratio: np.ndarray) -> np.ndarray:
    """Per-token k3 estimator e^x − x − 1 of a log ratio x, with x clamped to ±SAFETY_BOUND."""
    lr = np.clip(log_ratio, -SAFETY_BOUND, SAFETY_BOUND)
    return np.exp(lr) - lr - 1.0


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


@dataclass(frozen=True, slots=True)
class SequenceStats:
    """Per-sequence reductions, one entry per record with at least one scored token."""

    seq: np.ndarray            # record index
    n_tokens: np.ndarray       # T_i
    log_ratio: np.ndarray      # S_i = Σ_t d_t
    mean_k3: np.ndarray
    mean_abs_dlogp: np.ndarray
    mult_prob_error: np.ndarray
    has_veto: np.ndarray       # bool: a token with ρ < 1e-4


def sequence_stats(t: TokenPairs) -> SequenceStats:
    d = t.lp_train - t.lp_roll
    seqs, inverse = np.unique(t.seq, return_inverse=True)
    n = np.bincount(inverse, minlength=len(seqs)).astype(np.float64)

    def per_seq(x):
        return np.bincount(inverse, weights=x, minlength=len(seqs)) / np.maximum(n, 1)

    return SequenceStats(
        seq=seqs, n_tokens=n,
        log_ratio=np.bincount(inverse, weights=d, minlength=len(seqs)),
        mean_k3=per_seq(k3_terms(d)),
        mean_abs_dlogp=per_seq(np.abs(d)),
        mult_prob_error=per_seq(np.exp(np.minimum(np.abs(d), SAFETY_BOUND))),
        has_veto=np.bincount(inverse, weights=(d < math.log(1e-4)).astype(float), minlength=len(seqs)) > 0,
    )


def sequence_metrics(s: SequenceStats) -> dict[str, float]:
    """Sequence-level aggregates (§6.2 sequence table)."""
    if len(s.seq) == 0:
        return {"n_seqs": 0.0}
    S = s.log_ratio
    geo = np.exp(np.clip(S / s.n_tokens, -SAFETY_BOUND, SAFETY_BOUND))
    seq_ratio = np.exp(np.clip(S, -SAFETY_BOUND, SAFETY_BOUND))
    q = np.quantile(S, [0.01, 0.5, 0.99])
    return {
        "n_seqs": float(len(S)),
        "seq_mean_abs_dlogp": _mean(s.mean_abs_dlogp),
        "seq_log_ratio_mean": _mean(S),
        "seq_log_ratio_q01": float(q[0]), "seq_log_ratio_q50": float(q[1]), "seq_log_ratio_q99": float(q[2]),
        "seq_geo_ratio_mean": _mean(geo),
        "seq_mean_k3": _mean(s.mean_k3),
        "seq_mult_prob_error_mean": _mean(s.mult_prob_error),
        "seq_mult_prob_error_max": float(s.mult_prob_error.max()),
        "log_ppl_diff": _mean(-S / s.n_tokens),
        "chi2_seq": _mean(np.exp(2.0 * np.clip(S, -SAFETY_BOUND, SAFETY_BOUND))) - 1.0,
        "frac_seq_geo_out[0.999,1.001]": _frac((geo < 0.999) | (geo > 1.001)),
        "frac_seq_k3_gt0.01": _frac(s.mean_k3 > 0.01),
        "frac_seq_ratio_out[0.5,2]": _frac((seq_ratio < 0.5) | (seq_ratio > 2.0)),
        "frac_seq_ratio_gt3": _frac(seq_ratio > 3.0),
        "frac_seq_saturated": _frac(np.abs(S) >= SAFETY_BOUND),
        "frac_seq_veto_1e-4": _frac(s.has_veto),
        "seq_T_times_k3": _mean(s.n_tokens * s.mean_k3),
    }


def bucket_table(t: TokenPairs, bucket: np.ndarray, labels: list[str]) -> list[dict]:
    """The §6.2 stratified columns for each bucket index in `bucket` (−1 = not bucketed)."""
    d = t.lp_train - t.lp_roll
    k3 = k3_terms(d)
    total_k3 = float(k3.sum())
    p = np.exp(t.lp_roll)
    rho = np.exp(np.clip(d, -SAFETY_BOUND, SAFETY_BOUND))
    rows = []
    for b, label in enumerate(labels):
        sel = bucket == b
        n = int(sel.sum())
        tail = sel & (p < 1.0)
        rows.append({
            "bucket": label, "n_tokens": n, "share": n / len(d) if len(d) else math.nan,
            "mean_dlogp": _mean(d[sel]), "mean_abs_dlogp": _mean(np.abs(d[sel])),
            "k3_kl": _mean(k3[sel]),
            "k3_share": float(k3[sel].sum()) / total_k3 if total_k3 > 0 else math.nan,
            "mean_abs_dlogp_over_1mp": _mean(np.abs(d[tail]) / (1.0 - p[tail])),
            "frac_ratio_out[0.5,2]": _frac((rho[sel] < 0.5) | (rho[sel] > 2.0)),
        })
    return rows


def by_probability(t: TokenPairs) -> list[dict]:
    """Drift by rollout probability: the (1−p) tail analysis of "Taming the Tail"."""
    p = np.exp(t.lp_roll)
    bucket = np.searchsorted(PROB_EDGES, p, side="right") - 1
    labels = [f"[{_fmt(lo)}, {_fmt(hi)})" for lo, hi in zip(PROB_EDGES[:-1], PROB_EDGES[1:])]
    labels[-1] = "[0.9, 1]"
    return bucket_table(t, np.clip(bucket, 0, len(labels) - 1), labels)


def by_position(t: TokenPairs) -> list[dict]:
    bucket = np.searchsorted(POSITION_EDGES, t.pos, side="right") - 1
    labels = [f"{_fmt(lo)}-{_fmt(hi)}" if hi != math.inf else f"{_fmt(lo)}+"
              for lo, hi in zip(POSITION_EDGES[:-1], POSITION_EDGES[1:])]
    return [row for row in bucket_table(t, bucket, labels) if row["n_tokens"]]


def by_length(t: TokenPairs, lengths: np.ndarray) -> list[dict]:
    """Drift by the response length of each token's sequence (`lengths` is indexed by record)."""
    bucket = np.searchsorted(POSITION_EDGES, lengths[t.seq], side="right") - 1
    labels = [f"len {_fmt(lo)}-{_fmt(hi)}" if hi != math.inf else f"len {_fmt(lo)}+"
              for lo, hi in zip(POSITION_EDGES[:-1], POSITION_EDGES[1:])]
    return [row for row in bucket_table(t, bucket, labels) if row["n_tokens"]]


def by_entropy(t: TokenPairs, n_buckets: int = 5) -> list[dict]:
    """Drift by quantile bucket of the training-side entropy ("When Speed Kills Stability")."""
    if t.entropy is None or len(t) == 0:
        return []
    edges = np.unique(np.quantile(t.entropy, np.linspace(0, 1, n_buckets + 1)))
    if len(edges) < 2:
        return []
    bucket = np.clip(np.searchsorted(edges, t.entropy, side="right") - 1, 0, len(edges) - 2)
    labels = [f"H [{lo:.3g}, {hi:.3g}]" for lo, hi in zip(edges[:-1], edges[1:])]
    return bucket_table(t, bucket, labels)


def _fmt(x: float) -> str:
    if x >= 1024 and x % 1024 == 0:
        return f"{int(x) // 1024}k"
    return f"{x:g}"


def tail_anomaly_ratio(rows: list[dict], min_tokens: int = 20) -> float:
    """mean(|d|/(1−p)) of tokens with p < 1e-3 over that of p ∈ [0.1, 0.5): "Taming the Tail" predicts a
    roughly constant |d|/(1−p), so a large ratio means drift blowing up in the low-probability tail."""
    low = [r for r in rows[:2] if r["n_tokens"]]
    mid = rows[4]
    n_low = sum(r["n_tokens"] for r in low)
    if n_low < min_tokens or mid["n_tokens"] < min_tokens or not mid["mean_abs_dlogp_over_1mp"] > 0:
        return math.nan
    low_value = sum(r["mean_abs_dlogp_over_1mp"] * r["n_tokens"] for r in low) / n_low
    return low_value / mid["mean_abs_dlogp_over_1mp"]


def worst_tokens(t: TokenPairs, record_ids: list[str], top: int = 20) -> list[dict]:
    d = t.lp_train - t.lp_roll
    order = np.argsort(-np.abs(d), kind="stable")[:top]
    return [{
        "record_id": record_ids[int(t.seq[i])], "pos": int(t.pos[i]), "token_id": int(t.token_id[i]),
        "lp_roll": float(t.lp_roll[i]), "lp_train": float(t.lp_train[i]), "dlogp": float(d[i]),
        "p_roll": float(np.exp(t.lp_roll[i])),
        "entropy": None if t.entropy is None else float(t.entropy[i]),
    } for i in order]


def worst_sequences(s: SequenceStats, record_ids: list[str], top: int = 10) -> list[dict]:
    order = np.argsort(-np.abs(s.log_ratio), kind="stable")[:top]
    return [{"record_id": record_ids[int(s.seq[i])], "n_tokens": int(s.n_tokens[i]),
             "log_ratio": float(s.log_ratio[i]), "mean_k3": float(s.mean_k3[i]),
             "mean_abs_dlogp": float(s.mean_abs_dlogp[i])} for i in order]


def alignment_shift(t: TokenPairs) -> dict[str, float]:
    """Mean |lp_roll[t] − lp_train[t+s]| for s = −1, 0, +1 within each sequence: when a shifted
    pairing fits far better than the aligned one, the rollout logprobs are off by one position."""
    out = {}
    same_next = t.seq[1:] == t.seq[:-1]
    consecutive = same_next & (t.pos[1:] == t.pos[:-1] + 1)
    out["aligned"] = _mean(np.abs(t.lp_roll - t.lp_train))
    out["roll_vs_next_train"] = _mean(np.abs(t.lp_roll[:-1] - t.lp_train[1:])[consecutive])
    out["roll_vs_prev_train"] = _mean(np.abs(t.lp_roll[1:] - t.lp_train[:-1])[consecutive])
    return out


def temperature_fit(t: TokenPairs) -> tuple[float, float]:
    """Least-squares slope and R² of lp_roll on lp_train. Logprobs taken at temperature T against a
    T = 1 recompute follow lp_roll ≈ lp_train / T + c(position), so a slope far from 1 with a tight fit
    points at a temperature or logprobs-mode mismatch, and 1/slope estimates the ratio of temperatures."""
    if len(t) < 10 or np.std(t.lp_train) == 0:
        return math.nan, math.nan
    x, y = t.lp_train, t.lp_roll
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    var = np.var(y)
    return float(slope), float(1.0 - np.var(resid) / var) if var > 0 else math.nan
