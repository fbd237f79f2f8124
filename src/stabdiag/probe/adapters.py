"""Adapters from engine outputs to the normalized rollout record (probe.md §4.9).

vLLM `RequestOutput` (probe.md §4.2): `prompt_token_ids`, `outputs[i].token_ids` and
`outputs[i].logprobs`, a list (one per sampled token) of `{token_id: Logprob(logprob, rank,
decoded_token)}`. The sampled token's logprob is always looked up by its id, never as the first
entry: with `SamplingParams(logprobs=k > 0)` the dict is ordered by rank, not by the sampled token.
A dump is either the objects themselves (pickled, or passed to `records_from_vllm` in process) or
their JSON form, where the dict keys become strings and `Logprob` becomes
`{"logprob": ..., "rank": ..., "decoded_token": ...}` (a bare number is accepted too).

SGLang `/generate` (probe.md §4.4): `meta_info.output_token_logprobs = [[logprob, token_id, text|null],
...]`. The response does not carry the prompt ids, so the dump must keep the request's `input_ids`
beside it (top-level `input_ids`, or `request.input_ids`), or the request must have asked for
`logprob_start_len=0`, in which case `meta_info.input_token_logprobs` holds every prompt id. SGLang
reports logprobs of the temperature-scaled distribution without top-p/top-k truncation unless the
server ran with `SGLANG_RETURN_ORIGINAL_LOGPROB=1`; the adapter records exactly that as the
logprob semantics (`logprobs_mode = processed`, the request's temperature, no truncation), and a
`meta.logprobs_mode` in the dump overrides it.

Every adapter returns plain dicts in the normalized schema; records.py validates them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p")


def sniff(obj: object) -> str | None:
    """Which format an object is in: normalized, vllm, sglang, or None."""
    if isinstance(obj, dict):
        if "response_token_ids" in obj:
            return "normalized"
        if "outputs" in obj and "prompt_token_ids" in obj:
            return "vllm"
        if isinstance(obj.get("meta_info"), dict):
            return "sglang"
        return None
    if hasattr(obj, "outputs") and hasattr(obj, "prompt_token_ids"):
        return "vllm"
    return None


def _get(obj: object, name: str, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _sampled_logprob(entry: object, token_id: int, pos: int) -> float:
    if entry is None:
        raise ValueError(f"outputs.logprobs[{pos}] is empty")
    if isinstance(entry, (int, float)):
        return float(entry)
    hit = None
    if isinstance(entry, dict):
        hit = entry.get(token_id, entry.get(str(token_id)))
    else:                                    # a FlatLogprobs-like mapping
        try:
            hit = entry[token_id]
        except (KeyError, IndexError, TypeError):
            hit = None
    if hit is None:
        raise ValueError(f"outputs.logprobs[{pos}] has no entry for the sampled token id {token_id}")
    value = _get(hit, "logprob", hit)
    if value is None:
        raise ValueError(f"outputs.logprobs[{pos}] has no logprob for token id {token_id}")
    return float(value)


def _sampling_meta(params: object) -> dict:
    if params is None:
        return {}
    return {k: _get(params, k) for k in _SAMPLING_KEYS if _get(params, k) is not None}


def from_vllm_output(req: object) -> list[dict]:
    """Normalized records, one per completion, from one vLLM `RequestOutput` (object or its JSON form)."""
    prompt = _get(req, "prompt_token_ids")
    if prompt is None:
        raise ValueError("vLLM RequestOutput without prompt_token_ids")
    outputs = _get(req, "outputs") or []
    if not outputs:
        raise ValueError("vLLM RequestOutput without outputs")
    base_meta = {"engine": "vllm", **_sampling_meta(_get(req, "sampling_params"))}
    base_meta.update(_get(req, "meta") or {})
    request_id = _get(req, "request_id")
    records = []
    for n, out in enumerate(outputs):
        token_ids = [int(t) for t in (_get(out, "token_ids") or [])]
        lps = _get(out, "logprobs")
        if lps is None:
            raise ValueError("vLLM completion without logprobs: sample with SamplingParams(logprobs=0)")
        if len(lps) != len(token_ids):
            raise ValueError(f"vLLM completion has {len(lps)} logprob entries for {len(token_ids)} tokens")
        index = _get(out, "index", n)
        record = {
            "id": f"{request_id}/{index}" if request_id is not None else None,
            "prompt_token_ids": [int(t) for t in prompt],
            "response_token_ids": token_ids,
            "response_logprobs": [_sampled_logprob(e, t, i) for i, (e, t) in enumerate(zip(lps, token_ids))],
            "meta": dict(base_meta),
        }
        for extra in ("step", "policy_version", "loss_mask"):
            if _get(req, extra) is not None:
                record[extra] = _get(req, extra)
        records.append(record)
    return records


def _prompt_ids_of_sglang(resp: dict, info: dict) -> list[int]:
    for holder in (resp, resp.get("request") or {}):
        if holder.get("input_ids") is not None:
            return [int(t) for t in holder["input_ids"]]
    inputs = info.get("input_token_logprobs")
    if inputs and info.get("prompt_tokens") in (None, len(inputs)):
        return [int(item[1]) for item in inputs]
    raise ValueError("SGLang response without the prompt ids: keep the request's input_ids beside the "
                     "response, or request logprob_start_len=0 so meta_info.input_token_logprobs has them")


def from_sglang_response(resp: dict) -> dict:
    """A normalized record from one SGLang `/generate` response (plus the request's input_ids)."""
    info = resp.get("meta_info") or {}
    triples = info.get("output_token_logprobs")
    if triples is None:
        raise ValueError("SGLang response without meta_info.output_token_logprobs: request with "
                         "return_logprob=true")
    token_ids = [int(item[1]) for item in triples]
    logprobs = [None if item[0] is None else float(item[0]) for item in triples]
    output_ids = resp.get("output_ids")
    if output_ids is not None and len(output_ids) == len(token_ids) and [int(t) for t in output_ids] != token_ids:
        raise ValueError("SGLang output_ids disagree with the ids in meta_info.output_token_logprobs")
    params = resp.get("sampling_params") or (resp.get("request") or {}).get("sampling_params") or {}
    meta = {"engine": "sglang", "logprobs_mode": "processed",
            "temperature": float(params.get("temperature", 1.0))}
    for k in ("top_p", "top_k", "min_p"):
        if params.get(k) is not None:
            meta[f"sampling_{k}"] = params[k]      # used for sampling, not applied to the logprobs
    meta.update(resp.get("meta") or {})
    record = {
        "id": info.get("id", resp.get("id")),
        "prompt_token_ids": _prompt_ids_of_sglang(resp, info),
        "response_token_ids": token_ids,
        "response_logprobs": logprobs,
        "meta": meta,
    }
    for extra in ("step", "policy_version", "loss_mask"):
        if resp.get(extra) is not None:
            record[extra] = resp[extra]
    return record


def records_from_vllm(outputs: Iterable[object], *, meta: dict | None = None,
                      step: int | None = None) -> list[dict]:
    """Normalized records from `LLM.generate(...)` results, for writing a probe input in process.

    Example::

        outs = llm.generate(prompts, SamplingParams(logprobs=0, temperature=1.0))
        write_jsonl(records_from_vllm(outs, meta={"logprobs_mode": "processed"}, step=12), "r.jsonl")
    """
    records = []
    for req in outputs:
        for rec in from_vllm_output(req):
            rec["meta"].update(meta or {})
            if step is not None:
                rec["step"] = step
            records.append(rec)
    return records


def write_jsonl(records: Iterable[dict], path: str | os.PathLike[str]) -> None:
    """Write normalized records as JSONL (gzip when the name ends in .gz)."""
    import gzip

    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
