"""The Markdown report, for a GitHub job summary ($GITHUB_STEP_SUMMARY) or a pull-request comment.

Per run: the verdict, a table of the four layers, what to check first at the root layer, the
downstream findings (with the warning not to fix from the bottom up), and the signals to start logging
for layers that could not be judged.  Several runs get the count line and a table of the runs that need
reading first (failures first, the passes folded), and a section each while they fit MAX_BYTES.
"""

from __future__ import annotations

from ..judge.diagnosis import Diagnosis, Status
from ..judge.rules import LAYER_NAMES
from . import tree
from ._escape import markdown_code, markdown_text
from .settings import summary_line
from .sparkline import cells, sparkline

_ICON = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "unknown": "❔ unknown", "ignored": "⏭️ ignored"}


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, HTML and links inert (report._escape)."""
    return markdown_text(text)


def _root(diag: Diagnosis) -> str:
    if diag.root_layer is None:
        return "none"
    return f"layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})"


def _evidence(diag: Diagnosis, layer: int) -> str:
    result = diag.layers[layer - 1]
    if result.status is Status.IGNORED:
        fired = [f"`{f.rule}` {f.severity}" for f in diag.ignored_findings if f.layer == layer]
        return "ignored (--select/--ignore)" + (f"; would fire: {', '.join(fired)}" if fired else "")
    if result.status is Status.UNKNOWN:
        return "not judged: " + cell(tree.lacks(result, diag))
    parts = []
    for f in result.findings:
        tag = " (downstream)" if f.downstream else ""
        parts.append(f"{markdown_code(f.rule, in_table=True)}{tag} (onset {f.onset}): {cell(f.message)}")
    return "<br>".join(parts)


def _trends(diag: Diagnosis, layer: int) -> str:
    return "<br>".join(f"{markdown_code(t.signal, in_table=True)} {sparkline(cells(t, 24))}"
                       for t in diag.trends if t.layer == layer)


def verdict(diag: Diagnosis) -> str:
    """The verdict with its icon, what the selection left out and the rules too noisy to tell: never a
    bare pass."""
    left_out, undecided = diag.ignored_text(), diag.undecided_text()
    return (_ICON[diag.verdict] + (f", {cell(left_out)} ignored" if left_out else "")
            + (f", {cell(undecided)}" if undecided else ""))


def _run(diag: Diagnosis, heading: str) -> list[str]:
    steps = f", steps {diag.steps[0]}-{diag.steps[1]}" if diag.steps else ""
    resumed = ", resumed" if diag.resumed else ""
    out = [f"{heading} {markdown_code(diag.run)}: {verdict(diag)} - root {_root(diag)}{steps}{resumed}", ""]
    with_trends = bool(diag.trends)
    out.append("| layer | status | onset | key evidence |" + (" signals |" if with_trends else ""))
    out.append("|---|---|---:|---|" + ("---|" if with_trends else ""))
    for r in diag.layers:
        status = _ICON[r.status.value] + (" **(root)**" if r.layer == diag.root_layer else "")
        onset = "" if r.onset_step is None else str(r.onset_step)      # the earliest finding's onset
        row = f"| {r.layer} {LAYER_NAMES[r.layer]} | {status} | {onset} | {_evidence(diag, r.layer)} |"
        out.append(row + (f" {_trends(diag, r.layer)} |" if with_trends else ""))
    out.append("")
    root = diag.root_findings()
    if root:
        out.append(f"**Check first** (layer {diag.root_layer}, {LAYER_NAMES[diag.root_layer]}):")
        out.append("")
        lead = sorted(root, key=lambda f: f.severity != "fail")[0]
        out += [f"{i}. {step}" for i, step in enumerate(lead.check_first, 1)]
        others = [f"`stabdiag rules explain {f.rule}`" for f in root if f is not lead]
        if others:
            out += ["", "More on the other root findings: " + ", ".join(others)]
        if diag.methods_advice:
            out += ["", f"Methods: {cell(diag.methods_advice)}"]
        out.append("")
        out += _samples(diag)
    downstream = [f for f in diag.findings if f.downstream]
    if downstream:
        out.append(f"**Downstream of layer {diag.root_layer}** - likely consequences; "
                   "do not fix from the bottom up:")
        out.append("")
        out += [f"- {markdown_code(f.rule)} ({f.severity}, onset step {f.onset}): "
                f"{markdown_text(f.message, in_table=False)}"
                for f in downstream]
        out.append("")
    if diag.ignored_findings:
        out.append("**Ignored by the selection**, would have fired:")
        out.append("")
        out += [f"- `{f.rule}` ({f.severity}, onset step {f.onset}): {f.message}"
                for f in diag.ignored_findings]
        out.append("")
    if diag.unknown:
        out.append("<details><summary>Not judged: rules that lack a signal or enough data</summary>")
        out.append("")
        out += [f"- {markdown_code(u.rule)} (layer {u.layer}, {u.kind}): {cell(u.describe())}" for u in diag.unknown]
        out += ["", "</details>", ""]
    out += [f"> note: {markdown_text(n, in_table=False)}" for n in diag.notes]
    if diag.notes:
        out.append("")
    return out


def _samples(diag: Diagnosis) -> list[str]:
    """The samples' evidence: its headline, the named features, and the example answers collapsed."""
    evidence = diag.samples
    if evidence is None:
        return []
    out = [f"**Samples**: {markdown_text(evidence.headline(), in_table=False)}", ""]
    out += [f"- {markdown_text(e.describe(), in_table=False)}" for e in evidence.named]
    if evidence.named:
        out.append("")
    if evidence.examples:
        out += ["<details><summary>Three samples to read</summary>", ""]
        out += [f"- {x.role}, step {x.step}: {markdown_code(x.text)}" for x in evidence.examples]
        out += ["", "</details>", ""]
    return out


