"""`stabdiag watch` on runs logged live by real writers in a subprocess (tests/live_writers.py): the CSV
module, tensorboard's own EventFileWriter and an offline wandb run.  The watch starts before the first
record; it must exit 1 within a few seconds of the failure being written, its last event naming the
root layer; on the healthy twin it stays quiet and exits 0 on SIGINT; a writer killed mid-record never
crashes it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WRITER = str(Path(__file__).with_name("live_writers.py"))
REPO = str(Path(__file__).resolve().parents[1])
LATENCY_S = 5.0              # "within a few seconds" of the failure being written


def _watch(folder: Path, *extra: str) -> subprocess.Popen:
    """The watch, once it says on stderr that it is watching (before the writer writes a record)."""
    cmd = [sys.executable, "-m", "stabdiag", "watch", str(folder), "--exit-on", "fail", "--format", "jsonl",
           "--interval", "0.2", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    ready = proc.stderr.readline()
    assert ready.startswith("watching "), ready + proc.stderr.read()
    return proc


def _writer(kind: str, folder: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, WRITER, kind, str(folder), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)


def _lines_until(proc: subprocess.Popen, word: str, timeout_s: float) -> list[str]:
    end, got = time.time() + timeout_s, []
    while time.time() < end:
        line = proc.stdout.readline()
        if not line:
            break
        got.append(line.strip())
        if line.startswith(word):
            return got
    raise AssertionError(f"writer never said {word!r}: {got}; stderr: {proc.stderr.read()[-2000:]}")


def _interrupt(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, out, err


def _failing(kind: str, tmp_path: Path, startup_s: float) -> None:
    watch = _watch(tmp_path)
    try:
        time.sleep(startup_s)                              # settled: the first pass has run
        writer = _writer(kind, tmp_path, "--fail-at", "150")
        said = _lines_until(writer, "failed", 60)
        failed_at = float(said[-1].split()[2])
        out, err = watch.communicate(timeout=30)
        exited_at = time.time()
        writer.wait(timeout=30)
    finally:
        for proc in (watch,):
            if proc.poll() is None:
                proc.kill()
    assert watch.returncode == 1, err
    assert "Traceback" not in err
    events = [json.loads(line) for line in out.splitlines()]
    last = events[-1]
    assert last["event"] == "stop" and last["root_layer"] == 3 and last["finding"] == "L3.nonfinite-values", last
    assert any(e["event"] == "finding" and e["severity"] == "fail" for e in events[:-1])
    assert exited_at - failed_at < LATENCY_S, f"exited {exited_at - failed_at:.1f} s after the failure was written"


def _healthy(kind: str, tmp_path: Path, startup_s: float) -> None:
    watch = _watch(tmp_path)
    try:
        time.sleep(startup_s)
        writer = _writer(kind, tmp_path)
        _lines_until(writer, "done", 60)
        writer.wait(timeout=30)
        time.sleep(1.0)                                     # two more intervals: the whole run judged
        assert watch.poll() is None, watch.stderr.read()
        code, out, err = _interrupt(watch)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert code == 0, err
    assert out == "", out                                   # quiet: not one event on a healthy run
    assert "Traceback" not in err


def _killed_mid_record(kind: str, tmp_path: Path, startup_s: float) -> None:
    watch = _watch(tmp_path)
    writer = None
    try:
        time.sleep(startup_s)
        writer = _writer(kind, tmp_path, "--cut-after", "120")
        _lines_until(writer, "cut", 60)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
        time.sleep(1.0)
        assert watch.poll() is None, watch.stderr.read()      # still watching, not crashed
        code, out, err = _interrupt(watch)
    finally:
        for proc in (watch, writer):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert code == 0, err
    assert "Traceback" not in err and "error:" not in err, err
    assert out == ""


@pytest.mark.parametrize("kind", ["csv", "tensorboard"])
def test_watch_stops_on_the_failure(kind, tmp_path):
    _failing(kind, tmp_path, startup_s=0.5)


@pytest.mark.parametrize("kind", ["csv", "tensorboard"])
def test_watch_stays_quiet_on_a_healthy_run_and_exits_0_on_sigint(kind, tmp_path):
    _healthy(kind, tmp_path, startup_s=0.5)


@pytest.mark.parametrize("kind", ["csv", "tensorboard"])
def test_a_writer_killed_mid_record_never_crashes_the_watch(kind, tmp_path):
    _killed_mid_record(kind, tmp_path, startup_s=0.5)


@pytest.mark.slow
def test_watch_stops_on_the_failure_of_an_offline_wandb_run(tmp_path):
    pytest.importorskip("wandb")
    _failing("wandb", tmp_path, startup_s=0.5)


@pytest.mark.slow
def test_watch_stays_quiet_on_a_healthy_offline_wandb_run(tmp_path):
    pytest.importorskip("wandb")
    _healthy("wandb", tmp_path, startup_s=0.5)
