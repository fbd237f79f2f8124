"""Drift metrics, verdicts and hints on synthetic logprobs with known answers (probe.md §6.5); no torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stabdiag.errors import ConfigError
from stabdiag.probe.analysis import analyze, step_series
from stabdiag.probe.hints import likely_causes
from stabdiag.probe.records import RolloutRecord
from stabdiag.probe.thresholds import DEFAULT_THRESHOLDS, apply_overrides, judge


def _records(n_records=40, length=50, seed=0, steps=1, low=-8.0, high=-0.05):
    rng = np.random.default_rng(seed)
    recs, true = [], []
    for i in range(n_records):
        lp = rng.uniform(low, high, length)
        recs.append(RolloutRecord(id=f"r{i}", source="mem", line=i + 1, key=None,
                                  prompt_ids=np.array([1, 2, 3]), response_ids=rng.integers(3, 256, length),
                                  logprobs=lp.copy(), loss_mask=np.ones(length, dtype=bool), step=i % steps))
        true.append(lp.copy())
    return recs, true


def _analyze(records, train, label="fp32"):
    result = analyze(records, {label: train}, {label: None})
    result.hints = likely_causes(result, records)
    return result


def test_identity_gives_ideal_metrics():
    recs, true = _records()
    m = _analyze(recs, true).primary.metrics
    assert m["mean_abs_dlogp"] == 0 and m["max_abs_dlogp"] == 0 and m["k3_kl"] == 0
    assert m["mult_prob_error"] == 1 and m["is_ess"] == pytest.approx(1) and m["frac_exact"] == 1
    assert m["chi2_token"] == 0 and m["is_mean"] == 1 and m["frac_ratio_out[0.5,2]"] == 0
    assert _analyze(recs, true).primary.verdict.level == "ok"


@pytest.mark.parametrize("delta", [0.01, 0.3, 1.0])
def test_constant_shift_has_analytic_values(delta):
    recs, true = _records(high=-1.05)
    for r in recs:
        r.logprobs = r.logprobs + delta               # engine reports +δ on every token: d = −δ
    m = _analyze(recs, true).primary.metrics
    assert m["mean_dlogp"] == pytest.approx(-delta, abs=1e-12)
    assert m["mean_abs_dlogp"] == pytest.approx(delta, abs=1e-12)
    assert m["k3_kl"] == pytest.approx(math.exp(-delta) + delta - 1, rel=1e-9)
    assert m["mult_prob_error"] == pytest.approx(math.exp(delta), rel=1e-12)
    assert m["is_mean"] == pytest.approx(math.exp(-delta), rel=1e-12)
    assert m["frac_ratio_out[0.5,2]"] == (1.0 if delta > math.log(2) else 0.0)
    assert m["seq_log_ratio_q50"] == pytest.approx(-50 * delta)


def test_constant_shift_verdict_and_hint():
    recs, true = _records(high=-1.05)
    for r in recs:
        r.logprobs = r.logprobs + 0.3
    res = _analyze(recs, true)
    assert res.primary.verdict.level == "danger"
    assert res.primary.verdict.reasons[0]["source"].startswith("[")
    assert "constant-shift" in {h["id"] for h in res.hints}


def test_single_spike():
    recs, true = _records()
    recs[3].logprobs[7] = true[3][7] - 15.0           # one token the engine thought 15 nats less likely
    res = _analyze(recs, true)
    m = res.primary.metrics
    n = 40 * 50
    assert m["max_abs_dlogp"] == pytest.approx(15.0)
    assert m["frac_extreme_tau10"] == pytest.approx(1 / n)
    assert m["frac_veto_1e-4"] == 0 and m["frac_ratio_gt3"] == pytest.approx(1 / n)
    assert res.primary.worst_tokens[0]["record_id"] == "r3" and res.primary.worst_tokens[0]["pos"] == 7
    levels = {r["metric"]: r["level"] for r in res.primary.verdict.reasons}
    assert levels["frac_extreme_tau10"] == "warn"
    assert {f["metric"] for f in res.primary.verdict.flags} >= {"max_abs_dlogp"}


def test_off_by_one_alignment_is_flagged():
    recs, true = _records()
    for r in recs:
        r.logprobs = np.concatenate([r.logprobs[1:], r.logprobs[-1:]])   # engine logprobs shifted by one
    res = _analyze(recs, true)
    assert res.primary.verdict.level == "danger"
    assert "alignment" in {h["id"] for h in res.hints}


def test_masked_and_neg_inf_tokens_are_left_out_and_counted():
    recs, true = _records(n_records=10)
    recs[0].loss_mask[:10] = False
    recs[0].logprobs[:10] = 0.0                       # placeholder logprobs of tool tokens
    recs[1].logprobs[5] = -math.inf
    res = _analyze(recs, true)
    m = res.primary.metrics
    assert m["n_tokens"] == 500 - 10 - 1 and m["frac_masked_out"] == pytest.approx(10 / 500)
    assert m["n_neg_inf_engine"] == 1 and m["mean_abs_dlogp"] == 0
    assert res.primary.verdict.level == "ok"


def test_many_neg_inf_engine_logprobs_are_inconclusive():
    recs, true = _records(n_records=10)
    recs[1].logprobs[:10] = -math.inf                 # 2 % of the tokens
    res = _analyze(recs, true)
    assert res.primary.verdict.level == "inconclusive"
    assert "-inf" in res.primary.verdict.reasons[0]["problem"]


def test_low_probability_tail_blowup():
    rng = np.random.default_rng(1)
    recs, true = _records(n_records=60, low=-12.0, high=-0.01)
    for r in recs:
        low = r.logprobs < math.log(1e-3)
        noise = np.where(low, rng.normal(0, 0.8, len(low)), rng.normal(0, 0.01, len(low)))
        r.logprobs = np.minimum(r.logprobs + noise, 0.0)
    res = _analyze(recs, true)
    assert res.primary.metrics["tail_anomaly_ratio"] > 20
    assert "low-p-tail" in {h["id"] for h in res.hints}


def test_by_probability_buckets_cover_every_token():
    recs, true = _records(low=-12, high=-0.01)
    res = _analyze(recs, true)
    rows = res.primary.by_prob
    assert len(rows) == 7 and sum(r["n_tokens"] for r in rows) == 2000
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)


def test_step_series_one_row_per_step_with_version_lag():
    recs, true = _records(n_records=12, steps=3)
    for i, r in enumerate(recs):
        r.policy_version = np.full(len(r.response_ids), max(0, r.step - (i % 2)), dtype=np.int64)
        r.logprobs = np.minimum(r.logprobs + 0.01 * r.step, 0)
    res = _analyze(recs, true)
    cols = step_series(recs, res.primary)
    assert cols["step"].tolist() == [0, 1, 2]
    assert cols["logprob_delta"] == pytest.approx([0.0, 0.01, 0.02], abs=1e-9)
    assert cols["policy_version_lag"] == pytest.approx([0.0, 0.5, 0.5])
    assert set(cols) == {"step", "logprob_delta", "logprob_k3_kl", "is_ratio_mean", "mult_prob_error",
                         "prob_delta", "policy_version_lag"}
    assert "stale-policy" in {h["id"] for h in res.hints}


def test_thresholds_have_sources_and_overrides():
    assert all(th.source.startswith("[") and th.basis for th in DEFAULT_THRESHOLDS)
    assert judge({"k3_kl": 0.005}).level == "warn"
    changed = apply_overrides(["k3_kl.warn=0.01", "k3_kl.danger=0.1", "is_mean.warn=0.8:1.25"])
    by = {th.metric: th for th in changed}
    assert by["k3_kl"].warn == 0.01 and by["k3_kl"].source == "[--set]"
    assert by["is_mean"].warn == (0.8, 1.25)
    assert judge({"k3_kl": 0.005}, changed).level == "ok"
    assert judge({"is_mean": 0.85}, changed).level == "ok"
    assert judge({"is_mean": 0.85}).level == "warn"
    assert judge({"is_ess": 0.2}).level == "danger"
    with pytest.raises(ConfigError, match="no threshold"):
        apply_overrides(["nope.warn=1"])
    with pytest.raises(ConfigError, match="expected"):
        apply_overrides(["k3_kl=1"])


def test_drift_growing_with_position_and_moe_hints():
    rng = np.random.default_rng(2)
    recs, true = _records(n_records=4, length=1500)
    for r in recs:
        scale = np.where(np.arange(1500) < 256, 0.01, 0.1)
        r.logprobs = np.minimum(r.logprobs + rng.normal(0, 1, 1500) * scale, 0.0)
    result = analyze(recs, {"fp32": true}, {"fp32": None})
    hints = {h["id"] for h in likely_causes(result, recs, moe_experts=8)}
    assert {"long-context", "moe-routing"} <= hints
    assert [row["bucket"] for row in result.primary.by_position] == ["0-256", "256-1k", "1k-4k"]
    assert [row["bucket"] for row in result.primary.by_length] == ["len 1k-4k"]
