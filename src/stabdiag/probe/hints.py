"""Likely causes: patterns in the drift that point at a specific mistake (probe.md §6.4).

Each hint has a stable id (for tests and JSON consumers) and one sentence saying what was seen and
what to check. Hints are suggestions drawn from the write-ups in probe.md §3, not verdicts.
"""

from __future__ import annotations

import math

import numpy as np

from . import metrics as M
from .analysis import PrecisionResult, ProbeResult
from .records import RolloutRecord

MIN_TOKENS = 50


def likely_causes(result: ProbeResult, records: list[RolloutRecord], *, moe_experts: int = 0) -> list[dict]:
    """Hints for the primary precision, most specific first."""
    primary = result.primary
    drifting = primary.verdict.level in ("warn", "danger")
    hints = [h for h in (_alignment(primary), _sampling_mismatch(primary, drifting), _low_p_tail(primary),
                         _long_context(primary, drifting)) if h is not None]
    if moe_experts:
        hints.append(_hint("moe-routing", f"MoE model ({moe_experts} experts): the recompute re-routes every "
                           "token, so the drift includes router disagreement (R3: replay the rollout's routing)"))
    ref = next((r for r in result.results if r.label == result.reference), None)
    explained = {h["id"] for h in hints} & {"alignment", "temperature", "constant-shift"}
    if ref is not None and ref.verdict.level == "danger" and not explained:
        hints.append(_hint("weights-mismatch", "drift is at danger even against the fp32 reference: more "
                           "than precision; suspect a refit or weights mismatch (wrong checkpoint or "
                           "policy_version)"))
    versions = {int(v) for r in records if r.policy_version is not None for v in np.unique(r.policy_version)}
    if len(versions) > 1:
        hints.append(_hint("stale-policy", f"the records span {len(versions)} policy versions: tokens "
                           "sampled with stale weights differ from the current model by design; compare "
                           "one policy_version at a time"))
    m = primary.metrics
    if m.get("frac_exact", 0.0) >= 0.99 and len(primary.pairs):
        hints.append(_hint("bitwise", f"{m['frac_exact']:.1%} of tokens match exactly: a bitwise-aligned "
                           "stack"))
    return hints


def _alignment(primary: PrecisionResult) -> dict | None:
    shift = M.alignment_shift(primary.pairs)
    best = min(_nan_inf(shift["roll_vs_next_train"]), _nan_inf(shift["roll_vs_prev_train"]))
    if not (shift["aligned"] > 0.05 and best < 0.5 * shift["aligned"]):
        return None
    which = "next" if shift["roll_vs_next_train"] <= shift["roll_vs_prev_train"] else "previous"
    return _hint("alignment", f"engine logprobs match the recomputed logprobs of the {which} token better "
                 f"(mean |d| {best:.3g} vs {shift['aligned']:.3g} aligned): an off-by-one alignment bug in "
                 "the dump or the recompute")


def _sampling_mismatch(primary: PrecisionResult, drifting: bool) -> dict | None:
    if not drifting:
        return None
    m = primary.metrics
    slope, r2 = M.temperature_fit(primary.pairs)
    if abs(slope - 1.0) > 0.1 and r2 > 0.8:
        return _hint("temperature", f"lp_roll ~ {slope:.2f} x lp_train (R2 {r2:.2f}): the engine logprobs look "
                     f"taken at temperature ~{1.0 / slope:.2f} relative to the recompute; check raw vs "
                     "processed (--logprobs-mode) and --temperature")
    if _constant_shift(primary.by_prob, m):
        return _hint("constant-shift", f"d is a near-constant shift ({m['mean_dlogp']:+.3g} nats) in every "
                     "probability bucket: a temperature or logprobs-mode mismatch, or a missing top-p/top-k "
                     "renormalisation")
    return None


def _low_p_tail(primary: PrecisionResult) -> dict | None:
    ratio = primary.metrics.get("tail_anomaly_ratio", math.nan)
    if not ratio > 5.0:
        return None
    return _hint("low-p-tail", f"drift blows up in the low-probability tail (|d|/(1-p) {ratio:.1f}x the p in "
                 "[0.1, 0.5) bucket): numeric precision; try fp16 on both sides, --lm-head-fp32 (and an fp32 "
                 "head in the engine), or TIS/MIS correction")


def _long_context(primary: PrecisionResult, drifting: bool) -> dict | None:
    rows = [r for r in primary.by_position if r["n_tokens"] >= MIN_TOKENS]
    if not (drifting and len(rows) >= 2 and rows[0]["mean_abs_dlogp"] > 0
            and rows[-1]["mean_abs_dlogp"] > 2.0 * rows[0]["mean_abs_dlogp"]):
        return None
    first, last = rows[0], rows[-1]
    return _hint("long-context", f"drift grows with position (mean |d| {first['mean_abs_dlogp']:.3g} at "
                 f"{first['bucket']} -> {last['mean_abs_dlogp']:.3g} at {last['bucket']}): a long-context "
                 "kernel problem; try disabling cascade attention (verl FAQ, vLLM #22103) and prefix caching")


def _hint(hint_id: str, text: str) -> dict:
    return {"id": hint_id, "text": text}


def _nan_inf(x: float) -> float:
    return math.inf if math.isnan(x) else x


def _constant_shift(by_prob: list[dict], m: dict[str, float]) -> bool:
    if not m["mean_abs_dlogp"] > 0.01 or abs(m["mean_dlogp"]) < 0.8 * m["mean_abs_dlogp"]:
        return False
    signs = {np.sign(r["mean_dlogp"]) for r in by_prob if r["n_tokens"] >= 10}
    return len(signs) == 1
