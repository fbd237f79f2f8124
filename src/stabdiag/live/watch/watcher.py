"""The watch loop: wait for the files to change, read what they gained, judge each run that gained points
again (at most every `interval_s`) with the same rules and engine as `check`, and say what changed.

The library part (`Watcher.step`) returns events and never prints; `Watcher.run` is the loop that
`stabdiag watch` runs: it writes events (a line each, or JSON with format="jsonl"), runs --on-alert,
stops with 1 on --exit-on, and with 0 on SIGINT (Ctrl-C, a supervisor's SIGINT).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ...errors import ConfigError
from ...judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding
from .events import Event, Tracker, stop_event
from .runs import Finder, LiveRun


@dataclass(frozen=True)
class WatchSettings:
    interval_s: float = 1.0
    format: str = "text"                  # text or jsonl
    exit_on: str | None = None            # None, "warn" or "fail"
    on_alert: tuple[str, ...] = ()        # argv; the event's JSON on stdin
    polling: bool = False                 # never use watchfiles
    mapping: dict[str, str] | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    params: dict | None = None
    rules_dirs: list[str] | None = None
    guess: bool = True
    rules: tuple | None = None            # rules already loaded and selected (the CLI's); else loaded here
    load_options: dict = field(default_factory=dict)
    one_run: bool = False                 # the logs side by side in one folder are one run (--one-run)
    split_files: bool = False             # ... each its own run (--split-files); neither: as check decides
    clear_after: int = 3                  # judgements in a row without a finding before it is said cleared
    clear_share: float = 1.0              # ... over this many times the steps logged when it was last seen

    def __post_init__(self) -> None:
        if self.format not in ("text", "jsonl"):
            raise ConfigError(f"--format: expected one of text, jsonl; got {self.format!r}")
        if self.exit_on not in (None, "warn", "fail"):
            raise ConfigError(f"--exit-on: expected one of warn, fail; got {self.exit_on!r}")
        if not self.interval_s > 0:
            raise ConfigError(f"--interval: expected a number of seconds above 0; got {self.interval_s!r}")
        if not (isinstance(self.clear_after, int) and self.clear_after >= 1):
            raise ConfigError(f"--clear-after: expected a whole number of judgements >= 1; got {self.clear_after!r}")
        if self.one_run and self.split_files:
            raise ConfigError("--one-run and --split-files: give one of them, not both")


class Watcher:
    """Watches the runs under some paths (files, run dirs, trees of runs, wandb:// URIs)."""

    def __init__(self, paths: list[str], settings: WatchSettings | None = None) -> None:
        from functools import partial

        from ...advise import advise
        from ...judge.engine import diagnose

        self.settings = s = settings or WatchSettings()
        self.paths = list(paths)
        # loaded once, and a bad --select fails here, before any file is read
        self._rules = s.rules if s.rules is not None else chosen_rules(s.rules_dirs, s.select, s.ignore)
        self._diagnose = partial(diagnose, advise=advise)
        self.finders = [_finder(p, s) for p in self.paths]
        self.findings: dict[str, dict[str, Finding]] = {}     # each run's findings as last judged
        self.diagnoses: dict[str, Diagnosis] = {}              # each run's last judgement: what `check` says
        self.trackers: dict[str, Tracker] = {}                 # each run's findings as the watch says them
        self._alerted: set[tuple[str, str, str]] = set()       # (run, rule, severity) an alert ran for
        self._judged_at = -float("inf")
        self.stopped: Event | None = None

    def step(self, *, now: float | None = None) -> list[Event]:
        """One pass: read what the files gained; when `interval_s` has passed since the last judgement,
        judge every run that gained points; the events, and `stopped` set when --exit-on is reached."""
        for finder in self.finders:
            finder.poll()
        now = time.monotonic() if now is None else now
        if now - self._judged_at < self.settings.interval_s:
            return []
        dirty = [live for finder in self.finders for live in finder.runs.values() if live.dirty]
        if not dirty:
            return []
        self._judged_at = now
        events: list[Event] = []
        for live in dirty:
            events.extend(self._judge(live))
        return events

    def _judge(self, live: LiveRun) -> list[Event]:
        live.dirty = False
        run = live.run()
        if run is None:
            return []
        s = self.settings
        diag = self._diagnose(run, rules=self._rules, mapping=s.mapping, params=s.params, guess=s.guess)
        self.diagnoses[live.name] = diag
        tracker = self.trackers.setdefault(live.name, Tracker(s.clear_after, s.clear_share))
        events = tracker.update(diag)
        self.findings[live.name] = {f.rule: f for f in diag.findings}
        # --exit-on reads the judgement itself, as `check` on the same file would give it, never a held finding
        if s.exit_on and self.stopped is None and any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[s.exit_on]
                                                      for f in diag.findings):
            self.stopped = stop_event(diag, s.exit_on)
            events.append(self.stopped)
        return events

    def final(self) -> dict[str, Diagnosis]:
        """Each run judged on everything read so far, whatever the interval: the watch's last word, the
        same as `stabdiag check` on the same files."""
        for finder in self.finders:
            finder.poll()
        for finder in self.finders:
            for live in finder.runs.values():
                if live.dirty:
                    self._judge(live)
        return dict(self.diagnoses)

    def run(self, out=None, err=None) -> int:
        """The loop: 1 when --exit-on is reached, 0 when interrupted (SIGINT)."""
        from ._wake import waiter

        out = out or sys.stdout
        err = err or sys.stderr
        _interruptible()
        wait, how = waiter(self.paths, self.settings.interval_s, polling=self.settings.polling)
        # on stderr in both formats (stdout is the events' stream): a supervisor can wait for this line
        print(f"watching {', '.join(self.paths)} ({how}, judged at most every {self.settings.interval_s:g} s; "
              "Ctrl-C stops)", file=err, flush=True)
        for path in self.paths:
            if "://" not in path and not os.path.exists(path):
                print(f"warning: {path}: does not exist yet; waiting for it", file=err)
        said: set[str] = set()
        status = None
        if self.settings.format == "text" and getattr(out, "isatty", lambda: False)():
            from ._status import LiveStatus

            status = LiveStatus(out).__enter__()
        try:
            while True:
                events = self.step()
                for event in events:
                    self._emit(event, out, err, status)
                if status is not None:
                    status.update(self.diagnoses)
                self._say_problems(said, err)
                if self.stopped is not None:
                    return 1
                wait()
        except KeyboardInterrupt:
            if self.settings.format == "text":
                print("stopped (interrupted)", file=err)
                try:
                    for name, diag in sorted(self.final().items()):
                        print(f"final: {name}: {diag.verdict_text()}"
                              + (f", root layer {diag.root_layer}" if diag.root_layer else ""), file=err)
                except Exception:    # noqa: BLE001  the last word must never turn an interrupt into a crash
                    pass
            return 0
        finally:
            if status is not None:
                status.__exit__(None, None, None)

    def _emit(self, event: Event, out, err, status=None) -> None:
        if status is not None:
            status.print(event.line())
        else:
            text = json.dumps(event.to_dict()) if self.settings.format == "jsonl" else event.line()
            print(text, file=out, flush=True)
        key = (event.run, event.finding or "", event.severity or "")
        if self.settings.on_alert and event.alerts and key not in self._alerted:     # one alert per finding
            self._alerted.add(key)
            _alert(self.settings.on_alert, event, err)

    def _say_problems(self, said: set[str], err) -> None:
        for finder in self.finders:
            for live in finder.runs.values():
                for problem in live.problems():
                    if problem not in said:
                        said.add(problem)
                        print(f"warning: {problem}", file=err)


