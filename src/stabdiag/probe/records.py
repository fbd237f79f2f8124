"""Rollout records: the token ids an engine was fed and sampled, with the logprob it reported for each.

Every input format (normalized JSONL / JSONL.gz / JSON / Parquet, vLLM `RequestOutput` dumps, SGLang
`/generate` responses) becomes a list of `RolloutRecord`; nothing downstream knows which one it was.
Validation follows probe.md §4.9: a record that breaks a rule stops the run with an `InputError`
naming the file and line, because a probe that silently drops bad rows reports drift on the wrong data.
Reported logprobs of −inf, or the very negative sentinels some engines write instead (≤ −1e8), are
kept as −inf and counted; they are excluded from the metrics, not averaged.
"""

from __future__ import annotations

import json
import math
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..read._textio import json_lines, open_text
from . import adapters

NEG_INF_SENTINEL = -1e8        # SGLang-derived engines clamp −inf to −999999999.0
POSITIVE_TOLERANCE = 1e-4      # a logprob this far above 0 is rounding; anything more is a bad record
LOGPROB_MODES = {"raw": "raw", "processed": "processed", "raw_logprobs": "raw",
                 "processed_logprobs": "processed"}
INPUT_FORMATS = ("auto", "normalized", "vllm", "sglang")


@dataclass(slots=True)
class RolloutRecord:
    """One sampled response: ids, engine logprobs and where in which file it came from."""

    id: str
    source: str
    line: int | None                 # 1-based line of a JSONL file, else None (see `key`)
    key: str | None                  # "row 3" (Parquet) or "item 3" (JSON array) where there are no lines
    prompt_ids: np.ndarray           # int64
    response_ids: np.ndarray         # int64
    logprobs: np.ndarray             # float64; −inf where the engine reported −inf or a sentinel; NaN kept
    loss_mask: np.ndarray            # bool, True = token is scored
    policy_version: np.ndarray | None = None   # int64 per response token
    step: int | None = None
    meta: dict = field(default_factory=dict)
    train_logprobs: np.ndarray | None = None   # sidecar: logprobs a trainer already recomputed

    def error(self, problem: str) -> InputError:
        """An InputError that points at this record."""
        return InputError(self.source, f"record {self.id}: {problem}", line=self.line, key=self.key)

    @property
    def n_context(self) -> int:
        """Tokens fed to the model to score the response: prompt + response[:-1]."""
        return len(self.prompt_ids) + len(self.response_ids) - 1


@dataclass(slots=True)
class Rollouts:
    """The records read from one or more files and what was skipped on the way."""

    records: list[RolloutRecord]
    files: list[str]
    n_empty_skipped: int = 0
    engines: set[str] = field(default_factory=set)


def read_rollouts(paths: list[str], *, input_format: str = "auto", trust_pickle: bool = False,
                  max_records: int | None = None) -> Rollouts:
    """Read and validate rollout records from files (JSONL, JSONL.gz, JSON, Parquet, trusted pickle)."""
    if input_format not in INPUT_FORMATS:
        raise InputError(None, f"unknown input format {input_format!r}; expected one of "
                               f"{', '.join(INPUT_FORMATS)}")
    out = Rollouts(records=[], files=[])
    for path in paths:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise InputError(path, "no such file")
        out.files.append(path)
        for raw, line, key, header in _iter_objects(path, trust_pickle):
            for obj in _normalize(raw, input_format, path, line, key):
                rec = _validate(obj, header, path, line, key, len(out.records))
                if rec is None:
                    out.n_empty_skipped += 1
                    continue
                engine = rec.meta.get("engine")
                if engine:
                    out.engines.add(str(engine))
                out.records.append(rec)
                if max_records is not None and len(out.records) >= max_records:
                    return out
    if not out.records:
        raise InputError(paths[0] if len(paths) == 1 else None,
                         "no rollout records with a non-empty response")
    return out


def read_sidecar(path: str) -> list[tuple[str | None, np.ndarray, int | None]]:
    """Training-side logprobs a framework already computed: (id or None, train_logprobs, line)."""
    rows = []
    for raw, line, key, _ in _iter_objects(path, trust_pickle=False):
        if not isinstance(raw, dict) or "train_logprobs" not in raw:
            raise InputError(path, "a sidecar row needs a train_logprobs list", line=line, key=key)
        values = _float_list(raw["train_logprobs"], "train_logprobs", path, line, key)
        rows.append((None if raw.get("id") is None else str(raw["id"]), values, line))
    if not rows:
        raise InputError(path, "sidecar file has no rows")
    return rows


