"""What a watch says: one event when a finding appears, rises in severity or clears, and one when the
watch stops on --exit-on.  `to_dict` is the JSON of `--format jsonl` and of `--on-alert`'s stdin.

A live run is judged again and again on more data, and a judgement near a rule's bar can go either way
from one pass to the next.  `Tracker` keeps what a watch says steady (hysteresis): a finding once raised
stays until the evidence for it has been gone for a declared stretch (`clear_after` judgements in a row,
over at least `clear_share` times as many steps as the run had logged when it was last seen: by default
as many again), its severity only rises while it is held, and the live verdict is the worst held
severity.  So a verdict does not go fail -> pass -> fail while a run only
gets worse, and an alert is not said twice.  A precursor (a climb the detector dates before an event:
`event_step` in its evidence) is only ever seen once its event is in the data: its event is placed
before the event it preceded and says so, never as a warning ahead of it."""

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
    after_event: int | None = None   # a precursor seen only once its event (this step) was in the data

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
        if self.after_event is not None:
            text += f" (seen once its event at step {self.after_event} was logged: the climb before it, not an alert)"
        return f"{where}: {mark} {self.finding} [{sev}, layer {self.layer}{tail}] {text}  ({self.verdict}, {root})"

    def reaches(self, level: str) -> bool:
        """A finding now at or above `level` ('warn' or 'fail')."""
        return self.event in ("finding", "changed") and SEVERITY_RANK[self.severity] >= SEVERITY_RANK[level]

    @property
    def alerts(self) -> bool:
        """Whether --on-alert runs for it: a finding raised or risen, not a precursor seen after its event."""
        return self.event in ("finding", "changed") and self.after_event is None


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


def _late_precursor(f: Finding, diag: Diagnosis) -> int | None:
    """The step of the event a precursor finding preceded, when that event is already in the data."""
    event = f.evidence.get("event_step")
    if isinstance(event, int) and diag.steps is not None and diag.steps[1] >= event:
        return event
    return None


@dataclass
class _Held:
    finding: Finding
    severity: str                   # the highest severity raised since it appeared
    missing: int = 0                # judgements in a row without it
    missing_since: int | None = None   # the last logged step of the first of them


class Tracker:
    """One run's findings as a watch says them, steady between judgements (see the module's docstring).
    `update(diagnosis)` returns the events; `verdict` is the live verdict."""

    def __init__(self, clear_after: int = 3, clear_share: float = 1.0) -> None:
        self.clear_after, self.clear_share = clear_after, clear_share
        self.held: dict[str, _Held] = {}
        self.root_layer: int | None = None

    @property
    def verdict(self) -> str | None:
        worst = max((SEVERITY_RANK[h.severity] for h in self.held.values()), default=0)
        return {0: None, 1: "warn", 2: "fail"}[worst]

    def update(self, diag: Diagnosis, *, now: float | None = None) -> list[Event]:
        now = time.time() if now is None else now
        last = diag.steps[1] if diag.steps else None
        first = diag.steps[0] if diag.steps else 0
        fresh = {f.rule: f for f in diag.findings}
        raised: list[tuple[str, Finding, str | None]] = []       # (event, finding, previous severity)
        for rule, f in fresh.items():
            held = self.held.get(rule)
            if held is None:
                self.held[rule] = _Held(f, f.severity)
                raised.append(("finding", f, None))
                continue
            held.finding, held.missing, held.missing_since = f, 0, None
            if SEVERITY_RANK[f.severity] > SEVERITY_RANK[held.severity]:
                raised.append(("changed", f, held.severity))
                held.severity = f.severity
        cleared = []
        for rule, held in list(self.held.items()):
            if rule in fresh:
                continue
            held.missing += 1
            held.missing_since = held.missing_since if held.missing_since is not None else last
            gone_for = (last - held.missing_since) if last is not None and held.missing_since is not None else 0
            logged_before = (held.missing_since - first) if held.missing_since is not None else 0
            if held.missing >= self.clear_after and gone_for >= self.clear_share * logged_before:
                cleared.append(held)
                del self.held[rule]
        if diag.root_layer is not None or not self.held:
            self.root_layer = diag.root_layer
        verdict = self.verdict or diag.verdict
        base = {"run": diag.run, "step": last, "verdict": verdict, "root_layer": self.root_layer, "time": now}
        out = [Event(kind, finding=f.rule, layer=f.layer, severity=self.held[f.rule].severity, previous=previous,
                     onset=f.onset, downstream=f.downstream, message=f.message,
                     after_event=_late_precursor(f, diag), **base)
               for kind, f, previous in sorted(raised, key=lambda r: (r[1].onset, r[1].layer != diag.root_layer))]
        out += [Event("cleared", finding=h.finding.rule, layer=h.finding.layer, severity=h.severity,
                      onset=h.finding.onset, **base) for h in cleared]
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
