"""A live view that does not flap (issue 46 item 4): a finding once raised stays until its evidence has
been gone for a declared stretch, one alert per finding, a precursor is placed before the event it
preceded and never alerts after it, and the watch's last judgement is `check` on the same file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import stabdiag
from stabdiag.judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding
from stabdiag.judge.engine import diagnose
from stabdiag.live.watch import Watcher, WatchSettings
from stabdiag.live.watch import watcher as watcher_module
from stabdiag.live.watch.events import Tracker

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
REAL = Path(__file__).resolve().parents[2] / "shared" / "real_runs" / "framework_set1" / "runs"


def _replay(src: Path, folder: Path, lines_per_pass: int, **settings):
    """Append `src` to a file in `folder` a few lines at a time, judging after each append; every event
    is emitted as `stabdiag watch` emits it, with --on-alert recorded instead of run."""
    target = folder / src.name
    target.write_text("")
    text = src.read_text(errors="replace").splitlines(keepends=True)
    watcher = Watcher([str(folder)], WatchSettings(interval_s=0.5, on_alert=("record",), **settings))
    events, alerts = [], []
    original = watcher_module._alert
    watcher_module._alert = lambda argv, event, err: alerts.append(event)
    try:
        for i in range(0, len(text), lines_per_pass):
            with open(target, "a") as fh:
                fh.writelines(text[i:i + lines_per_pass])
            for event in watcher.step(now=float(i + 1)):
                watcher._emit(event, _Sink(), _Sink())
                events.append(event)
            if watcher.stopped:
                break
    finally:
        watcher_module._alert = original
    return watcher, events, alerts, target


class _Sink:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def _same_judgement(a: Diagnosis, b: Diagnosis) -> None:
    assert (a.verdict, a.root_layer) == (b.verdict, b.root_layer)
    assert [(f.rule, f.severity, f.onset) for f in a.findings] == [(f.rule, f.severity, f.onset) for f in b.findings]


@pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_runs is not beside the checkout")
def test_a_real_diverging_run_never_flaps_and_alerts_once_per_finding(tmp_path):
    # transformers' console log of an SFT run whose loss goes 4 -> 546: judged a line at a time, the
    # grad-norm spike at step 7 is re-judged absorbed and back several times (fail, pass, fail, pass)
    watcher, events, alerts, target = _replay(REAL / "sft_f2_diverge" / "train_console.log", tmp_path, 1)
    verdicts = [e.verdict for e in events]
    assert verdicts and all(SEVERITY_RANK[b] >= SEVERITY_RANK[a] for a, b in zip(verdicts, verdicts[1:])), verdicts
    raised = [e.finding for e in events if e.event == "finding"]
    assert len(raised) == len(set(raised)), raised                       # each finding raised once
    assert sorted((e.finding, e.severity) for e in alerts) == sorted(set((e.finding, e.severity) for e in alerts))
    assert {e.finding for e in alerts} == set(raised)                    # one alert per finding, none twice
    (last,) = watcher.final().values()
    _same_judgement(last, diagnose(stabdiag.load(str(tmp_path))[0]))


def test_a_collapsing_run_puts_the_precursor_before_the_nan_and_ends_as_check_does(tmp_path):
    src = SAMPLES / "grpo_math_reward_hacking"
    shutil.copy(src / "config.yaml", tmp_path / "config.yaml")
    watcher, events, alerts, target = _replay(src / "metrics.jsonl", tmp_path, 3)
    order = [e.finding for e in events]
    precursor = next(e for e in events if e.finding == "L3.grad-norm-precursor")
    nan = next(e for e in events if e.finding == "L3.nonfinite-values")
    assert order.index(precursor.finding) < order.index(nan.finding)      # the climb is told before the NaN
    assert precursor.onset < nan.onset == 312 and precursor.after_event == 312
    assert "not an alert" in precursor.line() and precursor not in alerts
    assert nan in alerts and all(e.event != "cleared" for e in events)
    (last,) = watcher.final().values()
    _same_judgement(last, diagnose(stabdiag.load(str(tmp_path))[0]))


def test_exit_on_stops_on_what_check_of_the_same_file_says(tmp_path):
    src = SAMPLES / "grpo_math_reward_hacking"
    shutil.copy(src / "config.yaml", tmp_path / "config.yaml")
    watcher, events, alerts, target = _replay(src / "metrics.jsonl", tmp_path, 7, exit_on="fail")
    stop = events[-1]
    assert stop.event == "stop" and watcher.stopped is stop
    checked = diagnose(stabdiag.load(str(tmp_path))[0])                 # the file as it stood at the stop
    assert stop.finding in {f.rule for f in checked.findings if f.severity == "fail"}
    assert stop.onset == next(f.onset for f in checked.findings if f.rule == stop.finding)


def _diag(findings, steps=(1, 50)):
    return Diagnosis(run="r", layers=(), findings=tuple(findings), unknown=(), signals={},
                     root_layer=findings[0].layer if findings else None, steps=steps)


def _finding(rule, severity, layer=3):
    return Finding(rule, layer, severity, "t", 10, 20, f"{rule} msg", {}, ())


def test_a_held_finding_clears_only_after_its_declared_stretch_and_never_falls_in_severity():
    tracker = Tracker(clear_after=3)
    spike = _finding("L3.grad-norm-spike", "fail")
    said = tracker.update(_diag([spike], (1, 10)), now=0)
    assert [(e.event, e.verdict) for e in said] == [("finding", "fail")]
    assert tracker.update(_diag([replace_severity(spike, "warn")], (1, 12)), now=0) == []   # absorbed: held at fail
    assert tracker.verdict == "fail"
    for last in (14, 16, 18):                        # three judgements without it, but only 6 steps of 13
        assert tracker.update(_diag([], (1, last)), now=0) == []
    assert tracker.update(_diag([spike], (1, 20)), now=0) == []          # back: nothing new to say
    quiet = [tracker.update(_diag([], (1, last)), now=0) for last in (22, 30, 45)]
    assert quiet[:2] == [[], []] and [e.event for e in quiet[2]] == ["cleared"]   # gone 24 steps >= the 20 before


def replace_severity(f: Finding, severity: str) -> Finding:
    from dataclasses import replace

    return replace(f, severity=severity)
