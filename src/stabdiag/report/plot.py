"""`stabdiag plot`: the run's timeline as four stacked panels, one per layer, on a shared step axis.

    1 data & reward      reward, every eval, zero-variance group fraction; response length on a twin
    2 policy change      KL; entropy on a twin axis
    3 numeric update     loss and grad norm, log scale
    4 training system    logprob delta (rollout vs training); policy version lag on a twin axis

Each finding is shaded over its step range in its layer's panel (red fail, amber warn, hatched when
downstream), the root layer's panel is framed, and the first non-finite step is a dashed line through
all panels, so the order of events - what went first - is the first thing a reader sees.

matplotlib is imported only inside `plot`: `stabdiag check` never pays for it.  Every finding's span
carries the gid "finding:<rule id>" and the non-finite line "nonfinite", so tests can find them.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import ConfigError, MissingExtraError
from ..judge.diagnosis import Diagnosis, Finding
from ..judge.rules import LAYER_NAMES
from ..read.run import Run

FORMATS = ("png", "svg", "pdf")
_SEVERITY_COLOR = {"fail": "#d62728", "warn": "#ff9f1a"}
_STATUS_COLOR = {"pass": "#2ca02c", "warn": "#e08a00", "fail": "#d62728", "unknown": "#7f7f7f",
                 "ignored": "#7f7f7f"}
# per panel: (left-axis signals, twin-axis signals, log scale)
PANELS = {
    1: (("reward", "eval:*", "zero_std_frac"), ("response_length",), False),
    2: (("kl",), ("entropy",), False),
    3: (("loss",), ("grad_norm",), True),
    4: (("logprob_delta", "logprob_k3_kl", "prob_delta", "mult_prob_error"), ("policy_version_lag",), False),
}
_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22")
_TWIN_COLOR = "#7f7f7f"


def _pick(signals, names: tuple[str, ...]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, steps, values) for the named signals the run has; `eval:*` expands to every eval."""
    out = []
    for name in names:
        found = signals.evals() if name == "eval:*" else {name: signals.get(name)}
        for sig, series in found.items():
            if series is not None and len(series):
                values = np.where(np.isfinite(series.values), series.values, np.nan)
                out.append((sig, series.steps, values))
    return out


def _scale(ax, curves, log: bool, cutoff: int | None) -> None:
    """Log scale where asked and every value is positive; y-limits from the points up to the first
    non-finite step, because what a broken model logs afterwards would squash the story before it."""
    if not curves:
        return
    kept = [v[(s <= cutoff) if cutoff is not None else slice(None)] for _, s, v in curves]
    values = np.concatenate(kept) if kept else np.array([])
    values = values[np.isfinite(values)]
    if not len(values):
        return
    positive = values.min() > 0
    log = log and positive and values.max() / values.min() > 20     # a narrow range reads better linear
    if log:
        from matplotlib.ticker import NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        return
    if log:
        ax.set_ylim(lo / 1.5, hi * 1.5)
    else:
        pad = 0.06 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)


def _draw_curves(ax, curves, colors, linestyle="-") -> list:
    handles = []
    for (name, steps, values), color in zip(curves, colors):
        sparse = len(steps) < 60
        (line,) = ax.plot(steps, values, linestyle, color=color, lw=1.4, label=name,
                          marker="o" if sparse else None, ms=3)
        handles.append(line)
    return handles


def _span(ax, f: Finding, span_steps: int, row: int) -> None:
    """Shade the finding's steps; a one-step finding gets a minimum visible width."""
    lo, hi = float(f.start_step), float(f.end_step)
    pad = max(0.5, span_steps * 0.004)
    if hi - lo < 2 * pad:
        lo, hi = lo - pad, hi + pad
    patch = ax.axvspan(lo, hi, color=_SEVERITY_COLOR[f.severity], alpha=0.10 if f.downstream else 0.22,
                       hatch="//" if f.downstream else None, lw=0, zorder=0)
    patch.set_gid(f"finding:{f.rule}")
    label = f.rule + (" (downstream)" if f.downstream else "")
    ax.text(lo, 0.96 - 0.14 * row, label, transform=ax.get_xaxis_transform(), fontsize=8, va="top",
            color=_SEVERITY_COLOR[f.severity], fontweight="normal" if f.downstream else "bold", zorder=5,
            clip_on=True, bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 1.5})


def _panel(ax, layer: int, signals, diag: Diagnosis) -> None:
    left_names, twin_names, log = PANELS[layer]
    left, twin = _pick(signals, left_names), _pick(signals, twin_names)
    result = diag.layers[layer - 1]
    cutoff = diag.first_nonfinite_step
    handles = _draw_curves(ax, left, _COLORS)
    _scale(ax, left, log, cutoff)
    if layer == 4 and left:      # rollout and trainer agree at 0: show how far from it the run sits
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0.0), high)
        ax.axhline(0.0, color="black", lw=0.8, zorder=1)
        ax.text(1.0, 0.0, "agree ", transform=ax.get_yaxis_transform(), fontsize=8, ha="right", va="bottom")
    if twin:
        ax2 = ax.twinx()
        handles += _draw_curves(ax2, twin, (_TWIN_COLOR,), "--")
        _scale(ax2, twin, log, cutoff)
        ax2.tick_params(axis="y", labelsize=8, colors=_TWIN_COLOR)
        ax2.set_ylabel(", ".join(n for n, _, _ in twin), fontsize=8, color=_TWIN_COLOR)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.06, 1.0), fontsize=8, frameon=False,
                  borderaxespad=0)
    else:
        wanted = ", ".join(result.missing_signals or left_names[:1])
        ax.text(0.5, 0.5, f"not logged - start logging {wanted}", transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color=_STATUS_COLOR["unknown"])
        ax.set_yticks([])
    status = result.status.value
    root = layer == diag.root_layer
    title = f"{layer}  {LAYER_NAMES[layer]}: {status.upper()}" + ("  <- ROOT: look here first" if root else "")
    ax.set_title(title, loc="left", fontsize=10, color=_STATUS_COLOR[status],
                 fontweight="bold" if root or status == "fail" else "normal")
    ax.tick_params(axis="y", labelsize=8)
    if root:
        ax.set_facecolor("#fff4f2" if status == "fail" else "#fffaf0")
        for spine in ax.spines.values():
            spine.set_edgecolor(_STATUS_COLOR[status])
            spine.set_linewidth(2.2)
    span_steps = (diag.steps[1] - diag.steps[0]) if diag.steps else 1
    for row, f in enumerate(sorted(result.findings, key=lambda x: x.start_step)):
        _span(ax, f, span_steps, row)


