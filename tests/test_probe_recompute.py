"""The transformers recompute on a tiny random Llama built offline (probe.md §5, §6.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from stabdiag.probe.analysis import analyze  # noqa: E402
from stabdiag.probe.hints import likely_causes  # noqa: E402
from stabdiag.probe.model import Precision, load_model, logit_postprocess, parse_precisions  # noqa: E402
from stabdiag.probe.recompute import (  # noqa: E402
    LogprobHead,
    SelfCheckError,
    check_vocab,
    recompute,
    self_check,
    transform_logits,
)
from stabdiag.probe.records import RolloutRecord  # noqa: E402
from stabdiag.probe.sampling import Sampling  # noqa: E402
from stabdiag.probe.synthetic import build_tiny_model, sample_rollouts  # noqa: E402

pytestmark = pytest.mark.torch
FP32 = Precision("fp32")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """A tiny model runs fastest on one thread, and does not stall when other jobs share the CPUs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def model(model_dir):
    return load_model(model_dir, FP32, device="cpu")


def _records(rows):
    return [RolloutRecord(id=r["id"], source="mem", line=i + 1, key=None,
                          prompt_ids=np.array(r["prompt_token_ids"]), response_ids=np.array(r["response_token_ids"]),
                          logprobs=np.array(r["response_logprobs"]),
                          loss_mask=np.ones(len(r["response_token_ids"]), bool),
                          step=r.get("step"), meta=r["meta"]) for i, r in enumerate(rows)]


@pytest.fixture(scope="module")
def rollouts(model):
    return _records(sample_rollouts(model, n_records=24, seed=1))


def _scores(model, recs, precision=FP32, samplings=None, **kw):
    samplings = samplings or [Sampling()] * len(recs)
    out = recompute(model, recs, samplings, precision=precision, device="cpu", **kw)
    return [out[i].logprobs for i in range(len(recs))], [out[i].entropy for i in range(len(recs))]


def _analyze(recs, lps, label="fp32"):
    result = analyze(recs, {label: lps}, {label: None})
    result.hints = likely_causes(result, recs)
    return result


def test_fp32_engine_agrees_with_fp32_recompute(model, rollouts):
    lps, ents = _scores(model, rollouts)
    res = _analyze(rollouts, lps)
    m = res.primary.metrics
    assert m["max_abs_dlogp"] < 1e-5 and m["k3_kl"] < 1e-10
    assert res.primary.verdict.level == "ok"
    assert all(e is not None and np.all(e > 0) and np.all(e <= math.log(256) + 1e-6) for e in ents)


def test_identity_is_exact_when_the_engine_path_is_the_same(model, rollouts):
    lps, _ = _scores(model, rollouts)
    same = [RolloutRecord(r.id, r.source, r.line, None, r.prompt_ids, r.response_ids, lp.copy(), r.loss_mask)
            for r, lp in zip(rollouts, lps)]
    again, _ = _scores(model, rollouts)
    m = _analyze(same, again).primary.metrics
    assert m["frac_exact"] == 1.0 and m["k3_kl"] == 0.0 and m["mult_prob_error"] == 1.0 and m["is_ess"] == 1.0


def test_injected_drift_is_recovered(model, rollouts):
    lps, _ = _scores(model, rollouts)
    delta = 0.2
    shifted = [RolloutRecord(r.id, r.source, r.line, None, r.prompt_ids, r.response_ids,
                             np.minimum(lp - delta, 0.0), r.loss_mask) for r, lp in zip(rollouts, lps)]
    m = _analyze(shifted, lps).primary.metrics
    assert m["mean_dlogp"] == pytest.approx(delta, abs=1e-9)
    assert m["k3_kl"] == pytest.approx(math.exp(delta) - delta - 1, rel=1e-6)
    assert m["mult_prob_error"] == pytest.approx(math.exp(delta), rel=1e-9)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_batched_equals_one_by_one(model, rollouts, padding_side):
    one, _ = _scores(model, rollouts, batch_tokens=1)
    batched, _ = _scores(model, rollouts, batch_tokens=4096, padding_side=padding_side)
    assert max(np.abs(a - b).max() for a, b in zip(one, batched)) < 1e-5


