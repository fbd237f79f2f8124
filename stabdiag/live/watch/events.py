"""What a watch says: one event when a finding appears, changes severity or clears, and one when the
watch stops on --exit-on.  `to_dict` is the JSON of `--format jsonl` and of `--on-alert`'s stdin."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ...judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding

KINDS = ("finding", "changed", "cleared", "stop")


@dataclass(frozen=True, slots=True)
class Event:
    event: str                   # one of KINDS
    run: str
    step: int | None             # the last step the run has logged
    verdict: str                 # the run's verdict now: pass, warn, fail, unknown
    root_layer: int | None
    finding: str | None = None   # the rule id
    layer: int | None = None
    severity: str | None = None  # now (for `cleared`: what it was)
    previous: str | None = None  # the severity before, for `changed`
    onset: int | None = None     # the finding's onset, as every report quotes it
    downstream: bool = False
    message: str = ""
    time: float = 0.0            # seconds since the epoch

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """One line for a terminal."""
        where = f"{self.run} step {self.step}" if self.step is not None else self.run
        root = f"root layer {self.root_layer}" if self.root_layer else "no root"
        if self.event == "stop":
            return f"{where}: stopping: {self.message} ({self.verdict}, {root})"
        mark = {"finding": "+", "changed": "~", "cleared": "-"}[self.event]
        sev = f"{self.previous} -> {self.severity}" if self.event == "changed" else self.severity
        tail = " (downstream)" if self.downstream else ""
        text = "cleared" if self.event == "cleared" else self.message
        return f"{where}: {mark} {self.finding} [{sev}, layer {self.layer}{tail}] {text}  ({self.verdict}, {root})"

    def reaches(self, level: str) -> bool:
        """A finding now at or above `level` ('warn' or 'fail')."""
        return self.event in ("finding", "changed") and SEVERITY_RANK[self.severity] >= SEVERITY_RANK[level]


def changes(before: dict[str, Finding], diag: Diagnosis, *, now: float | None = None) -> list[Event]:
    """The events between a run's findings before (by rule id) and its new diagnosis: appeared, changed
    severity, cleared; the root layer's findings first, so that they are read first."""
    now = time.time() if now is None else now
    step = diag.steps[1] if diag.steps else None
    base = {"run": diag.run, "step": step, "verdict": diag.verdict, "root_layer": diag.root_layer, "time": now}
    after = {f.rule: f for f in diag.findings}
    out = []
    for rule, f in after.items():
        old = before.get(rule)
        if old is None or old.severity != f.severity:
            out.append(Event("finding" if old is None else "changed", finding=rule, layer=f.layer,
                             severity=f.severity, previous=None if old is None else old.severity,
                             onset=f.onset, downstream=f.downstream, message=f.message, **base))
    for rule, old in before.items():
        if rule not in after:
            out.append(Event("cleared", finding=rule, layer=old.layer, severity=old.severity, **base))
    out.sort(key=lambda e: (e.downstream, e.layer != diag.root_layer, e.layer or 0))
    return out


def stop_event(diag: Diagnosis, level: str, *, now: float | None = None) -> Event:
    """The last event of a watch stopped by --exit-on: the run, its root layer and root findings."""
    roots = diag.root_findings() or diag.findings
    worst = [f for f in roots if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[level]] or list(roots)
    first = worst[0] if worst else None
    return Event("stop", diag.run, diag.steps[1] if diag.steps else None, diag.verdict, diag.root_layer,
                 finding=first.rule if first else None, layer=first.layer if first else None,
                 severity=first.severity if first else None, onset=first.onset if first else None,
                 message=f"a {level} finding (--exit-on {level})" + (f": {first.message}" if first else ""),
                 time=time.time() if now is None else now)
