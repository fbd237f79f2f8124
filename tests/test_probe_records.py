"""Reading and validating rollout records (probe.md §4.9) and resolving their logprob semantics; no torch."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stabdiag.errors import InputError
from stabdiag.probe.records import RolloutRecord, attach_sidecar, read_rollouts
from stabdiag.probe.sampling import Sampling, SamplingOverrides, resolve_sampling


def _rec(**over):
    rec = {"id": "a", "prompt_token_ids": [1, 5, 6], "response_token_ids": [7, 8, 2],
           "response_logprobs": [-0.5, -1.25, -0.01], "meta": {"logprobs_mode": "raw"}}
    rec.update(over)
    return rec


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_normalized_jsonl_round_trip(tmp_path):
    path = _write_jsonl(tmp_path / "r.jsonl", [_rec(step=3, policy_version=2, loss_mask=[1, 0, 1]),
                                               _rec(id="b", loss_mask=[True, True, False])])
    out = read_rollouts([path])
    a, b = out.records
    assert a.id == "a" and a.line == 1 and b.line == 2 and a.step == 3
    assert a.prompt_ids.tolist() == [1, 5, 6] and a.logprobs.tolist() == [-0.5, -1.25, -0.01]
    assert a.loss_mask.tolist() == [True, False, True] and a.policy_version.tolist() == [2, 2, 2]
    assert a.n_context == 5 and b.step is None and b.loss_mask.tolist() == [True, True, False]


def test_jsonl_gz_and_parquet_inputs(tmp_path):
    rows = [_rec(id=f"r{i}", step=i) for i in range(3)]
    gz = tmp_path / "r.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    pq_path = tmp_path / "r.parquet"
    table = pa.table({
        "id": [r["id"] for r in rows], "step": [r["step"] for r in rows],
        "prompt_token_ids": [r["prompt_token_ids"] for r in rows],
        "response_token_ids": [r["response_token_ids"] for r in rows],
        "response_logprobs": [r["response_logprobs"] for r in rows],
        "meta": [json.dumps(r["meta"]) for r in rows],
    })
    pq.write_table(table, pq_path)
    for path in (gz, pq_path):
        recs = read_rollouts([str(path)]).records
        assert [r.id for r in recs] == ["r0", "r1", "r2"] and recs[2].step == 2
        assert recs[0].meta["logprobs_mode"] == "raw"
    bad = pa.table({"id": ["x"], "prompt_token_ids": [[1]], "response_token_ids": [[2, 3]],
                    "response_logprobs": [[-0.1]]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(InputError, match=r"bad.parquet \[row 1\]: response_logprobs has 1 values for 2"):
        read_rollouts([str(tmp_path / "bad.parquet")])


@pytest.mark.parametrize("override, message", [
    ({"response_logprobs": [-0.5, -1.0]}, "response_logprobs has 2 values for 3 response tokens"),
    ({"response_logprobs": [-0.5, 0.7, -0.1]}, r"response_logprobs\[1\] = 0.7 is positive"),
    ({"response_token_ids": [7, -1, 2]}, "negative token id"),
    ({"response_token_ids": [7, 1.5, 2]}, "integer token ids"),
    ({"response_logprobs": [-0.5, "x", -0.1]}, r"response_logprobs\[1\] = 'x' is not a number"),
    ({"loss_mask": [1, 1]}, "loss_mask must hold 3 values"),
    ({"policy_version": [1, 2]}, "policy_version has 2 values"),
    ({"prompt_token_ids": []}, "prompt_token_ids is empty"),
    ({"meta": {"logprobs_mode": "raw_logits"}}, "cannot be probed"),
    ({"step": "x"}, "step 'x' is not an integer"),
])
def test_validation_errors_name_file_and_line(tmp_path, override, message):
    path = _write_jsonl(tmp_path / "r.jsonl", [_rec(), _rec(**override)])
    with pytest.raises(InputError, match=message) as info:
        read_rollouts([path])
    assert info.value.line == 2 and str(info.value).startswith(f"{path}:2: ")


def test_missing_field_and_bad_json(tmp_path):
    rec = _rec()
    del rec["response_logprobs"]
    path = _write_jsonl(tmp_path / "r.jsonl", [_rec(), _rec(), rec])
    with pytest.raises(InputError, match=r":3: missing field response_logprobs"):
        read_rollouts([path])
    (tmp_path / "b.jsonl").write_text(json.dumps(_rec()) + "\n{not json\n")
    with pytest.raises(InputError, match=r"b.jsonl:2: not valid JSON"):
        read_rollouts([str(tmp_path / "b.jsonl")])
    (tmp_path / "c.jsonl").write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(InputError, match=r"c.jsonl:1: not a rollout record"):
        read_rollouts([str(tmp_path / "c.jsonl")])
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(InputError, match="unknown rollout file type"):
        read_rollouts([str(tmp_path / "x.txt")])


def test_sentinels_null_and_empty_responses(tmp_path):
    path = _write_jsonl(tmp_path / "r.jsonl", [
        _rec(response_logprobs=[-999999999.0, None, -0.1]),
        _rec(id="empty", response_token_ids=[], response_logprobs=[]),
    ])
    out = read_rollouts([path])
    assert len(out.records) == 1 and out.n_empty_skipped == 1
    lp = out.records[0].logprobs
    assert lp[0] == -math.inf and math.isnan(lp[1])
    empty = _write_jsonl(tmp_path / "e.jsonl", [_rec(response_token_ids=[], response_logprobs=[])])
    with pytest.raises(InputError, match="no rollout records"):
        read_rollouts([empty])


def test_header_line_sets_meta_for_following_records(tmp_path):
    rows = [{"meta": {"logprobs_mode": "processed_logprobs", "temperature": 0.7, "engine": "vllm"}},
            _rec(meta=None), _rec(meta={"temperature": 1.0})]
    out = read_rollouts([_write_jsonl(tmp_path / "r.jsonl", rows)])
    a, b = out.records
    assert a.meta == {"logprobs_mode": "processed", "temperature": 0.7, "engine": "vllm"}
    assert b.meta["temperature"] == 1.0 and a.line == 2 and out.engines == {"vllm"}


def test_sampling_semantics():
    recs = {"raw": {"logprobs_mode": "raw", "temperature": 0.7},
            "proc": {"logprobs_mode": "processed", "temperature": 0.7, "top_p": 0.9, "top_k": 50},
            "t1": {"temperature": 1.0}, "unknown": {"temperature": 0.7}, "none": {},
            "proc_no_t": {"logprobs_mode": "processed"}}

    def rec(meta):
        return RolloutRecord("x", "f.jsonl", 4, None, np.array([1]), np.array([2]), np.array([-1.0]),
                             np.array([True]), meta=meta)

    none = SamplingOverrides()
    assert resolve_sampling(rec(recs["raw"]), none) == Sampling()
    assert resolve_sampling(rec(recs["proc"]), none) == Sampling(0.7, 50, 0.9, 0.0)
    assert resolve_sampling(rec(recs["t1"]), none) == Sampling()
    for name in ("unknown", "none"):
        with pytest.raises(InputError, match=r"f.jsonl:4: record x: it does not say whether"):
            resolve_sampling(rec(recs[name]), none)
    with pytest.raises(InputError, match="need the sampling temperature"):
        resolve_sampling(rec(recs["proc_no_t"]), none)
    assert resolve_sampling(rec(recs["none"]), SamplingOverrides(logprobs_mode="raw")) == Sampling()
    assert resolve_sampling(rec(recs["unknown"]), SamplingOverrides("processed")) == Sampling(0.7)
    assert resolve_sampling(rec(recs["proc"]), SamplingOverrides("raw")) == Sampling()


def test_sidecar_by_id_and_by_order(tmp_path):
    path = _write_jsonl(tmp_path / "r.jsonl", [_rec(id="a"), _rec(id="b")])
    side = _write_jsonl(tmp_path / "s.jsonl", [{"id": "b", "train_logprobs": [-1, -1, -1]},
                                               {"id": "a", "train_logprobs": [-2, -2, -2]}])
    recs = read_rollouts([path]).records
    attach_sidecar(recs, side)
    assert recs[0].train_logprobs.tolist() == [-2, -2, -2]
    ordered = _write_jsonl(tmp_path / "o.jsonl", [{"train_logprobs": [-1, -1, -1]}])
    with pytest.raises(InputError, match="sidecar has 1 rows without ids for 2 records"):
        attach_sidecar(recs, ordered)
    short = _write_jsonl(tmp_path / "x.jsonl", [{"train_logprobs": [-1]}, {"train_logprobs": [-1, -1, -1]}])
    with pytest.raises(InputError, match=r"x.jsonl:1: train_logprobs has 1 values for record a"):
        attach_sidecar(recs, short)
