"""The HTML report: one self-contained file to keep as a CI artifact and read offline.

The count line, a table of the runs failures first (fail, warn, unknown, then pass) with a filter that
hides the passes (CSS only: no script), then per run its verdict, what to check first, and a four-layer
timeline: each layer a panel with value axes, every finding's span lightly shaded in its severity's colour,
each layer's onset marked, the evals drawn in layer 1's panel, gaps in logging left open, the first
NaN/Inf a dashed line through all panels and the root layer framed; then the findings (onset and window),
the rules too noisy to tell with their intervals, what was not judged and the notes.  A supervised run
(SFT, pretraining) gets panels only for the layers it logged signals for.  The panels are drawn by
matplotlib where it is installed (the `plot` extra; report.html_panels) and by the built-in SVG here
otherwise.  No script, no stylesheet or font from elsewhere, no URL; every style rule is scoped to
`.stabdiag`, so the notebook view (`_repr_html_`) leaves the notebook's own styles alone.

Every piece of text reaches the page through `_t` (and attribute values through `_a`): the one place
where text becomes markup.
"""

from __future__ import annotations

import html
import math

from .._version import __version__
from ..judge.diagnosis import Diagnosis, Status, Trend
from ..judge.rules import LAYER_NAMES
from . import tree
from ._escape import html as escape_html
from ._escape import visible
from .html_panels import scale_groups, timeline_layers
from .settings import summary_line
from .sparkline import gaps, short

