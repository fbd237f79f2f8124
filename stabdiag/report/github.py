"""GitHub Actions workflow commands: one `::error` / `::warning` annotation per finding.

    ::error file=runs/a/metrics.jsonl,title=L1.reward-eval-divergence (root layer 1)::reward 0.37 -> ...

A `fail` finding is an error and a `warn` finding a warning; layers that could not be judged get one
`::notice` each.  Values are escaped the way the Actions runner expects (`%`, CR and LF everywhere;
also `:` and `,` inside properties), so a message can never end the command early; a value from the data
is `visible` first (report._escape), so its newlines are `\\n`, never a line the runner reads.
"""

from __future__ import annotations

import os

from ..judge.diagnosis import Diagnosis, Status
from ..judge.rules import LAYER_NAMES
from ._escape import github_data, github_property, visible
from .settings import summary_line

_LEVEL = {"fail": "error", "warn": "warning"}


def escape_data(text: str) -> str:
    """A message whose values are already `visible` (report._escape); its own line breaks kept as %0A."""
    return github_data(text, lines=True)


def escape_property(text: str) -> str:
    return github_property(text)


def command(level: str, message: str, **properties: str) -> str:
    """One workflow command line, e.g. command("error", "msg", file="a.csv", title="t")."""
    props = ",".join(f"{k}={escape_property(v)}" for k, v in properties.items() if v)
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def _file(diag: Diagnosis) -> str:
    """The run's first source as a path relative to the working directory (the repository root in
    Actions), so the annotation links to the file; empty for online runs."""
    if not diag.sources or "://" in diag.sources[0]:
        return ""
    path = diag.sources[0]
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def render(diagnoses: list[Diagnosis], **options) -> str:
    lines: list[str] = []
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        lines.append(command("notice", visible(settings), title="stabdiag settings"))
    for diag in diagnoses:
        file = _file(diag)
        for f in diag.findings:
            if f.downstream:
                role = f"downstream of layer {diag.root_layer}"
            elif f.layer == diag.root_layer:
                role = f"root layer {f.layer}"
            else:
                role = f"layer {f.layer}"
            message = (f"{visible(diag.run)}: {visible(f.title)}. {visible(f.message)} "
                       f"(steps {f.start_step}-{f.end_step})")
            if f.layer == diag.root_layer and f.check_first:
                message += f"\nCheck first: {visible(f.check_first[0])}"
            elif f.downstream:
                message += f"\nLikely a consequence of layer {diag.root_layer}; do not fix from the bottom up."
            lines.append(command(_LEVEL[f.severity], message, file=file,
                                 title=f"stabdiag {f.rule} ({role})"))
        if diag.ignored:
            lines.append(command("warning" if diag.ignored_findings else "notice",
                                 f"{visible(diag.run)}: {visible(diag.verdict_text())}", file=file,
                                 title="stabdiag rules ignored (--select/--ignore)"))
        for u in diag.undecided:        # a pass beside a change nobody could confirm is not a clean bill
            lines.append(command("notice", f"{visible(diag.run)}: {u.rule} not judged: {visible(u.reason)}",
                                 file=file, title=f"stabdiag {u.rule} too noisy to tell"))
        for r in diag.layers:
            if r.status is Status.UNKNOWN:
                lines.append(command("notice", f"{visible(diag.run)}: layer {r.layer} ({LAYER_NAMES[r.layer]}) not "
                                     f"judged ({r.unknown_reason}): {visible(r.not_judged_text())}",
                                     file=file, title=f"stabdiag layer {r.layer} not judged"))
        for note in diag.notes:         # a note is a note here too, not a `warning:` on stderr
            lines.append(command("notice", f"{visible(diag.run)}: {visible(note)}", file=file,
                                 title="stabdiag note"))
    for path, why in options.get("not_read") or ():      # named, never skipped silently
        lines.append(command("warning", f"{visible(path)}: not read: {visible(why)}", title="stabdiag not read"))
    return "\n".join(lines) + ("\n" if lines else "")
