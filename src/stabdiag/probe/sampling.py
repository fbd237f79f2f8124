"""Which distribution the engine's logprobs were taken from, per record (probe.md §4.2–4.4, §5.1).

vLLM V1 returns `raw_logprobs` by default: the model's distribution before temperature and top-k/top-p.
verl, TRL and OpenRLHF ask for `processed_logprobs`: the distribution actually sampled from, after
temperature and truncation. SGLang reports the temperature-scaled distribution. The recompute must
reproduce the same one, or every metric measures the sampling transform instead of the drift; so a
record whose semantics are unknown and matter (temperature ≠ 1 or truncation) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .records import RolloutRecord


@dataclass(frozen=True, slots=True)
class Sampling:
    """The transform the recompute applies to the logits before the log-softmax."""

    temperature: float = 1.0
    top_k: int = 0           # 0 = no top-k
    top_p: float = 1.0       # 1 = no top-p
    min_p: float = 0.0       # 0 = no min-p

    @property
    def key(self) -> tuple[float, int, float, float]:
        return (self.temperature, self.top_k, self.top_p, self.min_p)

    @property
    def is_identity(self) -> bool:
        return self.temperature == 1.0 and self.top_k <= 0 and self.top_p >= 1.0 and self.min_p <= 0.0

    def describe(self) -> str:
        parts = [f"T={self.temperature:g}"]
        if self.top_k > 0:
            parts.append(f"top_k={self.top_k}")
        if self.top_p < 1.0:
            parts.append(f"top_p={self.top_p:g}")
        if self.min_p > 0.0:
            parts.append(f"min_p={self.min_p:g}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class SamplingOverrides:
    """CLI values that replace the records' meta (None = take the record's)."""

    logprobs_mode: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None


def _number(rec: RolloutRecord, meta: dict, name: str, cast):
    value = meta.get(name)
    if value is None:
        return None
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise rec.error(f"meta.{name} {value!r} is not a number") from None


def resolve_sampling(rec: RolloutRecord, overrides: SamplingOverrides) -> Sampling:
    """The Sampling to recompute this record with, from CLI overrides first, then the record's meta."""
    meta = rec.meta
    mode = overrides.logprobs_mode or meta.get("logprobs_mode")
    temperature = overrides.temperature if overrides.temperature is not None else \
        _number(rec, meta, "temperature", float)
    top_p = overrides.top_p if overrides.top_p is not None else _number(rec, meta, "top_p", float)
    top_k = overrides.top_k if overrides.top_k is not None else _number(rec, meta, "top_k", int)
    min_p = overrides.min_p if overrides.min_p is not None else _number(rec, meta, "min_p", float)
    processed = Sampling(
        temperature=1.0 if temperature is None else temperature,
        top_k=0 if top_k is None or top_k < 0 else top_k,
        top_p=1.0 if top_p is None else top_p,
        min_p=0.0 if min_p is None else min_p,
    )
    if processed.temperature <= 0:
        raise rec.error(f"temperature {processed.temperature:g} cannot be recomputed (greedy decoding has "
                        "no sampling distribution); probe sampled rollouts")
    if not 0 < processed.top_p <= 1:
        raise rec.error(f"top_p {processed.top_p:g} is outside (0, 1]")
    if mode == "raw":
        return Sampling()
    if mode == "processed":
        if temperature is None:
            raise rec.error("processed logprobs need the sampling temperature: set meta.temperature or "
                            "pass --temperature")
        return processed
    if temperature is not None and processed.is_identity:
        return processed        # T = 1, no truncation: raw and processed are the same distribution
    raise InputError(rec.source, f"record {rec.id}: it does not say whether its logprobs are raw (before "
                                 "temperature/top-p: vLLM V1's default) or processed (the sampled "
                                 "distribution: verl, TRL, OpenRLHF; SGLang's default); set "
                                 "meta.logprobs_mode and meta.temperature or pass --logprobs-mode",
                     line=rec.line, key=rec.key)
