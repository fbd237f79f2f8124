"""GitHub Actions workflow commands: an `::error` / `::warning` annotation per finding of a run that needs
reading, within what GitHub shows, and one `::notice` with the counts.

    ::error file=runs/a/metrics.jsonl,title=L1.reward-eval-divergence (root layer 1)::reward 0.37 -> ...

A `fail` finding is an error and a `warn` finding a warning, failing runs first; a downstream finding is
named in its root's annotation; a run nothing could judge is one warning (a notice with --allow-unknown);
a passing run has none.  GitHub shows 10 annotations of each kind per step: the rest are counted in the
closing notice, which points at the job summary.

Values are escaped the way the Actions runner expects (`%`, CR and LF everywhere; also `:` and `,` inside
properties), so a message can never end the command early; a value from the data is `visible` first
(report._escape), so its newlines are `\\n`, never a line the runner reads.
"""

from __future__ import annotations

from ..judge.diagnosis import Diagnosis, Status
from ..judge.rules import LAYER_NAMES
from . import tree
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
    return tree.source(diag)


# GitHub shows at most 10 annotations of each kind (error, warning, notice) per step, and 50 per job:
# past that they are dropped unseen.  Each kind is capped here, the last notice kept for the count line.
MAX_PER_KIND = 10


def _role(diag: Diagnosis, f) -> str:
    if f.layer == diag.root_layer:
        return f"root layer {f.layer}"
    return f"layer {f.layer}"


def _finding(diag: Diagnosis, f) -> tuple[str, str, str]:
    """One finding of a failing run: its message with the onset every format quotes, the first check at
    the root, and the downstream findings folded in (a consequence is no annotation of its own)."""
    message = (f"{visible(diag.run)}: {visible(f.title)}. {visible(f.message)} "
               f"(onset step {f.onset}; window {f.start_step}-{f.end_step})")
    if f.layer == diag.root_layer and f.check_first:
        message += f"\nCheck first: {visible(f.check_first[0])}"
        downstream = [f"{d.rule} ({d.severity}, onset step {d.onset})" for d in diag.findings if d.downstream]
        if downstream:
            message += (f"\nDownstream of layer {diag.root_layer}, likely consequences (do not fix from the "
                        f"bottom up): {', '.join(downstream)}")
    return _LEVEL[f.severity], message, f"stabdiag {f.rule} ({_role(diag, f)})"


def _unknown(diag: Diagnosis, allow_unknown: bool) -> tuple[str, str, str]:
    lacks = "; ".join(f"layer {r.layer} ({LAYER_NAMES[r.layer]}) {r.unknown_reason}: {visible(tree.lacks(r, diag))}"
                      for r in diag.layers if r.status is Status.UNKNOWN)
    return ("notice" if allow_unknown else "warning", f"{visible(diag.run)}: nothing could be judged. {lacks}",
            "stabdiag run not judged")


def annotations(diagnoses: list[Diagnosis], allow_unknown: bool = False) -> list[tuple[str, str, str, str]]:
    """(kind, message, file, title) for every run that needs reading, failures first: each finding of a
    failing or warning run that is not downstream, what --select/--ignore left out that would fire, one
    per run that nothing could judge, the run's notes.  A passing run gets none: it is in the count."""
    out = []
    for diag in tree.ordered(diagnoses):
        file = _file(diag)
        if diag.verdict in ("fail", "warn"):
            for f in sorted((f for f in diag.findings if not f.downstream),
                            key=lambda f: (f.layer != diag.root_layer, f.severity != "fail", f.onset)):
                kind, message, title = _finding(diag, f)
                out.append((kind, message, file, title))
        elif diag.verdict == "unknown":
            kind, message, title = _unknown(diag, allow_unknown)
            out.append((kind, message, file, title))
        if diag.ignored_findings:
            out.append(("warning", f"{visible(diag.run)}: {visible(diag.verdict_text())}", file,
                        "stabdiag rules ignored (--select/--ignore)"))
        if tree.needs_reading(diag):    # a note is a note here too, not a `warning:` on stderr
            out += [("notice", f"{visible(diag.run)}: {visible(note)}", file, "stabdiag note") for note in diag.notes]
    return out


def render(diagnoses: list[Diagnosis], *, allow_unknown: bool = False, fail_on: str = "fail", **options) -> str:
    """The annotations of the runs that need reading, each kind capped at what GitHub shows, then one
    notice with the counts and what was left out."""
    wanted: list[tuple[str, str, str, str]] = []
    settings = summary_line(options.get("settings"))
    if settings:                        # a config file or a flag that changes the verdict is never silent
        wanted.append(("notice", visible(settings), "", "stabdiag settings"))
    wanted += annotations(diagnoses, allow_unknown)
    for path, why in options.get("not_read") or ():      # named, never skipped silently
        wanted.append(("warning", f"{visible(path)}: not read: {visible(why)}", "", "stabdiag not read"))
    room = {"error": MAX_PER_KIND, "warning": MAX_PER_KIND, "notice": MAX_PER_KIND - 1}
    lines, left = [], {"error": 0, "warning": 0, "notice": 0}
    for kind, message, file, title in wanted:
        if room[kind] > 0:
            room[kind] -= 1
            lines.append(command(kind, message, file=file, title=title))
        else:
            left[kind] += 1
    count = tree.count_line(diagnoses, fail_on, allow_unknown=allow_unknown)
    noisy = [d for d in diagnoses if d.verdict == "pass" and d.undecided]
    if len(noisy) > 3:
        text = count + f"; {len(noisy)} of the passes with rules too noisy to tell"
    else:          # a pass beside a change nobody could confirm is not a clean bill: named
        text = count + "".join(f"; {visible(d.run)}: {visible(d.verdict_text())}" for d in noisy)
    dropped = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in left.items() if n)
    if dropped:
        text += f". Not shown here (GitHub shows {MAX_PER_KIND} annotations of a kind per step): {dropped}"
    text += ". Every run is in the job summary and the reports (-o FILE.md/.html/.json)."
    lines.append(command("notice", text, title="stabdiag " + count))
    return "\n".join(lines) + "\n"