# GitHub refuses a job summary over 1 MiB (and shows none of it); a summary is read on one screen anyway.
# The sections of the runs that need reading go in, failures first, while they fit this budget; the rest
# are named in one line that points at the full reports.
MAX_BYTES = 200_000


def _summary_table(runs: list[Diagnosis]) -> list[str]:
    lines = ["| run | verdict | root layer | onset | first finding |", "|---|---|---|---:|---|"]
    for d in runs:
        lead = d.root_lead
        first = f"{markdown_code(tree.lead_said(d), in_table=True)} {cell(lead.title)}" if lead is not None else ""
        lines.append(f"| {markdown_code(d.run, in_table=True)} | {verdict(d)} | {_root(d)} | "
                     f"{'' if d.root_onset is None else d.root_onset} | {first} |")
    return lines


def _passes(passes: list[Diagnosis]) -> list[str]:
    """The passing runs folded: one line, their names in a collapsed list."""
    if not passes:
        return []
    names = ", ".join(markdown_code(d.run) + (f" ({cell(d.undecided_text())})" if d.undecided else "")
                      for d in passes)
    return [f"<details><summary>{len(passes)} pass</summary>", "", names, "", "</details>", ""]


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False,
           max_bytes: int = MAX_BYTES, **options) -> str:
    """Markdown: one run's section; for several, the count line, a table of the runs that need reading
    (failures first), the passes folded, then a section per run that needs reading while they fit
    `max_bytes` (GitHub's job summary takes 1 MiB), and the count line again."""
    lines = ["## stabdiag", ""]
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        lines += [f"> {cell(settings)}", ""]
    heading = "###"
    count = tree.count_line(diagnoses, fail_on, allow_unknown=allow_unknown)
    runs = tree.ordered(diagnoses)
    several = len(diagnoses) > 1
    if several:
        listed = [d for d in runs if tree.needs_reading(d)]
        lines += [f"**{count}**", ""]
        if listed:
            lines += _summary_table(listed) + [""]
        lines += _passes([d for d in runs if not tree.needs_reading(d)])
        sections = listed
    else:
        sections = runs
    size = len("\n".join(lines).encode())
    left_out: list[Diagnosis] = []
    for d in sections:
        part = _run(d, heading)
        part_size = len("\n".join(part).encode()) + 1
        if left_out or (size + part_size > max_bytes - 2_000 and d is not sections[0]):
            left_out.append(d)
            continue
        lines += part
        size += part_size
    if left_out:
        lines += [f"> {len(left_out)} more run(s) that need reading are in the table above but have no section "
                  f"here, to keep this summary under {max_bytes // 1000} kB: "
                  + ", ".join(markdown_code(d.run) for d in left_out[:20]) + (", ..." if len(left_out) > 20 else "")
                  + ". Every run is in the full reports (`stabdiag check -o report.html -o report.json`).", ""]
    not_read = options.get("not_read") or ()
    if not_read:                        # an empty run dir or a path that is gone is named, never skipped
        lines += [f"{heading} Not read ({len(not_read)})", ""]
        lines += [f"- {markdown_code(path)}: {cell(why)}" for path, why in not_read]
        lines.append("")
    if several:
        lines += [f"**{count}**", ""]
    return "\n".join(lines).rstrip() + "\n"
