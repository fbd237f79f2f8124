"""Walk the four layers top-down: run every rule's detector, then pick the root layer.

The root is the first failing layer (else the first warning one); findings below it are marked
downstream, because a layer's failure makes every layer under it suspect (seed 000: lowering the LR did
nothing when the cause was the reward).  Behaviour rules judge the run only up to its first non-finite
step: after that the numbers describe a broken model, not a training dynamic.
"""

from __future__ import annotations

import string
from dataclasses import replace

import numpy as np

from .detectors import CHAIN, Curve, Evidence
from .diagnosis import SEVERITY_RANK, Diagnosis, Finding, LayerResult, Status, Unknown
from .rules import EVAL_ANY, Rule, load_rules, select_rules
from .run import Run
from .signals import Signals, resolve

LAYERS = (1, 2, 3, 4)


def first_nonfinite_step(signals: Signals) -> int | None:
    """The first step at which a signal of the finite-status chain (seed 002) is NaN or Inf."""
    firsts = []
    for name in CHAIN:
        s = signals.get(name)
        if s is not None:
            bad = ~np.isfinite(s.values)
            if bad.any():
                firsts.append(int(s.steps[np.argmax(bad)]))
    return min(firsts) if firsts else None


def _curve(signals: Signals, name: str, cutoff: int | None) -> Curve | None:
    s = signals.get(name)
    if s is None or len(s) == 0:
        return None
    steps, values = s.steps, s.values
    if cutoff is not None:
        keep = steps <= cutoff
        steps, values = steps[keep], values[keep]
        if len(steps) == 0:
            return None
    return Curve(name, s.key, steps, values)


def _inputs(rule: Rule, signals: Signals, cutoff: int | None) -> tuple[dict, list[str]]:
    """Detector keyword arguments for a rule, and the required signals the run lacks."""
    kwargs: dict = {}
    missing: list[str] = []
    for arg, name in rule.signals.items():
        if name == EVAL_ANY:
            curves = [c for n in signals.evals() if (c := _curve(signals, n, cutoff)) is not None]
            kwargs[arg] = curves
            if not curves:
                missing.append(EVAL_ANY)
        else:
            kwargs[arg] = _curve(signals, name, cutoff)
            if kwargs[arg] is None:
                missing.append(name)
    for arg, name in rule.optional_signals.items():
        kwargs[arg] = _curve(signals, name, cutoff)
    present = len(rule.signals) - len(missing)
    if rule.requires == "any" and present > 0:
        missing = []
    return kwargs, missing


class _Fields(dict):
    def __missing__(self, key):
        return "{" + key + "}"


def _message(rule: Rule, ev: Evidence) -> str:
    """Fill the rule's message template; a field the evidence lacks stays visible as {name}."""
    fields = _Fields(ev.values)
    fields.update(start=ev.start_step, end=ev.end_step)
    try:
        return string.Formatter().vformat(rule.message, (), fields)
    except (ValueError, TypeError):
        return f"{rule.title} (steps {ev.start_step}-{ev.end_step})"


def _finding(rule: Rule, ev: Evidence) -> Finding:
    severity = rule.severity
    if ev.severity is not None and SEVERITY_RANK[ev.severity] < SEVERITY_RANK[severity]:
        severity = ev.severity
    message = _message(rule, ev)
    if ev.explained_by:
        # explained by the data (e.g. all-correct groups): a consequence, reported as a warning
        severity = "warn"
        message += f" - explained by {ev.explained_by} (data difficulty, layer 1)"
    return Finding(rule=rule.id, layer=rule.layer, severity=severity, title=rule.title,
                   start_step=ev.start_step, end_step=ev.end_step, message=message,
                   evidence=dict(ev.values), check_first=rule.check_first,
                   explained_by=ev.explained_by)


def _layer(layer: int, findings: list[Finding], ran: bool, missing: list[str]) -> LayerResult:
    mine = tuple(f for f in findings if f.layer == layer)
    if mine:
        status = Status.FAIL if any(f.severity == "fail" for f in mine) else Status.WARN
    else:
        status = Status.PASS if ran else Status.UNKNOWN
    onset = min((f.start_step for f in mine), default=None)
    return LayerResult(layer, status, onset, mine, tuple(dict.fromkeys(missing)))


def _root(findings: list[Finding]) -> int | None:
    """The first layer with a failing finding, else the first with a warning."""
    for severity in ("fail", "warn"):
        layers = [f.layer for f in findings if f.severity == severity]
        if layers:
            return min(layers)
    return None


def diagnose(run: Run, *, rules: tuple[Rule, ...] | None = None, mapping: dict[str, str] | None = None,
             select: list[str] | None = None, ignore: list[str] | None = None,
             params: dict[str, dict[str, float]] | None = None) -> Diagnosis:
    """Check one run against the rules and return its Diagnosis."""
    rules = select_rules(rules if rules is not None else load_rules(), select, ignore)
    signals = resolve(run, mapping)
    cutoff = first_nonfinite_step(signals)
    findings: list[Finding] = []
    unknown: list[Unknown] = []
    ran = dict.fromkeys(LAYERS, False)
    missing_by_layer: dict[int, list[str]] = {layer: [] for layer in LAYERS}
    for rule in rules:
        sees_all = rule.spec.sees_nonfinite
        kwargs, missing = _inputs(rule, signals, None if sees_all else cutoff)
        if missing:
            unknown.append(Unknown(rule.id, rule.layer, tuple(missing)))
            missing_by_layer[rule.layer].extend(missing)
            continue
        ran[rule.layer] = True
        values = {**rule.all_params(), **(params or {}).get(rule.id, {})}
        evidence = rule.spec.fn(**kwargs, **values)
        if evidence is not None:
            findings.append(_finding(rule, evidence))
    root = _root(findings)
    findings = [f if root is None or f.layer <= root else replace(f, downstream=True) for f in findings]
    layers = [_layer(layer, findings, ran[layer], missing_by_layer[layer]) for layer in LAYERS]
    all_steps = [s.steps for s in run.series.values() if len(s)]
    span = (int(min(a[0] for a in all_steps)), int(max(a[-1] for a in all_steps))) if all_steps else None
    notes = list(run.notes) + list(signals.notes)
    if run.resumed:
        notes.append(f"resumed run: {run.duplicate_steps} step(s) were written more than once; "
                     "the last write of each step was used")
    return Diagnosis(run=run.name, layers=tuple(layers), findings=tuple(findings), unknown=tuple(unknown),
                     signals=signals.mapping(), root_layer=root, notes=tuple(notes), resumed=run.resumed,
                     first_nonfinite_step=cutoff, steps=span, sources=run.sources,
                     framework=signals.framework)
