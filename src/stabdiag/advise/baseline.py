"""Compare a run with a baseline (before and after a fix): per layer what changed, and whether the fix
acted on the root layer.

The question after a fix is not "is it green now" but "did we fix the cause": a change that quiets the
grad-norm spikes (layer 3) while the reward loophole (layer 1) is still open treats a symptom, and the
comparison says so instead of counting the run as improved.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..judge.diagnosis import SEVERITY_RANK, Diagnosis
from ..judge.rules import LAYER_NAMES


@dataclass(frozen=True, slots=True)
class LayerChange:
    """One layer before and after: status, onset, and which rules stopped, started or kept firing."""

    layer: int
    before: str
    after: str
    onset_before: int | None
    onset_after: int | None
    resolved: tuple[str, ...]
    new: tuple[str, ...]
    persisting: tuple[str, ...]

    @property
    def change(self) -> str:
        """'better', 'worse', 'same', or 'not comparable' when either side could not be judged."""
        if "unknown" in (self.before, self.after):
            return "same" if self.before == self.after else "not comparable"
        delta = SEVERITY_RANK[self.after] - SEVERITY_RANK[self.before]
        if delta == 0 and (self.resolved or self.new):
            return "better" if self.resolved and not self.new else "worse" if self.new and not self.resolved \
                else "same"
        return "better" if delta < 0 else "worse" if delta > 0 else "same"

    def to_dict(self) -> dict:
        return {"layer": self.layer, "before": self.before, "after": self.after, "change": self.change,
                "onset_before": self.onset_before, "onset_after": self.onset_after,
                "resolved": list(self.resolved), "new": list(self.new), "persisting": list(self.persisting)}


@dataclass(frozen=True, slots=True)
class Comparison:
    """A run against its baseline."""

    baseline: str
    run: str
    verdict_before: str
    verdict_after: str
    root_before: int | None
    root_after: int | None
    layers: tuple[LayerChange, ...]
    acted_on_root: bool | None      # None when the baseline had no root layer
    summary: str
    method_changes: tuple[tuple[str, int], ...] = ()   # (what changed, the layer the method acts on)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "run": self.run, "verdict_before": self.verdict_before,
                "verdict_after": self.verdict_after, "root_before": self.root_before,
                "root_after": self.root_after, "acted_on_root": self.acted_on_root, "summary": self.summary,
                "method_changes": [{"change": what, "layer": layer} for what, layer in self.method_changes],
                "layers": [c.to_dict() for c in self.layers]}


def _layer_change(before: Diagnosis, after: Diagnosis, layer: int) -> LayerChange:
    b, a = before.layers[layer - 1], after.layers[layer - 1]
    rules_b = [f.rule for f in b.findings]
    rules_a = [f.rule for f in a.findings]
    return LayerChange(layer, b.status.value, a.status.value, b.onset_step, a.onset_step,
                       resolved=tuple(r for r in rules_b if r not in rules_a),
                       new=tuple(r for r in rules_a if r not in rules_b),
                       persisting=tuple(r for r in rules_a if r in rules_b))


def _summary(root_before: int | None, root_after: int | None, changes: tuple[LayerChange, ...],
             acted: bool | None) -> str:
    if root_before is None:
        if root_after is None:
            return "the baseline had no failing layer, and neither does this run"
        return f"regression: the baseline had no failing layer; now layer {root_after} " \
               f"({LAYER_NAMES[root_after]}) is the root"
    root = changes[root_before - 1]
    name = f"layer {root_before} ({LAYER_NAMES[root_before]})"
    if acted:
        if root.after == "pass":
            tail = f"; layer {root_after} ({LAYER_NAMES[root_after]}) is now the root" if root_after \
                else "; no layer fails now"
            return f"the fix acted on the root {name}: it now passes{tail}"
        return f"the fix acted on the root {name} ({root.before} -> {root.after}), but it still {root.after}s"
    moved = [c.layer for c in changes if c.layer != root_before and c.change == "better"]
    if moved:
        where = ", ".join(str(x) for x in moved)
        return (f"the fix did not act on the root {name}, which still {root.after}s; it changed only layer "
                f"{where} - symptoms downstream of the cause; do not fix from the bottom up")
    return f"no change at the root {name}: it still {root.after}s"


def _method_changes(baseline: Diagnosis, run: Diagnosis) -> tuple[tuple[str, int], ...]:
    """The stability methods switched on, off or retuned between the two runs' configurations."""
    before = {m.name: m for m in baseline.methods}
    after = {m.name: m for m in run.methods}
    out = []
    for name in dict.fromkeys([*before, *after]):
        b, a = before.get(name), after.get(name)
        if b is None:
            out.append((f"{a.label()} switched on", a.layer))
        elif a is None:
            out.append((f"{b.label()} switched off", b.layer))
        elif b.value != a.value:
            out.append((f"{name} {b.source_key.rsplit('.', 1)[-1]} {b.value} -> {a.value}", a.layer))
    return tuple(out)


def _config_summary(changes: tuple[tuple[str, int], ...], root: int | None) -> str:
    if not changes or root is None:
        return ""
    layers = sorted({layer for _, layer in changes})
    if root in layers:
        return f"; the config change acts on the root layer {root}"
    return (f"; the config change acts on layer {', '.join(map(str, layers))} while the root was layer {root} "
            f"({LAYER_NAMES[root]}): it cannot fix the cause")


def compare(baseline: Diagnosis, run: Diagnosis) -> Comparison:
    """What changed from `baseline` (e.g. before a fix) to `run` (after it), layer by layer, and which
    stability methods the configuration changed, each placed on the layer it acts on."""
    changes = tuple(_layer_change(baseline, run, layer) for layer in range(1, 5))
    acted: bool | None = None
    if baseline.root_layer is not None:
        root = changes[baseline.root_layer - 1]
        acted = root.change == "better" or bool(root.resolved)
    methods = _method_changes(baseline, run)
    summary = _summary(baseline.root_layer, run.root_layer, changes, acted) + _config_summary(methods,
                                                                                             baseline.root_layer)
    return Comparison(baseline.run, run.run, baseline.verdict, run.verdict, baseline.root_layer,
                      run.root_layer, changes, acted, summary, methods)
