"""The terminal report: a verdict line per run, the four-layer table, what to check first, downstream
findings, and which signals to start logging for layers that could not be judged."""

from __future__ import annotations

import io
import math
import re

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..advise.cost import describe as describe_cost
from ..judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding, Status, Trend
from ..judge.rules import LAYER_NAMES
from ._escape import terminal as shown
from .settings import summary_line
from .sparkline import cell_steps, cells, short, sparkline
from .tree import count_line, lacking_groups, lacks, lead_said, needs_reading, ordered, shorten_all, who

_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim", "ignored": "dim"}


def _layer_evidence(diag: Diagnosis, layer: int) -> str:
    result = diag.layers[layer - 1]
    if result.status is Status.UNKNOWN:
        return f"not judged ({result.unknown_reason}; see below)"
    if result.status is Status.IGNORED:
        return ignored_evidence(diag, layer)
    if not result.findings:
        return ""
    worst = sorted(result.findings, key=lambda f: f.severity != "fail")[0]
    more = len(result.findings) - 1
    return shown(worst.message) + (f"  (+{more} more)" if more else "")


def ignored_evidence(diag: Diagnosis, layer: int) -> str:
    """An ignored layer's evidence: that nobody asked, and what its rules would have said."""
    fired = [f"{f.rule} {f.severity}" for f in diag.ignored_findings if f.layer == layer]
    return "ignored (--select/--ignore)" + (f"; would fire: {', '.join(fired)}" if fired else "")


def _verdict_parts(diag: Diagnosis) -> list[Text]:
    """The verdict line's parts, each kept whole when the line wraps."""
    head = Text()
    head.append(shown(diag.run), style="bold")
    head.append("  ")
    head.append(diag.verdict.upper(), style=_STYLE[diag.verdict])
    if diag.ignored:
        head.append(f", {diag.ignored_text()} ignored", style="yellow" if diag.ignored_findings else "dim")
    parts = [head]
    if diag.undecided:
        head.append(",")
        parts.append(Text(diag.undecided_text(), style="yellow"))
    if diag.root_layer is not None:
        parts.append(Text(f"root: layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})"))
    elif diag.verdict == "unknown":
        parts.append(Text("nothing could be judged"))
    else:
        parts.append(Text("no layer failed"))
    if diag.steps:
        parts.append(Text(f"steps {diag.steps[0]}-{diag.steps[1]}", style="dim"))
    if diag.framework:
        parts.append(Text(shown(diag.framework), style="dim"))
    if diag.resumed:
        parts.append(Text("resumed", style="dim"))
    if diag.ending is not None and diag.ending.failed:
        parts.append(Text(f"ended: {diag.ending.kind} at step {diag.ending.step}", style="bold red"))
    return parts


def _verdict_line(diag: Diagnosis, width: int = 10_000) -> Text:
    """The verdict line, its parts two spaces apart; past `width` a part goes whole to the next line,
    indented (a phrase like "root: layer 1 (data & reward)" is never split)."""
    return _packed(_verdict_parts(diag), width)


def _packed(parts: list[Text], width: int, indent: int = 2) -> Text:
    out = Text()
    used = 0
    for i, part in enumerate(parts):
        gap = 1 if i and out.plain.endswith(",") else 2
        if i and used + gap + part.cell_len > width:
            out.append("\n" + " " * indent)
            used = indent
        elif i:
            out.append(" " * gap)
            used += gap
        out.append_text(part)
        used += part.cell_len
    return out


def _hanging(console: Console, text: Text, indent: int = 2) -> None:
    """A paragraph wrapped at whole words, its second and later lines indented under the first."""
    lines = text.wrap(console, max(20, console.width - indent))
    for i, line in enumerate(lines):
        console.print(Text(" " * indent) + line if i else line)


def _spark_text(trend: Trend, name: str, name_w: int, spark_w: int, span: tuple[int, int],
                findings: tuple[Finding, ...], labels: bool) -> Text:
    """One signal's sparkline; the cells inside a finding's step range take the finding's colour."""
    drawn = cells(trend, spark_w)
    text = Text(f"{name:<{name_w}} ", style="dim")
    for i, char in enumerate(sparkline(drawn)):
        a, b = cell_steps(span, len(drawn), i)
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
    names = shorten_all([shown(t.signal) for t in diag.trends], name_w)     # a cut name shows its cut: "…"
    return [_spark_text(t, names[shown(t.signal)], name_w, spark_w, diag.steps, findings, labels) for t in mine]