_COLOR = {"pass": "#2ca02c", "warn": "#e08a00", "fail": "#d62728", "unknown": "#7f7f7f", "ignored": "#7f7f7f"}
_LINES = ("#1f77b4", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#2ca02c")
# every rule scoped to .stabdiag: the page wraps itself in it, and so does a notebook's view of a run
_CSS = """
.stabdiag{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#222;padding:0 16px}
.stabdiag h1{font-size:22px;margin:0 0 4px}
.stabdiag h2{font-size:18px;margin:32px 0 6px;border-top:1px solid #ddd;padding-top:16px}
.stabdiag table{border-collapse:collapse;margin:8px 0}
.stabdiag th,.stabdiag td{text-align:left;padding:3px 10px 3px 0;vertical-align:top}
.stabdiag th{font-weight:600;border-bottom:1px solid #ccc}
.stabdiag code{font:12.5px ui-monospace,Menlo,Consolas,monospace}
.stabdiag .pass{color:#2ca02c}.stabdiag .warn{color:#e08a00}.stabdiag .fail{color:#d62728;font-weight:600}
.stabdiag .unknown,.stabdiag .ignored,.stabdiag .dim{color:#777}
.stabdiag .note{color:#555;font-size:13px}
.stabdiag .timeline{margin:8px 0;border:1px solid #eee;max-width:100%;height:auto}
.stabdiag ol{margin:4px 0 8px 18px;padding:0}.stabdiag li{margin:2px 0}
.stabdiag .filter{margin:6px 0}.stabdiag .filter label{margin-right:14px;cursor:pointer}
.stabdiag #sd-needs:checked~table.runs tr.run-pass{display:none}
.stabdiag details.passes>summary{cursor:pointer;margin:18px 0 6px;font-weight:600}
"""
# svg width, left margin (panel label, axis ticks), right margin (a second axis), panel height, the legend
# line under each panel
_W, _LEFT, _RIGHT, _ROW, _LEGEND = 1000, 190, 64, 120, 40
_X0, _X1 = _LEFT, _W - _RIGHT


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


def _summary(diagnoses: list[Diagnosis], fail_on: str, allow_unknown: bool) -> list[str]:
    """The runs failures first; with passes among several runs, a filter (radio buttons and one CSS rule)
    that shows the runs that need reading alone, the default."""
    runs = tree.ordered(diagnoses)
    needing = sum(tree.needs_reading(d) for d in runs)
    out = []
    if len(runs) > 1 and needing < len(runs):
        out.append(f'<div class="filter">show: <input type="radio" name="sd-filter" id="sd-needs" checked>'
                   f'<label for="sd-needs">runs that need reading ({needing})</label>'
                   f'<input type="radio" name="sd-filter" id="sd-all"><label for="sd-all">all runs '
                   f'({len(runs)})</label>')
    out.append('<table class="runs"><tr><th>run</th><th>verdict</th><th>root layer</th><th>onset</th>'
               '<th>first finding</th></tr>')
    for d in runs:
        lead = d.root_lead
        first = f"<code>{_t(tree.lead_said(d))}</code> {_t(lead.message)}" if lead is not None else ""
        out.append(f'<tr class="run-{_a(d.verdict)}"><td><a href="#{_a(_anchor(d.run))}">{_t(d.run)}</a></td>'
                   f'<td class="{_a(d.verdict)}">{_t(d.verdict_text())}</td><td>{_t(_root(d))}</td>'
                   f'<td>{_t("" if d.root_onset is None else d.root_onset)}</td><td>{first}</td></tr>')
    out.append("</table>")
    if len(out) > 2 and out[0].startswith('<div class="filter">'):
        out.append("</div>")
    return out


def _x(step: float, span: tuple[int, int]) -> float:
    lo, hi = span
    return _X0 + (_X1 - _X0) * ((step - lo) / max(hi - lo, 1))


def _range(trend: Trend) -> tuple[float, float] | None:
    finite = [v for v in trend.values if v is not None and math.isfinite(v)]
    return (min(finite), max(finite)) if finite else None


def _y(value: float, lo: float, hi: float, top: float) -> float:
    return top + _ROW - 8 - (_ROW - 16) * ((value - lo) / (hi - lo) if hi > lo else 0.5)


def _group_range(group: list[Trend]) -> tuple[float, float]:
    bounds = [b for t in group if (b := _range(t)) is not None]
    return min(b[0] for b in bounds), max(b[1] for b in bounds)


def _polyline(trend: Trend, span: tuple[int, int], top: float, color: str,
              bounds: tuple[float, float]) -> list[str]:
    """A signal on its scale group's axis inside its panel; holes longer than its usual spacing break the
    line (a run that logged nothing for 1,000 steps is not drawn across), NaN/Inf bins are ×, a lone
    point a dot."""
    values = trend.values
    lo, hi = bounds
    n = len(values)
    breaks = {a for a, _ in gaps(list(values))}
    parts: list[list[tuple[float, float]]] = [[]]
    svg = []
    for i, v in enumerate(values):
        if v is None:
            continue
        x = _x(span[0] + (span[1] - span[0]) * (i + 0.5) / n, span)
        if not math.isfinite(v):
            svg.append(f'<text x="{x:.1f}" y="{top + 14:.1f}" font-size="11" fill="#d62728" '
                       f'text-anchor="middle">×</text>')
            parts.append([])
            continue
        parts[-1].append((x, _y(v, lo, hi, top)))
        if i in breaks:
            parts.append([])
    for part in parts:
        if len(part) == 1:
            svg.append(f'<circle cx="{part[0][0]:.1f}" cy="{part[0][1]:.1f}" r="2" fill="{color}"/>')
        elif part:
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in part)
            svg.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5">'
                       f'<title>{_t(trend.signal)} ({_t(trend.key)})</title></polyline>')
    return svg


