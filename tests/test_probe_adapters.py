"""The vLLM and SGLang adapters on small hand-written dumps that use those projects' field names
(probe.md §4.2, §4.4); no torch, no vLLM, no SGLang."""

from __future__ import annotations

import json
import math
import pickle
from types import SimpleNamespace

import pytest

from stabdiag.errors import InputError
from stabdiag.probe.adapters import records_from_vllm, write_jsonl
from stabdiag.probe.records import read_rollouts

# vLLM RequestOutput as JSON: SamplingParams(logprobs=2) → each position holds the sampled token plus the
# top-2 by rank, ordered by rank; the sampled token (rank 3 at position 1) is NOT the first entry.
VLLM_JSON = {
    "request_id": "req-7",
    "prompt_token_ids": [1, 17, 42],
    "sampling_params": {"temperature": 0.8, "top_p": 1.0, "top_k": -1},
    "meta": {"logprobs_mode": "processed"},
    "step": 5,
    "outputs": [
        {"index": 0, "text": "a b", "token_ids": [11, 12], "cumulative_logprob": -2.6, "finish_reason": "length",
         "logprobs": [
             {"11": {"logprob": -0.1, "rank": 1, "decoded_token": "a"},
              "30": {"logprob": -2.5, "rank": 2, "decoded_token": "z"}},
             {"40": {"logprob": -0.3, "rank": 1, "decoded_token": "q"},
              "41": {"logprob": -1.6, "rank": 2, "decoded_token": "r"},
              "12": {"logprob": -2.5, "rank": 3, "decoded_token": "b"}},
         ]},
        {"index": 1, "token_ids": [13], "logprobs": [{"13": -0.7}]},
    ],
}


def _logprob(value, rank):
    return SimpleNamespace(logprob=value, rank=rank, decoded_token=None)


def _vllm_objects():
    """RequestOutput-like objects: integer-keyed dicts of Logprob, as LLM.generate returns them."""
    out = SimpleNamespace(index=0, token_ids=[11, 12], logprobs=[
        {30: _logprob(-2.5, 2), 11: _logprob(-0.1, 1)},
        {40: _logprob(-0.3, 1), 12: _logprob(-2.5, 3)},
    ])
    return [SimpleNamespace(request_id="o1", prompt_token_ids=[1, 17, 42], outputs=[out])]


def test_vllm_json_dump_indexes_logprobs_by_sampled_id(tmp_path):
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps([VLLM_JSON]))
    recs = read_rollouts([str(path)]).records
    assert [r.id for r in recs] == ["req-7/0", "req-7/1"]
    a, b = recs
    assert a.prompt_ids.tolist() == [1, 17, 42] and a.response_ids.tolist() == [11, 12]
    assert a.logprobs.tolist() == [-0.1, -2.5]                 # not -0.3, the rank-1 entry
    assert b.logprobs.tolist() == [-0.7]
    assert a.meta == {"engine": "vllm", "temperature": 0.8, "top_p": 1.0, "top_k": -1, "logprobs_mode": "processed"}
    assert a.step == 5


def test_vllm_objects_in_process_and_pickled(tmp_path):
    rows = records_from_vllm(_vllm_objects(), meta={"logprobs_mode": "raw"}, step=2)
    assert rows[0]["response_logprobs"] == [-0.1, -2.5] and rows[0]["step"] == 2
    write_jsonl(rows, tmp_path / "conv.jsonl.gz")
    rec = read_rollouts([str(tmp_path / "conv.jsonl.gz")]).records[0]
    assert rec.id == "o1/0" and rec.meta["logprobs_mode"] == "raw"
    with open(tmp_path / "outs.pkl", "wb") as fh:
        pickle.dump(_vllm_objects(), fh)
    with pytest.raises(InputError, match="--trust-pickle"):
        read_rollouts([str(tmp_path / "outs.pkl")])
    rec = read_rollouts([str(tmp_path / "outs.pkl")], trust_pickle=True).records[0]
    assert rec.logprobs.tolist() == [-0.1, -2.5]


def test_vllm_errors(tmp_path):
    missing = json.loads(json.dumps(VLLM_JSON))
    missing["outputs"][0]["logprobs"][1].pop("12")
    no_lp = json.loads(json.dumps(VLLM_JSON))
    no_lp["outputs"][0]["logprobs"] = None
    for name, obj, message in (("m", missing, r"logprobs\[1\] has no entry for the sampled token id 12"),
                               ("n", no_lp, r"SamplingParams\(logprobs=0\)")):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(VLLM_JSON) + "\n" + json.dumps(obj) + "\n")
        with pytest.raises(InputError, match=message) as info:
            read_rollouts([str(path)])
        assert info.value.line == 2


# SGLang /generate responses: meta_info.output_token_logprobs = [[logprob, token_id, text|null], ...].
SGLANG_WITH_REQUEST = {
    "text": " b c",
    "output_ids": [21, 22, 2],
    "meta_info": {"id": "abc", "prompt_tokens": 3, "completion_tokens": 3,
                  "finish_reason": {"type": "stop", "matched": 2},
                  "output_token_logprobs": [[-0.2, 21, None], [-999999999.0, 22, None], [-0.05, 2, None]]},
    "input_ids": [1, 5, 9],
    "sampling_params": {"temperature": 0.6, "top_p": 0.95},
}
SGLANG_START_LEN_0 = {
    "text": " b",
    "meta_info": {"id": "def", "prompt_tokens": 2,
                  "input_token_logprobs": [[None, 1, None], [-3.2, 5, None]],
                  "output_token_logprobs": [[-0.4, 21, " b"]]},
}


def test_sglang_responses(tmp_path):
    path = tmp_path / "sglang.jsonl"
    path.write_text(json.dumps(SGLANG_WITH_REQUEST) + "\n" + json.dumps(SGLANG_START_LEN_0) + "\n")
    a, b = read_rollouts([str(path)]).records
    assert a.id == "abc" and a.prompt_ids.tolist() == [1, 5, 9] and a.response_ids.tolist() == [21, 22, 2]
    assert a.logprobs[0] == -0.2 and a.logprobs[1] == -math.inf      # SGLang's −inf sentinel
    # default SGLang semantics: temperature-scaled, no truncation; top_p kept only as information
    assert a.meta == {"engine": "sglang", "logprobs_mode": "processed", "temperature": 0.6, "sampling_top_p": 0.95}
    assert b.prompt_ids.tolist() == [1, 5] and b.meta["temperature"] == 1.0


def test_sglang_batch_json_and_errors(tmp_path):
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([SGLANG_WITH_REQUEST, SGLANG_START_LEN_0]))
    assert len(read_rollouts([str(path)]).records) == 2
    no_prompt = {"meta_info": {"output_token_logprobs": [[-0.1, 3, None]]}}
    path.write_text(json.dumps([SGLANG_WITH_REQUEST, no_prompt]))
    with pytest.raises(InputError, match=r"batch.json \[item 1\]: SGLang response without the prompt ids"):
        read_rollouts([str(path)])
    raw_mode = dict(SGLANG_WITH_REQUEST, meta={"logprobs_mode": "raw"})   # SGLANG_RETURN_ORIGINAL_LOGPROB=1
    path.write_text(json.dumps([raw_mode]))
    assert read_rollouts([str(path)]).records[0].meta["logprobs_mode"] == "raw"
    path.write_text(json.dumps([SGLANG_WITH_REQUEST]))
    with pytest.raises(InputError, match="unknown input format"):
        read_rollouts([str(path)], input_format="slime")
    with pytest.raises(InputError, match="missing field prompt_token_ids"):
        read_rollouts([str(path)], input_format="normalized")
