"""The result of checking a run: per-layer status, the root layer, findings with evidence.

`Diagnosis.to_dict()` is the JSON contract (schema_version below); field names are stable strings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

SCHEMA_VERSION = "3.1"   # 2.0: verdict "unknown", not-judged reasons; 2.1: what a selection ignored, the
                         # layer status "ignored", verdict_text; 2.2: unknown[].undecided, and verdict_text
                         # names the rules too noisy to tell; 3.0: one onset per finding (findings[].onset,
                         # .onset_interval), a layer's onset_step is its earliest finding's onset (it was the
                         # earliest window start), and the report's top-level `summary`; 3.1: samples (what
                         # logged completions show, present only for a run that logged them).
                         # The schema: stabdiag/report/schema.py


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"
    IGNORED = "ignored"         # every rule of the layer was left out by --select / --ignore


SEVERITY_RANK = {"pass": 0, "warn": 1, "fail": 2}

# Exit codes, as pytest's: 0 clean, 1 findings, 2 usage or input error, 3 nothing could be judged.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_NOT_JUDGED = 0, 1, 2, 3
# The notebook view is the HTML reporter's, and judge never imports a reporter: stabdiag.report hands its
# renderer in when it is imported (show_in_notebooks_with), so the arrow points from report down to here.
_NOTEBOOK_VIEW: list = []


def show_in_notebooks_with(render) -> None:
    """`render(diagnosis) -> str` draws a Diagnosis in a notebook (`_repr_html_`)."""
    _NOTEBOOK_VIEW[:] = [render]


FINDING_COLUMNS = ("run", "rule", "layer", "severity", "root", "downstream", "explained_by", "onset",
                   "start_step", "end_step", "title", "message")          # Diagnosis.to_frame()


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that fired on one run.

    `onset` is the one step every report quotes for when the finding began: the change point of its
    signal for a trend rule (with its 95% interval in the evidence), else the step its detector dates it
    at (the first sustained crossing of a level rule, the step of an event).  `start_step`..`end_step`
    is the window the rule read and shaded; it is not an onset.  Left out, `onset` is `start_step`."""

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
    downstream_reason: str | None = None     # why it is read as after the root (its layer, or its onset)
    onset: int = None                        # type: ignore[assignment]  # None: start_step (__post_init__)

    def __post_init__(self) -> None:
        if self.onset is None:
            object.__setattr__(self, "onset", self.start_step)

    @property
    def onset_interval(self) -> tuple[int, int]:
        """The 95% interval of the step the finding began (the change-point model's, where a trend rule's
        finding has one; the onset itself otherwise)."""
        low, high = self.evidence.get("onset_low"), self.evidence.get("onset_high")
        if isinstance(low, int) and isinstance(high, int) and low <= self.onset <= high:
            return low, high
        return self.onset, self.onset

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "severity": self.severity, "title": self.title,
                "onset": self.onset, "onset_interval": list(self.onset_interval),
                "start_step": self.start_step, "end_step": self.end_step, "message": self.message,
                "evidence": _jsonable(self.evidence), "downstream": self.downstream,
                "downstream_reason": self.downstream_reason,
                "explained_by": self.explained_by, "check_first": list(self.check_first)}


@dataclass(frozen=True, slots=True)
class Unknown:
    """A rule that did not judge the run: a signal it needs is not logged (`missing`), or the data it
    has is too short or too sparse to judge (`reason`).  `undecided`: the data shows a change of the size
    the rule looks for but can neither confirm it nor rule it out ("too noisy to tell")."""

    rule: str
    layer: int
    missing: tuple[str, ...]
    reason: str = ""
    undecided: bool = False

    @property
    def kind(self) -> str:
        return "missing signal" if self.missing else "too little data"

    def describe(self) -> str:
        return self.reason or ("start logging " + ", ".join(self.missing))

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "kind": self.kind, "missing": list(self.missing),
                "reason": self.describe(), "undecided": self.undecided}


@dataclass(frozen=True, slots=True)
class LayerResult:
    """One layer's outcome.  `pass` means at least one of its rules judged the run and nothing fired;
    `unknown` means none could judge it, for the reason in `unknown_reason`."""

    layer: int
    status: Status
    onset_step: int | None
    findings: tuple[Finding, ...] = ()
    missing_signals: tuple[str, ...] = ()
    judged: tuple[str, ...] = ()            # the rules that judged this layer
    not_judged: tuple[Unknown, ...] = ()     # the rules that could not

    @property
    def unknown_reason(self) -> str | None:
        """Why an unknown layer is unknown: "missing signal" or "too little data"."""
        if self.status is not Status.UNKNOWN:
            return None
        return "too little data" if any(u.kind == "too little data" for u in self.not_judged) \
            else "missing signal"

    def not_judged_text(self) -> str:
        """Why the layer's rules could not judge, as a user can act on it."""
        short = list(dict.fromkeys(u.reason for u in self.not_judged if u.kind == "too little data"))
        if short:
            return "; ".join(short[:2]) + (f" (+{len(short) - 2} more)" if len(short) > 2 else "")
        return "start logging " + ", ".join(self.missing_signals)

    def to_dict(self) -> dict:
        return {"layer": self.layer, "status": self.status.value, "onset_step": self.onset_step,
                "unknown_reason": self.unknown_reason, "judged_rules": list(self.judged),
                "missing_signals": list(self.missing_signals)}


