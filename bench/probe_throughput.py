"""Throughput and peak memory of the probe's recompute against a naive full-vocab fp32 log_softmax.

The probe runs the decoder body once per token-budget batch and applies the lm head only at response
positions, in fp32 chunks (stabdiag/probe/recompute.py). The baseline is what a quick script does:
`model(...).logits.float().log_softmax(-1)` over the whole sequence, then gather. Both see the same
batches of random token ids (the logprob values do not matter for speed), and both are timed after a
warm-up batch.

Peak memory: on CUDA `torch.cuda.max_memory_allocated` over the timed run; on Linux CPUs the process's
peak resident set (VmHWM, reset through /proc/self/clear_refs before each run) minus the resident set
at the start of the run. MFU (GPU only) counts 2·params FLOPs per context token for the body, 2·V·H per
scored token for the head, and 2·L²·H per layer per sequence for causal attention, against the dense
bf16/fp16 peak of the GPU (989 TFLOP/s for H100/H200, 312 for A100; --peak-tflops to override).

    python bench/probe_throughput.py                                  # tiny model, CPU, CI-sized
    python bench/probe_throughput.py --config vocab152k --seq-len 1024 --seq-len 4096
    python bench/probe_throughput.py --config qwen2-0.5b --dtype bf16 --device cuda \
        --seq-len 4096 --seq-len 8192 --seq-len 16384 --batch-tokens 16384
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIGS = {
    # name: (vocab, hidden, intermediate, layers, heads, kv_heads)
    "tiny": (256, 64, 128, 2, 2, 1),
    "vocab152k": (151936, 128, 256, 2, 4, 1),      # a Qwen-sized vocab on a tiny body: the head dominates
    "qwen2-0.5b": (151936, 896, 4864, 24, 14, 2),  # Qwen2-0.5B shapes, random weights
}


def build_model(name: str, dtype: str, device: str, model_dir: str | None):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()

    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    if model_dir:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype).to(device).eval()
    vocab, hidden, inter, layers, heads, kv = CONFIGS[name]
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=32768,
                      tie_word_embeddings=name == "qwen2-0.5b", initializer_range=0.2 if name == "tiny" else 0.02)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:     # through save/load, as the probe would see it
        Qwen2ForCausalLM(cfg).save_pretrained(tmp)
        return AutoModelForCausalLM.from_pretrained(tmp, dtype=torch_dtype).to(device).eval()


def make_records(vocab: int, seq_len: int, n_seqs: int, prompt_len: int):
    from stabdiag.probe.records import RolloutRecord

    rng = np.random.default_rng(0)
    resp = seq_len - prompt_len
    return [RolloutRecord(f"b{i}", "bench", None, None, rng.integers(3, vocab, prompt_len),
                          rng.integers(3, vocab, resp), np.full(resp, -1.0), np.ones(resp, dtype=bool))
            for i in range(n_seqs)]


def _rss_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak extra memory of a block: CUDA allocator peak, or VmHWM − VmRSS on Linux CPUs (MB)."""

    def __init__(self, device: str):
        self.device = device
        self.mb: float | None = None

    def __enter__(self):
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
        else:
            try:
                Path("/proc/self/clear_refs").write_text("5")      # reset VmHWM to the current RSS
            except OSError:
                pass
            self.start = _rss_kb("VmRSS")
        return self

    def __exit__(self, *exc):
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            self.mb = (torch.cuda.max_memory_allocated() - self.start) / 2**20
        else:
            peak = _rss_kb("VmHWM")
            self.mb = None if peak is None or self.start is None else (peak - self.start) / 1024


def run_probe(model, records, *, args, precision, batch_tokens):
    from stabdiag.probe.recompute import recompute
    from stabdiag.probe.sampling import Sampling

    recompute(model, records, [Sampling()] * len(records), precision=precision, device=args.device,
              chunk_tokens=args.chunk, batch_tokens=batch_tokens, want_entropy=False)