# ---------------------------------------------------------------- reading files into raw objects


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(".gz"):
        low = low[:-3]
    for ext, kind in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "json"),
                      (".parquet", "parquet"), (".pq", "parquet"), (".pkl", "pickle"),
                      (".pickle", "pickle")):
        if low.endswith(ext):
            return kind
    raise InputError(path, "unknown rollout file type; expected .jsonl, .jsonl.gz, .json, .parquet "
                           "or (with --trust-pickle) .pkl")


def _iter_objects(path: str, trust_pickle: bool) -> Iterator[tuple[object, int | None, str | None, dict]]:
    """Yield (object, line, key, header meta) for every record-like object in a file."""
    kind = _kind(path)
    try:
        if kind == "jsonl":
            yield from _iter_jsonl(path)
        elif kind == "json":
            with open_text(path) as fh:
                data = json.load(fh)
            items = data if isinstance(data, list) else [data]
            for i, item in enumerate(items):
                yield item, None, f"item {i}", {}
        elif kind == "parquet":
            import pyarrow.parquet as pq

            for i, row in enumerate(pq.read_table(path).to_pylist()):
                if isinstance(row.get("meta"), str):
                    row["meta"] = _json_cell(row["meta"], path, i)
                yield row, None, f"row {i + 1}", {}
        else:
            if not trust_pickle:
                raise InputError(path, "a pickle can run arbitrary code when loaded; pass --trust-pickle "
                                       "if this file comes from a source you trust")
            with open(path, "rb") as fh:
                data = pickle.load(fh)  # noqa: S301 - only with --trust-pickle
            items = data if isinstance(data, (list, tuple)) else [data]
            for i, item in enumerate(items):
                yield item, None, f"item {i}", {}
    except InputError:
        raise
    except json.JSONDecodeError as exc:
        raise InputError(path, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    except (OSError, EOFError, ValueError, UnicodeDecodeError, pickle.UnpicklingError) as exc:
        raise InputError(path, f"cannot read as {kind}: {str(exc).strip() or type(exc).__name__}") from None


def _iter_jsonl(path: str) -> Iterator[tuple[object, int | None, str | None, dict]]:
    header: dict = {}
    for lineno, obj in json_lines(path):
        if isinstance(obj, dict) and set(obj) <= {"meta", "schema"} and "meta" in obj:
            if not isinstance(obj["meta"], dict):
                raise InputError(path, "header meta must be an object", line=lineno)
            header = dict(obj["meta"])            # a header line: meta for the records below it
            continue
        yield obj, lineno, None, header


def _json_cell(text: str, path: str, row: int) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise InputError(path, "meta column is not JSON", key=f"row {row + 1}") from None
    return value if isinstance(value, dict) else {}


def _normalize(raw: object, input_format: str, path: str, line: int | None, key: str | None) -> list[dict]:
    """Turn one raw object into normalized record dicts (vLLM: one per completion)."""
    fmt = input_format if input_format != "auto" else adapters.sniff(raw)
    try:
        if fmt == "normalized":
            if not isinstance(raw, dict):
                raise ValueError("a record must be a JSON object")
            return [raw]
        if fmt == "vllm":
            return adapters.from_vllm_output(raw)
        if fmt == "sglang":
            return [adapters.from_sglang_response(raw)]
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise InputError(path, str(exc).strip("'\""), line=line, key=key) from None
    raise InputError(path, "not a rollout record: expected prompt_token_ids + response_token_ids "
                           "(normalized), outputs[] (vLLM RequestOutput) or meta_info.output_token_logprobs "
                           "(SGLang /generate)", line=line, key=key)


# ---------------------------------------------------------------- validation (§4.9)


def _int_list(value, name: str, path: str, line, key) -> np.ndarray:
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise InputError(path, f"{name} must be a list of token ids", line=line, key=key)
    arr = np.asarray(value) if len(value) else np.empty(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "biuf":
        raise InputError(path, f"{name} must hold integer token ids", line=line, key=key)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise InputError(path, f"{name} must hold integer token ids", line=line, key=key)
    arr = arr.astype(np.int64)
    if len(arr) and arr.min() < 0:
        raise InputError(path, f"{name} holds a negative token id {int(arr.min())}", line=line, key=key)
    return arr


def _float_list(value, name: str, path: str, line, key) -> np.ndarray:
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise InputError(path, f"{name} must be a list of numbers", line=line, key=key)
    fast = np.asarray(value) if len(value) else np.empty(0, dtype=np.float64)
    if fast.ndim == 1 and fast.dtype.kind in "iuf":         # the common case: plain numbers, no nulls
        out = fast.astype(np.float64)
    else:
        out = _float_list_slow(value, name, path, line, key)
    out[out <= NEG_INF_SENTINEL] = -math.inf
    bad = np.flatnonzero(out > POSITIVE_TOLERANCE)
    if len(bad):
        i = int(bad[0])
        raise InputError(path, f"{name}[{i}] = {out[i]:.6g} is positive; a logprob must be <= 0",
                         line=line, key=key)
    return out


def _float_list_slow(value, name: str, path: str, line, key) -> np.ndarray:
    out = np.empty(len(value), dtype=np.float64)
    for i, v in enumerate(value):
        if v is None:
            out[i] = math.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise InputError(path, f"{name}[{i}] = {v!r} is not a number", line=line, key=key) from None
    return out


def _validate(obj: dict, header: dict, path: str, line, key, index: int) -> RolloutRecord | None:
    for name in ("prompt_token_ids", "response_token_ids", "response_logprobs"):
        if name not in obj:
            raise InputError(path, f"missing field {name}", line=line, key=key)
    prompt = _int_list(obj["prompt_token_ids"], "prompt_token_ids", path, line, key)
    response = _int_list(obj["response_token_ids"], "response_token_ids", path, line, key)
    logprobs = _float_list(obj["response_logprobs"], "response_logprobs", path, line, key)
    if len(logprobs) != len(response):
        raise InputError(path, f"response_logprobs has {len(logprobs)} values for {len(response)} "
                               "response tokens", line=line, key=key)
    if len(response) == 0:
        return None
    if len(prompt) == 0:
        raise InputError(path, "prompt_token_ids is empty: the first response token has no context to "
                               "score it with", line=line, key=key)
    mask = np.ones(len(response), dtype=bool)
    if obj.get("loss_mask") is not None:
        mask = _int_list(obj["loss_mask"], "loss_mask", path, line, key)
        if len(mask) != len(response) or (len(mask) and mask.max() > 1):
            raise InputError(path, f"loss_mask must hold {len(response)} values of 0 or 1",
                             line=line, key=key)
        mask = mask.astype(bool)
    meta = dict(header)
    if obj.get("meta") is not None:
        if not isinstance(obj["meta"], dict):
            raise InputError(path, "meta must be an object", line=line, key=key)
        meta.update({k: v for k, v in obj["meta"].items() if v is not None})
    mode = meta.get("logprobs_mode")
    if mode is not None:
        if mode not in LOGPROB_MODES:
            raise InputError(path, f"meta.logprobs_mode {mode!r} is not raw or processed (logits modes "
                                   "cannot be probed)", line=line, key=key)
        meta["logprobs_mode"] = LOGPROB_MODES[mode]
    step = obj.get("step")
    if step is not None:
        try:
            step = int(step)
        except (TypeError, ValueError):
            raise InputError(path, f"step {step!r} is not an integer", line=line, key=key) from None
    rec_id = obj.get("id")
    rec = RolloutRecord(
        id=str(rec_id) if rec_id is not None else str(index),
        source=path, line=line, key=key, prompt_ids=prompt, response_ids=response,
        logprobs=logprobs, loss_mask=mask, step=step, meta=meta,
        policy_version=_policy_version(obj.get("policy_version"), len(response), path, line, key),
    )
    if obj.get("train_logprobs") is not None:
        rec.train_logprobs = _float_list(obj["train_logprobs"], "train_logprobs", path, line, key)
        if len(rec.train_logprobs) != len(response):
            raise InputError(path, "train_logprobs must have one value per response token",
                             line=line, key=key)
    return rec


def _policy_version(value, n: int, path: str, line, key) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = _int_list(value, "policy_version", path, line, key)
        if len(arr) != n:
            raise InputError(path, f"policy_version has {len(arr)} values for {n} response tokens",
                             line=line, key=key)
        return arr
    try:
        return np.full(n, int(value), dtype=np.int64)
    except (TypeError, ValueError):
        raise InputError(path, f"policy_version {value!r} is not an integer", line=line, key=key) from None


def attach_sidecar(records: list[RolloutRecord], path: str) -> None:
    """Give each record its training logprobs from a sidecar file, by id where both have ids, else by order."""
    rows = read_sidecar(path)
    by_id = {rid: (vals, line) for rid, vals, line in rows if rid is not None}
    use_ids = len(by_id) == len(rows)
    if not use_ids and len(rows) != len(records):
        raise InputError(path, f"sidecar has {len(rows)} rows without ids for {len(records)} records; "
                               "give every row the record's id or write one row per record in order")
    for i, rec in enumerate(records):
        if use_ids:
            if rec.id not in by_id:
                raise InputError(path, f"no sidecar row for record id {rec.id}")
            values, line = by_id[rec.id]
        else:
            _, values, line = rows[i]
        if len(values) != len(rec.response_ids):
            raise InputError(path, f"train_logprobs has {len(values)} values for record {rec.id} with "
                                   f"{len(rec.response_ids)} response tokens", line=line)
        rec.train_logprobs = values
