"""The terminal report: a verdict line per run, the four-layer table, what to check first, downstream
findings, and which signals to start logging for layers that could not be judged."""

from __future__ import annotations

import io

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..diagnosis import Diagnosis, Status
from ..rules import LAYER_NAMES

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}


def _layer_evidence(diag: Diagnosis, layer: int) -> str:
    result = diag.layers[layer - 1]
    if result.status is Status.UNKNOWN:
        return "not judged: start logging " + ", ".join(result.missing_signals)
    if not result.findings:
        return ""
    worst = sorted(result.findings, key=lambda f: f.severity != "fail")[0]
    more = len(result.findings) - 1
    return worst.message + (f"  (+{more} more)" if more else "")


def _verdict_line(diag: Diagnosis) -> Text:
    text = Text()
    text.append(diag.run, style="bold")
    text.append("  ")
    text.append(diag.verdict.upper(), style=_STYLE[diag.verdict])
    if diag.root_layer is not None:
        text.append(f"  root: layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})")
    else:
        text.append("  no layer failed")
    if diag.steps:
        text.append(f"  steps {diag.steps[0]}-{diag.steps[1]}", style="dim")
    if diag.resumed:
        text.append("  resumed", style="dim")
    return text


def _layer_table(diag: Diagnosis) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False)
    table.add_column("layer", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("onset", justify="right", no_wrap=True)
    table.add_column("key evidence", overflow="fold")
    for result in diag.layers:
        status = result.status.value
        marker = " (root)" if result.layer == diag.root_layer else ""
        downstream = diag.root_layer is not None and result.layer > diag.root_layer and result.findings
        table.add_row(f"{result.layer} {LAYER_NAMES[result.layer]}",
                      Text(status + marker, style=_STYLE[status]),
                      "" if result.onset_step is None else str(result.onset_step),
                      Text(("(downstream) " if downstream else "") + _layer_evidence(diag, result.layer)))
    return table


def _items(console: Console, rows: list[tuple[Text | str, Text | str]]) -> None:
    """Indented two-column list whose long lines wrap under their own column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for head, body in rows:
        grid.add_row(head, body if isinstance(body, Text) else Text(body))
    console.print(Padding(grid, (0, 0, 0, 2)))


def _print_run(console: Console, diag: Diagnosis) -> None:
    console.print(_verdict_line(diag))
    console.print(_layer_table(diag))
    root = diag.root_findings()
    if root:
        console.print(Text(f"Check first (layer {diag.root_layer}, {LAYER_NAMES[diag.root_layer]}):",
                           style="bold"))
        _items(console, [(Text(f.rule, style=_STYLE[f.severity]), f.message) for f in root])
        lead = sorted(root, key=lambda f: f.severity != "fail")[0]
        _items(console, [(f"{i}.", step) for i, step in enumerate(lead.check_first, 1)])
        others = [f.rule for f in root if f is not lead]
        if others:
            console.print(Text(f"  more: stabdiag rules explain {' | '.join(others)}", style="dim"))
    downstream = [f for f in diag.findings if f.downstream]
    if downstream:
        console.print(Text(f"Downstream of layer {diag.root_layer} - likely consequences; do not fix "
                           "from the bottom up:", style="bold"))
        _items(console, [(Text(f"{f.rule} ({f.severity})", style=_STYLE[f.severity]), f.message)
                         for f in downstream])
    unknown_layers = [r for r in diag.layers if r.status is Status.UNKNOWN]
    if unknown_layers:
        console.print(Text("Not judged - log one of these signals to cover the layer:", style="bold"))
        _items(console, [(f"layer {r.layer}", f"({LAYER_NAMES[r.layer]}) " + ", ".join(r.missing_signals))
                         for r in unknown_layers])
    for note in diag.notes:
        console.print(Text(f"note: {note}", style="dim"))


def render(diagnoses: list[Diagnosis], *, width: int | None = None, color: bool = False, **options) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 100, force_terminal=color, no_color=not color,
                      highlight=False, soft_wrap=False)
    for i, diag in enumerate(diagnoses):
        if i:
            console.print()
        _print_run(console, diag)
    if len(diagnoses) > 1:
        counts = {v: sum(d.verdict == v for d in diagnoses) for v in ("pass", "warn", "fail")}
        console.print()
        console.print(f"{len(diagnoses)} runs: {counts['pass']} pass, {counts['warn']} warn, "
                      f"{counts['fail']} fail")
    return buffer.getvalue()
