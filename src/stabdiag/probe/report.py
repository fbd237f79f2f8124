"""The probe's report: a versioned JSON document and a ~30-line terminal summary of it (probe.md §6.4).

Both are built from the same `report_dict`, so the terminal never says something the JSON does not.
Non-finite numbers become null in the JSON (NaN is not JSON).  In the terminal summary every text from the
inputs (the model, record ids, problems and hints that quote them) is shown as report._escape shows names:
a record id holding `\n::error::` or ESC[31m is one visible line, not a forged annotation or a colour.
"""

from __future__ import annotations

import math

from ..errors import StabdiagError
from ..report._escape import terminal as _shown
from .analysis import PrecisionResult
from .metrics import ALIASES
from .pipeline import ProbeRun
from .thresholds import Threshold

SCHEMA = "stabdiag.probe/1"
HEADLINE = ("k3_kl", "mult_prob_error", "mean_abs_dprob", "seq_mean_abs_dlogp", "mean_abs_dlogp", "mean_dlogp",
            "max_abs_dlogp", "chi2_token", "is_mean", "is_ess", "frac_ratio_out[0.5,2]", "frac_extreme_tau10",
            "frac_seq_saturated", "frac_exact")


def _clean(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return _clean(value.item())
    return value


def _verdict_dict(r: PrecisionResult) -> dict:
    return {"level": r.verdict.level, "reasons": r.verdict.reasons, "flags": r.verdict.flags}


def _threshold_dict(th: Threshold) -> dict:
    return {"warn": th.warn, "danger": th.danger, "kind": th.kind, "gating": th.gating,
            "source": th.source, "basis": th.basis}


def report_dict(run: ProbeRun, thresholds: tuple[Threshold, ...]) -> dict:
    """The report.json document for a finished run (rank 0)."""
    if run.result is None:
        raise StabdiagError("no result on this rank: only rank 0 writes the report")
    res = run.result
    p = res.primary
    meta_modes = sorted({str(r.meta.get("logprobs_mode")) for r in run.rollouts.records
                         if r.meta.get("logprobs_mode")})
    seq_q = {k: p.metrics.get(k) for k in ("seq_log_ratio_q01", "seq_log_ratio_q50", "seq_log_ratio_q99")}
    doc = {
        "schema": SCHEMA,
        "inputs": {
            "files": run.rollouts.files, "n_records": len(run.rollouts.records),
            "n_empty_skipped": run.rollouts.n_empty_skipped, "engines": sorted(run.rollouts.engines),
            "model": run.info.get("model"), "precisions": [r.label for r in res.results],
            "primary": p.label, "reference": res.reference, "device": run.info.get("device"),
            "world_size": run.info.get("world_size", 1), "logprobs_modes": meta_modes,
            "sampling": run.info.get("sampling", {}),
        },
        "counts": res.counts,
        "metrics": p.metrics,
        "aliases": ALIASES,
        "thresholds": {th.metric: _threshold_dict(th) for th in thresholds},
        "verdict": _verdict_dict(p),
        "buckets": {"by_prob": p.by_prob, "by_entropy": p.by_entropy, "by_position": p.by_position,
                    "by_length": p.by_length},
        "sequences": {"quantiles": seq_q, "worst": p.worst_sequences},
        "worst_tokens": p.worst_tokens,
        "per_dtype": {r.label: {"metrics": r.metrics, "verdict": _verdict_dict(r), "vs_reference": r.vs_reference,
                                "n_nonfinite_train": r.n_nonfinite_train} for r in res.results},
        "hints": res.hints,
        "self_check": run.info.get("self_check", {}),
        "recompute": run.info.get("recompute", {}),
    }
    return _clean(doc)


def _num(value, width: int = 9) -> str:
    """A number right-aligned in `width` columns, always leaving one blank column in front."""
    if value is None:
        text = "-"
    elif isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e6):
        text = f"{int(value)}"
    else:
        text = f"{value:.4g}"
    return " " + text.rjust(width - 1) if width else text


