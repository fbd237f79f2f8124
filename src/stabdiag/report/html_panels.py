"""The HTML report's timeline drawn by matplotlib (the `plot` extra), when it is installed: one panel per
layer on a shared step axis, value axes (a second one on the right for the panel's twin signal, as
`stabdiag plot` draws them), every finding's span lightly shaded, each layer's onset a line, the first
NaN/Inf a dashed line through all panels, the root layer's panel framed, gaps in logging left open.

It draws a Diagnosis's binned signals (`Diagnosis.trends`), so the page needs no run file.  The SVG that
matplotlib writes is made fit to sit inline in a page with no URL and no global style: no XML prolog,
namespace or DTD, no <style> (it would restyle the host page), no clip paths (`url(#...)`), ids only
where a <use> needs them; the findings, onsets and the NaN line carry the classes the built-in SVG's do.
"""

from __future__ import annotations

import html
import io
import math
import re

import numpy as np

from ..judge.diagnosis import Diagnosis
from ..judge.rules import LAYER_NAMES
from .sparkline import gaps

_SEVERITY = {"fail": "#d62728", "warn": "#ff9f1a"}
_STATUS = {"pass": "#2ca02c", "warn": "#e08a00", "fail": "#d62728", "unknown": "#7f7f7f", "ignored": "#7f7f7f"}
_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22")


def timeline_layers(diag: Diagnosis) -> list[int]:
    """The layers that get a panel: all four for an RL run (an empty panel says what is not logged); for a
    supervised one the layers with signals, with findings, and the root layer (a job that died is a
    layer-4 finding with no layer-4 signal)."""
    if diag.kind == "sft":
        drawn = {t.layer for t in diag.trends}
        if drawn:
            drawn |= {f.layer for f in diag.findings} | ({diag.root_layer} if diag.root_layer else set())
            return sorted(drawn)
    return [1, 2, 3, 4]


def scale_groups(trends) -> list[list]:
    """The signals of a panel grouped by scale, so that one axis never squashes another's curve flat (an
    eval of 0.4 beside a response length of 4,000; an lr of 1e-6 beside a grad norm of 5): a signal joins
    the first group whose typical magnitude is within 10x of its own, else starts a group; signals with no
    finite value are left out."""
    groups: list[tuple[float, list]] = []
    for trend in trends:
        finite = [abs(v) for v in trend.values if v is not None and math.isfinite(v)]
        if not finite:
            continue
        size = max(max(finite), 1e-300)
        for magnitude, members in groups:
            if max(size, magnitude) / max(min(size, magnitude), 1e-300) <= 10:
                members.append(trend)
                break
        else:
            groups.append((size, [trend]))
    return [members for _, members in groups]


def _matplotlib():
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return matplotlib, Figure


def _curve(trend, span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Bin centres and values, with NaN where the line must break: an empty bin inside a hole longer than
    the signal's usual spacing, and a non-finite bin; the short holes of a sparse signal are skipped."""
    n = len(trend.values)
    breaks = {a for a, _ in gaps(list(trend.values))}
    xs, ys = [], []
    for i, v in enumerate(trend.values):
        if v is None:
            continue
        xs.append(span[0] + (span[1] - span[0]) * (i + 0.5) / n)
        ys.append(v if math.isfinite(v) else math.nan)
        if i in breaks:
            xs.append(xs[-1])
            ys.append(math.nan)
    return np.array(xs, dtype=float), np.array(ys, dtype=float)


def _panel(ax, diag: Diagnosis, layer: int, span: tuple[int, int]) -> None:
    result = diag.layers[layer - 1]
    status = result.status.value
    root = layer == diag.root_layer
    ax.set_gid(f"sdlayer-{layer}-{status}")
    handles = []
    color_index = 0
    for g, group in enumerate(scale_groups([t for t in diag.trends if t.layer == layer])):
        target = ax
        if g:                                    # each further scale on an axis of its own, on the right
            target = ax.twinx()
            if g > 1:
                target.spines["right"].set_position(("axes", 1 + 0.07 * (g - 1)))
        side = "" if g == 0 else " (right)" if g == 1 else f" (right {g})"
        for trend in group:
            x, y = _curve(trend, span)
            color = _COLORS[color_index % len(_COLORS)]
            color_index += 1
            (line,) = target.plot(x, y, "-", color=color, lw=1.3, marker="o" if len(x) < 40 else None, ms=2.5,
                                  label=trend.signal + side)
            handles.append(line)
        target.tick_params(axis="y", labelsize=7, colors=_COLORS[(color_index - len(group)) % len(_COLORS)]
                           if g else "#333")
    for f in result.findings:
        lo, hi = float(f.start_step), float(f.end_step)
        if hi - lo < (span[1] - span[0]) * 0.004:
            pad = max(0.5, (span[1] - span[0]) * 0.002)
            lo, hi = lo - pad, hi + pad
        patch = ax.axvspan(lo, hi, color=_SEVERITY[f.severity], alpha=0.05 if f.downstream else 0.09, lw=0, zorder=0)
        patch.set_gid(f"sdfinding-{f.rule}")
    if result.onset_step is not None:
        line = ax.axvline(result.onset_step, color=_STATUS[status], lw=1.6, zorder=3)
        line.set_gid("sdonset")
        ax.text(result.onset_step, 0.02, f" onset {result.onset_step}", transform=ax.get_xaxis_transform(),
                fontsize=7.5, color=_STATUS[status], va="bottom")
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.2, 1.0), fontsize=7, frameon=False,
                  borderaxespad=0)
    else:
        from . import tree

        text = ("not judged: " + tree.lacks(result, diag)) if result.status.value == "unknown" else "no signal drawn"
        ax.text(0.5, 0.5, text if len(text) <= 110 else text[:109] + "…", transform=ax.transAxes, ha="center",
                va="center", fontsize=8, color="#777", wrap=True)
        ax.set_yticks([])
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(f"{layer}  {LAYER_NAMES[layer]}: {status}" + ("  (root)" if root else ""), loc="left",
                 fontsize=9, color=_STATUS[status], fontweight="bold" if root else "normal")
    if root:
        ax.set_facecolor("#fff8f6")
        for spine in ax.spines.values():
            spine.set_edgecolor(_STATUS[status])
            spine.set_linewidth(2.0)


