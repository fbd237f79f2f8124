"""Recompute each sampled token's logprob with the training-side model (probe.md §5.1–5.2).

The decoder body runs once per batch; the lm head is then applied only at the response positions, in
chunks of `chunk_tokens` rows upcast to fp32, so memory stays at chunk × vocab × 4 bytes however long
the responses or large the vocabulary (a full fp32 logits tensor for 32k tokens of a 152k vocab is
~20 GB). Batches are filled up to a padded-token budget, longest first, and every batch carries
explicit `position_ids`: HF decoders otherwise derive positions from the cache, so left padding would
shift RoPE and silently change every logprob.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..errors import StabdiagError
from .model import Precision, logit_postprocess, require_torch, vocab_size
from .records import RolloutRecord
from .sampling import Sampling

TRAIN_LOGPROB_FLOOR = -100.0     # a sampled token outside the recomputed top-k/top-p set gets this, not −inf


class SelfCheckError(StabdiagError):
    """The chunked lm-head path disagrees with the model's own forward: the logits are post-processed
    in a way the probe does not reproduce, so every recomputed logprob would be wrong."""


@dataclass(frozen=True, slots=True)
class TokenScores:
    """Recomputed logprob and entropy (of the recomputed distribution) for each response token."""

    logprobs: np.ndarray          # float64
    entropy: np.ndarray | None    # float64


def check_vocab(records: list[RolloutRecord], model) -> None:
    """Refuse records whose ids the model cannot embed (wrong model, or ids from another tokenizer)."""
    size = vocab_size(model)
    for rec in records:
        top = max(int(rec.prompt_ids.max()), int(rec.response_ids.max()))
        if top >= size:
            raise rec.error(f"token id {top} is not below the model's vocab size {size}")


def plan_batches(records: list[RolloutRecord], samplings: list[Sampling], batch_tokens: int,
                 order: list[int] | None = None) -> list[list[int]]:
    """Record indices grouped into batches sharing one Sampling, each at most `batch_tokens` padded
    tokens (a record longer than the budget is a batch of its own), longest records first."""
    indices = list(range(len(records))) if order is None else list(order)
    indices.sort(key=lambda i: (samplings[i].key, -records[i].n_context))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in indices:
        if current and (samplings[current[0]] != samplings[i]
                        or (len(current) + 1) * records[current[0]].n_context > batch_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def decoder_of(model):
    """The decoder body (everything before lm_head), so the head can be applied to response positions only."""
    get = getattr(model, "get_decoder", None)
    body = get() if get is not None else None
    if body is None or body is model:
        raise SelfCheckError(f"{type(model).__name__} exposes no decoder body (get_decoder()); the probe "
                             "cannot apply its lm head in chunks")
    return body


def _autocast(torch, device: str, precision: Precision):
    if precision.autocast is None:
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision.autocast == "bf16" else torch.float16
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def _hidden_states(model, records: list[RolloutRecord], rows: list[int], *, device: str,
                   precision: Precision, padding_side: str):
    """Last hidden states at the positions that predict each response token, flattened to [N, H]."""
    torch = require_torch()
    seqs = [np.concatenate([records[i].prompt_ids, records[i].response_ids[:-1]]) for i in rows]
    width = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), width), dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    take_row, take_col = [], []
    for r, (i, seq) in enumerate(zip(rows, seqs)):
        offset = 0 if padding_side == "right" else width - len(seq)
        ids[r, offset:offset + len(seq)] = seq
        mask[r, offset:offset + len(seq)] = 1
        start = offset + len(records[i].prompt_ids) - 1
        take_row.append(np.full(len(records[i].response_ids), r))
        take_col.append(np.arange(start, start + len(records[i].response_ids)))
    input_ids = torch.from_numpy(ids).to(device)
    attention_mask = torch.from_numpy(mask).to(device)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with _autocast(torch, device, precision):
        out = decoder_of(model)(input_ids=input_ids, attention_mask=attention_mask,
                                position_ids=position_ids, use_cache=False)
    hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
    row_t = torch.from_numpy(np.concatenate(take_row)).to(hidden.device)
    col_t = torch.from_numpy(np.concatenate(take_col)).to(hidden.device)
    return hidden[row_t, col_t]


class LogprobHead:
    """The lm head applied in chunks, in fp32 after the matmul, with the sampling transform."""

    def __init__(self, model, precision: Precision, *, chunk_tokens: int = 1024):
        torch = require_torch()
        head = model.get_output_embeddings()
        self.torch = torch
        self.precision = precision
        self.chunk_tokens = max(1, int(chunk_tokens))
        self.post = logit_postprocess(model)
        weight, bias = head.weight, getattr(head, "bias", None)
        if precision.lm_head_fp32:
            weight, bias = weight.float(), (None if bias is None else bias.float())
        elif precision.autocast is not None:
            half = torch.bfloat16 if precision.autocast == "bf16" else torch.float16
            weight, bias = weight.to(half), (None if bias is None else bias.to(half))
        self.weight, self.bias = weight, bias

    def logits(self, hidden):
        """fp32 logits for rows of hidden states, with the model's own post-processing."""
        torch = self.torch
        h = hidden.to(self.weight.device, self.weight.dtype)
        logits = torch.nn.functional.linear(h, self.weight, self.bias).float()
        for kind, value in self.post:
            logits = logits * value if kind == "scale" else torch.tanh(logits / value) * value
        return logits

    def __call__(self, hidden, targets, sampling: Sampling, want_entropy: bool = True):
        """(logprobs, entropy) as float64 numpy arrays for rows of hidden states and their targets."""
        torch = self.torch
        lps, ents = [], []
        targets = targets.to(self.weight.device)
        with torch.inference_mode():
            for s in range(0, hidden.shape[0], self.chunk_tokens):
                lp, ent = self._chunk(hidden[s:s + self.chunk_tokens], targets[s:s + self.chunk_tokens],
                                      sampling, want_entropy)
                lps.append(lp)
                ents.append(ent)
        lp_all = torch.cat(lps).numpy()
        return lp_all, (torch.cat(ents).numpy() if want_entropy else None)

    def _chunk(self, hidden, targets, sampling: Sampling, want_entropy: bool):
        torch = self.torch
        logits = transform_logits(torch, self.logits(hidden), sampling)
        lse = torch.logsumexp(logits, dim=-1)
        lp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
        ent = None
        if want_entropy:
            probs = torch.softmax(logits, dim=-1)
            finite = torch.where(torch.isfinite(logits), logits, torch.zeros_like(logits))
            ent = (lse - (probs * finite).sum(-1)).double().cpu()
        return lp.clamp(min=TRAIN_LOGPROB_FLOOR).double().cpu(), ent