def _headline(diag: Diagnosis) -> tuple[str, str]:
    if diag.root_layer is None:
        unknown = [str(r.layer) for r in diag.layers if r.status.value == "unknown"]
        tail = f" (layer {', '.join(unknown)} not judged)" if unknown else ""
        return f"{diag.run}: PASS - no layer failed{tail}", ""
    lead = sorted(diag.root_findings(), key=lambda f: f.severity != "fail")[0]   # as the terminal report
    head = f"{diag.run}: {diag.verdict.upper()} - root: layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})"
    sub = f"{lead.title} (onset step {lead.onset}; window {lead.start_step}-{lead.end_step})"
    downstream = sorted({f.layer for f in diag.findings if f.downstream})
    if downstream:
        sub += f"; layer {', '.join(map(str, downstream))} findings are likely downstream"
    return head, sub


def plot(run: Run, diagnosis: Diagnosis, out_path: str | os.PathLike[str] | None = None,
         format: str | None = None, *, mapping: dict[str, str] | None = None, dpi: int = 110):
    """Draw the run's four-panel timeline; save it to `out_path` (png, svg or pdf) if given; return the Figure."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtraError("plot needs matplotlib", "plot") from None
    from ..signals.resolve import resolve

    if format is None:
        suffix = os.path.splitext(str(out_path or ""))[1].lstrip(".").lower()
        format = suffix if suffix in FORMATS else "png"
    if format not in FORMATS:
        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}; got {format!r}")
    signals = resolve(run, mapping, guess=bool(diagnosis.guessed))   # the signals the diagnosis read
    present = {layer: bool(_pick(signals, PANELS[layer][0] + PANELS[layer][1])) for layer in range(1, 5)}
    layers = panel_layers(diagnosis.kind, present)
    fig = Figure(figsize=(12, 10 if len(layers) == 4 else 1.5 + 2.4 * len(layers)), layout="constrained")
    axes = fig.subplots(len(layers), 1, sharex=True, squeeze=False,
                        height_ratios=[1.0 if present[layer] else 0.35 for layer in layers])[:, 0]
    for layer, ax in zip(layers, axes):
        _panel(ax, layer, signals, diagnosis)
    left_out = [layer for layer in range(1, 5) if layer not in layers]
    if left_out:
        names = ", ".join(f"{layer} ({LAYER_NAMES[layer]})" for layer in left_out)
        fig.supxlabel(f"not drawn: layer {names} - this {diagnosis.kind.upper()} run logged no signal there",
                      fontsize=8, color=_STATUS_COLOR["unknown"], x=0.01, ha="left")
    nonfinite = diagnosis.first_nonfinite_step
    if diagnosis.steps:
        axes[-1].set_xlim(diagnosis.steps[0], diagnosis.steps[1])
    if nonfinite is not None:
        for i, ax in enumerate(axes):
            line = ax.axvline(nonfinite, color="black", ls=(0, (4, 3)), lw=1.3, zorder=4)
            line.set_gid("nonfinite")
            if diagnosis.steps:
                ax.axvspan(nonfinite, diagnosis.steps[1], color="#999999", alpha=0.12, lw=0, zorder=0)
            if i == 0:
                ax.text(nonfinite, 1.01, f"first NaN/Inf: step {nonfinite}", transform=ax.get_xaxis_transform(),
                        fontsize=9, ha="center", va="bottom", fontweight="bold")
    axes[-1].set_xlabel("step")
    head, sub = _headline(diagnosis)
    fig.suptitle(head + ("\n" + sub if sub else ""), fontsize=12, fontweight="bold", x=0.01, ha="left")
    if out_path is not None:
        # no date or software version in the file: the same run draws the same bytes
        metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(format, {"Software": None})
        try:
            fig.savefig(out_path, format=format, dpi=dpi, metadata=metadata)
        except OSError as exc:
            raise ConfigError(f"-o {out_path}: cannot write the plot ({exc.strerror or exc})") from None
    return fig


def panel_layers(kind: str, present: dict[int, bool]) -> list[int]:
    """The layers that get a panel.  An RL run keeps all four: an empty panel says what to start logging
    for a layer its checklist reads.  A supervised run (SFT, pretraining) has no reward, KL or rollout
    logprobs, so only the layers it logged signals for are drawn."""
    if kind == "sft":
        drawn = [layer for layer in range(1, 5) if present.get(layer)]
        if drawn:
            return drawn
    return [1, 2, 3, 4]


def default_name(run_name: str, format: str) -> str:
    """The file name a run's plot gets when -o names a folder."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_name) or "run"
    return f"{safe}.timeline.{format}"