def render_text(doc: dict, *, worst: int = 10) -> str:
    """The terminal summary of a report document."""
    inp, m, verdict = doc["inputs"], doc["metrics"], doc["verdict"]
    lines = [f"stabdiag probe: {inp['n_records']} records, {_num(m.get('n_tokens'), 0)} scored tokens "
             f"({(doc['counts'].get('frac_masked_out') or 0):.1%} masked out); "
             f"{'model ' + _shown(inp['model']) if inp['model'] else 'sidecar logprobs'}; "
             f"primary {_shown(inp['primary'])}" + (f", reference {_shown(inp['reference'])}" if inp["reference"] and
                                             inp["reference"] != inp["primary"] else "")]
    lines.append(_verdict_line(verdict))
    lines.append("")
    lines.append(f"  {'metric':<24}{'value':>10}  {'warn/danger':<22}{'source':<34}alias")
    for name in HEADLINE:
        th = doc["thresholds"].get(name)
        bounds = "" if th is None else f"{_bound(th['warn'])} / {_bound(th['danger'])}"
        alias = (doc["aliases"].get(name) or [""])[0]
        src = "" if th is None else _shown(th["source"])
        lines.append(f"  {name:<24}{_num(m.get(name), 10)}  {bounds:<22}{src:<34}{alias}")
    lines.append("")
    lines.append(f"  {'p_roll bucket':<16}{'share':>7}{'mean d':>10}{'mean|d|':>10}{'k3':>10}{'k3 share':>9}"
                 f"{'|d|/(1-p)':>11}{'out[.5,2]':>10}")
    for row in doc["buckets"]["by_prob"]:
        if not row["n_tokens"]:
            continue
        lines.append(f"  {row['bucket']:<16}{row['share']:>7.1%}{_num(row['mean_dlogp'], 10)}"
                     f"{_num(row['mean_abs_dlogp'], 10)}{_num(row['k3_kl'], 10)}"
                     f"{_pct(row['k3_share'], 9)}{_num(row['mean_abs_dlogp_over_1mp'], 11)}"
                     f"{_pct(row['frac_ratio_out[0.5,2]'], 10)}")
    if len(doc["per_dtype"]) > 1:
        lines.append("")
        lines.append(f"  {'precision':<18}{'verdict':<10}{'mean|d|':>10}{'k3':>10}{'mult':>9}{'vs fp32 k3':>12}")
        for label, entry in doc["per_dtype"].items():
            pm, ref = entry["metrics"], entry["vs_reference"] or {}
            lines.append(f"  {_shown(label):<18}{entry['verdict']['level']:<10}{_num(pm.get('mean_abs_dlogp'), 10)}"
                         f"{_num(pm.get('k3_kl'), 10)}{_num(pm.get('mult_prob_error'), 9)}"
                         f"{_num(ref.get('k3_kl'), 12)}")
    lines.append("")
    lines.append(f"  worst tokens{'':<13}{'pos':>6}{'token':>8}{'lp_roll':>10}{'lp_train':>10}{'d':>9}")
    for tok in doc["worst_tokens"][:worst]:
        lines.append(f"  {_shown(tok['record_id'])[:24]:<25}{tok['pos']:>6}{tok['token_id']:>8}"
                     f"{_num(tok['lp_roll'], 10)}{_num(tok['lp_train'], 10)}{_num(tok['dlogp'], 9)}")
    if doc["hints"]:
        lines.append("")
        lines.append("likely causes:")
        lines.extend(f"  - [{_shown(h['id'])}] {_shown(h['text'])}" for h in doc["hints"])
    return "\n".join(lines) + "\n"


def _verdict_line(verdict: dict) -> str:
    level = verdict["level"]
    if level == "inconclusive":
        problems = "; ".join(_shown(r["problem"]) for r in verdict["reasons"] if r.get("problem"))
        return f"verdict: INCONCLUSIVE: {problems}"
    if not verdict["reasons"]:
        return "verdict: OK (every gating metric within its warn threshold)"
    top = verdict["reasons"][0]
    more = len(verdict["reasons"]) - 1
    return (f"verdict: {level.upper()}: {_shown(top['metric'])} = {_num(top['value'], 0).strip()} "
            f"{_shown(top['threshold'])} {_shown(top['source'])}"
            + (f" (+{more} more gating metric{'s' if more > 1 else ''})" if more else ""))


def _bound(bound) -> str:
    if bound is None:
        return "-"
    if isinstance(bound, (list, tuple)):
        return f"[{bound[0]:.3g},{bound[1]:.3g}]"
    return f"{bound:.3g}"


def _pct(value, width: int) -> str:
    return "-".rjust(width) if value is None else f"{value:.1%}".rjust(width)