def _layer_table(diag: Diagnosis, width: int = 100, sparklines: bool = True) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False)
    table.add_column("layer", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("onset", justify="right", no_wrap=True)
    table.add_column("key evidence", overflow="fold")
    for result in diag.layers:
        status = result.status.value
        marker = " (root)" if result.layer == diag.root_layer else ""
        downstream = bool(result.findings) and all(f.downstream for f in result.findings)
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


def _check_first(console: Console, diag: Diagnosis) -> None:
    root = diag.root_findings()
    if not root:
        return
    console.print(Text(f"Check first (layer {diag.root_layer}, {LAYER_NAMES[diag.root_layer]}):", style="bold"))
    _items(console, [(Text(f.rule, style=_STYLE[f.severity]), shown(f.message)) for f in root])
    lead = diag.root_lead
    _items(console, [(f"{i}.", shown(step)) for i, step in enumerate(lead.check_first, 1)])
    others = [f.rule for f in root if f is not lead]
    if others:
        _hanging(console, Text(f"  more: stabdiag rules explain {' | '.join(others)}", style="dim"), 4)
    if diag.methods_advice:
        _items(console, [("methods:", shown(diag.methods_advice))])
    _samples(console, diag)


def _samples(console: Console, diag: Diagnosis) -> None:
    """What the logged samples show about the lead finding: the named features and three short answers,
    every piece of sample text escaped (it may hold anything)."""
    evidence = diag.samples
    if evidence is None:
        return
    rows: list[tuple[Text | str, Text | str]] = [("samples:", shown(evidence.headline()))]
    rows += [("", "- " + shown(effect.describe())) for effect in evidence.named[:4]]
    for example in evidence.examples:
        text = example.text if len(example.text) <= 100 else example.text[:99] + "…"
        reward = f", reward {example.reward:.3g}" if math.isfinite(example.reward) else ""
        rows.append(("", Text(f"{example.role} (step {example.step}{reward}): ", style="dim") + Text(shown(text))))
    _items(console, rows)


def _not_judged(console: Console, diag: Diagnosis) -> None:
    unknown_layers = [r for r in diag.layers if r.status is Status.UNKNOWN]
    if unknown_layers:
        console.print(Text("Not judged - what each layer lacks:", style="bold"))
        _items(console, [(f"layer {r.layer}", f"({LAYER_NAMES[r.layer]}) {r.unknown_reason}: "
                          + shown(lacks(r, diag))) for r in unknown_layers])


def _too_noisy(console: Console, diag: Diagnosis) -> None:
    """The rules that saw a large change they could not confirm, in layers other rules judged: the layer's
    pass does not cover them (an unknown layer's reasons are in the not-judged list)."""
    noisy = [u for u in diag.undecided if diag.layers[u.layer - 1].status is not Status.UNKNOWN]
    if noisy:
        console.print(Text("Too noisy to tell - changes these rules could neither confirm nor rule out "
                           "(more steps, larger groups or denser evals decide them):", style="bold"))
        _items(console, [(Text(u.rule, style="yellow"), shown(u.reason)) for u in noisy])


def _print_run(console: Console, diag: Diagnosis, sparklines: bool = True, shared: bool = False) -> None:
    """The full view of one run: the verdict, what to check first (both on the first screen), the
    four-layer table, then the rest.  `shared`: the not-judged lists are said once for the whole tree."""
    console.print(_verdict_line(diag, console.width))
    _check_first(console, diag)
    console.print(_layer_table(diag, console.width, sparklines))
    downstream = [f for f in diag.findings if f.downstream]
    if downstream:
        console.print(Text(f"Downstream of layer {diag.root_layer} - likely consequences; do not fix "
                           "from the bottom up:", style="bold"))
        _items(console, [(Text(f"{f.rule} ({f.severity})", style=_STYLE[f.severity]), shown(f.message))
                         for f in downstream])
    _too_noisy(console, diag)
    if not shared:
        _not_judged(console, diag)
    if diag.ignored_findings:
        console.print(Text("Ignored by the selection, would have fired:", style="bold"))
        _items(console, [(Text(f"{f.rule} ({f.severity})", style=_STYLE[f.severity]), shown(f.message))
                         for f in diag.ignored_findings])
    for line in describe_cost(diag.cost) if diag.cost else ():
        _hanging(console, Text(shown(line)))
    for forecast in diag.forecasts:
        _hanging(console, Text(shown(forecast.describe()), style="yellow"))
    for note in diag.notes:
        _hanging(console, Text(f"note: {shown(note)}", style="dim"))


def _headline(diag: Diagnosis) -> str:
    """What one table row says after the verdict: the root's lead rule and its title (the block below
    gives its message), or why there is none."""
    if diag.root_lead is not None:
        text = f"{lead_said(diag)}: {shown(diag.root_lead.title)}"
    elif diag.verdict == "unknown":
        text = "nothing could be judged"
    else:
        text = ""
    if diag.ignored:
        fired = f"; would fire: {', '.join(f.rule for f in diag.ignored_findings)}" if diag.ignored_findings else ""
        text = "; ".join(t for t in (text, f"{diag.ignored_text()} ignored{fired}") if t)
    if diag.undecided:
        text = "; ".join(t for t in (text, diag.undecided_text()) if t)
    if diag.ending is not None and diag.ending.failed and diag.root_lead is None:
        text = "; ".join(t for t in (text, f"ended: {diag.ending.kind} at step {diag.ending.step}") if t)
    return text


def _name_width(width: int, names: list[str]) -> int:
    """The run column: the longest name, up to 30% of the line (at least 16), so the headline keeps room."""
    return min(max(len(n) for n in names), max(16, int(width * 0.3)))


def _runs_table(console: Console, shown_runs: list[Diagnosis], names: dict[str, str]) -> None:
    """One row per run, as ruff and pytest lead: name (cut in the middle, distinct), verdict, root layer,
    onset, headline; a long headline wraps under its own column at whole words."""
    narrow = console.width < 100
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False, header_style="dim")
    table.add_column("run", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("root", no_wrap=True)
    table.add_column("onset", justify="right", no_wrap=True)
    table.add_column("headline", overflow="fold", ratio=1)
    for d in shown_runs:
        root = "" if d.root_layer is None else (f"L{d.root_layer}" if narrow
                                                  else f"{d.root_layer} {LAYER_NAMES[d.root_layer]}")
        table.add_row(names[d.run], Text(d.verdict.upper(), style=_STYLE[d.verdict]), root,
                      "" if d.root_onset is None else str(d.root_onset), Text(_headline(d)))
    console.print(table)


def _folded(diagnoses: list[Diagnosis]) -> str:
    """The line that stands for the passing runs the table leaves out."""
    passes = [d for d in diagnoses if not needs_reading(d)]
    noisy = sum(bool(d.undecided) for d in passes)
    ignored = sum(bool(d.ignored_findings) for d in passes)
    extra = "; ".join(part for part in (f"{noisy} with rules too noisy to tell" if noisy else "",
                                        f"{ignored} whose ignored rules would fire" if ignored else "") if part)
    return (f"{len(passes)} pass{' (' + extra + ')' if extra else ''}, not listed: --show-passes lists them")


def _compact(console: Console, diag: Diagnosis) -> None:
    """A run at or above --fail-on in a tree: its root findings and first checks, each wrapped at whole
    words under its own column."""
    console.print(_verdict_line(diag, console.width))
    root = diag.root_findings()
    rows: list[tuple[Text | str, Text | str]] = [(Text(f.rule, style=_STYLE[f.severity]), shown(f.message))
                                                 for f in root[:2]]
    if len(root) > 2:
        rows.append((Text("more:", style="dim"), ", ".join(f.rule for f in root[2:])))
    if root:
        rows += [(f"check first {i}.", shown(step)) for i, step in enumerate(diag.root_lead.check_first[:2], 1)]
    downstream = [f"{f.rule} ({f.severity})" for f in diag.findings if f.downstream]
    if downstream:
        rows.append((Text("downstream:", style="dim"), ", ".join(downstream)))
    if diag.ignored_findings:
        rows.append((Text("ignored, would fire:", style="yellow"),
                     ", ".join(f"{f.rule} ({f.severity})" for f in diag.ignored_findings)))
    if rows:
        _items(console, rows)


def _shared_not_judged(console: Console, diagnoses: list[Diagnosis], names: dict[str, str]) -> None:
    """What each unjudged layer lacks, each line with the runs that lack exactly that: ten runs of one
    framework are one line, and a run that lacks something else has its own."""
    groups = lacking_groups(diagnoses)
    if not groups:
        return
    console.print(Text("Not judged - what the runs lack:", style="bold"))
    _items(console, [(f"layer {layer}", f"({LAYER_NAMES[layer]}, {who(runs, diagnoses, names)}) {why}: {shown(text)}")
                     for runs, (layer, why, text) in groups])


def _at_or_above(diag: Diagnosis, fail_on: str) -> bool:
    bar = SEVERITY_RANK[fail_on]
    return any(SEVERITY_RANK[f.severity] >= bar for f in diag.findings) or bool(diag.ignored_findings)


def _console(buffer: io.StringIO, width: int | None, color: bool) -> Console:
    # emoji=False: a `:name:` in a metric or rule text (`step:100:`) stays text, and rich's emoji table
    # (~10 ms of a small check's start) is never loaded
    return Console(file=buffer, width=width or 100, force_terminal=color, no_color=not color, highlight=False,
                   soft_wrap=False, emoji=False)


def render_run(diag: Diagnosis, *, width: int | None = None, color: bool = False, sparklines: bool = True,
               shared: bool = False) -> str:
    """One run's full view.  `check --jobs` has its workers draw these parts, the costly bit, for -v."""
    buffer = io.StringIO()
    _print_run(_console(buffer, width, color), diag, sparklines, shared)
    return _finish(buffer.getvalue(), color)


def _finish(text: str, color: bool) -> str:
    """Rich pads table cells to the column width: no line ends in spaces unless colour is on."""
    return text if color else _TRAILING.sub("", text)


VIEWS = ("auto", "full", "quiet")


def _not_read(console: Console, not_read) -> None:
    """An empty run dir or a path that is gone is named, never skipped."""
    if not_read:
        console.print()
        console.print(Text(f"Not read ({len(not_read)}):", style="bold"))
        for path, why in not_read:
            console.print(Text(f"  {shown(path)}: {shown(why)}"))


def render(diagnoses: list[Diagnosis], *, width: int | None = None, color: bool = False,
           sparklines: bool = True, drawn: list[str | None] | None = None, view: str = "auto",
           fail_on: str = "fail", show_passes: bool = False, **options) -> str:
    """The terminal report.  One run: its full view.  Several: the count line, a table of the runs
    failures first (fail, warn, unknown; the passes folded into one line unless `show_passes`), a compact
    block for each run at or above `fail_on`, what the unjudged runs lack, and the count line again
    (`view` "full", -v: every run's full view; "quiet", -q: the table alone).  `drawn` holds, per
    diagnosis, its full view as `render_run(..., shared=True)` drew it with the same width and colour,
    or None."""
    buffer = io.StringIO()
    console = _console(buffer, width, color)
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        console.print(Text(shown(settings), style="bold"))
    if len(diagnoses) == 1 and view != "quiet":
        _print_run(console, diagnoses[0], sparklines)
        _not_read(console, options.get("not_read") or ())
        return _finish(buffer.getvalue(), color)
    allow_unknown = bool(options.get("allow_unknown"))
    counts = count_line(diagnoses, fail_on, allow_unknown=allow_unknown)
    if len(diagnoses) > 1:
        console.print(Text(counts, style="bold"))
    runs = ordered(diagnoses)
    listed = [d for d in runs if show_passes or view == "full" or needs_reading(d) or len(diagnoses) == 1]
    names = shorten_all([shown(d.run) for d in diagnoses], _name_width(console.width, [shown(d.run)
                                                                                        for d in diagnoses]))
    names = {d.run: names[shown(d.run)] for d in diagnoses}
    if listed:
        _runs_table(console, listed, names)
    if len(listed) < len(runs):
        console.print(Text(_folded(runs), style="dim"))
    if view != "quiet":
        order = runs if view == "full" else [d for d in runs if _at_or_above(d, fail_on)]
        index = {id(d): i for i, d in enumerate(diagnoses)}
        for diag in order:
            console.print()
            part = drawn[index[id(diag)]] if view == "full" and drawn is not None else None
            if view != "full":
                _compact(console, diag)
            elif part is None:
                _print_run(console, diag, sparklines, shared=True)
            else:
                buffer.write(part)      # the console writes each print through: the order holds
        if any(r.status is Status.UNKNOWN for d in diagnoses for r in d.layers):
            console.print()
            _shared_not_judged(console, runs, names)
    _not_read(console, options.get("not_read") or ())
    if len(diagnoses) > 1:
        console.print()
        console.print(Text(counts, style="bold"))   # said again at the end: a long report is read from its foot too
    return _finish(buffer.getvalue(), color)
