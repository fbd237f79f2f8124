"""`stabdiag probe`: recompute rollout logprobs with the training-side model and measure the drift.

Mounted by the main CLI as `app.add_typer(probe_app, name="probe")`. The command is the Typer's
callback (with `invoke_without_command=True` and interspersed options) rather than an `@app.command()`,
because a sub-Typer's commands become sub-sub-commands when mounted (`stabdiag probe probe FILE`).
Importing this module does not import torch or transformers; they load only when a model is given.

Exit codes: 0 verdict below --fail-on, 1 verdict at/above --fail-on (default danger), 2 bad input or
usage, or an inconclusive verdict (unless --fail-on never).
"""

# no `from __future__ import annotations`: typer evaluates string annotations at every
# start (see stabdiag/cli.py)
import glob
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperGroup

from ..errors import ConfigError, StabdiagError


class _CommandLikeGroup(TyperGroup):
    """A group without sub-commands whose usage line reads like a command's (no `COMMAND [ARGS]...`)."""

    def collect_usage_pieces(self, ctx):
        pieces = super().collect_usage_pieces(ctx)
        return [p for p in pieces if p != self.subcommand_metavar]


app = typer.Typer(add_completion=False, cls=_CommandLikeGroup)

FAIL_ON = ("never", "warn", "danger")
FORMATS = ("text", "json")
_LEVEL_RANK = {"ok": 0, "warn": 1, "danger": 2}


def _stderr(line: str) -> str:
    """An `error:` line with every value in it escaped (report._escape): a file or record name holding a
    newline or a control sequence stays on the line, visible."""
    from ..report._escape import stderr

    return stderr(line)


def _expand(inputs: list[Path]) -> list[str]:
    paths: list[str] = []
    for item in inputs:
        text = os.fspath(item)
        matches = sorted(glob.glob(text)) if any(c in text for c in "*?[") else [text]
        if not matches:
            raise ConfigError(f"{text}: the pattern matches no file")
        paths.extend(matches)
    return paths


@app.callback(invoke_without_command=True, no_args_is_help=True,
              context_settings={"allow_interspersed_args": True})