def test_chunked_lm_head_equals_full(model, rollouts):
    full, ents_full = _scores(model, rollouts, chunk_tokens=10**6)
    chunked, ents_chunked = _scores(model, rollouts, chunk_tokens=7)
    # 1e-6 relative: fp32 GEMMs of different row counts round differently (~1 ulp of a logprob near -10)
    assert all(np.allclose(a, b, rtol=1e-6, atol=1e-6) for a, b in zip(full, chunked))
    assert max(np.abs(a - b).max() for a, b in zip(ents_full, ents_chunked)) < 1e-5
    # and the chunked head equals a naive full-vocab log_softmax of model(...).logits
    r = rollouts[0]
    x = torch.tensor(np.concatenate([r.prompt_ids, r.response_ids[:-1]])[None])
    with torch.no_grad():
        ref = torch.log_softmax(model(x).logits[0, len(r.prompt_ids) - 1:].float(), -1)
    ref = ref.gather(-1, torch.tensor(r.response_ids)[:, None]).squeeze(-1).double().numpy()
    assert np.abs(ref - chunked[0]).max() < 1e-5


def test_temperature_semantics(model):
    recs = _records(sample_rollouts(model, n_records=16, temperature=0.7, seed=2))
    as_processed, _ = _scores(model, recs, samplings=[Sampling(0.7)] * len(recs))
    ok = _analyze(recs, as_processed)
    assert ok.primary.metrics["max_abs_dlogp"] < 1e-5 and ok.primary.verdict.level == "ok"
    as_raw, _ = _scores(model, recs, samplings=[Sampling()] * len(recs))
    bad = _analyze(recs, as_raw)
    assert bad.primary.verdict.level == "danger"
    assert "temperature" in {h["id"] for h in bad.hints}


def test_top_k_top_p_masks():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])
    top_k = transform_logits(torch, logits, Sampling(top_k=2))
    assert torch.isinf(top_k[0, 2:]).all() and torch.isfinite(top_k[0, :2]).all()
    probs = torch.softmax(logits, -1)[0]                      # ≈ .636 .234 .086 .032 .012
    top_p = transform_logits(torch, logits, Sampling(top_p=0.8))
    assert torch.isfinite(top_p[0, :2]).all() and torch.isinf(top_p[0, 2:]).all()
    assert probs[:2].sum() > 0.8 > probs[0]
    assert torch.isfinite(transform_logits(torch, logits, Sampling(top_p=0.5))[0]).sum() == 1
    min_p = transform_logits(torch, logits, Sampling(min_p=0.1))
    assert torch.isfinite(min_p[0]).tolist() == [True, True, True, False, False]


def test_processed_top_k_logprobs_are_reproduced(model, rollouts):
    """Engine logprobs of a top-k-truncated distribution, made with a naive full-vocab forward, match a
    processed recompute with the same top_k and drift against a raw one."""
    k = 40
    recs = []
    for r in rollouts[:8]:
        x = torch.tensor(np.concatenate([r.prompt_ids, r.response_ids[:-1]])[None])
        with torch.no_grad():
            logits = model(x).logits[0, len(r.prompt_ids) - 1:].float()
        kth = logits.sort(-1, descending=True).values[:, k - 1:k]
        lp = torch.log_softmax(logits.masked_fill(logits < kth, float("-inf")), -1)
        lp = lp.gather(-1, torch.tensor(r.response_ids)[:, None]).squeeze(-1).double().numpy()
        kept = np.isfinite(lp)                              # a token outside the top-k could not be sampled
        recs.append(RolloutRecord(r.id, "mem", 1, None, r.prompt_ids, r.response_ids, np.where(kept, lp, -1.0),
                                  kept))
    processed, _ = _scores(model, recs, samplings=[Sampling(top_k=k)] * len(recs))
    assert _analyze(recs, processed).primary.metrics["max_abs_dlogp"] < 1e-5
    raw, _ = _scores(model, recs)
    assert _analyze(recs, raw).primary.metrics["mean_dlogp"] < -0.01      # truncation mass missing