@dataclass(frozen=True, slots=True)
class Trend:
    """A signal downsampled for display (sparklines): `values` are equal-width step bins over
    `Diagnosis.steps`; None marks a bin without points, NaN a bin holding a non-finite value.  `points`:
    how many points the signal has (a reporter draws 3 points as 3 points)."""

    signal: str
    key: str
    layer: int
    values: tuple[float | None, ...]
    first: float | None = None     # first and last finite values, for "0.30 -> 0.81" labels
    last: float | None = None
    points: int = 0


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
    kind: str = "rl"                    # "rl", or "sft" for supervised fine-tuning / pretraining
    ending: object | None = None        # stabdiag.read.ending.Ending: how the run ended, where the logs say
    cost: dict | None = None            # stabdiag.advise.cost.estimate: wasted compute, or the reason there is none
    forecasts: tuple = ()               # stabdiag.advise.forecast.Forecast: where a run still going is heading
    methods: tuple = ()                 # stabdiag.advise.methods.ActiveMethod: stability methods the run has on
    methods_advice: str | None = None   # which of them act on the root layer, and what would
    signal_sources: dict[str, str] = field(default_factory=dict)   # signal -> the file it was read from
    guessed: dict[str, str] = field(default_factory=dict)   # signal -> key, for signals guessed from names
    trends: tuple[Trend, ...] = field(default=(), compare=False)   # display only; not in to_dict()
    ignored: tuple[str, ...] = ()           # rule ids the selection (--select / --ignore) left out
    ignored_layers: tuple[int, ...] = ()    # layers all of whose rules were left out
    ignored_findings: tuple[Finding, ...] = ()   # what the left-out rules would have found
    samples: object | None = None           # stabdiag.advise.samples.SampleForensics: what logged samples show

    @property
    def verdict(self) -> str:
        """fail / warn by the worst finding; else pass when some layer was judged clean; else unknown
        (nothing could be judged, which is never a pass)."""
        worst = max((SEVERITY_RANK[f.severity] for f in self.findings), default=0)
        if worst == 0 and not any(layer.status is Status.PASS for layer in self.layers):
            return "unknown"
        return {0: "pass", 1: "warn", 2: "fail"}[worst]

    def ignored_text(self) -> str:
        """What the selection left out, as a reader takes it in: "L1 and L3", "L3.grad-norm-spike",
        "L1 and 3 L3 rules"; empty when nothing was."""
        parts = [f"L{n}" for n in self.ignored_layers]
        for layer in sorted({int(rid[1]) for rid in self.ignored} - set(self.ignored_layers)):
            ids = [rid for rid in self.ignored if int(rid[1]) == layer]
            parts += ids if len(ids) <= 2 else [f"{len(ids)} L{layer} rules"]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else ""

    @property
    def undecided(self) -> tuple[Unknown, ...]:
        """The rules that saw a change of the size they look for but could not confirm it or rule it out."""
        return tuple(u for u in self.unknown if u.undecided)

    def undecided_text(self) -> str:
        """"L1.reward-eval-divergence too noisy to tell", or "3 rules too noisy to tell"; empty when none."""
        ids = [u.rule for u in self.undecided]
        if not ids:
            return ""
        return (", ".join(ids) if len(ids) <= 2 else f"{len(ids)} rules") + " too noisy to tell"

    def verdict_text(self) -> str:
        """The verdict, never a bare pass when rules were left out or could not tell: "pass, L1 and L3
        ignored (ignored rules would fire: L3.nonfinite-values fail)", "pass, L1.length-confound too
        noisy to tell"."""
        text = self.verdict
        left_out = self.ignored_text()
        if left_out:
            text += f", {left_out} ignored"
            if self.ignored_findings:
                fired = ", ".join(f"{f.rule} {f.severity}" for f in self.ignored_findings)
                text += f" (ignored rules would fire: {fired})"
        undecided = self.undecided_text()
        return text + (f", {undecided}" if undecided else "")

    def root_findings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.layer == self.root_layer and not f.downstream)

    @property
    def root_lead(self) -> Finding | None:
        """The root layer's lead finding, the one a row of runs names and whose checks come first: its first
        failing finding, else its first; None without a root."""
        root = self.root_findings()
        return sorted(root, key=lambda f: f.severity != "fail")[0] if root else None

    @property
    def root_onset(self) -> int | None:
        """The root layer's onset (its earliest finding's), the one a row of runs quotes; None without a root."""
        return None if self.root_layer is None else self.layers[self.root_layer - 1].onset_step

    def exit_code(self, fail_on: str = "fail", *, allow_unknown: bool = False) -> int:
        """EXIT_FINDINGS when a finding is at or above `fail_on` ('warn' or 'fail'); EXIT_NOT_JUDGED when
        nothing could be judged (verdict unknown) unless `allow_unknown`; else EXIT_CLEAN.  A CI gate must
        not pass a run it never read, nor call it failing: "not judged" is its own answer."""
        bar = SEVERITY_RANK[fail_on]
        if any(SEVERITY_RANK[f.severity] >= bar for f in self.findings):
            return EXIT_FINDINGS
        if self.verdict == "unknown" and not allow_unknown:
            return EXIT_NOT_JUDGED
        return EXIT_CLEAN

    def to_frame(self):
        """The findings as a pandas DataFrame, one row per finding (run, rule, layer, severity, root,
        downstream, explained_by, onset, start_step, end_step, title, message), the root's first."""
        import pandas as pd

        rows = [{"run": self.run, "rule": f.rule, "layer": f.layer, "severity": f.severity,
                 "root": f.layer == self.root_layer and not f.downstream, "downstream": f.downstream,
                 "explained_by": f.explained_by, "onset": f.onset, "start_step": f.start_step, "end_step": f.end_step,
                 "title": f.title, "message": f.message} for f in self.findings]
        return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))

    def _repr_html_(self) -> str | None:
        """A notebook shows the diagnosis as the HTML report's section for the run, timeline included
        when trends are attached (`stabdiag.report.sparkline.with_trends`); before stabdiag.report is
        imported (stabdiag.diagnose imports it), the plain repr."""
        return _NOTEBOOK_VIEW[0](self) if _NOTEBOOK_VIEW else None

    def to_dict(self) -> dict:
        return {"run": self.run, "verdict": self.verdict, "root_layer": self.root_layer,
                "layers": [layer.to_dict() for layer in self.layers],
                "findings": [f.to_dict() for f in self.findings],
                "unknown": [u.to_dict() for u in self.unknown],
                "signals": dict(self.signals), "signal_sources": dict(self.signal_sources),
                "guessed": dict(self.guessed),
                "framework": self.framework, "kind": self.kind,
                "ending": self.ending.to_dict() if self.ending is not None else None,
                "cost": self.cost, "forecasts": [f.to_dict() for f in self.forecasts],
                "methods": [m.to_dict() for m in self.methods], "methods_advice": self.methods_advice,
                "resumed": self.resumed,
                "first_nonfinite_step": self.first_nonfinite_step,
                "steps": list(self.steps) if self.steps else None, "notes": list(self.notes),
                "verdict_text": self.verdict_text(), "ignored": list(self.ignored),
                "ignored_layers": list(self.ignored_layers),
                "ignored_findings": [f.to_dict() for f in self.ignored_findings],
                **({"samples": self.samples.to_dict()} if self.samples is not None else {})}


