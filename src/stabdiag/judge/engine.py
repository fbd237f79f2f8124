"""Walk the four layers top-down: run every rule, then pick the root layer.

Each rule comes out one of three ways: a finding, judged and clean, or not judged (a signal it needs is
missing, or the data is too short or too sparse; the detector says why).  A layer passes only when one
of its rules judged the run and none fired (a rule whose clean reading is marked `clean_passes_layer =
false` counts only beside another); a run with no judged layer is `unknown`, never `pass`.

The root is chosen by time: among the failing findings (else the warning ones) that no other rule
explains as a consequence, the one whose onset comes first (a trend's onset is the change point of its
signal, with a 95% interval; an event's is its step).  A signal of another layer that moves only at or
after that change point is its consequence, within its interval too: its onset comes later and its
interval does not reach back before the start of the cause's (truncation that jumps as the policy
collapses is the collapse's).  Where onset intervals still overlap, the shallowest layer among them wins,
the layer order breaking ties only when time cannot.  Findings in deeper layers are downstream, because a
layer's failure makes every layer under it suspect (seed 000: lowering the LR did nothing when the cause
was the reward), and so are findings in shallower layers that began after the root's interval or moved
only after its change point (a reward that diverges after the policy collapsed); each says why.  Cause comes before
consequence: a finding a rule declares a consequence of another (equal rewards in every group after
entropy hit 0) is explained by it when that one began first, and is never the root.  Behaviour rules
judge the run only up to its first *persistent* non-finite step: after that the numbers describe a
broken model, not a training dynamic; a NaN or Inf the run comes back from (a skipped step, a loss-scale
overflow) cuts nothing.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from .. import _stats as st
from ..read.run import Run, is_bookkeeping
from ..signals.resolve import Signals, default_alias_table, resolve
from .detectors import CHAIN, Curve, Evidence, NotJudged, Quiet
from .detectors.early import PLACEHOLDER_SIGNALS, placeholder_at_start
from .diagnosis import SEVERITY_RANK, Diagnosis, Finding, LayerResult, Status, Unknown
from .rules import EVAL_ANY, RUN_INPUTS, Rule, load_rules, select_rules
from .stats.evidence import hinge_onset

LAYERS = (1, 2, 3, 4)
_FIT_END_POINTS = 20_000
_MIN_SIDE_POINTS = 3         # points the onset fit needs on each side of its change


def persistent_nonfinite_step(signals: Signals) -> int | None:
    """The first step at which a signal of the finite-status chain (seed 002) turns NaN or Inf and
    does not come back."""
    firsts = []
    for name in CHAIN:
        s = signals.get(name)
        if s is not None:
            i = st.persistent_nonfinite_index(s.values)
            if i is not None:
                firsts.append(int(s.steps[i]))
    return min(firsts) if firsts else None


def without_placeholders(signals: Signals) -> Signals:
    """The signals a step cannot measure as 0 (early.PLACEHOLDER_SIGNALS) without a recorder's placeholder 0.0
    at their first logged step (early.placeholder_at_start), said in a note.  An eval, a reward or a fraction
    keeps its first point whatever it reads: a score of 0 before training is data."""
    trimmed: dict = {}
    said: list[str] = []
    for name in PLACEHOLDER_SIGNALS:
        s = signals.series.get(name)
        if s is None or not placeholder_at_start(s.values):
            continue
        trimmed[name] = replace(s, steps=s.steps[1:], values=s.values[1:],
                                wall_time=None if s.wall_time is None else s.wall_time[1:])
        said.append(f"{s.key} at step {int(s.steps[0])}")
    if not trimmed:
        return signals
    note = "read as a recorder's placeholder, not data: the 0.0 of " + ", ".join(said)
    return replace(signals, series={**signals.series, **trimmed}, notes=(*signals.notes, note))


def _curve(signals: Signals, name: str, cutoff: int | None) -> Curve | None:
    s = signals.get(name)
    if s is None or len(s) == 0:
        return None
    steps, values = s.steps, s.values
    if cutoff is not None:
        end = int(np.searchsorted(steps, cutoff, side="right"))     # steps ascend: views, not copies
        steps, values = steps[:end], values[:end]
        if end == 0:
            return None
    return Curve(name, s.key, steps, values, s.superseded_steps, s.superseded_values)


def _wired(signals: Signals, name: str, cutoff: int | None) -> Curve | list[Curve] | None:
    """What a rule's input receives: a family (`reward:*`) as its list of curves, a signal as its curve.
    `eval:*` stands for every independent check the run logs: its evals, and beside them a reward function
    logged with weight 0 or an accuracy under its own key (Signals.checks, signals/checks.py)."""
    if name.endswith(":*"):
        names = signals.matching(name)
        if name == EVAL_ANY:
            names = [*names, *(n for n in signals.checks if n in signals.series)]
        return [c for n in names if (c := _curve(signals, n, cutoff)) is not None]
    return _curve(signals, name, cutoff)


def _inputs(rule: Rule, signals: Signals, cutoff: int | None) -> tuple[dict, list[str]]:
    """Detector keyword arguments for a rule, and the required signals the run lacks."""
    kwargs: dict = {}
    missing: list[str] = []
    for arg, name in rule.signals.items():
        if name in RUN_INPUTS:
            kwargs[arg] = signals.run.meta.get(name)
            continue
        kwargs[arg] = wired = _wired(signals, name, cutoff)
        if wired is None or (isinstance(wired, list) and not wired):      # no curve, or a family of none
            missing.append(name)
    for arg, name in rule.optional_signals.items():
        kwargs[arg] = _wired(signals, name, cutoff)
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


def _finding(rule: Rule, ev: Evidence, kind: str, ending=None) -> Finding:
    severity = rule.severity
    if ev.severity is not None and SEVERITY_RANK[ev.severity] < SEVERITY_RANK[severity]:
        severity = ev.severity
    message = _message(rule, ev)
    if ev.explained_by:
        # explained by the data (e.g. all-correct groups before the drop): a consequence, a warning
        severity = "warn"
        message += f" - explained by {ev.explained_by} (data difficulty, layer 1)"
    # the step the detector dates the finding at: its own `onset` where it gives one (a level rule's first
    # sustained crossing), else its start (an event's step); a trend's change point replaces it later
    dated = ev.values.get("onset")
    onset = int(dated) if isinstance(dated, (int, np.integer)) else ev.start_step
    return Finding(rule=rule.id, layer=rule.layer, severity=severity, title=rule.title,
                   start_step=ev.start_step, end_step=ev.end_step, message=message,
                   evidence=dict(ev.values), check_first=rule.advice(kind, getattr(ending, "kind", None)),
                   explained_by=ev.explained_by, onset=onset)


def _explain_consequences(findings: list[Finding], rules: dict[str, Rule]) -> list[Finding]:
    """A finding whose rule names the rule of another finding as a possible cause (equal rewards after
    entropy collapsed) becomes a warning explained by it, so it cannot be the root, when its signal moved
    at or after that one's change point: its onset is not before the start of the cause's onset interval."""
    out = []
    for f in findings:
        rule = rules[f.rule]
        # a cause that is itself explained by the data (an entropy drop after all-correct groups) cannot
        # turn that data finding into its consequence
        causes = [c for c in findings if c.rule in rule.consequence_of and c.onset_interval[0] <= f.onset_interval[1]
                  and not c.explained_by]
        if causes:
            cause = max(causes, key=lambda c: (SEVERITY_RANK[c.severity], -c.onset))
            values = {**f.evidence, "kind": "every sample of a group alike"} if "kind" in f.evidence else f.evidence
            message = _message(rule, Evidence(f.start_step, f.end_step, values))
            f = replace(f, severity="warn", explained_by=cause.rule, evidence=values,
                        message=f"{message} - a consequence of {cause.rule} (from step {cause.onset})")
        out.append(f)
    return out


def _layer(layer: int, findings: list[Finding], judged: list[str], unknown: list[Unknown],
           fitting: dict[str, Rule] | None = None, kind: str = "rl") -> LayerResult:
    """One layer's outcome; what it lacks counts only the rules in `fitting` (those a run of its kind can
    feed: an SFT run is never told to log a reward or a KL), each missing signal that fits the kind."""
    mine = tuple(f for f in findings if f.layer == layer)
    if mine:
        status = Status.FAIL if any(f.severity == "fail" for f in mine) else Status.WARN
    else:
        status = Status.PASS if judged else Status.UNKNOWN
    onset = min((f.onset for f in mine), default=None)        # the earliest finding's onset
    gaps = tuple(u for u in unknown if u.layer == layer and (fitting is None or u.rule in fitting))
    fits = default_alias_table().fits
    missing = tuple(dict.fromkeys(s for u in gaps for s in u.missing if fits(s, kind)))
    return LayerResult(layer, status, onset, mine, missing, tuple(judged), gaps)


def _fits_kind(rule: Rule, kind: str) -> bool:
    """A run of this kind can feed the rule: every signal it needs (one of them, for `requires = "any"`)
    is one such a run logs (signals.toml `kinds`)."""
    fits = default_alias_table().fits
    wired = [fits(s, kind) for s in rule.signals.values() if s not in RUN_INPUTS]
    return not wired or (any(wired) if rule.requires == "any" else all(wired))


def _not_for_kind(rule: Rule, missing: list[str], kind: str) -> str:
    """Why a rule is not judged on a run that cannot feed it, instead of "start logging" what it lacks."""
    if _fits_kind(rule, kind):
        return ""
    return f"an RL run's rule: it reads {', '.join(missing)}, which an SFT/pretraining run does not log"


def _moved_after(f: Finding, cause: Finding) -> bool:
    """`f` (of another layer) moved only at or after `cause`'s change point: its onset comes after that
    one's, and its onset interval does not reach back before the start of that one's (a signal whose own
    change could have come first - a straight rise dated anywhere in a wide interval - is not its
    consequence)."""
    return f.layer != cause.layer and cause.onset < f.onset and cause.onset_interval[0] <= f.onset_interval[0]


def _root(findings: list[Finding]) -> Finding | None:
    """The finding the run's trouble starts from, by time: among failing findings (else warnings) that no
    other rule explains as its consequence, the one whose onset comes first; where other such findings'
    onset intervals overlap its interval, the one of the shallowest layer among them (seed 000's layer
    order breaks ties only when time cannot).  A finding whose signal moved only at or after the change
    point of another layer's finding (_moved_after) is that one's consequence, within its interval too
    (truncation that jumps as the policy collapses is the collapse's, not an earlier layer-1 cause)."""
    causes = [f for f in findings if not (f.explained_by or "").startswith("L")]
    for severity in ("fail", "warn"):
        ranked = [f for f in causes if f.severity == severity]
        ranked = [f for f in ranked if not any(_moved_after(f, g) for g in ranked)] or ranked
        if ranked:
            first = min(ranked, key=lambda f: (f.onset, f.layer))
            low, high = first.onset_interval
            tied = [f for f in ranked if f.onset_interval[0] <= high and low <= f.onset_interval[1]]
            return min(tied, key=lambda f: (f.layer, f.onset))
    return None


def _mark_downstream(findings: list[Finding], root: Finding | None) -> list[Finding]:
    """Findings outside the root's layer are read as after it: deeper layers (a layer's failure makes
    every layer under it suspect) and shallower ones whose onset comes after the root's interval, or that
    moved only after its change point (_moved_after)."""
    if root is None:
        return findings
    out = []
    for f in findings:
        reason = None
        if f.layer > root.layer:
            reason = f"below the root layer {root.layer}"
        elif f.layer < root.layer and f.onset_interval[0] > root.onset_interval[1]:
            reason = f"began at step {f.onset}, after {root.rule} (from step {root.onset})"
        elif f.layer < root.layer and _moved_after(f, root):
            low, high = root.onset_interval
            reason = (f"began at step {f.onset}, after the change point of {root.rule} (step {root.onset}, "
                      f"95% interval {low}-{high})")
        out.append(replace(f, downstream=True, downstream_reason=reason) if reason else f)
    return out


def _fit_end(steps: np.ndarray, values: np.ndarray, end_step: int) -> int:
    """How many points the onset's two-phase fit reads: up to where the smoothed curve has covered 90% of
    its way from its start to where it stands at the finding's end.  A change that then holds (entropy
    that collapses and stays at 0) is two bends; one hinge fitted through the plateau too dates it late.
    A finding on under 20 points reads up to 3 points past its end."""
    end = int(np.searchsorted(steps, end_step, side="right"))
    ok = np.isfinite(values[:end])
    v = values[:end][ok]
    if len(v) < 20:
        # a short log: up to 3 points past the finding's end too (the fit's minimum on a side), so that a
        # change at its end (a jump between the last two points logged in its window) has a side after it
        return min(len(steps), end + _MIN_SIDE_POINTS)
    # on at most _FIT_END_POINTS block means, smoothed over at most 101: a running median 5% of a
    # 1M-point curve wide costs minutes, and the 90% mark needs no finer grain
    size = -(-len(v) // _FIT_END_POINTS)
    blocks = v[: len(v) // size * size].reshape(-1, size).mean(axis=1) if size > 1 else v
    smooth = st.rolling_median(blocks, min(101, max(3, len(blocks) // 20)))
    start, stop = float(st.median(blocks[: max(3, len(blocks) // 10)])), float(smooth[-1])
    if stop == start:
        return end
    progress = (smooth - start) / (stop - start)
    reached = np.flatnonzero(progress >= 0.9)
    # a jump (more than half the way between two points: an eval every 10 steps that collapses) is read with
    # the points of a side after it, which a level shift needs: read up to the jump's own point, the fit bent
    # a ramp 20 steps early, before the change that caused it
    jump = len(reached) and reached[0] > 0 and progress[reached[0] - 1] < 0.5
    cut = (int(reached[0]) + (_MIN_SIDE_POINTS if jump else 1)) * size if len(reached) else len(v)
    return int(np.flatnonzero(ok)[max(cut, 10) - 1]) + 1 if cut < len(v) else end


def _with_change_points(findings: list[Finding], signals: Signals, rules: dict[str, Rule]) -> list[Finding]:
    """Each finding of a trend rule gets its onset from one change-point model (the hinge of the best
    two-phase linear fit to its signal up to the finding's end, or the level shift of a jump between two
    logged points, evidence.hinge_onset) with a 95% interval;
    the evidence holds both (`onset`, `onset_low`, `onset_high`; `change_step` = `onset`) and the message
    quotes them."""
    out = []
    for f in findings:
        s = signals.get(str(f.evidence.get("signal", "")))
        if s is None or not rules[f.rule].spec.trend:
            out.append(f)
            continue
        end = _fit_end(s.steps, s.values, f.end_step)
        onset = hinge_onset(s.steps[:end], s.values[:end], min_side_points=_MIN_SIDE_POINTS)
        if onset is None:
            out.append(f)
            continue
        out.append(replace(f, message=f"{f.message}; onset {onset.text()}", onset=onset.step,
                           evidence={**f.evidence, "onset": onset.step, "onset_low": onset.low,
                                     "onset_high": onset.high, "change_step": onset.step}))
    return out


Advisor = Callable[[Run, Signals, Diagnosis, dict], Diagnosis]


def diagnose(run: Run, *, rules: tuple[Rule, ...] | None = None, mapping: dict[str, str] | None = None,
             select: list[str] | None = None, ignore: list[str] | None = None,
             params: dict[str, dict[str, float]] | None = None, guess: bool = True,
             advise: Advisor | None = None) -> Diagnosis:
    """Check one run against the rules and return its Diagnosis; `guess=False` reads only --map and the
    alias table (no signal guessed from a metric's name).  `advise(run, signals, diagnosis, params)`
    adds what stabdiag.advise makes of the judgement (cost, forecasts, methods); it is passed in because
    judging never imports the layers above it."""
    rules = select_rules(rules if rules is not None else load_rules(), select, ignore)
    signals = without_placeholders(resolve(run, mapping, guess=guess))
    cutoff = persistent_nonfinite_step(signals)
    findings: list[Finding] = []
    quiet_notes: list[str] = []       # judged clean, with a reason a user should see (sharpening)
    unknown: list[Unknown] = []
    judged: dict[int, list[str]] = {layer: [] for layer in LAYERS}
    resolved = {r.id: {**r.params, **(params or {}).get(r.id, {})} for r in rules}
    with st.remembered():             # the rules read the same curves' noise and EMAs again and again: once each
        for rule in rules:
            kwargs, missing = _inputs(rule, signals, None if rule.spec.sees_nonfinite else cutoff)
            if missing:
                unknown.append(Unknown(rule.id, rule.layer, tuple(missing),
                                       _not_for_kind(rule, missing, signals.kind)))
                continue
            result = rule.spec.fn(**kwargs, **resolved[rule.id])
            if rule.requires == "event" and not isinstance(result, Evidence):
                continue                      # an event rule only reports; its silence judges nothing
            if isinstance(result, NotJudged):
                unknown.append(Unknown(rule.id, rule.layer, (), result.reason, result.undecided))
                continue
            judged[rule.layer].append(rule.id)
            if isinstance(result, Quiet):
                quiet_notes.append(f"{rule.id}: {result.note}")
            elif result is not None:
                findings.append(_finding(rule, result, signals.kind, run.meta.get("ending")))
    by_id = {r.id: r for r in rules}
    for layer, ids in judged.items():
        # a rule whose clean reading does not pass a layer by itself (L1.eval-below-start: an eval that did
        # not fall says nothing of a reward that rose beside it) counts only beside one that does
        if not any(by_id[i].clean_passes_layer for i in ids):
            judged[layer] = []
    findings = _explain_consequences(_with_change_points(findings, signals, by_id), by_id)
    root_finding = _root(findings)
    root = root_finding.layer if root_finding is not None else None
    findings = _mark_downstream(findings, root_finding)
    fitting = {r.id: r for r in rules if _fits_kind(r, signals.kind)}
    layers = [_layer(layer, findings, judged[layer], unknown, fitting, signals.kind) for layer in LAYERS]
    all_steps = [s.steps for k, s in run.series.items() if len(s) and not is_bookkeeping(k)] or \
        [s.steps for s in run.series.values() if len(s)]
    span = (int(min(a[0] for a in all_steps)), int(max(a[-1] for a in all_steps))) if all_steps else None
    notes = list(run.notes) + list(signals.notes) + quiet_notes
    if run.duplicate_steps:
        notes.append(f"resumed run: {run.duplicate_steps} step(s) were written again after a restart; "
                     "the last write of each step was used")
    diagnosis = Diagnosis(run=run.name, layers=tuple(layers), findings=tuple(findings), unknown=tuple(unknown),
                          signals=signals.mapping(), root_layer=root, notes=tuple(notes), resumed=run.resumed,
                          first_nonfinite_step=_first_nonfinite(signals), steps=span, sources=run.sources,
                          framework=signals.framework, kind=signals.kind, ending=run.meta.get("ending"),
                          signal_sources={n: s.source for n, s in signals.series.items() if s.source},
                          guessed=signals.guessed_keys())
    return advise(run, signals, diagnosis, resolved) if advise is not None else diagnosis


def _first_nonfinite(signals: Signals) -> int | None:
    firsts = [int(s.steps[np.argmax(~np.isfinite(s.values))]) for name in CHAIN
              if (s := signals.get(name)) is not None and s.nonfinite_count]
    return min(firsts) if firsts else None
