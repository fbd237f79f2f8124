"""The concise report: one line per finding, `path:step: RULE message`, as ruff's and a compiler's are, for
an editor's problem list, grep, or a CI log read line by line.

    runs/a/metrics.jsonl:78: L1.reward-eval-divergence [fail, root layer 1] reward 0.37 -> 0.76 ...
    runs/b/metrics.jsonl: not judged: layer 3 (numeric update) missing signal: start logging loss ...
    2 runs: 1 fail, 1 unknown

`step` is the finding's onset, the one every format quotes.  Only the runs that need reading have lines
(failures first; a downstream finding says whose consequence it is); the last line is the count.
"""

from __future__ import annotations

from ..judge.diagnosis import Diagnosis, Status
from ..judge.rules import LAYER_NAMES
from . import tree
from ._escape import visible


def _role(diag: Diagnosis, f) -> str:
    if f.downstream:
        return f"downstream of layer {diag.root_layer}"
    return f"root layer {f.layer}" if f.layer == diag.root_layer else f"layer {f.layer}"


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False, **options) -> str:
    lines = []
    for diag in tree.ordered(diagnoses):
        where = visible(tree.source(diag) or diag.run)
        if diag.verdict in ("fail", "warn"):
            for f in sorted(diag.findings, key=lambda f: (f.downstream, f.layer != diag.root_layer, f.onset)):
                lines.append(f"{where}:{f.onset}: {f.rule} [{f.severity}, {_role(diag, f)}] {visible(f.message)}")
        elif diag.verdict == "unknown":
            lacks = "; ".join(f"layer {r.layer} ({LAYER_NAMES[r.layer]}) {r.unknown_reason}: {tree.lacks(r, diag)}"
                              for r in diag.layers if r.status is Status.UNKNOWN)
            lines.append(f"{where}: not judged: {visible(lacks)}")
        for f in diag.ignored_findings:
            lines.append(f"{where}:{f.onset}: {f.rule} [ignored by --select/--ignore, would be {f.severity}] "
                         f"{visible(f.message)}")
    for path, why in options.get("not_read") or ():
        lines.append(f"{visible(path)}: not read: {visible(why)}")
    lines.append(tree.count_line(diagnoses, fail_on, allow_unknown=allow_unknown))
    return "\n".join(lines) + "\n"