def exit_code_of(diagnoses, fail_on: str = "fail", *, allow_unknown: bool = False) -> int:
    """The exit code of a check of several runs: findings (1) outrank runs never judged (3), which
    outrank clean runs (0); no run at all is clean."""
    codes = {d.exit_code(fail_on, allow_unknown=allow_unknown) for d in diagnoses}
    for code in (EXIT_FINDINGS, EXIT_NOT_JUDGED):
        if code in codes:
            return code
    return EXIT_CLEAN


VERDICTS = ("fail", "warn", "unknown", "pass")      # worst first: the order a tree of runs is read in


def overall_verdict(diagnoses) -> str:
    """The worst verdict of the runs: fail, else warn, else unknown (a run never read is not a pass),
    else pass; no run at all is a pass."""
    seen = {d.verdict for d in diagnoses}
    return next((v for v in VERDICTS if v in seen), "pass")


def summary(diagnoses, fail_on: str = "fail", *, allow_unknown: bool = False) -> dict:
    """The counts of a check of several runs, its overall verdict and its exit code (before --exit-zero):
    the JSON report's `summary`, and what every other format's count line says."""
    counts = {v: sum(d.verdict == v for d in diagnoses) for v in ("pass", "warn", "fail", "unknown")}
    return {"runs": len(diagnoses), **counts, "verdict": overall_verdict(diagnoses),
            "exit_code": exit_code_of(diagnoses, fail_on, allow_unknown=allow_unknown), "fail_on": fail_on,
            "allow_unknown": allow_unknown}


def report_dict(diagnoses: list[Diagnosis], version: str, fail_on: str = "fail", *,
                allow_unknown: bool = False) -> dict:
    """The top-level JSON document for one `check` invocation."""
    return {"stabdiag_version": version, "schema_version": SCHEMA_VERSION,
            "summary": summary(diagnoses, fail_on, allow_unknown=allow_unknown),
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