def _axis(bounds: tuple[float, float], top: float, right: bool, color: str) -> list[str]:
    """Three value ticks of a scale, on the panel's left or right edge, in its first signal's colour."""
    lo, hi = bounds
    x = _X1 if right else _X0
    out = [f'<line class="axis" x1="{x}" y1="{top}" x2="{x}" y2="{top + _ROW}" stroke="{color}" stroke-width="1"/>']
    for value in ((lo, (lo + hi) / 2, hi) if hi > lo else (lo,)):
        y = _y(value, lo, hi, top)
        tick, anchor, shift = (6, "start", 8) if right else (-6, "end", -8)
        out.append(f'<line x1="{x}" y1="{y:.1f}" x2="{x + tick}" y2="{y:.1f}" stroke="{color}"/>')
        out.append(f'<text class="tick" x="{x + shift}" y="{y + 4:.1f}" font-size="10.5" fill="{color}" '
                   f'text-anchor="{anchor}">{_t(short(value))}</text>')
    return out


def _legend(drawn: list[tuple[Trend, str, str]], y: float) -> str:
    """Every signal of the panel in its line's colour, with its range and the axis that reads it, on up
    to two lines under the panel; what does not fit is counted ("+2 more", their names in the tooltip)."""
    room = int((_X1 - _X0) / 6.2)           # characters a line of 10.5 px text holds
    lines: list[list[str]] = [[]]
    used, left = 0, []
    for trend, color, where in drawn:
        bounds = _range(trend)
        text = f"{trend.signal}{'' if bounds is None else f' {short(bounds[0])}..{short(bounds[1])}'}{where}"
        if used + len(text) + 3 > room and lines[-1]:
            if len(lines) == 2:
                left.append(trend.signal)
                continue
            lines.append([])
            used = 0
        lines[-1].append(f'<tspan fill="{color}">{_t(text)}   </tspan>')
        used += len(text) + 3
    if left:
        lines[-1].append(f'<tspan fill="#777">+{len(left)} more<title>{_t(", ".join(left))}</title></tspan>')
    return "".join(f'<text x="{_X0}" y="{y + 13 * i}" font-size="10.5">{"".join(parts)}</text>'
                   for i, parts in enumerate(lines))


