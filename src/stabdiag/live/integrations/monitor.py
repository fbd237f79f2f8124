"""A run judged from inside its loop: `log(step, metrics)` keeps the history, every `check_every` steps
the history is judged with the engine, and `should_stop` says whether a finding at a chosen severity, in a
chosen layer, asks to stop.  The framework callbacks (transformers, Lightning) are thin over this."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence

from ...errors import ConfigError
from ...judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding
from ...read.run import Run
from ..watch._store import PointStore
from ..watch.events import Event, changes
from ._governor import CheckGovernor

DIAGNOSIS_FILE = "stabdiag_diagnosis.json"


class Monitor:
    """Judges the metrics a loop logs, every `check_every` steps.

    `stop_on`: the severity that asks to stop ("fail", "warn", or None: never); `stop_layers`: the layers
    whose findings may stop the run (default all four); `max_overhead` (default 0.01): the most of the
    training wall time that judging may take: after a check that cost c seconds the next waits until
    c / max_overhead seconds have passed (looking again every `check_every` steps; None: every
    `check_every` steps whatever the cost), except after a non-finite value was logged (see _governor);
    `clock`: the time source that budget is measured with (a test's fake clock); the rest (`mapping`,
    `select`, `ignore`, `params`, `rules_dirs`, `guess`) as for `stabdiag.diagnose`."""

    def __init__(self, *, name: str = "run", check_every: int = 10, stop_on: str | None = "fail",
                 stop_layers: Sequence[int] = (1, 2, 3, 4), output_dir: str | os.PathLike[str] | None = None,
                 mapping: dict[str, str] | None = None, select: list[str] | None = None,
                 ignore: list[str] | None = None, params: dict | None = None, rules_dirs: list[str] | None = None,
                 guess: bool = True, max_overhead: float | None = 0.01,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        from ..watch.watcher import chosen_rules

        if not isinstance(check_every, int) or check_every < 1:
            raise ConfigError(f"check_every: expected a whole number of steps >= 1; got {check_every!r}")
        if stop_on not in (None, "warn", "fail"):
            raise ConfigError(f"stop_on: expected one of warn, fail or None; got {stop_on!r}")
        if not set(stop_layers) <= {1, 2, 3, 4}:
            raise ConfigError(f"stop_layers: expected layers among 1, 2, 3, 4; got {list(stop_layers)!r}")
        if max_overhead is not None and (isinstance(max_overhead, bool) or not isinstance(max_overhead, (int, float))
                                         or not 0 < max_overhead <= 1):
            raise ConfigError(f"max_overhead: expected a fraction in (0, 1]; got {max_overhead!r}")
        self.name, self.check_every, self.stop_on = name, check_every, stop_on
        self.governor = CheckGovernor(check_every, max_overhead, clock)
        self.stop_layers = tuple(stop_layers)
        self.output_dir = None if output_dir is None else os.fspath(output_dir)
        self._rules = chosen_rules(rules_dirs, select, ignore)
        self._options = {"mapping": mapping, "params": params, "guess": guess}
        self._store = PointStore()
        self._last_check: int | None = None
        self._last_step: int | None = None
        self._findings: dict[str, Finding] = {}
        self.diagnosis: Diagnosis | None = None
        self.events: list[Event] = []
        self.checks = 0
        self.stop_reason: str | None = None
        self.stop_step: int | None = None

    @property
    def should_stop(self) -> bool:
        return self.stop_reason is not None

    @property
    def max_overhead(self) -> float | None:
        """The budget the checks keep to: the governor's, which a callback may switch off (None)."""
        return self.governor.max_overhead

    def log(self, step: int, metrics: Mapping[str, object]) -> list[Finding]:
        """Record one step's metrics (numbers; anything else is left out); when a check is due (see
        `max_overhead`), judge the run: the findings that appeared or changed severity."""
        step = int(step)
        for key, value in metrics.items():
            number = _number(value)
            if number is not None:
                self._store.append(str(key), step, number)
                if not math.isfinite(number):
                    self.governor.urgent = True
        self._last_step = step
        if self._last_check is None:
            self._last_check = step
        if self.governor.due(step):
            return self.check()
        return []

    def check(self) -> list[Finding]:
        """Judge the history now: the findings that appeared or changed severity since the last check."""
        self._last_check = self._last_step
        if not len(self._store):
            return []
        from ...advise import advise
        from ...judge.engine import diagnose

        started = self.governor.clock()
        run = Run(self.name, self._store.series(), (), {"format": "in-process"})
        diag = diagnose(run, rules=self._rules, advise=advise, **self._options)
        self.checks += 1
        self.diagnosis = diag
        events = changes(self._findings, diag)
        self._findings = {f.rule: f for f in diag.findings}
        self.events.extend(events)
        new = [self._findings[e.finding] for e in events if e.event in ("finding", "changed")]
        if not self.should_stop:
            self._maybe_stop(diag)
        self.governor.checked(self._last_step, started)
        return new

    def _maybe_stop(self, diag: Diagnosis) -> None:
        if self.stop_on is None:
            return
        bar = SEVERITY_RANK[self.stop_on]
        hits = [f for f in diag.findings if f.layer in self.stop_layers and SEVERITY_RANK[f.severity] >= bar]
        if hits:
            hits.sort(key=lambda f: (f.downstream, f.layer != diag.root_layer, f.layer))
            f = hits[0]
            self.stop_step = self._last_step
            root = f"root layer {diag.root_layer}" if diag.root_layer else "no root"
            self.stop_reason = (f"stabdiag: {f.rule} ({f.severity}, layer {f.layer}, {root}) at step "
                                f"{self._last_step}: {f.message}")

    def to_dict(self) -> dict:
        """The final diagnosis (the versioned JSON of `stabdiag check --format json`) and why it stopped."""
        from ...report import render

        if self.diagnosis is None or (self._last_step is not None and self._last_check != self._last_step):
            self.check()
        report = json.loads(render([self.diagnosis], "json")) if self.diagnosis is not None else None
        return {"stopped": self.should_stop, "stop_reason": self.stop_reason, "stop_step": self.stop_step,
                "checks": self.checks, "check_every": self.check_every, "max_overhead": self.max_overhead,
                "postponed": self.governor.postponed, "last_step": self._last_step,
                "report": report}

    def write(self, output_dir: str | os.PathLike[str] | None = None) -> str | None:
        """Write `to_dict()` as JSON to <output_dir>/stabdiag_diagnosis.json; the path (None: no dir)."""
        folder = os.fspath(output_dir) if output_dir is not None else self.output_dir
        if folder is None:
            return None
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, DIAGNOSIS_FILE)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=2, default=str)
        return path


def _number(value) -> float | None:
    """A logged value as a float (a Python or numpy number, a one-element tensor); None for the rest
    (text, a list, a tensor of many elements)."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return float(item())
        except (TypeError, ValueError, RuntimeError):
            return None
    return None