def test_bf16_vs_fp32_small_positive_k3_larger_in_low_p(model_dir, model):
    recs = _records(sample_rollouts(model, n_records=32, seed=4))
    lp32, _ = _scores(model, recs)
    bf16 = load_model(model_dir, Precision("bf16"), device="cpu")
    lp16, _ = _scores(bf16, recs, precision=Precision("bf16"))
    for r, lp in zip(recs, lp32):
        r.logprobs = lp.copy()                               # an fp32 "engine"
    result = analyze(recs, {"bf16": lp16, "fp32": lp32}, {"bf16": None, "fp32": None})
    m = result.primary.metrics
    assert 0 < m["k3_kl"] < 0.01
    ref = result.primary.vs_reference
    assert ref["k3_kl"] == pytest.approx(m["k3_kl"])
    assert ref["k3_kl_p_lt_1e-2"] > ref["k3_kl_p_ge_0.1"]


def test_lm_head_fp32_and_autocast_run(model_dir, model, rollouts):
    precisions = parse_precisions(["bf16"], ["bf16"], True)
    assert [p.label for p in precisions] == ["bf16+fp32head", "amp-bf16+fp32head"]
    lp32, _ = _scores(model, rollouts[:4])
    for p in precisions:
        m = load_model(model_dir, p, device="cpu")
        self_check(m, rollouts[0], p, device="cpu")
        lp, _ = _scores(m, rollouts[:4], precision=p)
        assert 0 < max(np.abs(a - b).max() for a, b in zip(lp, lp32)) < 0.5


def test_self_check_passes_and_rejects_unknown_logit_postprocessing(model_dir, rollouts):
    m = load_model(model_dir, FP32, device="cpu")
    assert self_check(m, rollouts[0], FP32, device="cpu") < 1e-5
    m.config.final_logit_softcapping = 5.0               # the chunked path now softcaps; forward() does not
    assert logit_postprocess(m) == [("softcap", 5.0)]
    with pytest.raises(SelfCheckError, match="self-check failed"):
        self_check(m, rollouts[0], FP32, device="cpu")


def test_softcap_is_reproduced_for_gemma2(tmp_path, rollouts):
    from transformers import Gemma2Config, Gemma2ForCausalLM

    cfg = Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=32, initializer_range=0.5,
                       final_logit_softcapping=2.0, max_position_embeddings=256)
    torch.manual_seed(0)
    Gemma2ForCausalLM(cfg).save_pretrained(tmp_path / "g2")
    m = load_model(str(tmp_path / "g2"), FP32, device="cpu", attn="eager")
    assert ("softcap", 2.0) in logit_postprocess(m)
    assert self_check(m, rollouts[0], FP32, device="cpu") < 1e-5


def test_vocab_check_names_the_record(model, rollouts):
    bad = RolloutRecord("bad", "r.jsonl", 9, None, np.array([1, 2]), np.array([5, 300]), np.array([-1.0, -1.0]),
                        np.ones(2, bool))
    with pytest.raises(Exception, match=r"r.jsonl:9: record bad: token id 300 is not below the model's vocab size 256"):
        check_vocab([rollouts[0], bad], model)


def test_head_memory_is_bounded_by_chunk(model):
    head = LogprobHead(model, FP32, chunk_tokens=4)
    hidden = torch.randn(10, 64)
    lp, ent = head(hidden, torch.randint(0, 256, (10,)), Sampling())
    assert lp.shape == (10,) and ent.shape == (10,)


def test_device_auto_picks_cuda_when_available(monkeypatch):
    from stabdiag.errors import ConfigError
    from stabdiag.probe.model import pick_device

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto") == "cpu"
    with pytest.raises(ConfigError, match="no CUDA device"):
        pick_device("cuda")
    with pytest.raises(ConfigError, match="--device 'tpu'"):
        pick_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device("auto") == "cuda"
    monkeypatch.setenv("LOCAL_RANK", "1")                  # under torchrun: this rank's GPU
    assert pick_device("auto") == "cuda:1"