def chosen_rules(rules_dirs: list[str] | None, select: list[str] | None, ignore: list[str] | None) -> tuple:
    """The rules to judge with, loaded once; a --select or --ignore prefix that names no rule is refused."""
    from ...judge.rules import load_rules, select_rules

    rules = load_rules(rules_dirs)
    for flag, prefixes in (("select", select), ("ignore", ignore)):
        for prefix in prefixes or ():
            if not select_rules(rules, [prefix]):
                raise ConfigError(f"{flag}: no rule id or prefix {prefix!r} (ids look like L3.loss-spike; "
                                  "`stabdiag rules list` lists them)")
    return select_rules(rules, select, ignore)


def _finder(path: str, s: WatchSettings):
    if "://" in path:
        from ...read.formats import uri_loader
        from .online import OnlineFinder

        if uri_loader(path) is None:
            raise ConfigError(f"{path}: not a path or a URI stabdiag reads (wandb://ENTITY/PROJECT/RUN_ID)")
        return OnlineFinder(path, s.interval_s)
    return Finder(path, dict(s.load_options), grouping={"one_run": s.one_run, "split_files": s.split_files})


def _alert(argv: tuple[str, ...], event: Event, err) -> None:
    """Run the alert command (no shell) with the event's JSON on stdin; its output goes to stderr, and
    a command that fails is a warning, never the end of the watch."""
    try:
        done = subprocess.run(list(argv), input=json.dumps(event.to_dict()) + "\n", text=True,
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"warning: --on-alert: {argv[0]}: {exc}", file=err)
        return
    if done.stdout or done.stderr:          # never on stdout: that is the events' stream
        err.write(done.stdout + done.stderr)
    if done.returncode:
        print(f"warning: --on-alert: {argv[0]} exited {done.returncode}", file=err)


def settings_from_flags(settings, rules, *, interval: float, format: str, exit_on: str | None,
                        on_alert: str | None, step_col: str | None, polling: bool,
                        clear_after: int = 3) -> WatchSettings:
    """WatchSettings from `stabdiag watch`'s flags and the resolved check settings (config file < flags)."""
    import shlex

    from ...judge.rules import select_rules

    try:
        argv = tuple(shlex.split(on_alert)) if on_alert else ()
    except ValueError as exc:
        raise ConfigError(f"--on-alert: cannot split {on_alert!r} into arguments ({exc})") from None
    if on_alert is not None and not argv:
        raise ConfigError("--on-alert: expected a command; got an empty one")
    return WatchSettings(interval_s=interval, format=format, exit_on=exit_on, on_alert=argv, polling=polling,
                         mapping=settings.map, params=settings.params, guess=not settings.no_guess,
                         rules=select_rules(rules, list(settings.select), list(settings.ignore)),
                         load_options={"step_col": step_col}, one_run=settings.one_run,
                         split_files=settings.split_files, clear_after=clear_after)


def _interruptible() -> None:
    """SIGINT raises KeyboardInterrupt here whatever this process inherited: a process started with SIGINT
    ignored (a child of a pool worker or of a shell job that ignores it; Python then leaves it ignored)
    would never stop on Ctrl-C or a supervisor's SIGINT, which is how a watch is meant to end."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
