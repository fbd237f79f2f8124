"""stabdiag watch, in process: each follower reads only what a file gained and ends with what the
reader reads from the whole file; half-written records wait; new files join their run; events on
change; --on-alert; wandb:// backoff against a stand-in; the polling fallback; bad flags."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.cli import app
from stabdiag.judge.diagnosis import Diagnosis, Finding
from stabdiag.live.watch import Watcher, WatchSettings
from stabdiag.live.watch._tail import Tail
from stabdiag.live.watch.events import changes
from stabdiag.live.watch.online import OnlineFollower
from stabdiag.live.watch.runs import Finder
from stabdiag.read.run import Run, Series

sys.path.insert(0, str(Path(__file__).parent))
from live_writers import TensorBoardWriter, metrics  # noqa: E402


def _rows(steps, fail_at=None):
    rng = np.random.default_rng(0)
    return [(s, metrics(s, fail_at, rng)) for s in steps]


def _same_as_reader(finder: Finder, path) -> None:
    """The followed run holds what the reader reads from the finished files."""
    (live,) = finder.runs.values()
    followed = live.run()
    (whole,) = stabdiag.load(path)
    assert set(followed.series) == set(whole.series)
    for key, s in whole.series.items():
        np.testing.assert_array_equal(followed.series[key].steps, s.steps)
        np.testing.assert_array_equal(followed.series[key].values, s.values)


def _spy_reads(monkeypatch) -> list[int]:
    """Bytes each Tail read returned: a follower must read only what was appended."""
    sizes: list[int] = []
    original = Tail.new_bytes

    def counted(self, limit=-1):
        data = original(self, limit)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(Tail, "new_bytes", counted)
    return sizes


def test_point_store_series_are_what_from_points_makes_of_every_write_order_seen_so_far():
    # the store looks only at the points after its last series() while the steps keep increasing; over
    # random chunks (sorted, shuffled, repeated steps, single appends, wall times or none) each series()
    # must equal Series.from_points of every point written so far
    from stabdiag.live.watch._store import PointStore

    rng = np.random.default_rng(28)
    for _ in range(200):
        store, written = PointStore(), []
        for _ in range(int(rng.integers(1, 7))):
            n, base = int(rng.integers(0, 5)), int(rng.integers(0, 25))
            steps = base + rng.integers(0, 6, n)
            steps = np.sort(steps) if rng.random() < 0.7 else steps
            values, walls = rng.random(n), (rng.random(n) if rng.random() < 0.5 else np.full(n, np.nan))
            if rng.random() < 0.5:
                store.extend("k", steps, values, walls)
            else:
                walls = np.full(n, np.nan)
                for step, value in zip(steps.tolist(), values.tolist()):
                    store.append("k", step, value)
            written.append((steps, values, walls))
            if not len(store):
                continue
            got = store.series()["k"]
            s_, v_, w_ = (np.concatenate(parts) for parts in zip(*written))
            want = Series.from_points("k", s_, v_, w_ if np.isfinite(w_).any() else None)
            for field in ("steps", "values", "superseded_steps", "superseded_values"):
                assert np.array_equal(getattr(got, field), getattr(want, field)), field
            assert got.stepped_back == want.stepped_back and (got.wall_time is None) == (want.wall_time is None)
            if got.wall_time is not None:
                assert np.array_equal(got.wall_time, want.wall_time, equal_nan=True)


def test_point_store_refuses_a_step_out_of_range_appended_after_an_ordered_history():
    from stabdiag.live.watch._store import PointStore
    from stabdiag.read.run import StepError

    store = PointStore()
    store.extend("k", np.arange(1, 100), np.ones(99))
    assert len(store.series()["k"]) == 99
    store.append("k", 2**62, 1.0)
    with pytest.raises(StepError):
        store.series()


def test_csv_follower_reads_only_appended_lines_and_waits_for_a_half_line(tmp_path, monkeypatch):
    path = tmp_path / "metrics.csv"
    rows = _rows(range(1, 101))
    text = "step,loss,grad_norm,reward,entropy\n" + "".join(
        f"{s}," + ",".join(repr(v) for v in m.values()) + "\n" for s, m in rows)
    lines = text.splitlines(keepends=True)
    finder = Finder(str(tmp_path), {})
    reads = _spy_reads(monkeypatch)
    path.write_text("".join(lines[:51]) + lines[51][:7])           # 50 rows and half of the next
    assert finder.poll()
    (live,) = finder.runs.values()
    assert len(live.run().series["loss"]) == 50
    with open(path, "a") as fh:
        fh.write(lines[51][7:] + "".join(lines[52:]))
    reads.clear()
    assert finder.poll()
    assert reads == [len(text) - len("".join(lines[:51]))]          # the appended bytes and the half line only
    _same_as_reader(finder, tmp_path)
    assert not finder.poll()                                         # nothing new: nothing read


def test_jsonl_follower_ends_with_what_the_reader_reads(tmp_path):
    path = tmp_path / "log.jsonl"
    rows = _rows(range(1, 61))
    finder = Finder(str(tmp_path), {})
    with open(path, "w") as fh:
        for i, (s, m) in enumerate(rows):
            fh.write(json.dumps({"step": s, "data": m}) + "\n")
            if i % 20 == 19:
                fh.flush()
                finder.poll()
        fh.write('{"step": 61, "data": {"lo')                        # a line being written
    finder.poll()
    _same_as_reader(finder, path)


def test_tensorboard_follower_waits_for_a_cut_record_and_takes_a_new_file(tmp_path):
    first = TensorBoardWriter(str(tmp_path))
    finder = Finder(str(tmp_path), {})
    for s, m in _rows(range(1, 41)):
        first.log(s, m)
    first.flush()
    (event_file,) = [p for p in tmp_path.iterdir() if "tfevents" in p.name]
    data = event_file.read_bytes()
    event_file.write_bytes(data[:-30])                                # the last record cut short
    assert finder.poll()
    (live,) = finder.runs.values()
    assert len(live.run().series["train/loss"]) == 39
    event_file.write_bytes(data)                                      # the writer finished it
    assert finder.poll()
    assert len(live.run().series["train/loss"]) == 40
    first.writer.close()
    resumed = TensorBoardWriter(str(tmp_path))                        # a resume: a second events file
    for s, m in _rows(range(41, 81)):
        resumed.log(s, m)
    resumed.flush()
    assert finder.poll()
    assert len(live.run().series["train/loss"]) == 80
    _same_as_reader(finder, tmp_path)


def test_console_log_is_followed_and_parsed_whole(tmp_path):
    path = tmp_path / "train.log"
    finder = Finder(str(tmp_path), {})
    with open(path, "w") as fh:
        for s, m in _rows(range(1, 81)):
            fh.write(f"step {s} loss={m['loss']:.4f} grad_norm={m['grad_norm']:.4f}\n")
            if s % 40 == 0:
                fh.flush()
                assert finder.poll()
    _same_as_reader(finder, path)


def test_watcher_reports_a_failure_once_and_the_root_layer(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss,grad_norm,reward,entropy\n")
    watcher = Watcher([str(tmp_path)], WatchSettings(interval_s=0.5, exit_on="fail"))
    seen = []
    clock = 0.0
    rows = _rows(range(1, 201), fail_at=150)
    for start in range(0, 200, 20):
        with open(path, "a") as fh:
            for s, m in rows[start:start + 20]:
                fh.write(f"{s}," + ",".join(repr(v) for v in m.values()) + "\n")
        clock += 1.0
        seen.extend(watcher.step(now=clock))
        if watcher.stopped:
            break
    assert [e.event for e in seen] == ["finding", "stop"]
    assert seen[0].finding == "L3.nonfinite-values" and seen[0].onset == 150 and seen[-1].root_layer == 3
    assert seen[-1].step == 160                                       # stopped with the chunk that held it


def test_judged_at_most_every_interval(tmp_path):
    path = tmp_path / "m.csv"
    watcher = Watcher([str(tmp_path)], WatchSettings(interval_s=10.0))
    calls = []
    original = watcher._diagnose
    watcher._diagnose = lambda run, **kw: calls.append(run) or original(run, **kw)
    path.write_text("step,loss\n1,1.0\n")
    watcher.step(now=100.0)
    with open(path, "a") as fh:
        fh.write("2,1.0\n")
    watcher.step(now=105.0)                                            # too soon: read, not judged
    assert len(calls) == 1
    watcher.step(now=111.0)
    assert len(calls) == 2 and len(calls[-1].series["loss"]) == 2


def _diag(findings, root):
    return Diagnosis(run="r", layers=(), findings=tuple(findings), unknown=(), signals={}, root_layer=root,
                     steps=(1, 50))


def _finding(rule, layer, severity):
    return Finding(rule, layer, severity, "t", 10, 20, f"{rule} msg", {}, ())


def test_events_appear_change_severity_and_clear():
    warn = _finding("L3.grad-norm-precursor", 3, "warn")
    first = changes({}, _diag([warn], 3), now=1.0)
    assert [(e.event, e.finding, e.severity) for e in first] == [("finding", "L3.grad-norm-precursor", "warn")]
    fail = _finding("L3.grad-norm-precursor", 3, "fail")
    second = changes({warn.rule: warn}, _diag([fail], 3), now=2.0)
    assert [(e.event, e.previous, e.severity) for e in second] == [("changed", "warn", "fail")]
    third = changes({fail.rule: fail}, _diag([], None), now=3.0)
    assert [(e.event, e.finding) for e in third] == [("cleared", "L3.grad-norm-precursor")]
    assert changes({}, _diag([], None)) == []
    line = first[0].line()
    assert "+ L3.grad-norm-precursor [warn, layer 3]" in line and "root layer 3" in line
    assert json.loads(json.dumps(first[0].to_dict()))["finding"] == "L3.grad-norm-precursor"


def test_on_alert_gets_the_event_json_on_stdin_without_a_shell(tmp_path):
    got = tmp_path / "alert out.json"                                  # a space: argv, not a shell line
    path = tmp_path / "run" / "m.csv"
    path.parent.mkdir()
    rows = _rows(range(1, 201), fail_at=150)
    path.write_text("step,loss,grad_norm,reward,entropy\n" + "".join(
        f"{s}," + ",".join(repr(v) for v in m.values()) + "\n" for s, m in rows))
    script = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read())"
    result = CliRunner().invoke(app, ["watch", str(path.parent), "--exit-on", "fail", "--format", "jsonl",
                                      "--interval", "0.1", "--polling", "--on-alert",
                                      f"{sys.executable} -c \"{script}\" '{got}'"])
    assert result.exit_code == 1, result.output
    alerts = [json.loads(line) for line in got.read_text().splitlines()]
    assert [a["finding"] for a in alerts] == ["L3.nonfinite-values"] and alerts[0]["root_layer"] == 3


def _run_with(points: int) -> Run:
    steps = np.arange(1, points + 1)
    return Run("r", {"loss": Series.from_points("loss", steps, np.ones(points))})


def test_online_runs_are_polled_with_backoff_against_a_stand_in():
    clock = [0.0]
    answers = [_run_with(10), _run_with(10), stabdiag.InputError("wandb://e/p/r", "rate limited"),
               _run_with(10), _run_with(20)]
    fetched = []

    def fetch(uri):
        fetched.append(clock[0])
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    follower = OnlineFollower("wandb://e/p/r", 1.0, fetch=fetch, clock=lambda: clock[0], max_wait_s=8.0)
    news = []
    while answers:
        news.append(follower.poll())
        clock[0] += 0.5
    assert fetched == [0.0, 1.0, 3.0, 7.0, 15.0]                       # waits 1, 2, 4, 8 (capped)
    assert news.count(True) == 2 and follower.wait_s == 1.0           # new points: back to the interval
    assert len(follower.run().series["loss"]) == 20


def test_polling_works_without_watchfiles(tmp_path, monkeypatch):
    import importlib.util

    from stabdiag.live.watch._wake import waiter

    if importlib.util.find_spec("watchfiles") is not None:
        assert waiter([str(tmp_path)], 0.01)[1] == "watchfiles"
        assert waiter([str(tmp_path)], 0.01, polling=True)[1] == "polling"
        assert waiter([str(tmp_path / "not-yet")], 0.01)[1] == "polling"     # watchfiles needs the path
    monkeypatch.setitem(sys.modules, "watchfiles", None)              # as if not installed
    wait, how = waiter([str(tmp_path)], 0.01)
    assert how == "polling"
    wait()


@pytest.mark.parametrize("args, where", [
    (["--exit-on", "error"], "--exit-on"),
    (["--format", "json"], "--format"),
    (["--interval", "0"], "--interval"),
    (["--on-alert", "  "], "--on-alert"),
    (["--select", "L9"], "L9"),
])
def test_bad_flags_are_one_line_and_exit_2(tmp_path, args, where):
    result = CliRunner().invoke(app, ["watch", str(tmp_path), *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and where in lines[0], result.output
    assert "Traceback" not in result.output


def test_nan_written_as_text_is_a_finding_not_a_crash(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{'nan' if s > 40 else 1.0 / s}\n" for s in range(1, 61)))
    watcher = Watcher([str(path)], WatchSettings(interval_s=0.1))
    events = watcher.step(now=1.0)
    assert any(e.finding == "L3.nonfinite-values" and e.onset == 41 for e in events)


FRAMEWORK = Path(__file__).parent / "fixtures" / "framework_runs"


@pytest.mark.parametrize("pattern", ["wandb/offline-run-*/run-*.wandb", "runs/*/events.out.tfevents.*"])
def test_real_framework_logs_written_in_pieces_end_as_the_reader_reads_them(tmp_path, pattern):
    """TRL's own .wandb and TensorBoard files, grown in five pieces cut at arbitrary bytes (mid-record):
    the follower never fails on a cut and ends with exactly what the reader reads."""
    (source,) = (FRAMEWORK / "grpo_healthy").glob(pattern)
    target = tmp_path / source.relative_to(FRAMEWORK / "grpo_healthy")
    target.parent.mkdir(parents=True)
    data = source.read_bytes()
    cuts = [0, *sorted(np.random.default_rng(1).integers(100, len(data), 4).tolist()), len(data)]
    finder = Finder(str(target.parent), {})
    grew = []
    for a, b in zip(cuts, cuts[1:]):
        with open(target, "ab") as fh:
            fh.write(data[a:b])
        grew.append(finder.poll())
        (live,) = finder.runs.values() if finder.runs else (None,)
        assert all(f.problem is None for f in (live.followers if live else []))
    assert grew[-1]
    _same_as_reader(finder, target.parent)


def test_the_terminal_status_table_shows_each_run(tmp_path):
    from rich.console import Console

    from stabdiag.live.watch._status import status_table

    path = tmp_path / "m.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{'nan' if s > 40 else 1.0 / s}\n" for s in range(1, 61)))
    watcher = Watcher([str(path)], WatchSettings(interval_s=0.1))
    watcher.step(now=1.0)
    console = Console(width=120, record=True, color_system=None)
    console.print(status_table(watcher.diagnoses))
    text = console.export_text()
    assert "run" in text and "verdict" in text
    row = next(line for line in text.splitlines() if line.startswith("m "))
    assert "60" in row and "fail" in row and "layer 3" in row and "L3.nonfinite-values (fail)" in row


def test_jsonl_follower_notes_a_key_written_flat_and_nested_as_the_reader_does(tmp_path):
    """issue 29: the reader keeps the form met first in a line and says so; followed in two polls, the
    same values and the same note (counted over every line so far)."""
    path = tmp_path / "log.jsonl"
    finder = Finder(str(tmp_path), {})
    with open(path, "w") as fh:
        for s in range(1, 21):
            fh.write(json.dumps({"step": s, "train/reward": 1.0, "train": {"reward": 2.0}}) + "\n")
            if s == 10:
                fh.flush()
                finder.poll()
    finder.poll()
    _same_as_reader(finder, path)
    (live,) = finder.runs.values()
    (whole,) = stabdiag.load(path)
    said = [n for n in whole.notes if "written both as one key and as nested parts" in n]
    assert said and said[0] in live.run().notes and "in 20 line(s)" in said[0]