def timeline_svg(diag: Diagnosis) -> str:
    """The run's layers as panels on one step axis, as inline SVG (no external reference)."""
    layers = timeline_layers(diag)
    span = diag.steps or (0, 1)
    pitch = _ROW + _LEGEND
    height = len(layers) * pitch + 30
    out = [f'<svg class="timeline" role="img" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}">',
           f"<title>{_t(diag.run)}: {_t(diag.verdict_text())}</title>"]
    for row, layer in enumerate(layers):
        top = row * pitch
        result = diag.layers[layer - 1]
        status = result.status.value
        root = layer == diag.root_layer
        out.append(f'<g class="layer" data-layer="{layer}" data-status="{_a(status)}">')
        out.append(f'<rect x="{_X0}" y="{top}" width="{_X1 - _X0}" height="{_ROW}" '
                   f'fill="{"#fff8f6" if root else "#fcfcfc"}" stroke="{_COLOR[status] if root else "#ddd"}" '
                   f'stroke-width="{2.5 if root else 1}"/>')
        out.append(f'<text x="4" y="{top + 18}" font-size="13" font-weight="600">{_t(f"{layer} {LAYER_NAMES[layer]}")}'
                   f'</text>')
        out.append(f'<text x="4" y="{top + 36}" font-size="12" fill="{_COLOR[status]}">'
                   f'{_t(status + (" (root)" if root else ""))}</text>')
        for f in result.findings:        # light: the curves stay readable under the span
            x0, x1 = _x(f.start_step, span), _x(f.end_step, span)
            color = _COLOR[f.severity]
            out.append(f'<rect class="finding" data-rule="{_a(f.rule)}" x="{x0:.1f}" y="{top}" '
                       f'width="{max(x1 - x0, 2):.1f}" height="{_ROW}" fill="{color}" '
                       f'fill-opacity="{0.05 if f.downstream else 0.09}"><title>{_t(f.rule)} ({_t(f.severity)}'
                       f'{", downstream" if f.downstream else ""}), onset step {f.onset}, window '
                       f'{f.start_step}-{f.end_step}: {_t(f.message)}</title></rect>')
        trends = [t for t in diag.trends if t.layer == layer]
        drawn: list[tuple[Trend, str, str]] = []
        for g, group in enumerate(scale_groups(trends)):   # one axis per scale: none squashes another flat
            bounds = _group_range(group)
            where = " (left axis)" if g == 0 else " (right axis)" if g == 1 else " (own scale)"
            for trend in group:
                color = _LINES[len(drawn) % len(_LINES)]
                if g < 2 and trend is group[0]:
                    out += _axis(bounds, top, right=g == 1, color=color)
                out += _polyline(trend, span, top, color, bounds if g < 2 else _range(trend))
                drawn.append((trend, color, where))
        if drawn:
            out.append(_legend(drawn, top + _ROW + 15))
        elif result.status is Status.UNKNOWN:
            text = "not judged: " + tree.lacks(result, diag)
            text = text if len(text) <= 110 else text[:109] + "…"
            out.append(f'<text x="{_X0 + 8}" y="{top + _ROW / 2 + 4}" font-size="12" fill="#777">'
                       f'{_t(text)}<title>{_t(tree.lacks(result, diag))}</title></text>')
        if result.onset_step is not None:
            x = _x(result.onset_step, span)
            out.append(f'<line class="onset" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + _ROW}" '
                       f'stroke="{_COLOR[status]}" stroke-width="2"/>')
            out.append(f'<text x="{x + 3:.1f}" y="{top + _ROW - 4}" font-size="10.5" '
                       f'fill="{_COLOR[status]}">onset {result.onset_step}</text>')
        out.append("</g>")
    bottom = len(layers) * pitch
    if diag.first_nonfinite_step is not None:
        x = _x(diag.first_nonfinite_step, span)
        out.append(f'<line class="nonfinite" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{bottom - _LEGEND}" '
                   f'stroke="#000" stroke-dasharray="5,4" stroke-width="1.3"/>')
        out.append(f'<text x="{x + 3:.1f}" y="12" font-size="11">first NaN/Inf: step '
                   f'{diag.first_nonfinite_step}</text>')
    for k in range(5):                  # the step axis
        step = span[0] + (span[1] - span[0]) * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(f'<text x="{_x(step, span):.1f}" y="{bottom + 14}" font-size="11" fill="#555" '
                   f'text-anchor="{anchor}">{"step " if k == 0 else ""}{round(step)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline(diag: Diagnosis, panels: str = "auto") -> str:
    """The run's timeline: matplotlib's panels where it is installed and `panels` is "auto" or
    "matplotlib", else the built-in SVG."""
    if panels != "svg":
        from . import html_panels

        drawn = html_panels.timeline(diag, required=panels == "matplotlib")
        if drawn is not None:
            return drawn
    return timeline_svg(diag)


def _run(diag: Diagnosis, panels: str = "auto") -> list[str]:
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
        lead = diag.root_lead
        out.append(f"<h3>Check first (layer {diag.root_layer}, {_t(LAYER_NAMES[diag.root_layer])})</h3><ul>")
        out += [f'<li><code class="{_a(f.severity)}">{_t(f.rule)}</code> {_t(f.message)}</li>' for f in root_findings]
        out.append("</ul><ol>")
        out += [f"<li>{_t(step)}</li>" for step in lead.check_first]
        out.append("</ol>")
        out += _samples(diag)
    out.append(timeline(diag, panels))
    if diag.findings:
        out.append("<table><tr><th>rule</th><th>severity</th><th>onset</th><th>window</th><th>finding</th></tr>")
        for f in diag.findings:
            role = " (downstream)" if f.downstream else ""
            out.append(f'<tr><td><code>{_t(f.rule)}</code></td><td class="{_a(f.severity)}">{_t(f.severity)}'
                       f'{_t(role)}</td><td class="finding-onset">{f.onset}</td><td>{f.start_step}-{f.end_step}</td>'
                       f'<td>{_t(f.message)}</td></tr>')
        out.append("</table>")
    if diag.undecided:                  # a pass beside a change nobody could confirm: each with its interval
        out.append("<p><b>Too noisy to tell</b> - changes these rules could neither confirm nor rule out "
                   "(more steps, larger groups or denser evals decide them)</p><ul>")
        out += [f'<li class="undecided"><code>{_t(u.rule)}</code> {_t(u.reason)}</li>' for u in diag.undecided]
        out.append("</ul>")
    unknown = [r for r in diag.layers if r.status is Status.UNKNOWN]
    if unknown:
        out.append("<p><b>Not judged</b></p><ul>")
        out += [f"<li>layer {r.layer} ({_t(LAYER_NAMES[r.layer])}) {_t(r.unknown_reason)}: "
                f"{_t(tree.lacks(r, diag))}</li>" for r in unknown]
        out.append("</ul>")
    if diag.ignored_findings:
        out.append("<p><b>Ignored by the selection, would have fired</b></p><ul>")
        out += [f"<li><code>{_t(f.rule)}</code> ({_t(f.severity)}) {_t(f.message)}</li>"
                for f in diag.ignored_findings]
        out.append("</ul>")
    out += [f'<p class="note">note: {_t(n)}</p>' for n in diag.notes]
    out.append("</section>")
    return out


def _samples(diag: Diagnosis) -> list[str]:
    """The samples' evidence, the example answers collapsed; sample text through report._escape.html."""
    evidence = diag.samples
    if evidence is None:
        return []
    out = [f"<p><b>Samples</b>: {escape_html(evidence.headline())}</p>"]
    if evidence.named:
        out.append("<ul>" + "".join(f"<li>{escape_html(e.describe())}</li>" for e in evidence.named) + "</ul>")
    if evidence.examples:
        out.append("<details><summary>Three samples to read</summary><ul>")
        out += [f"<li>{_t(x.role)}, step {x.step}: <code>{escape_html(x.text)}</code></li>" for x in evidence.examples]
        out.append("</ul></details>")
    return out


def render_one(diag: Diagnosis, panels: str = "auto") -> str:
    """One run as an HTML fragment (a notebook's `_repr_html_`), its styles scoped to it."""
    return f'<div class="stabdiag"><style>{_CSS}</style>' + "\n".join(_run(diag, panels)) + "</div>"


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False, panels: str = "auto",
           **options) -> str:
    """The page: the count line, the runs failures first, a section per run (the passes of a tree folded
    under one line, open to read)."""
    head = tree.count_line(diagnoses, fail_on, allow_unknown=allow_unknown)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>stabdiag: {_t(head)}</title><style>{_CSS}</style></head><body>", '<div class="stabdiag">',
           f"<h1>stabdiag</h1><p><b>{_t(head)}</b> <span class=\"dim\">(stabdiag {_t(__version__)})</span></p>"]
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        out.append(f"<p><b>{_t(settings)}</b></p>")
    out += _summary(diagnoses, fail_on, allow_unknown)
    runs = tree.ordered(diagnoses)
    passes = [d for d in runs if not tree.needs_reading(d)] if len(runs) > 1 else []
    for diag in runs:
        if diag not in passes:
            out += _run(diag, panels)
    if passes:
        out.append(f'<details class="passes"><summary>{len(passes)} pass</summary>')
        for diag in passes:
            out += _run(diag, "svg")     # folded, many: the built-in SVG, fast and small
        out.append("</details>")
    not_read = options.get("not_read") or ()
    if not_read:
        out.append(f"<h2>Not read ({len(not_read)})</h2><ul>")
        out += [f"<li><code>{_t(visible(path))}</code>: {_t(visible(why))}</li>" for path, why in not_read]
        out.append("</ul>")
    out.append(f"<p><b>{_t(head)}</b></p></div></body></html>")
    return "\n".join(out) + "\n"
