"""W&B runs: offline run directories written by the real wandb library, damaged copies of them,
hand-framed logs for the cases wandb will not write on demand, and online runs through a stand-in
for `wandb.Api` (the only place the network is replaced)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from stabdiag.errors import InputError, MissingExtraError
from stabdiag.read.assemble import discover, load
from stabdiag.read.formats import wandb as wr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from fuzz_records import wandb_frame as frame  # noqa: E402  (a log framed as wandb frames it)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")

STEPS = 250

# what the generator logs at step s of the "mixed" run (kept beside the generator so both agree)
GENERATOR = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import wandb

    out = sys.argv[1]
    settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True,
                              x_disable_machine_info=True, silent=True, save_code=False,
                              disable_git=True)
    made = {}

    run = wandb.init(project="stabdiag-test", id="mixed01", dir=out, mode="offline",
                     settings=settings, config={"lr": 1e-3, "model": {"name": "tiny", "layers": 2}})
    for s in range(250):
        row = {"train/reward": s * 0.01, "train/loss": 1.0 / (s + 1),
               "grad_norm": {30: float("nan"), 31: float("inf"), 32: float("-inf")}.get(s, 1.0 + s % 3)}
        if s % 10 == 0:
            row["train"] = {"kl": {"mean": 0.001 * s}}          # a logged nested dict
        if s % 20 == 0:
            row["eval/acc"] = s / 250
            row["flag"] = True
        if s % 25 == 0:
            row["img"] = wandb.Image(np.full((4, 4, 3), s % 255, dtype=np.uint8))
        if s in (50, 100):
            row["hist"] = wandb.Histogram([1, 2, 2, 3])
        if s == 10:
            row["tbl"] = wandb.Table(columns=["a"], data=[[1]])
        if s == 5:
            row["phase"] = "warmup"
        run.log(row, step=s)
    run.summary["best_acc"] = 0.9
    made["mixed"] = run.dir
    run.finish()

    run = wandb.init(project="stabdiag-test", id="axis01", dir=out, mode="offline", settings=settings)
    run.define_metric("train/global_step")
    run.define_metric("*", step_metric="train/global_step", step_sync=True)
    for gs in range(1, 41):
        run.log({"train/reward": gs * 0.1, "train/global_step": gs})
        if gs % 10 == 0:
            run.log({"eval/acc": gs / 100})
    made["axis"] = run.dir
    run.finish()
    print(json.dumps(made))
''')


def expected_mixed(step: int) -> dict[str, float]:
    row = {"train/reward": step * 0.01, "train/loss": 1.0 / (step + 1),
           "grad_norm": {30: math.nan, 31: math.inf, 32: -math.inf}.get(step, 1.0 + step % 3)}
    if step % 10 == 0:
        row["train/kl/mean"] = 0.001 * step
    if step % 20 == 0:
        row["eval/acc"] = step / 250
        row["flag"] = 1.0
    return row


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two offline runs written by wandb itself (in a child process, so the wandb service and its
    globals never enter the test process), side by side under one wandb/ directory."""
    base = tmp_path_factory.mktemp("wandb_runs")
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONSOLE="off",
               WANDB_DISABLE_GIT="true", WANDB_DISABLE_CODE="true", WANDB_DIR=str(base),
               WANDB_CONFIG_DIR=str(base / "cfg"), WANDB_CACHE_DIR=str(base / "cache"),
               WANDB_DATA_DIR=str(base / "data"))
    env.pop("WANDB_API_KEY", None)
    done = subprocess.run([sys.executable, "-c", GENERATOR, str(base)], env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    made = json.loads(done.stdout.strip().splitlines()[-1])
    out = {}
    for name, files_dir in made.items():
        root = Path(files_dir).parent
        out[name] = root
        out[name + "_log"] = next(root.glob("run-*.wandb"))
    out["wandb_dir"] = out["mixed"].parent
    return out


def assert_series_match(run, expected_rows: dict[int, dict[str, float]]):
    keys = sorted({k for row in expected_rows.values() for k in row})
    assert sorted(run.series) == keys
    for key in keys:
        steps = sorted(s for s, row in expected_rows.items() if key in row)
        series = run.series[key]
        assert series.steps.tolist() == steps, key
        np.testing.assert_array_equal(series.values, [expected_rows[s][key] for s in steps], err_msg=key)


# --- offline runs written by wandb ---------------------------------------------------------------

def test_series_equal_what_was_logged(runs):
    run = wr.load(str(runs["mixed_log"]))
    assert_series_match(run, {s: expected_mixed(s) for s in range(STEPS)})
    assert run.series["grad_norm"].nonfinite_count == 3
    assert not run.resumed and run.notes == ()
    assert np.all(np.isfinite(run.series["train/loss"].wall_time))


def test_config_and_summary_are_metadata(runs):
    meta = wr.load(str(runs["mixed_log"])).meta
    assert meta["config"] == {"lr": 1e-3, "model": {"name": "tiny", "layers": 2}}
    assert meta["summary"]["best_acc"] == 0.9
    assert meta["summary"]["train/loss"] == 1.0 / STEPS
    assert meta["summary"]["img"] == "<image-file>"
    assert meta["run_id"] == "mixed01" and meta["project"] == "stabdiag-test"
    assert meta["finished"] is True and meta["exit_code"] == 0


def test_define_metric_step_axis_is_the_step(runs):
    run = wr.load(str(runs["axis_log"]))
    assert set(run.series) == {"train/reward", "eval/acc"}      # the axis itself is not a metric
    assert run.series["train/reward"].steps.tolist() == list(range(1, 41))
    assert run.series["eval/acc"].steps.tolist() == [10, 20, 30, 40]
    assert run.series["eval/acc"].values.tolist() == [0.1, 0.2, 0.3, 0.4]


def test_step_col_option_picks_the_axis(runs):
    run = wr.load(str(runs["axis_log"]), step_col="_step")
    assert run.series["eval/acc"].steps.tolist() == [10, 21, 32, 43]    # wandb's own _step
    with pytest.raises(InputError, match="no key 'epoch'"):
        wr.load(str(runs["axis_log"]), step_col="epoch")


def test_item_path_and_chunked_flush_give_the_same_run(runs, monkeypatch):
    """The vectorized reading (chunked, with nested rows) equals wandb's classes item by item."""
    from stabdiag.read.formats.wandb import _batch as _wandb_batch
    from stabdiag.read.formats.wandb import _history as _wandb_history
    from stabdiag.read.formats.wandb import _log as _wandb_log

    fast = wr.load(str(runs["mixed_log"]))
    monkeypatch.setattr(_wandb_history.History, "chunk_items", 37)
    chunked = wr.load(str(runs["mixed_log"]))
    monkeypatch.setattr(_wandb_batch, "key_names", lambda *args: None)       # byte counts "fail"
    reread = wr.load(str(runs["mixed_log"]))
    monkeypatch.setattr(_wandb_history.History, "add_lite", lambda self, record, payload=None: False)
    monkeypatch.setattr(_wandb_log, "aligned_keys", lambda items: None)
    slow = wr.load(str(runs["mixed_log"]))
    for other in (chunked, reread, slow):
        assert set(other.series) == set(fast.series)
        for key, series in fast.series.items():
            np.testing.assert_array_equal(other.series[key].steps, series.steps)
            np.testing.assert_array_equal(other.series[key].values, series.values)
            np.testing.assert_array_equal(other.series[key].wall_time, series.wall_time)
        assert other.meta["summary"] == fast.meta["summary"]


def test_wandb_dir_holds_several_runs_and_latest_run_is_not_read_twice(runs):
    latest = runs["wandb_dir"] / "latest-run"
    assert latest.is_symlink()
    found = discover(runs["wandb_dir"])
    names = [r.name for r in found]
    assert runs["mixed"].name in names and runs["axis"].name in names
    assert "latest-run" not in names and len(names) == len(set(names))
    files = [f for r in found for f in r.files]
    assert len(files) == len(set(os.path.realpath(f) for f in files))
    for source in (runs["mixed"], runs["mixed_log"], runs["wandb_dir"]):
        loaded = [r for r in load(source) if "mixed01" in r.name]
        assert len(loaded) == 1 and set(loaded[0].series) >= {"train/loss", "eval/acc"}


def test_console_copy_in_files_is_not_a_second_run(runs, tmp_path):
    root = tmp_path / "run-20240101_000000-mixed01"
    shutil.copytree(runs["mixed"], root, symlinks=True)
    (root / "files").mkdir(exist_ok=True)
    console = "{'loss': 0.5, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
    (root / "files" / "output.log").write_text(console)
    found = discover(tmp_path)
    assert [r.name for r in found] == [root.name]
    with pytest.raises(InputError, match="console copy of a W&B run"):
        load(root / "files" / "output.log")


# --- damaged copies ------------------------------------------------------------------------------

def records(path: Path):
    """(offset, payload length, Record) of every record, framed by stabdiag's own reader."""
    from wandb.proto import wandb_internal_pb2 as pb

    from stabdiag.read.formats.wandb._records import iter_records

    data = path.read_bytes()
    return [(off, len(p), pb.Record.FromString(p)) for off, p in iter_records(data, [])]


def history_offsets(path: Path) -> list[tuple[int, int, int]]:
    """(offset, payload length, _step) of each history record that sits inside one block."""
    out = []
    for off, size, rec in records(path):
        if rec.WhichOneof("record_type") == "history" and off % 32768 + 7 + size <= 32768:
            step = next(int(i.value_json) for i in rec.history.item if list(i.nested_key) == ["_step"])
            out.append((off, size, step))
    return out


@pytest.mark.parametrize("cut", ["middle", "block", "block+3"])
def test_run_killed_mid_write_reads_up_to_the_last_whole_record(runs, tmp_path, cut):
    data = runs["mixed_log"].read_bytes()
    at = {"middle": len(data) * 3 // 5, "block": 32768, "block+3": 32771}[cut]
    copy = tmp_path / "run-cut.wandb"
    copy.write_bytes(data[:at])
    full = wr.load(str(runs["mixed_log"]))
    run = wr.load(str(copy))
    at_boundary = at in {off for off, _, _ in records(runs["mixed_log"])}
    assert any("ends inside a record" in n for n in run.notes) is not at_boundary
    assert run.meta["finished"] is False
    assert any("no exit record" in n for n in run.notes)
    assert 0 < len(run.series["train/loss"]) < STEPS
    for key, series in run.series.items():
        head = full.series[key]
        n = len(series)
        assert series.steps.tolist() == head.steps[:n].tolist()
        np.testing.assert_array_equal(series.values, head.values[:n])


def test_cut_at_a_record_boundary_has_no_torn_tail(runs, tmp_path):
    off, _, step = history_offsets(runs["mixed_log"])[40]
    copy = tmp_path / "run-cut.wandb"
    copy.write_bytes(runs["mixed_log"].read_bytes()[:off])
    run = wr.load(str(copy))
    assert not any("ends inside" in n for n in run.notes)
    assert run.series["train/loss"].steps[-1] == step - 1


def test_corrupt_byte_skips_that_record_and_names_its_offset(runs, tmp_path):
    off, size, step = history_offsets(runs["mixed_log"])[100]
    data = bytearray(runs["mixed_log"].read_bytes())
    data[off + 7 + size // 2] ^= 0x5A
    copy = tmp_path / "run-bad.wandb"
    copy.write_bytes(bytes(data))
    run = wr.load(str(copy))
    assert any(f"corrupt record at byte offset {off}" in n and "checksum" in n for n in run.notes)
    assert step not in run.series["train/loss"].steps.tolist()
    assert len(run.series["train/loss"]) == STEPS - 1


def test_damaged_record_header_resumes_at_the_next_block(runs, tmp_path):
    first_in_block = [o for o, _, _ in history_offsets(runs["mixed_log"]) if 1000 < o < 20000][0]
    data = bytearray(runs["mixed_log"].read_bytes())
    data[first_in_block + 4:first_in_block + 6] = b"\xff\xff"          # length: past the block end
    copy = tmp_path / "run-bad.wandb"
    copy.write_bytes(bytes(data))
    run = wr.load(str(copy))
    assert any(f"byte offset {first_in_block}" in n for n in run.notes)
    after = [s for o, _, s in history_offsets(runs["mixed_log"]) if o > 32768 + 7]
    assert set(after) <= set(run.series["train/loss"].steps.tolist())
    assert len(run.series["train/loss"]) < STEPS


def test_unknown_header_version_is_refused_clearly(runs, tmp_path):
    data = bytearray(runs["mixed_log"].read_bytes())
    data[6] = 1
    copy = tmp_path / "run-v1.wandb"
    copy.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"unknown W&B transaction log version 1 .*version 0"):
        load(copy)


def test_not_a_wandb_log_and_empty_file(tmp_path):
    (tmp_path / "run-x.wandb").write_bytes(b"PK\x03\x04not a wandb file")
    with pytest.raises(InputError, match="not a W&B transaction log"):
        wr.load(str(tmp_path / "run-x.wandb"))
    (tmp_path / "run-x.wandb").write_bytes(b"")
    with pytest.raises(InputError, match="shorter than the 7-byte W&B header"):
        wr.load(str(tmp_path / "run-x.wandb"))


def test_cli_prints_one_error_line_and_exits_2(runs, tmp_path):
    from stabdiag.cli import app

    data = bytearray(runs["mixed_log"].read_bytes())
    data[6] = 3
    (tmp_path / "run-v3.wandb").write_bytes(bytes(data))
    result = CliRunner().invoke(app, ["check", str(tmp_path / "run-v3.wandb")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "version 3" in result.output


# --- hand-framed logs: cases wandb does not write on demand ---------------------------------------

def history(step: int | None, items: dict, *, nested: bool = True, step_num: int | None = None,
            typed: dict | None = None) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record()
    if step is not None:
        items = {"_step": step, **items}
    for key, value in items.items():
        item = rec.history.item.add()
        if nested:
            item.nested_key.extend(key if isinstance(key, tuple) else [key])
        else:
            item.key = key
        item.value_json = value if isinstance(value, str) else json.dumps(value)
    for key, value in (typed or {}).items():
        item = rec.history.item.add()
        item.nested_key.append(key)
        item.number = value
    rec.history.step.num = step if step_num is None else step_num
    return rec.SerializeToString()


def test_resumed_log_last_write_wins(tmp_path):
    rows = [history(s, {"loss": 1.0}) for s in range(10)] + [history(s, {"loss": 2.0}) for s in range(6, 12)]
    path = tmp_path / "run-res.wandb"
    path.write_bytes(frame(rows))
    run = wr.load(str(path))
    loss = run.series["loss"]
    assert loss.steps.tolist() == list(range(12))
    assert loss.values.tolist() == [1.0] * 6 + [2.0] * 6
    assert loss.superseded_steps.tolist() == [6, 7, 8, 9] and run.resumed


def test_old_writer_keys_typed_values_missing_step_and_text_nan(tmp_path):
    big = "x" * 70000                                              # one record over three blocks
    rows = [history(0, {"acc": 0.5, "note": big}, nested=False),
            history(None, {"acc": "NaN"}, nested=False, step_num=1),     # no _step item: use step.num
            history(2, {}, typed={"acc": 0.75}),                          # typed value, not JSON text
            history(3, {("a", "b"): "Infinity", "acc": 1})]
    path = tmp_path / "run-old.wandb"
    path.write_bytes(frame(rows))
    run = wr.load(str(path))
    assert run.series["acc"].steps.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(run.series["acc"].values, [0.5, math.nan, 0.75, 1.0])
    assert run.series["a/b"].values.tolist() == [math.inf]
    assert "note" not in run.series and run.notes[-1].endswith("wandb.finish()")


def summary(num: int, update: dict, remove: tuple = ()) -> bytes:
    """A summary record; a tuple key is a nested_key path, a string one is a plain `key`."""
    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record(num=num)
    for key, value in update.items():
        item = rec.summary.update.add()
        if isinstance(key, tuple):
            item.nested_key.extend(key)
        else:
            item.key = key
        item.value_json = json.dumps(value)
    for key in remove:
        rec.summary.remove.add().nested_key.extend(key)
    return rec.SerializeToString()


def test_summary_skips_and_newline_keys_match_the_item_path(tmp_path, monkeypatch):
    """Repeated small summary records, one-part and nested summary items, a removal and a history
    key holding a newline read the same through the fast paths as item by item."""
    from stabdiag.read.formats.wandb import _history as _wandb_history
    from stabdiag.read.formats.wandb import _log as _wandb_log

    runtime = {("_wandb", "runtime"): 1, "_runtime": 1}
    records = [summary(1, {("gone", "x"): 5.0, ("old",): 1.0})]
    for s in range(40):
        records.append(history(s, {("g", "a"): s, ("g", "b"): -s} if s % 2 else {"a": s, "b\nc": s}))
        records.append(summary(2 * s + 2, {("g", "a"): s, ("g", "b"): -s, "_step": s}))
        records.append(summary(2 * s + 3, runtime))             # the same bytes but the num
        records.append(summary(2 * s + 4, {("a",): s, "_step": s}))
    records.append(summary(90, {}, remove=(("gone",),)))
    records.append(summary(91, {("g", "a"): 99.0, ("new",): 7.0}))
    path = tmp_path / "run-sum.wandb"
    path.write_bytes(frame(records))
    fast = wr.load(str(path))
    assert fast.meta["summary"] == {"g/a": 99.0, "g/b": -39, "new": 7.0, "a": 39, "old": 1.0,
                                    "_step": 39, "_runtime": 1}
    assert fast.series["b\nc"].values.tolist() == [float(s) for s in range(0, 40, 2)]
    assert fast.series["g/b"].values.tolist() == [float(-s) for s in range(1, 40, 2)]
    monkeypatch.setattr(_wandb_history.History, "add_lite", lambda self, record, payload=None: False)
    monkeypatch.setattr(_wandb_log, "aligned_keys", lambda items: None)
    monkeypatch.setattr(_wandb_log, "_SMALL", -1)
    slow = wr.load(str(path))
    assert slow.meta["summary"] == fast.meta["summary"]
    assert set(slow.series) == set(fast.series)
    for key, series in fast.series.items():
        np.testing.assert_array_equal(slow.series[key].steps, series.steps)
        np.testing.assert_array_equal(slow.series[key].values, series.values)


def test_can_load_and_run_root(tmp_path):
    root = tmp_path / "wandb" / "run-20240101_000000-abc"
    (root / "files").mkdir(parents=True)
    names = {"run-abc.wandb": True, "files/wandb-history.jsonl": True, "files/wandb-summary.json": False,
             "files/config.yaml": False, "files/output.log": True, "files/requirements.txt": False,
             "notes.wandb": False}
    for rel in names:
        (root / rel).write_bytes(b"")
    for rel, expected in names.items():
        assert wr.can_load(str(root / rel)) is expected, rel
    assert wr.run_root(str(root / "run-abc.wandb")) == str(root)
    assert wr.run_root(str(root / "files" / "wandb-history.jsonl")) == str(root)
    assert not wr.can_load(str(tmp_path / "missing" / "run-x.wandb"))
    bare = tmp_path / "not-a-run" / "files"          # a console log with no W&B history beside it
    bare.mkdir(parents=True)
    (bare / "output.log").write_text("hello")
    assert not wr.can_load(str(bare / "output.log"))


def test_old_run_history_jsonl_with_summary_and_config(tmp_path):
    files = tmp_path / "wandb" / "run-20200101_000000-old1" / "files"
    files.mkdir(parents=True)
    rows = [{"_step": 0, "_runtime": 1, "_timestamp": 1.6e9, "loss": 1.0, "train": {"kl": 0.1}},
            {"_step": 1, "loss": float("nan"), "img": {"_type": "image-file", "width": 4}},
            {"_step": 2, "loss": float("inf"), "eval/acc": 0.5, "flag": True, "text": "hi"}]
    (files / "wandb-history.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{\"_step\": 3, \"lo")
    (files / "wandb-events.jsonl").write_text('{"system.cpu": 3.0, "_runtime": 1}\n')
    (files / "wandb-summary.json").write_text('{"loss": 0.5, "best": 2}')
    (files / "config.yaml").write_text("wandb_version: 1\nlr:\n  desc: null\n  value: 0.01\n")
    found = discover(tmp_path / "wandb")
    assert [r.name for r in found] == ["run-20200101_000000-old1"]
    (run,) = load(tmp_path / "wandb")
    assert set(run.series) == {"loss", "train/kl", "eval/acc", "flag"}
    np.testing.assert_array_equal(run.series["loss"].values, [1.0, math.nan, math.inf])
    assert run.meta["summary"] == {"loss": 0.5, "best": 2} and run.meta["config"] == {"lr": 0.01}
    assert any("history.jsonl:4" in n for n in run.notes)


def test_history_jsonl_is_ignored_beside_a_transaction_log(runs, tmp_path):
    root = tmp_path / "run-20240101_000000-mixed01"
    shutil.copytree(runs["mixed"], root, symlinks=True)
    (root / "files" / "wandb-history.jsonl").write_text('{"_step": 0, "loss": 9}\n')
    (run,) = load(root)
    assert "loss" not in run.series and len(run.series["train/loss"]) == STEPS
    assert any("not read" in n for n in run.notes)


def test_missing_wandb_package_names_the_extra(runs, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb.proto", None)
    with pytest.raises(MissingExtraError, match=r"stabdiag\[wandb\]"):
        wr.load(str(runs["mixed_log"]))


# --- online runs through a stand-in for wandb.Api -------------------------------------------------

class RateLimited(Exception):
    def __init__(self):
        super().__init__("HTTP 429: rate limit exceeded")
        self.response = type("Response", (), {"status_code": 429, "headers": {"Retry-After": "2"}})()


class FakeRun:
    """Rows of a run as the W&B backend keeps them; scan_history returns only rows holding every key."""

    def __init__(self, rows, *, state="running", fail_at=None):
        self.rows, self.state, self.fail_at = rows, state, fail_at
        self.id, self.entity, self.project, self.name = "r1", "ent", "proj", "my-run"
        self.url = "https://wandb.ai/ent/proj/runs/r1"
        self.config = {"lr": 0.01, "_wandb": {"x": 1}}
        self.summary_metrics = {"loss": 0.1, "train": {"kl": 0.2}, "_wandb": {"runtime": 3}}
        self.scans: list[tuple] = []
        counts: dict[str, int] = {}
        for row in rows:
            for key in row:
                counts[key] = counts.get(key, 0) + 1
        self.history_keys = {"lastStep": rows[-1]["_step"],
                             "keys": {k: {"typeCounts": [{"type": "number", "count": c}]}
                                      for k, c in counts.items()}}

    def scan_history(self, keys=None, page_size=1000, min_step=0, max_step=None):
        self.scans.append((tuple(keys or ()), min_step))
        for row in self.rows:
            if row["_step"] < min_step or (keys and not all(k in row for k in keys)):
                continue
            if self.fail_at is not None and row["_step"] == self.fail_at:
                self.fail_at = None
                raise RateLimited()
            yield {k: row[k] for k in keys} if keys else dict(row)


def online_rows(n=100):
    rows = []
    for s in range(n):
        row = {"_step": s, "_timestamp": 1.7e9 + s, "loss": 1.0 / (s + 1), "reward": "NaN" if s == 7 else s}
        if s % 20 == 0:
            row["eval/acc"] = s / 100
        if s % 3 != 1:
            row["lr"] = 0.1                     # lr and ent: logged equally often, at different steps
        if s % 3 != 2:
            row["ent"] = 2.0
        rows.append(row)
    return rows


@pytest.fixture()
def fake_api(monkeypatch, tmp_path):
    import wandb

    from stabdiag.read.formats.wandb import _online as _wandb_online

    state = {"run": FakeRun(online_rows()), "made": 0}

    class FakeApi:
        def __init__(self, **kwargs):
            state["made"] += 1

        def run(self, path):
            assert path == "ent/proj/r1"
            return state["run"]

    monkeypatch.setattr(wandb, "Api", FakeApi)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    sleeps: list[float] = []
    monkeypatch.setattr(_wandb_online, "_sleep", sleeps.append)
    state["sleeps"] = sleeps
    return state


@pytest.mark.parametrize("uri", ["wandb://ent/proj/r1", "wandb://ent/proj/runs/r1/",
                                 "https://wandb.ai/ent/proj/runs/r1", "https://wandb.ai/ent/proj/runs/r1?nw=x"])
def test_uri_and_url_parsing(uri):
    from stabdiag.read.formats.wandb._online import parse_uri

    assert wr.handles_uri(uri)
    assert parse_uri(uri) == ("ent", "proj", "r1")


def test_other_uris_are_not_claimed_and_bad_ones_are_located():
    from stabdiag.read.formats.wandb._online import parse_uri

    assert not wr.handles_uri("https://example.com/ent/proj/runs/r1")
    assert not wr.handles_uri("s3://bucket/run")
    with pytest.raises(InputError, match="expected wandb://ENTITY/PROJECT/RUN_ID"):
        parse_uri("wandb://ent/only-two")


def test_online_run_full_resolution_with_sparse_keys_in_their_own_scans(fake_api):
    run = wr.load_uri("wandb://ent/proj/r1")
    rows = online_rows()
    assert run.series["loss"].steps.tolist() == list(range(100))
    assert run.series["eval/acc"].steps.tolist() == [0, 20, 40, 60, 80]
    assert run.series["lr"].steps.tolist() == [s for s in range(100) if s % 3 != 1]
    assert run.series["ent"].steps.tolist() == [s for s in range(100) if s % 3 != 2]
    assert math.isnan(run.series["reward"].values[7]) and run.series["reward"].values[8] == 8
    assert not run.resumed
    scanned = [set(keys) for keys, _ in fake_api["run"].scans]
    assert {"eval/acc", "_step", "_timestamp"} in scanned       # the sparse key scanned on its own
    assert {"ent", "lr", "_step", "_timestamp"} in scanned      # logged as often, not together:
    assert {"lr", "_step", "_timestamp"} in scanned             # came back short, scanned alone
    assert all(keys for keys, _ in fake_api["run"].scans)       # never the sampled full-row history
    assert run.meta["summary"] == {"loss": 0.1, "train/kl": 0.2}
    assert run.meta["config"] == {"lr": 0.01}
    np.testing.assert_array_equal(run.series["eval/acc"].wall_time, [r["_timestamp"] for r in rows[::20]])


def test_http_429_backs_off_and_resumes_the_scan(fake_api):
    fake_api["run"] = FakeRun(online_rows(), fail_at=50)
    run = wr.load_uri("wandb://ent/proj/r1", refresh=True)
    assert fake_api["sleeps"] == [2.0]                          # Retry-After honoured
    assert run.series["loss"].steps.tolist() == list(range(100)) and not run.resumed
    assert (("loss", "reward", "_step", "_timestamp"), 50) in fake_api["run"].scans


def test_cache_hit_on_rerun_and_refresh_refetches(fake_api):
    first = wr.load_uri("wandb://ent/proj/r1", progress=True)
    scans = len(fake_api["run"].scans)
    again = wr.load_uri("wandb://ent/proj/r1")                  # running: asks the last step, no scan
    assert len(fake_api["run"].scans) == scans
    assert again.series["loss"].values.tolist() == first.series["loss"].values.tolist()
    assert again.meta["cache"].endswith("history-step99.parquet")
    wr.load_uri("wandb://ent/proj/r1", refresh=True)
    assert len(fake_api["run"].scans) == 2 * scans
    fake_api["run"].rows.append({"_step": 100, "loss": 0.5, "reward": 1})        # the run moved on
    fake_api["run"] = FakeRun(fake_api["run"].rows)
    moved = wr.load_uri("wandb://ent/proj/r1")
    assert moved.series["loss"].steps[-1] == 100


def test_finished_run_is_served_from_cache_without_the_network(fake_api):
    fake_api["run"] = FakeRun(online_rows(), state="finished")
    wr.load_uri("wandb://ent/proj/r1")
    made = fake_api["made"]
    run = wr.load_uri("https://wandb.ai/ent/proj/runs/r1")
    assert fake_api["made"] == made and len(run.series["loss"]) == 100


def test_no_login_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_IDENTITY_TOKEN_FILE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    from stabdiag.read.formats.wandb import _online as _wandb_online

    assert _wandb_online._has_credentials() is False
    with pytest.raises(InputError, match="not logged in to W&B; run `wandb login`"):
        wr.load_uri("wandb://ent/proj/r1")


def test_api_errors_are_one_line_and_never_show_the_key(fake_api, monkeypatch):
    import wandb

    secret = "a1b2c3d4" * 5

    class BrokenApi:
        def __init__(self, **kwargs):
            pass

        def run(self, path):
            raise RuntimeError(f"request failed for api_key={secret}\nsecond line")

    monkeypatch.setattr(wandb, "Api", BrokenApi)
    with pytest.raises(InputError) as info:
        wr.load_uri("wandb://ent/proj/r1")
    message = str(info.value)
    assert secret not in message and "\n" not in message and message.startswith("wandb://ent/proj/r1:")


def test_online_without_wandb_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(MissingExtraError, match=r"stabdiag\[wandb\]"):
        wr.load_uri("wandb://ent/proj/r1")


def test_no_network_is_named_as_such(fake_api, monkeypatch):
    import wandb

    class AuthenticationError(Exception):
        pass

    def offline(**kwargs):
        raise AuthenticationError("Failed to verify credentials with https://api.example: the service "
                                  "process is busy and did not respond in time.")

    monkeypatch.setattr(wandb, "Api", offline)
    with pytest.raises(InputError, match="no answer from the W&B API .*check the network"):
        wr.load_uri("wandb://ent/proj/r1")


def test_unwritable_cache_still_gives_the_run(fake_api, monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(blocker))
    run = wr.load_uri("wandb://ent/proj/r1")
    assert len(run.series["loss"]) == 100 and "cache" not in run.meta


def test_a_row_whose_own_step_is_out_of_range_is_counted_on_both_reading_paths(tmp_path, monkeypatch):
    """A history record without a `_step` item whose own step number is past 2**53 lands at step 0 with a
    note on the item-by-item path; the batch path put it there silently, over step 0's real value."""
    from stabdiag.read.formats.wandb import _history as _wandb_history
    from stabdiag.read.formats.wandb import _log as _wandb_log

    rows = [history(None, {"loss": 1.0 + s}, nested=False, step_num=s) for s in range(5)]
    rows.append(history(None, {"loss": 9.0}, nested=False, step_num=1 << 60))     # no _step, own step too big
    rows.append(history(7, {"loss": 8.0}, nested=False, step_num=1 << 60))        # a `_step` item places it
    path = tmp_path / "run-far.wandb"
    path.write_bytes(frame(rows))
    fast = wr.load(str(path))
    monkeypatch.setattr(_wandb_history.History, "add_lite", lambda self, record, payload=None: False)
    monkeypatch.setattr(_wandb_log, "aligned_keys", lambda items: None)
    slow = wr.load(str(path))
    for run in (fast, slow):
        assert run.series["loss"].steps.tolist() == [0, 1, 2, 3, 4, 7]
        assert [n for n in run.notes if "1 history row(s) with a _step" in n], run.notes