def probe(
    inputs: List[Path] = typer.Argument(..., help="Rollout files or globs: normalized JSONL / JSONL.gz / JSON "
                                             "/ Parquet, vLLM RequestOutput dumps, SGLang /generate JSON."),
    model: Optional[str] = typer.Option(None, "--model", help="HF model directory (or hub id) to recompute with."),
    dtype: List[str] = typer.Option(["bf16"], "--dtype", help="Training precision fp32|bf16|fp16; repeat or "
                                    "comma-separate to compare; the first is judged, fp32 is also the reference."),
    autocast: List[str] = typer.Option([], "--autocast", help="Also run fp32 weights under torch.autocast "
                                       "bf16|fp16 (FSDP/verl mixed precision)."),
    lm_head_fp32: bool = typer.Option(False, "--lm-head-fp32", help="Compute the lm head in fp32."),
    device: str = typer.Option("auto", "--device", help="cpu | cuda | auto (cuda when available)."),
    device_map: Optional[str] = typer.Option(None, "--device-map", help="Pass device_map (e.g. auto) to "
                                             "from_pretrained for models that do not fit one GPU."),
    attn: str = typer.Option("sdpa", "--attn", help="Attention implementation: sdpa | eager | flash_attention_2."),
    chunk: int = typer.Option(1024, "--chunk", help="Response tokens per lm-head chunk."),
    batch_tokens: int = typer.Option(16384, "--batch-tokens", help="Padded tokens per forward batch."),
    sidecar: Optional[str] = typer.Option(None, "--sidecar", help="File of train_logprobs per record "
                                          "(by id or in order) that a trainer already computed; no model needed."),
    input_format: str = typer.Option("auto", "--input-format", help="auto | normalized | vllm | sglang."),
    trust_pickle: bool = typer.Option(False, "--trust-pickle", help="Allow .pkl inputs (vLLM RequestOutput lists)."),
    logprobs_mode: Optional[str] = typer.Option(None, "--logprobs-mode", help="raw | processed: overrides "
                                                "meta.logprobs_mode of every record."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="Overrides meta.temperature."),
    top_p: Optional[float] = typer.Option(None, "--top-p", help="Overrides meta.top_p (processed mode)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="Overrides meta.top_k (processed mode)."),
    min_p: Optional[float] = typer.Option(None, "--min-p", help="Overrides meta.min_p (processed mode)."),
    max_records: Optional[int] = typer.Option(None, "--max-records", help="Read at most this many records."),
    worst: int = typer.Option(20, "--worst", help="Worst tokens kept in the report."),
    set_: List[str] = typer.Option([], "--set", help="Threshold override, e.g. k3_kl.danger=0.02 or "
                                   "is_mean.warn=0.8:1.25."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the JSON report here."),
    tokens_out: Optional[Path] = typer.Option(None, "--tokens-out", help="Write per-token Parquet here."),
    series_out: Optional[Path] = typer.Option(None, "--series-out", help="Write the per-step drift CSV here "
                                              "(for `stabdiag check RUN --with drift.csv`)."),
    fail_on: str = typer.Option("danger", "--fail-on", help="never | warn | danger."),
    format_: str = typer.Option("text", "--format", help="Stdout format: text | json."),
) -> None:
    """Recompute the rollout's token logprobs with the training-side model and measure the drift.

    Several GPUs: `torchrun --nproc-per-node N -m stabdiag.probe FILES --model DIR` shards the records
    across processes and rank 0 writes the report. A model that does not fit one GPU: --device-map auto.
    """
    try:
        code = _run(locals())
    except StabdiagError as exc:
        typer.echo(_stderr(f"error: {exc}"), err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


def _run(a: dict) -> int:
    from .model import parse_precisions
    from .pipeline import ProbeOptions, run_probe
    from .sampling import SamplingOverrides
    from .thresholds import apply_overrides

    if a["fail_on"] not in FAIL_ON:
        raise ConfigError(f"--fail-on {a['fail_on']!r}: expected one of {', '.join(FAIL_ON)}")
    if a["format_"] not in FORMATS:
        raise ConfigError(f"--format {a['format_']!r}: expected one of {', '.join(FORMATS)}")
    mode = a["logprobs_mode"]
    if mode is not None and mode not in ("raw", "processed"):
        raise ConfigError(f"--logprobs-mode {mode!r}: expected raw or processed")
    thresholds = apply_overrides(a["set_"])
    opts = ProbeOptions(
        inputs=_expand(a["inputs"]), model=a["model"],
        precisions=parse_precisions(a["dtype"], a["autocast"], a["lm_head_fp32"]),
        device=a["device"], device_map=a["device_map"], attn=a["attn"], chunk_tokens=a["chunk"],
        batch_tokens=a["batch_tokens"], sidecar=a["sidecar"], input_format=a["input_format"],
        trust_pickle=a["trust_pickle"], max_records=a["max_records"], thresholds=thresholds, worst=a["worst"],
        overrides=SamplingOverrides(mode, a["temperature"], a["top_p"], a["top_k"], a["min_p"]),
    )
    if not opts.precisions and opts.model is not None:
        raise ConfigError("--dtype/--autocast name no precision to recompute in")
    run = run_probe(opts)
    if run.result is None:            # a non-zero torchrun rank: rank 0 reports
        return 0
    return _report(run, thresholds, a)


def _report(run, thresholds, a: dict) -> int:
    import json

    from .outputs import write_json, write_series, write_tokens
    from .report import render_text, report_dict

    doc = report_dict(run, thresholds)
    if a["out"] is not None:
        write_json(doc, a["out"])
    if a["tokens_out"] is not None:
        write_tokens(run, a["tokens_out"])
    if a["series_out"] is not None:
        write_series(run, a["series_out"])
    if a["format_"] == "json":
        sys.stdout.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render_text(doc))
    level = doc["verdict"]["level"]
    if a["fail_on"] == "never":
        return 0
    if level == "inconclusive":
        problems = "; ".join(r["problem"] for r in doc["verdict"]["reasons"] if r.get("problem"))
        typer.echo(_stderr(f"error: verdict inconclusive: {problems}"), err=True)
        return 2
    return 1 if _LEVEL_RANK[level] >= _LEVEL_RANK[a["fail_on"]] else 0
