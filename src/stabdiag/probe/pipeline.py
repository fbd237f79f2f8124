"""The probe end to end as a library call: read rollouts, recompute (or take a sidecar), measure.

`run_probe(ProbeOptions(...))` is what `stabdiag probe` calls; tests and notebooks can call it too.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from . import distributed
from .analysis import ProbeResult, analyze
from .hints import likely_causes
from .model import Precision
from .records import Rollouts, attach_sidecar, read_rollouts
from .sampling import Sampling, SamplingOverrides, resolve_sampling
from .thresholds import DEFAULT_THRESHOLDS, Threshold

SIDECAR_LABEL = "sidecar"


@dataclass(slots=True)
class ProbeOptions:
    """Everything `stabdiag probe` takes, as plain values."""

    inputs: list[str]
    model: str | None = None
    precisions: list[Precision] = field(default_factory=lambda: [Precision("bf16")])
    device: str = "auto"
    device_map: str | None = None
    attn: str = "sdpa"
    chunk_tokens: int = 1024
    batch_tokens: int = 16384
    sidecar: str | None = None
    input_format: str = "auto"
    trust_pickle: bool = False
    overrides: SamplingOverrides = field(default_factory=SamplingOverrides)
    max_records: int | None = None
    thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS
    worst: int = 20
    padding_side: str = "right"


@dataclass(slots=True)
class ProbeRun:
    """The inputs, the recomputed logprobs per precision, and what was measured (rank 0 only)."""

    rollouts: Rollouts
    train: dict[str, list[np.ndarray]]
    entropy: dict[str, list[np.ndarray | None] | None]
    result: ProbeResult | None
    info: dict
    rank: int = 0


def run_probe(opts: ProbeOptions) -> ProbeRun:
    """Run the probe; under torchrun every rank recomputes a shard and only rank 0 gets a result."""
    if opts.chunk_tokens < 1 or opts.batch_tokens < 1:
        raise ConfigError("--chunk and --batch-tokens must be positive")
    rollouts = read_rollouts(opts.inputs, input_format=opts.input_format, trust_pickle=opts.trust_pickle,
                             max_records=opts.max_records)
    records = rollouts.records
    if opts.sidecar:
        attach_sidecar(records, opts.sidecar)
    has_sidecar = all(r.train_logprobs is not None for r in records)
    if opts.model is None and not has_sidecar:
        raise ConfigError("nothing to compare the engine logprobs with: pass --model DIR to recompute them, "
                          "or --sidecar FILE (or train_logprobs in every record) with logprobs a trainer "
                          "already computed")
    train: dict[str, list[np.ndarray]] = {}
    entropy: dict[str, list[np.ndarray | None] | None] = {}
    info: dict = {"model": opts.model, "precisions": [], "self_check": {}, "recompute": {}}
    rank = 0
    moe = 0
    if opts.model is not None:
        rank, moe = _recompute_all(opts, rollouts, train, entropy, info)
    if has_sidecar:
        train[SIDECAR_LABEL] = [r.train_logprobs for r in records]
        entropy[SIDECAR_LABEL] = None
        info["precisions"].append(SIDECAR_LABEL)
    if rank != 0:
        return ProbeRun(rollouts, train, entropy, None, info, rank)
    result = analyze(records, train, entropy, thresholds=opts.thresholds, worst=opts.worst)
    result.hints = likely_causes(result, records, moe_experts=moe)
    return ProbeRun(rollouts, train, entropy, result, info, rank)


def _recompute_all(opts: ProbeOptions, rollouts: Rollouts, train: dict, entropy: dict, info: dict):
    from .model import load_model, moe_experts, pick_device, require_torch
    from .recompute import check_vocab, recompute, self_check

    torch = require_torch()
    records = rollouts.records
    samplings: list[Sampling] = [resolve_sampling(r, opts.overrides) for r in records]
    info["sampling"] = _sampling_summary(samplings)
    device = pick_device(opts.device)
    rank, size = distributed.init(device)
    info.update(device=device if not opts.device_map else f"device_map={opts.device_map}", world_size=size)
    mine = distributed.shard(records, rank, size)
    moe = 0
    ok = False
    try:
        for precision in opts.precisions:
            model = load_model(opts.model, precision, device=device, attn=opts.attn, device_map=opts.device_map)
            moe = moe_experts(model)
            check_vocab(records, model)
            info["self_check"][precision.label] = self_check(model, records[0], precision, device=device)
            start = time.perf_counter()
            local = recompute(model, records, samplings, precision=precision, device=device,
                              chunk_tokens=opts.chunk_tokens, batch_tokens=opts.batch_tokens,
                              padding_side=opts.padding_side, indices=mine)
            seconds = time.perf_counter() - start
            n_tokens = sum(records[i].n_context for i in mine)
            info["recompute"][precision.label] = {"seconds": seconds, "context_tokens": n_tokens,
                                                  "tokens_per_s": n_tokens / seconds if seconds else None}
            del model
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            scores = distributed.gather(local, rank, size)
            info["precisions"].append(precision.label)
            if scores is not None:
                train[precision.label] = [scores[i].logprobs for i in range(len(records))]
                entropy[precision.label] = [scores[i].entropy for i in range(len(records))]
        ok = True
    finally:
        distributed.finish(size, wait=ok)
    return rank, moe


def _sampling_summary(samplings: list[Sampling]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in samplings:
        out[s.describe()] = out.get(s.describe(), 0) + 1
    return out
