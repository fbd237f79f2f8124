"""The terminal report: a verdict line per run, the four-layer table, what to check first, downstream
findings, and which signals to start logging for layers that could not be judged."""

from __future__ import annotations

import io

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..cost import describe as describe_cost
from ..diagnosis import Diagnosis, Finding, Status, Trend
from ..rules import LAYER_NAMES
from ._escape import terminal as shown
from .settings import summary_line
from .sparkline import cell_steps, rebin, short, sparkline

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}


def _layer_evidence(diag: Diagnosis, layer: int) -> str:
    result = diag.layers[layer - 1]
    if result.status is Status.UNKNOWN:
        return "not judged: " + shown(result.not_judged_text())
    if not result.findings:
        return ""
    worst = sorted(result.findings, key=lambda f: f.severity != "fail")[0]
    more = len(result.findings) - 1
    return shown(worst.message) + (f"  (+{more} more)" if more else "")


def _verdict_line(diag: Diagnosis) -> Text:
    text = Text()
    text.append(shown(diag.run), style="bold")
    text.append("  ")
    text.append(diag.verdict.upper(), style=_STYLE[diag.verdict])
    if diag.root_layer is not None:
        text.append(f"  root: layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})")
    elif diag.verdict == "unknown":
        text.append("  nothing could be judged")
    else:
        text.append("  no layer failed")
    if diag.steps:
        text.append(f"  steps {diag.steps[0]}-{diag.steps[1]}", style="dim")
    if diag.framework:
        text.append(f"  {shown(diag.framework)}", style="dim")
    if diag.resumed:
        text.append("  resumed", style="dim")
    if diag.ending is not None and diag.ending.failed:
        text.append(f"  ended: {diag.ending.kind} at step {diag.ending.step}", style="bold red")
    return text


def _spark_text(trend: Trend, name_w: int, spark_w: int, span: tuple[int, int],
                findings: tuple[Finding, ...], labels: bool) -> Text:
    """One signal's sparkline; the cells inside a finding's step range take the finding's colour."""
    cells = rebin(trend.values, spark_w)
    text = Text(f"{shown(trend.signal)[:name_w]:<{name_w}} ", style="dim")
    for i, char in enumerate(sparkline(cells)):
        a, b = cell_steps(span, len(cells), i)
        hit = [f for f in findings if f.start_step < b and f.end_step >= a]
        style = "bold red" if char == "×" else _STYLE[max(hit, key=lambda f: f.severity == "fail").severity] \
            if hit else ""
        text.append(char, style=style)
    if labels and trend.first is not None and trend.last is not None:
        text.append(f" {short(trend.first)} -> {short(trend.last)}", style="dim")
    return text


def _sparklines(diag: Diagnosis, layer: int, width: int) -> list[Text]:
    """The layer's signals as sparklines fitted to the evidence column; none when it is too narrow."""
    mine = [t for t in diag.trends if t.layer == layer]
    if not mine or diag.steps is None:
        return []
    name_w = min(16, max(len(shown(t.signal)) for t in diag.trends))
    column = width - 40                      # what the layer, status and onset columns leave
    spark_w = min(48, column - name_w - 1 - 22)
    labels = spark_w >= 12
    if not labels:
        spark_w = min(48, column - name_w - 1)
    if spark_w < 8:
        return []
    findings = diag.layers[layer - 1].findings
    return [_spark_text(t, name_w, spark_w, diag.steps, findings, labels) for t in mine]


