"""A tiny random causal LM and rollouts sampled from it, built offline (probe.md §5.3).

Used by the tests, the benchmark and the sample-log script: the "engine" is the same model run with a
plain full-vocab forward, so its logprobs are known exactly and any perturbation of them is a drift
whose size the metrics must recover.
"""

from __future__ import annotations

import os

import numpy as np

from .model import require_torch


def build_tiny_model(path: str | os.PathLike[str], *, vocab_size: int = 256, hidden_size: int = 64,
                     layers: int = 2, seed: int = 0, initializer_range: float = 0.2,
                     max_positions: int = 2048) -> str:
    """Save a tiny random Llama (head_dim 32, like vLLM's CPU backend needs) to `path` and return it.

    `initializer_range` 0.2 rather than the default 0.02 keeps the logits far from uniform, so the
    probability buckets are populated down to the tail.
    """
    torch = require_torch()
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=layers, num_attention_heads=hidden_size // 32, num_key_value_heads=1,
                      max_position_embeddings=max_positions, initializer_range=initializer_range,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    model.save_pretrained(os.fspath(path))
    return os.fspath(path)


def sample_rollouts(model, *, n_records: int = 16, prompt_len: tuple[int, int] = (4, 12),
                    response_len: tuple[int, int] = (8, 32), temperature: float = 1.0, seed: int = 0,
                    steps: int = 1, dtype=None) -> list[dict]:
    """Normalized records sampled from `model` at `temperature`, with the processed logprobs (the
    sampled distribution, log_softmax(logits / T)) computed by a plain full-vocab forward.

    `dtype` runs that forward in another precision (e.g. torch.bfloat16) to play a bf16 engine.
    """
    torch = require_torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # one-token forwards of a tiny model: threads only add sync (and stall on
    try:                            # a busy machine)
        return _sample(torch, model, n_records, prompt_len, response_len, temperature, seed, steps, dtype)
    finally:
        torch.set_num_threads(threads)


def _sample(torch, model, n_records, prompt_len, response_len, temperature, seed, steps, dtype) -> list[dict]:
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.get_output_embeddings().weight.shape[0]
    engine = model if dtype is None else _cast_copy(model, dtype)
    records = []
    for i in range(n_records):
        prompt = rng.integers(3, vocab, int(rng.integers(*prompt_len))).tolist()
        length = int(rng.integers(*response_len))
        ids = list(prompt)
        with torch.inference_mode():
            for _ in range(length):
                logits = engine(torch.tensor([ids])).logits[0, -1].float() / temperature
                ids.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)))
            response = ids[len(prompt):]
            full = engine(torch.tensor([ids[:-1]])).logits[0, len(prompt) - 1:].float() / temperature
            lps = torch.log_softmax(full, -1).gather(-1, torch.tensor(response)[:, None]).squeeze(-1)
        records.append({
            "id": f"s{i}", "step": i % steps, "prompt_token_ids": prompt, "response_token_ids": response,
            "response_logprobs": lps.double().tolist(),
            "meta": {"engine": "synthetic", "logprobs_mode": "processed", "temperature": temperature},
        })
    return records


def _cast_copy(model, dtype):
    import copy

    return copy.deepcopy(model).to(dtype)


def make_sample(out_dir: str | os.PathLike[str], *, n_records: int = 48, steps: int = 4, seed: int = 0,
                engine_dtype: str = "bf16") -> tuple[str, str]:
    """Write a tiny model and rollouts whose engine ran it in `engine_dtype` (a known bf16-vs-fp32 drift).

    Returns (model_dir, rollouts_path); probe them with
    `stabdiag probe ROLLOUTS --model MODEL_DIR --dtype fp32 --dtype bf16 --series-out drift.csv`.
    """
    torch = require_torch()
    from .adapters import write_jsonl
    from .model import WEIGHT_DTYPES, Precision, load_model

    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    model_dir = build_tiny_model(os.path.join(out_dir, "model"), seed=seed)
    model = load_model(model_dir, Precision("fp32"), device="cpu")
    rows = sample_rollouts(model, n_records=n_records, steps=steps, seed=seed,
                           dtype=getattr(torch, WEIGHT_DTYPES[engine_dtype]))
    for row in rows:
        row["meta"]["engine_dtype"] = engine_dtype
    path = os.path.join(out_dir, "rollouts.jsonl")
    write_jsonl(rows, path)
    return model_dir, path