def run_naive(model, records, *, args, batch_tokens):
    import torch

    from stabdiag.probe.recompute import plan_batches
    from stabdiag.probe.sampling import Sampling

    with torch.inference_mode():
        for rows in plan_batches(records, [Sampling()] * len(records), batch_tokens):
            seqs = [np.concatenate([records[i].prompt_ids, records[i].response_ids[:-1]]) for i in rows]
            x = torch.tensor(np.stack(seqs), device=args.device)         # equal lengths: no padding
            logits = model(input_ids=x).logits.float()
            lp = torch.log_softmax(logits, -1)
            tgt = torch.tensor(np.stack([np.concatenate([records[i].prompt_ids[1:], records[i].response_ids])
                                         for i in rows]), device=args.device)
            lp.gather(-1, tgt[..., None])
            del logits, lp


def timed(fn, device: str) -> float:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def model_flops(model, records) -> float:
    cfg = model.config
    emb = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight
    body = sum(p.numel() for p in model.parameters()) - emb - (0 if head is model.get_input_embeddings().weight
                                                                else head.numel())
    ctx = sum(r.n_context for r in records)
    scored = sum(len(r.response_ids) for r in records)
    attn = sum(2 * r.n_context ** 2 * cfg.hidden_size * cfg.num_hidden_layers for r in records)
    return 2 * body * ctx + 2 * head.numel() * scored + attn


def peak_tflops(device: str, override: float | None) -> float | None:
    if override:
        return override
    if not device.startswith("cuda"):
        return None
    import torch

    name = torch.cuda.get_device_name()
    for key, value in (("H200", 989.0), ("H100", 989.0), ("A100", 312.0), ("L40S", 362.0)):
        if key in name:
            return value
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--model", help="a model directory instead of a random --config")
    ap.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--lm-head-fp32", action="store_true")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seq-len", type=int, action="append", help="tokens per sequence (repeatable)")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=None, help="total tokens per measurement (default 4 seqs)")
    ap.add_argument("--batch-tokens", type=int, default=16384, help="0 = one sequence per batch")
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per measurement; the fastest is kept")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--peak-tflops", type=float)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args(argv)

    import torch

    from stabdiag.probe.model import Precision, pick_device

    args.device = pick_device(args.device)
    seq_lens = args.seq_len or [512]
    model = build_model(args.config, args.dtype, args.device, args.model)
    precision = Precision(args.dtype, None, args.lm_head_fp32)
    vocab = model.get_output_embeddings().weight.shape[0]
    peak = peak_tflops(args.device, args.peak_tflops)
    print(f"# {args.model or args.config}: vocab {vocab}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"params, {args.dtype}{' +fp32 head' if args.lm_head_fp32 else ''}, {args.device}, "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch_tokens {args.batch_tokens}, "
          f"chunk {args.chunk}")
    print(f"{'seq_len':>8} {'method':>7} {'tok/s':>10} {'peak MB':>9} {'MFU':>6}")
    results = []
    for seq_len in seq_lens:
        n_seqs = max(1, (args.tokens or 4 * seq_len) // seq_len)
        records = make_records(vocab, seq_len, n_seqs, min(args.prompt_len, seq_len // 2))
        tokens = sum(r.n_context for r in records)
        batch_tokens = args.batch_tokens or seq_len
        runners = {"probe": partial(run_probe, model, args=args, precision=precision, batch_tokens=batch_tokens),
                   "naive": partial(run_naive, model, args=args, batch_tokens=batch_tokens)}
        for name in (["probe"] if args.no_baseline else ["probe", "naive"]):
            runner = runners[name]
            timed(partial(runner, records[:1]), args.device)                    # warm-up
            seconds = float("inf")
            with PeakMemory(args.device) as mem:
                for _ in range(args.repeats):
                    seconds = min(seconds, timed(partial(runner, records), args.device))
            mfu = model_flops(model, records) / seconds / (peak * 1e12) if peak else None
            row = {"seq_len": seq_len, "method": name, "tokens": tokens, "seconds": seconds,
                   "tokens_per_s": tokens / seconds, "peak_mb": mem.mb, "mfu": mfu}
            results.append(row)
            print(f"{seq_len:>8} {name:>7} {row['tokens_per_s']:>10.0f} "
                  f"{'-' if mem.mb is None else f'{mem.mb:.0f}':>9} {'-' if mfu is None else f'{mfu:.1%}':>6}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