def _layer_table(diag: Diagnosis, width: int = 100, sparklines: bool = True) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False)
    table.add_column("layer", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("onset", justify="right", no_wrap=True)
    table.add_column("key evidence", overflow="fold")
    for result in diag.layers:
        status = result.status.value
        marker = " (root)" if result.layer == diag.root_layer else ""
        downstream = diag.root_layer is not None and result.layer > diag.root_layer and result.findings
        evidence = Text(("(downstream) " if downstream else "") + _layer_evidence(diag, result.layer))
        lines = _sparklines(diag, result.layer, width) if sparklines else []
        if lines:
            evidence = Text("\n").join(([evidence] if evidence.plain else []) + lines)
        table.add_row(f"{result.layer} {LAYER_NAMES[result.layer]}",
                      Text(status + marker, style=_STYLE[status]),
                      "" if result.onset_step is None else str(result.onset_step), evidence)
    return table


def _items(console: Console, rows: list[tuple[Text | str, Text | str]]) -> None:
    """Indented two-column list whose long lines wrap under their own column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for head, body in rows:
        grid.add_row(head, body if isinstance(body, Text) else Text(body))
    console.print(Padding(grid, (0, 0, 0, 2)))


def _print_run(console: Console, diag: Diagnosis, sparklines: bool = True) -> None:
    console.print(_verdict_line(diag))
    console.print(_layer_table(diag, console.width, sparklines))
    root = diag.root_findings()
    if root:
        console.print(Text(f"Check first (layer {diag.root_layer}, {LAYER_NAMES[diag.root_layer]}):",
                           style="bold"))
        _items(console, [(Text(f.rule, style=_STYLE[f.severity]), shown(f.message)) for f in root])
        lead = sorted(root, key=lambda f: f.severity != "fail")[0]
        _items(console, [(f"{i}.", shown(step)) for i, step in enumerate(lead.check_first, 1)])
        others = [f.rule for f in root if f is not lead]
        if others:
            console.print(Text(f"  more: stabdiag rules explain {' | '.join(others)}", style="dim"))
        if diag.methods_advice:
            _items(console, [("methods:", shown(diag.methods_advice))])
    downstream = [f for f in diag.findings if f.downstream]
    if downstream:
        console.print(Text(f"Downstream of layer {diag.root_layer} - likely consequences; do not fix "
                           "from the bottom up:", style="bold"))
        _items(console, [(Text(f"{f.rule} ({f.severity})", style=_STYLE[f.severity]), shown(f.message))
                         for f in downstream])
    unknown_layers = [r for r in diag.layers if r.status is Status.UNKNOWN]
    if unknown_layers:
        console.print(Text("Not judged - what each layer lacks:", style="bold"))
        _items(console, [(f"layer {r.layer}", f"({LAYER_NAMES[r.layer]}) {r.unknown_reason}: "
                          + shown(r.not_judged_text())) for r in unknown_layers])
    for line in describe_cost(diag.cost) if diag.cost else ():
        console.print(Text(shown(line)))
    for forecast in diag.forecasts:
        console.print(Text(shown(forecast.describe()), style="yellow"))
    for note in diag.notes:
        console.print(Text(f"note: {shown(note)}", style="dim"))


def _console(buffer: io.StringIO, width: int | None, color: bool) -> Console:
    return Console(file=buffer, width=width or 100, force_terminal=color, no_color=not color, highlight=False,
                   soft_wrap=False)


def render_run(diag: Diagnosis, *, width: int | None = None, color: bool = False, sparklines: bool = True) -> str:
    """One run's part of the terminal report.  The report is the settings line, these parts with a blank
    line between, and the summary: `check --jobs` has its workers draw the parts, the costly bit."""
    buffer = io.StringIO()
    _print_run(_console(buffer, width, color), diag, sparklines)
    return buffer.getvalue()


def render(diagnoses: list[Diagnosis], *, width: int | None = None, color: bool = False,
           sparklines: bool = True, drawn: list[str | None] | None = None, **options) -> str:
    """The terminal report; sparklines appear for diagnoses that carry trends (`with_trends`) and
    are left out when the terminal is too narrow for them.  `drawn` holds, per diagnosis, its part as
    `render_run` drew it with the same width, colour and sparklines, or None to draw it here."""
    buffer = io.StringIO()
    console = _console(buffer, width, color)
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        console.print(Text(shown(settings), style="bold"))
    for i, diag in enumerate(diagnoses):
        if i:
            console.print()
        part = drawn[i] if drawn is not None else None
        if part is None:
            _print_run(console, diag, sparklines)
        else:
            buffer.write(part)          # the console writes each print through: the order holds
    if len(diagnoses) > 1:
        counts = {v: sum(d.verdict == v for d in diagnoses) for v in ("pass", "warn", "fail", "unknown")}
        console.print()
        console.print(f"{len(diagnoses)} runs: {counts['pass']} pass, {counts['warn']} warn, "
                      f"{counts['fail']} fail" + (f", {counts['unknown']} unknown" if counts["unknown"] else ""))
    return buffer.getvalue()