def transform_logits(torch, logits, sampling: Sampling):
    """Temperature, then top-k, top-p and min-p masking, in the order vLLM's sampler applies them."""
    if sampling.temperature != 1.0:
        logits = logits / sampling.temperature
    neg_inf = torch.tensor(float("-inf"), device=logits.device)
    if sampling.top_k > 0 and sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = torch.where(logits < kth, neg_inf, logits)
    if sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=False)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cum <= 1.0 - sampling.top_p
        drop[..., -1] = False                          # always keep the most likely token
        drop = drop.scatter(-1, order, drop)
        logits = torch.where(drop, neg_inf, logits)
    if sampling.min_p > 0.0:
        probs = torch.softmax(logits, dim=-1)
        keep = probs >= sampling.min_p * probs.max(dim=-1, keepdim=True).values
        logits = torch.where(keep, logits, neg_inf)
    return logits


def recompute(model, records: list[RolloutRecord], samplings: list[Sampling], *, precision: Precision,
              device: str, chunk_tokens: int = 1024, batch_tokens: int = 16384, want_entropy: bool = True,
              padding_side: str = "right", indices: list[int] | None = None) -> dict[int, TokenScores]:
    """Recomputed scores for the records at `indices` (default: all), keyed by record index."""
    torch = require_torch()
    head = LogprobHead(model, precision, chunk_tokens=chunk_tokens)
    out: dict[int, TokenScores] = {}
    with torch.inference_mode():
        for rows in plan_batches(records, samplings, batch_tokens, indices):
            hidden = _hidden_states(model, records, rows, device=device, precision=precision,
                                    padding_side=padding_side)
            targets = torch.from_numpy(np.concatenate([records[i].response_ids for i in rows]))
            lp, ent = head(hidden, targets, samplings[rows[0]], want_entropy)
            del hidden
            start = 0
            for i in rows:
                n = len(records[i].response_ids)
                out[i] = TokenScores(lp[start:start + n], None if ent is None else ent[start:start + n])
                start += n
    return out


def self_check(model, record: RolloutRecord, precision: Precision, *, device: str,
               max_tokens: int = 32) -> float:
    """Compare the chunked path with `model(...).logits` on a short sequence; raise if they disagree.

    The comparison runs the head in the model's own dtype (what forward() does), so it checks that
    the body/head split and the logit post-processing are right, not the precision. Tolerance: 1e-5
    in fp32 (probe.md §5.1), 2e-2 nats when the forward runs in 16-bit.
    """
    torch = require_torch()
    prompt = record.prompt_ids[-max_tokens:]
    response = record.response_ids[:max_tokens]
    probe_rec = RolloutRecord(id="self-check", source=record.source, line=record.line, key=record.key,
                              prompt_ids=prompt, response_ids=response, logprobs=np.zeros(len(response)),
                              loss_mask=np.ones(len(response), dtype=bool))
    plain = Precision(precision.weights, precision.autocast, False)
    ours = recompute(model, [probe_rec], [Sampling()], precision=plain, device=device,
                     want_entropy=False)[0].logprobs
    x = torch.from_numpy(np.concatenate([prompt, response[:-1]])[None]).to(device)
    with torch.inference_mode(), _autocast(torch, device, precision):
        logits = model(input_ids=x).logits[0, len(prompt) - 1:].float()
    ref = torch.log_softmax(logits, -1).gather(-1, torch.from_numpy(response[:, None]).to(logits.device))
    ref = ref.squeeze(-1).double().cpu().numpy()
    err = float(np.max(np.abs(ours - ref)))
    tol = 1e-5 if precision.is_fp32 else 2e-2
    if not err <= tol:
        raise SelfCheckError(f"self-check failed: the chunked lm-head logprobs differ from the model's "
                             f"forward by {err:.3g} nats (tolerance {tol:g}); this model post-processes "
                             "its logits in a way the probe does not reproduce")
    return err
