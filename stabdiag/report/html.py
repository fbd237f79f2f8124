"""The HTML report: one self-contained file to keep as a CI artifact and read offline.

A summary table of the runs, then per run its verdict, what to check first, and a four-layer timeline
drawn as inline SVG from the diagnosis's binned signals (`Diagnosis.trends`): each layer a row, every
finding shaded over its steps in its severity's colour, each layer's onset marked, the first NaN/Inf a
dashed line through all rows and the root layer framed.  A supervised run (SFT, pretraining) gets rows
only for the layers it logged signals for.  No script, no stylesheet or font from elsewhere, no URL.

Every piece of text reaches the page through `_t` (and attribute values through `_a`): the one place
where text becomes markup.
"""

from __future__ import annotations

import html
import math

from .._version import __version__
from ..judge.diagnosis import Diagnosis, Finding, Status, Trend
from ..judge.rules import LAYER_NAMES
from .settings import summary_line

_COLOR = {"pass": "#2ca02c", "warn": "#e08a00", "fail": "#d62728", "unknown": "#7f7f7f", "ignored": "#7f7f7f"}
_LINES = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#2ca02c")
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 6px;border-top:1px solid #ddd;padding-top:16px}
table{border-collapse:collapse;margin:8px 0}th,td{text-align:left;padding:3px 10px 3px 0;vertical-align:top}
th{font-weight:600;border-bottom:1px solid #ccc}code{font:12.5px ui-monospace,Menlo,Consolas,monospace}
.pass{color:#2ca02c}.warn{color:#e08a00}.fail{color:#d62728;font-weight:600}.unknown,.ignored,.dim{color:#777}
.note{color:#555;font-size:13px}.timeline{margin:8px 0;border:1px solid #eee}
ol{margin:4px 0 8px 18px;padding:0}li{margin:2px 0}
"""
_W, _LABEL, _ROW, _GAP = 1000, 190, 70, 8        # svg width, label column, row height, gap between rows


def _t(text) -> str:
    """Text into the page."""
    return html.escape(str(text), quote=False)


def _a(text) -> str:
    """Text into an attribute value."""
    return html.escape(str(text), quote=True)


def _anchor(name: str) -> str:
    return "run-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def _root(diag: Diagnosis) -> str:
    return "" if diag.root_layer is None else f"{diag.root_layer} {LAYER_NAMES[diag.root_layer]}"


def _lead(findings) -> Finding:
    return sorted(findings, key=lambda f: f.severity != "fail")[0]


def _summary(diagnoses: list[Diagnosis]) -> list[str]:
    out = ["<table><tr><th>run</th><th>verdict</th><th>root layer</th><th>onset</th><th>first finding</th></tr>"]
    for d in diagnoses:
        root = d.root_findings()
        onset = "" if d.root_layer is None else d.layers[d.root_layer - 1].onset_step
        first = f"<code>{_t(_lead(root).rule)}</code> {_t(_lead(root).message)}" if root else ""
        out.append(f'<tr><td><a href="#{_a(_anchor(d.run))}">{_t(d.run)}</a></td>'
                   f'<td class="{_a(d.verdict)}">{_t(d.verdict_text())}</td><td>{_t(_root(d))}</td>'
                   f'<td>{_t("" if onset is None else onset)}</td><td>{first}</td></tr>')
    out.append("</table>")
    return out


def timeline_layers(diag: Diagnosis) -> list[int]:
    """The layers that get a row: all four for an RL run (an empty row says what is not logged), the
    layers with signals for a supervised one."""
    if diag.kind == "sft":
        drawn = sorted({t.layer for t in diag.trends})
        if drawn:
            return drawn
    return [1, 2, 3, 4]


def _x(step: float, span: tuple[int, int]) -> float:
    lo, hi = span
    return _LABEL + (_W - _LABEL - 10) * ((step - lo) / max(hi - lo, 1))


def _polyline(trend: Trend, span: tuple[int, int], top: float, color: str) -> list[str]:
    """A signal scaled to its own finite range inside its row; gaps break the line, NaN/Inf bins are ×."""
    values = trend.values
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return []
    lo, hi = min(finite), max(finite)
    n = len(values)
    out, points = [], []
    for i, v in enumerate(values):
        step = span[0] + (span[1] - span[0]) * (i + 0.5) / n
        x = _x(step, span)
        if v is None or not math.isfinite(v):
            if points:
                out.append(points)
                points = []
            if v is not None:
                out.append([("x", x)])
            continue
        y = top + _ROW - 6 - (_ROW - 12) * ((v - lo) / (hi - lo) if hi > lo else 0.5)
        points.append((x, y))
    if points:
        out.append(points)
    svg = []
    for part in out:
        if part and part[0][0] == "x":
            x = part[0][1]
            svg.append(f'<text x="{x:.1f}" y="{top + 14:.1f}" font-size="11" fill="#d62728" '
                       f'text-anchor="middle">×</text>')
        elif len(part) == 1:
            svg.append(f'<circle cx="{part[0][0]:.1f}" cy="{part[0][1]:.1f}" r="1.8" fill="{color}"/>')
        else:
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in part)
            svg.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5">'
                       f'<title>{_t(trend.signal)} ({_t(trend.key)})</title></polyline>')
    return svg


def _legend(trends: list[Trend], y: float, room: int = 30) -> str:
    """The row's signal names in their lines' colours, as many as fit the label column."""
    parts, used = [], 0
    for i, trend in enumerate(trends):
        if used + len(trend.signal) > room and parts:
            parts.append(f'<tspan fill="#777"> +{len(trends) - i}</tspan>')
            break
        parts.append(f'<tspan fill="{_LINES[i % len(_LINES)]}">{_t(trend.signal)} </tspan>')
        used += len(trend.signal) + 1
    return f'<text x="4" y="{y}" font-size="10.5">{"".join(parts)}</text>'


def timeline_svg(diag: Diagnosis) -> str:
    """The run's layers as rows on one step axis, as inline SVG (no external reference)."""
    layers = timeline_layers(diag)
    span = diag.steps or (0, 1)
    height = len(layers) * (_ROW + _GAP) + 24
    out = [f'<svg class="timeline" role="img" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}">',
           f"<title>{_t(diag.run)}: {_t(diag.verdict_text())}</title>"]
    for row, layer in enumerate(layers):
        top = row * (_ROW + _GAP)
        result = diag.layers[layer - 1]
        status = result.status.value
        root = layer == diag.root_layer
        out.append(f'<g class="layer" data-layer="{layer}" data-status="{_a(status)}">')
        out.append(f'<rect x="{_LABEL}" y="{top}" width="{_W - _LABEL - 10}" height="{_ROW}" '
                   f'fill="{"#fff4f2" if root else "#fafafa"}" stroke="{_COLOR[status] if root else "#ddd"}" '
                   f'stroke-width="{2.5 if root else 1}"/>')
        label = f"{layer} {LAYER_NAMES[layer]}"
        out.append(f'<text x="4" y="{top + 20}" font-size="13" font-weight="600">{_t(label)}</text>')
        out.append(f'<text x="4" y="{top + 38}" font-size="12" fill="{_COLOR[status]}">'
                   f'{_t(status + (" (root)" if root else ""))}</text>')
        for f in result.findings:
            x0, x1 = _x(f.start_step, span), _x(f.end_step, span)
            color = _COLOR[f.severity]
            out.append(f'<rect class="finding" data-rule="{_a(f.rule)}" x="{x0:.1f}" y="{top}" '
                       f'width="{max(x1 - x0, 2):.1f}" height="{_ROW}" fill="{color}" '
                       f'fill-opacity="{0.12 if f.downstream else 0.22}"><title>{_t(f.rule)} ({_t(f.severity)}'
                       f'{", downstream" if f.downstream else ""}), steps {f.start_step}-{f.end_step}: '
                       f'{_t(f.message)}</title></rect>')
        trends = [t for t in diag.trends if t.layer == layer]
        for i, trend in enumerate(trends):
            out += _polyline(trend, span, top, _LINES[i % len(_LINES)])
        if trends:
            out.append(_legend(trends, top + 56))
        elif result.status is Status.UNKNOWN:
            text = "not judged: " + result.not_judged_text()
            text = text if len(text) <= 125 else text[:124] + "…"
            out.append(f'<text x="{_LABEL + 8}" y="{top + _ROW / 2 + 4}" font-size="12" fill="#777">'
                       f'{_t(text)}<title>{_t(result.not_judged_text())}</title></text>')
        if result.onset_step is not None:
            x = _x(result.onset_step, span)
            out.append(f'<line class="onset" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + _ROW}" '
                       f'stroke="{_COLOR[status]}" stroke-width="2"/>')
            out.append(f'<text x="{x + 3:.1f}" y="{top + _ROW - 4}" font-size="10.5" '
                       f'fill="{_COLOR[status]}">onset {result.onset_step}</text>')
        out.append("</g>")
    bottom = len(layers) * (_ROW + _GAP)
    if diag.first_nonfinite_step is not None:
        x = _x(diag.first_nonfinite_step, span)
        out.append(f'<line class="nonfinite" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{bottom - _GAP}" '
                   f'stroke="#000" stroke-dasharray="5,4" stroke-width="1.3"/>')
        out.append(f'<text x="{x + 3:.1f}" y="{bottom + 8}" font-size="11">first NaN/Inf: step '
                   f'{diag.first_nonfinite_step}</text>')
    for step in (span[0], span[1]):
        anchor = "start" if step == span[0] else "end"
        out.append(f'<text x="{_x(step, span):.1f}" y="{bottom + 20}" font-size="11" fill="#555" '
                   f'text-anchor="{anchor}">step {step}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _run(diag: Diagnosis) -> list[str]:
    steps = f", steps {diag.steps[0]}-{diag.steps[1]}" if diag.steps else ""
    root = f"root: layer {_root(diag)}" if diag.root_layer else (
        "nothing could be judged" if diag.verdict == "unknown" else "no layer failed")
    extra = "".join(f", {_t(x)}" for x in (diag.framework, "resumed" if diag.resumed else None) if x)
    out = [f'<section id="{_a(_anchor(diag.run))}">',
           f'<h2>{_t(diag.run)}: <span class="{_a(diag.verdict)}">{_t(diag.verdict.upper())}</span>'
           f'{_t(diag.verdict_text()[len(diag.verdict):])}</h2>',      # rule ids keep their case
           f'<p>{_t(root)}{_t(steps)}{extra}</p>']
    root_findings = diag.root_findings()
    if root_findings:
        lead = _lead(root_findings)
        out.append(f"<h3>Check first (layer {diag.root_layer}, {_t(LAYER_NAMES[diag.root_layer])})</h3><ul>")
        out += [f'<li><code class="{_a(f.severity)}">{_t(f.rule)}</code> {_t(f.message)}</li>' for f in root_findings]
        out.append("</ul><ol>")
        out += [f"<li>{_t(step)}</li>" for step in lead.check_first]
        out.append("</ol>")
    out.append(timeline_svg(diag))
    if diag.findings:
        out.append("<table><tr><th>rule</th><th>severity</th><th>onset</th><th>window</th><th>finding</th></tr>")
        for f in diag.findings:
            role = " (downstream)" if f.downstream else ""
            out.append(f'<tr><td><code>{_t(f.rule)}</code></td><td class="{_a(f.severity)}">{_t(f.severity)}'
                       f'{_t(role)}</td><td class="finding-onset">{f.onset}</td><td>{f.start_step}-{f.end_step}</td>'
                       f'<td>{_t(f.message)}</td></tr>')
        out.append("</table>")
    unknown = [r for r in diag.layers if r.status is Status.UNKNOWN]
    if unknown:
        out.append("<p><b>Not judged</b></p><ul>")
        out += [f"<li>layer {r.layer} ({_t(LAYER_NAMES[r.layer])}) {_t(r.unknown_reason)}: "
                f"{_t(r.not_judged_text())}</li>" for r in unknown]
        out.append("</ul>")
    if diag.ignored_findings:
        out.append("<p><b>Ignored by the selection, would have fired</b></p><ul>")
        out += [f"<li><code>{_t(f.rule)}</code> ({_t(f.severity)}) {_t(f.message)}</li>"
                for f in diag.ignored_findings]
        out.append("</ul>")
    out += [f'<p class="note">note: {_t(n)}</p>' for n in diag.notes]
    out.append("</section>")
    return out


def render_one(diag: Diagnosis) -> str:
    """One run as an HTML fragment (a notebook's `_repr_html_`)."""
    return f"<div><style>{_CSS}</style>" + "\n".join(_run(diag)) + "</div>"


def render(diagnoses: list[Diagnosis], **options) -> str:
    counts = {v: sum(d.verdict == v for d in diagnoses) for v in ("pass", "warn", "fail", "unknown")}
    head = (f"{len(diagnoses)} run(s): {counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail"
            + (f", {counts['unknown']} unknown" if counts["unknown"] else ""))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>stabdiag: {_t(head)}</title><style>{_CSS}</style></head><body>",
           f"<h1>stabdiag</h1><p>{_t(head)} <span class=\"dim\">(stabdiag {_t(__version__)})</span></p>"]
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        out.append(f"<p><b>{_t(settings)}</b></p>")
    out += _summary(diagnoses)
    for diag in diagnoses:
        out += _run(diag)
    out.append("</body></html>")
    return "\n".join(out) + "\n"
