"""The result of checking a run: per-layer status, the root layer, findings with evidence.

`Diagnosis.to_dict()` is the JSON contract (schema_version below); field names are stable strings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

SCHEMA_VERSION = "1.0"


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"


SEVERITY_RANK = {"pass": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that fired on one run."""

    rule: str
    layer: int
    severity: str
    title: str
    start_step: int
    end_step: int
    message: str
    evidence: dict
    check_first: tuple[str, ...]
    downstream: bool = False
    explained_by: str | None = None

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "severity": self.severity, "title": self.title,
                "start_step": self.start_step, "end_step": self.end_step, "message": self.message,
                "evidence": _jsonable(self.evidence), "downstream": self.downstream,
                "explained_by": self.explained_by, "check_first": list(self.check_first)}


@dataclass(frozen=True, slots=True)
class Unknown:
    """A rule that could not run because the run lacks signals it needs."""

    rule: str
    layer: int
    missing: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "missing": list(self.missing)}


@dataclass(frozen=True, slots=True)
class LayerResult:
    layer: int
    status: Status
    onset_step: int | None
    findings: tuple[Finding, ...] = ()
    missing_signals: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"layer": self.layer, "status": self.status.value, "onset_step": self.onset_step,
                "missing_signals": list(self.missing_signals)}


@dataclass(frozen=True, slots=True)
class Trend:
    """A signal downsampled for display (sparklines): `values` are equal-width step bins over
    `Diagnosis.steps`; None marks a bin without points, NaN a bin holding a non-finite value."""

    signal: str
    key: str
    layer: int
    values: tuple[float | None, ...]
    first: float | None = None     # first and last finite values, for "0.30 -> 0.81" labels
    last: float | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What `stabdiag check` concluded about one run."""

    run: str
    layers: tuple[LayerResult, ...]
    findings: tuple[Finding, ...]
    unknown: tuple[Unknown, ...]
    signals: dict[str, str]
    root_layer: int | None
    notes: tuple[str, ...] = ()
    resumed: bool = False
    first_nonfinite_step: int | None = None
    steps: tuple[int, int] | None = None
    sources: tuple[str, ...] = field(default=())
    framework: str | None = None        # the framework recognised from the run's keys, e.g. "verl"
    trends: tuple[Trend, ...] = field(default=(), compare=False)   # display only; not in to_dict()

    @property
    def verdict(self) -> str:
        worst = max((SEVERITY_RANK[f.severity] for f in self.findings), default=0)
        return {0: "pass", 1: "warn", 2: "fail"}[worst]

    def root_findings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.layer == self.root_layer)

    def exit_code(self, fail_on: str = "fail") -> int:
        """1 when a finding is at or above `fail_on` ('warn' or 'fail'), else 0."""
        bar = SEVERITY_RANK[fail_on]
        return int(any(SEVERITY_RANK[f.severity] >= bar for f in self.findings))

    def to_dict(self) -> dict:
        return {"run": self.run, "verdict": self.verdict, "root_layer": self.root_layer,
                "layers": [layer.to_dict() for layer in self.layers],
                "findings": [f.to_dict() for f in self.findings],
                "unknown": [u.to_dict() for u in self.unknown],
                "signals": dict(self.signals), "framework": self.framework, "resumed": self.resumed,
                "first_nonfinite_step": self.first_nonfinite_step,
                "steps": list(self.steps) if self.steps else None, "notes": list(self.notes)}


def report_dict(diagnoses: list[Diagnosis], version: str) -> dict:
    """The top-level JSON document for one `check` invocation."""
    return {"stabdiag_version": version, "schema_version": SCHEMA_VERSION,
            "runs": [d.to_dict() for d in diagnoses]}


def _jsonable(value):
    """Evidence as plain JSON: numpy scalars to Python, NaN/Inf to strings (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