def timeline(diag: Diagnosis, *, required: bool = False) -> str | None:
    """The timeline as inline SVG drawn by matplotlib; None without matplotlib (the caller draws the
    built-in SVG), or a MissingExtraError when `required`."""
    found = _matplotlib()
    if found is None:
        if required:
            from ..errors import MissingExtraError

            raise MissingExtraError("the HTML report's matplotlib panels need matplotlib", "plot")
        return None
    matplotlib, Figure = found
    layers = timeline_layers(diag)
    span = diag.steps or (0, 1)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "stabdiag", "font.size": 8}):
        fig = Figure(figsize=(10.5, 0.6 + 1.55 * len(layers)), layout="constrained")
        axes = fig.subplots(len(layers), 1, sharex=True, squeeze=False)[:, 0]
        for layer, ax in zip(layers, axes):
            _panel(ax, diag, layer, span)
        axes[-1].set_xlim(span[0], span[1] if span[1] > span[0] else span[0] + 1)
        axes[-1].set_xlabel("step", fontsize=8)
        if diag.first_nonfinite_step is not None:
            for i, ax in enumerate(axes):
                line = ax.axvline(diag.first_nonfinite_step, color="black", ls=(0, (4, 3)), lw=1.1, zorder=4)
                if i == 0:
                    line.set_gid("sdnonfinite")
                    ax.text(diag.first_nonfinite_step, 1.02, f"first NaN/Inf: step {diag.first_nonfinite_step}",
                            transform=ax.get_xaxis_transform(), fontsize=7.5, ha="center", va="bottom")
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return _inline(buffer.getvalue(), diag)


_PROLOG = re.compile(r"<\?xml.*?\?>\s*|<!DOCTYPE.*?>\s*", re.S)
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)
_CLIP_DEF = re.compile(r"<clipPath.*?</clipPath>\s*", re.S)
_CLIP_USE = re.compile(r' clip-path="url\(#[^)]*\)"')
_NAMESPACES = re.compile(r' xmlns(:xlink)?="[^"]*"')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


def _inline(svg: str, diag: Diagnosis) -> str:
    svg = _PROLOG.sub("", svg)
    svg = _STYLE.sub("", svg)
    svg = _METADATA.sub("", svg)
    svg = _CLIP_DEF.sub("", svg)
    svg = _CLIP_USE.sub("", svg)
    svg = _NAMESPACES.sub("", svg)
    svg = svg.replace("xlink:href=", "href=")
    used = set(re.findall(r'href="#([^"]+)"', svg))
    svg = re.sub(r'<g id="sdfinding-([^"]+)"', lambda m: f'<g class="finding" data-rule="{m.group(1)}"', svg)
    svg = re.sub(r'<g id="sdlayer-(\d)-([a-z]+)"', r'<g class="layer" data-layer="\1" data-status="\2"', svg)
    svg = svg.replace('<g id="sdonset"', '<g class="onset"').replace('<g id="sdnonfinite"', '<g class="nonfinite"')
    svg = re.sub(r' id="([^"]+)"', lambda m: m.group(0) if m.group(1) in used else "", svg)
    svg = svg.replace("<svg ", '<svg class="timeline" role="img" ', 1).strip()
    title = html.escape(f"{diag.run}: {diag.verdict_text()}", quote=False)
    head = svg.index(">") + 1
    return svg[:head] + f"<title>{title}</title>" + svg[head:]
