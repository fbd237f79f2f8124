"""TensorBoard event files written by tensorboard's own writer: both scalar encodings, restarts, per-tag
folders, corrupt and truncated records, and the files around them that are not event files."""

from __future__ import annotations

import math
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("google_crc32c")

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2  # noqa: E402
from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

from stabdiag.errors import InputError, MissingExtraError  # noqa: E402
from stabdiag.read.assemble import discover, load  # noqa: E402
from stabdiag.read.formats import tensorboard as tb  # noqa: E402
from stabdiag.read.formats._progress import ByteProgress  # noqa: E402
from stabdiag.read.formats.tensorboard import _events as _tbevents  # noqa: E402
from stabdiag.read.formats.tensorboard import _tfrecord

SCALARS_META = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))


# ---- writing with tensorboard's own writer ------------------------------------------------------

def write_events(logdir: Path, events: list[Event]) -> Path:
    """Write `events` to a new event file in `logdir` with tensorboard's EventFileWriter."""
    logdir.mkdir(parents=True, exist_ok=True)
    before = set(logdir.iterdir())
    writer = EventFileWriter(str(logdir), max_queue_size=len(events) + 10)
    for event in events:
        writer.add_event(event)
    writer.close()
    (path,) = set(logdir.iterdir()) - before
    return path


def simple(step: int, wall: float | None = None, **tags: float) -> Event:
    """A legacy event: one simple_value per tag (tensorboardX, TF1, torch's default writer)."""
    values = [Summary.Value(tag=t.replace("__", "/"), simple_value=v) for t, v in tags.items()]
    return Event(wall_time=time.time() if wall is None else wall, step=step, summary=Summary(value=values))


def tensor(step: int, tag: str, number, *, meta: SummaryMetadata | None = None, proto=None) -> Event:
    """A TF2-style event: a rank-0 tensor, with plugin metadata only where the writer sends it."""
    value = Summary.Value(tag=tag, tensor=proto or tensor_util.make_tensor_proto(number))
    if meta is not None:
        value.metadata.CopyFrom(meta)
    return Event(wall_time=time.time(), step=step, summary=Summary(value=[value]))


def one(path, **options):
    runs = load(path, **options)
    assert len(runs) == 1
    return runs[0]


# ---- both scalar encodings ----------------------------------------------------------------------

def test_legacy_simple_values_every_point_with_wall_time(tmp_path):
    events = [simple(s, wall=1000.0 + s, train__loss=1.0 / (s + 1), train__reward=0.01 * s)
              for s in range(300)]
    write_events(tmp_path / "run", events)
    run = one(tmp_path / "run")
    assert run.name == "run" and set(run.series) == {"train/loss", "train/reward"}
    loss = run.series["train/loss"]
    assert loss.steps.tolist() == list(range(300))
    assert np.array_equal(loss.values, np.float32([1.0 / (s + 1) for s in range(300)]).astype(float))
    assert loss.wall_time.tolist() == [1000.0 + s for s in range(300)]
    assert not run.resumed and run.notes == () and run.meta["format"] == "tensorboard"


def test_nan_and_inf_are_values(tmp_path):
    write_events(tmp_path, [simple(1, loss=1.0), simple(2, loss=math.nan), simple(3, loss=-math.inf)])
    loss = one(tmp_path).series["loss"]
    assert math.isnan(loss.values[1]) and loss.values[2] == -math.inf and loss.nonfinite_count == 2


@pytest.mark.parametrize("number", [np.float32(0.25), np.float64(1e-300), np.float16(-1.5), np.int32(-7),
                                    np.int64(-(2**40)), np.int8(-3), np.uint8(200), np.int16(-300),
                                    np.bool_(True)], ids=lambda n: n.dtype.name)
def test_tensor_scalars_of_each_dtype_with_metadata_only_on_the_first_value(tmp_path, number):
    events = [tensor(0, "loss", number, meta=SCALARS_META)] + [tensor(s, "loss", number) for s in range(1, 5)]
    write_events(tmp_path, events)
    loss = one(tmp_path).series["loss"]
    assert loss.steps.tolist() == [0, 1, 2, 3, 4]
    assert loss.values.tolist() == [float(number)] * 5


def test_tensor_scalars_in_tensor_content_and_bfloat16_half_val(tmp_path):
    content = tensor_pb2.TensorProto(dtype=1, tensor_content=struct.pack("<f", 2.5))   # DT_FLOAT
    content.tensor_shape.SetInParent()
    bf16 = tensor_pb2.TensorProto(dtype=14, half_val=[0x3FC0])                         # 1.5 in bfloat16
    shaped = tensor_util.make_tensor_proto(np.array([[4.0]], dtype=np.float32))       # shape [1, 1]
    write_events(tmp_path, [tensor(1, "a", None, meta=SCALARS_META, proto=content),
                            tensor(1, "b", None, meta=SCALARS_META, proto=bf16),
                            tensor(1, "c", None, meta=SCALARS_META, proto=shaped)])
    run = one(tmp_path)
    assert {k: s.values.tolist() for k, s in run.series.items()} == {"a": [2.5], "b": [1.5], "c": [4.0]}


def test_scalar_pb_from_tensorboard_and_untagged_plugin_tensors(tmp_path):
    from tensorboard.plugins.scalar import summary_v2 as scalar_v2

    first = Event(wall_time=time.time(), step=3, summary=scalar_v2.scalar_pb("eval/acc", 0.5))
    write_events(tmp_path, [first, tensor(4, "eval/acc", np.float32(0.75)),
                            tensor(5, "no_metadata", np.float64(9.0))])
    run = one(tmp_path)
    assert run.series["eval/acc"].values.tolist() == [0.5, 0.75]
    assert run.series["no_metadata"].values.tolist() == [9.0]   # a rank-0 number with no plugin


# ---- what is not a scalar is skipped ------------------------------------------------------------

def test_images_histograms_audio_text_hparams_are_skipped(tmp_path):
    from tensorboard.compat.proto.summary_pb2 import HistogramProto
    from tensorboard.plugins.histogram import summary_v2 as histogram_v2
    from tensorboard.plugins.hparams import summary_v2 as hparams_v2
    from tensorboard.plugins.text import summary_v2 as text_v2

    legacy = Summary(value=[Summary.Value(tag="img", image=Summary.Image(height=1, width=1,
                                                                        encoded_image_string=b"\x89PNG")),
                            Summary.Value(tag="h", histo=HistogramProto(min=0, max=1, num=3)),
                            Summary.Value(tag="snd", audio=Summary.Audio(sample_rate=8000)),
                            Summary.Value(tag="loss", simple_value=0.5)])
    hist = histogram_v2.histogram_pb("weights", np.arange(10.0))
    later_hist = histogram_v2.histogram_pb("weights", np.arange(5.0))
    later_hist.value[0].ClearField("metadata")          # the plugin is remembered from the first value
    events = [Event(wall_time=time.time(), step=1, summary=legacy),
              Event(wall_time=time.time(), step=1, summary=hist),
              Event(wall_time=time.time(), step=2, summary=later_hist),
              Event(wall_time=time.time(), step=2, summary=text_v2.text_pb("notes", "hello")),
              Event(wall_time=time.time(), summary=hparams_v2.hparams_pb({"lr": 0.1})),
              Event(wall_time=time.time(), step=2, graph_def=b"\x0a\x03abc")]
    write_events(tmp_path, events)
    run = one(tmp_path)
    assert set(run.series) == {"loss"}
    assert run.meta["skipped_values"] == {"images": 1, "histograms": 3, "audio": 1, "text": 1, "hparams": 1}


def test_only_non_scalars_is_an_input_error(tmp_path):
    from tensorboard.plugins.text import summary_v2 as text_v2

    write_events(tmp_path, [Event(wall_time=time.time(), step=1, summary=text_v2.text_pb("notes", "x"))])
    with pytest.raises(InputError, match=r"no scalar summaries .*1 text"):
        load(tmp_path)


# ---- damaged files --------------------------------------------------------------------------------

def record_offsets(path: Path) -> list[int]:
    data, offsets, pos = path.read_bytes(), [], 0
    while pos < len(data):
        offsets.append(pos)
        pos += 16 + struct.unpack_from("<Q", data, pos)[0]
    return offsets


def test_flipped_payload_byte_skips_that_record_and_names_its_offset(tmp_path):
    path = write_events(tmp_path, [simple(s, loss=float(s)) for s in range(50)])
    offsets = record_offsets(path)
    data = bytearray(path.read_bytes())
    data[offsets[11] + 20] ^= 0x01                        # record 11 holds step 10
    path.write_bytes(bytes(data))
    run = one(tmp_path)
    assert run.series["loss"].steps.tolist() == [s for s in range(50) if s != 10]
    (note,) = run.notes
    assert str(path) in note and f"byte offset {offsets[11]}" in note and "corrupt" in note


def test_flipped_length_byte_finds_the_next_record(tmp_path):
    path = write_events(tmp_path, [simple(s, loss=float(s)) for s in range(50)])
    offsets = record_offsets(path)
    data = bytearray(path.read_bytes())
    data[offsets[21]] ^= 0x40                            # the length of the record for step 20
    path.write_bytes(bytes(data))
    run = one(tmp_path)
    assert run.series["loss"].steps.tolist() == [s for s in range(50) if s != 20]
    assert f"byte offset {offsets[21]} ({offsets[22] - offsets[21]} bytes)" in run.notes[0]


def test_file_cut_mid_record_reads_everything_before_the_cut(tmp_path):
    path = write_events(tmp_path, [simple(s, loss=float(s)) for s in range(30)])
    offsets = record_offsets(path)
    path.write_bytes(path.read_bytes()[:offsets[-1] + 15])       # inside the last record's payload
    run = one(tmp_path)
    assert run.series["loss"].steps.tolist() == list(range(29))
    assert any(f"cut short at byte offset {offsets[-1]}" in n for n in run.notes)


def test_not_an_event_file_at_all(tmp_path):
    bad = tmp_path / "events.out.tfevents.1700000000.host.1.0"
    bad.write_bytes(b"step,loss\n1,0.5\n" * 50)
    with pytest.raises(InputError, match="not a TensorBoard event file"):
        load(bad)


def test_not_an_event_file_exits_2_with_one_line(tmp_path):
    from typer.testing import CliRunner

    from stabdiag.cli import app

    bad = tmp_path / "events.out.tfevents.1700000000.host.1.0"
    bad.write_bytes(os.urandom(2000))
    result = CliRunner().invoke(app, ["check", str(bad)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not a TensorBoard event file" in lines[0]
    assert "Traceback" not in result.output


def test_unreadable_file_next_to_good_ones_is_a_warning(tmp_path):
    write_events(tmp_path, [simple(s, loss=1.0) for s in range(5)])
    (tmp_path / "events.out.tfevents.9999999999.host.1.0").write_bytes(os.urandom(100))
    run = one(tmp_path)
    assert len(run.series["loss"]) == 5
    assert any(n.startswith("skipped ") and "not a TensorBoard event file" in n for n in run.notes)


# ---- runs made of several files -------------------------------------------------------------------

def test_restart_merges_files_last_write_wins_and_keeps_the_earlier_segment(tmp_path):
    first = write_events(tmp_path, [simple(s, loss=1.0, lr=0.1) for s in range(0, 100, 10)])
    time.sleep(0.01)
    second = write_events(tmp_path, [simple(s, loss=2.0, lr=0.1) for s in range(60, 150, 10)])
    run = one(tmp_path)
    loss = run.series["loss"]
    assert loss.steps.tolist() == list(range(0, 150, 10))
    assert loss.values.tolist() == [1.0] * 6 + [2.0] * 9
    assert loss.superseded_steps.tolist() == [60, 70, 80, 90] and loss.superseded_values.tolist() == [1.0] * 4
    assert run.resumed and run.sources == (str(first), str(second))
    (note,) = run.notes
    assert note.startswith("resumed at step 60: ") and str(second) in note and "60-90" in note


def test_restart_order_follows_the_first_event_not_the_file_name(tmp_path):
    written_first = write_events(tmp_path / "a", [simple(s, loss=1.0) for s in (4, 5)])
    time.sleep(0.01)
    written_second = write_events(tmp_path / "b", [simple(s, loss=2.0) for s in (5, 6)])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    os.rename(written_first, run_dir / "events.out.tfevents.2.host")     # names sort the wrong way round
    os.rename(written_second, run_dir / "events.out.tfevents.1.host")
    loss = one(run_dir).series["loss"]
    assert loss.values.tolist() == [1.0, 2.0, 2.0]           # the later-written file wins step 5


def test_tensor_plugin_is_remembered_across_restart_files(tmp_path):
    from tensorboard.plugins.histogram import summary_v2 as histogram_v2

    write_events(tmp_path, [tensor(1, "acc", np.float32(0.5), meta=SCALARS_META),
                            Event(wall_time=time.time(), step=1,
                                  summary=histogram_v2.histogram_pb("w", np.arange(3.0)))])
    time.sleep(0.01)
    bare = histogram_v2.histogram_pb("w", np.arange(3.0))
    bare.value[0].ClearField("metadata")
    bare.value[0].tensor.CopyFrom(tensor_util.make_tensor_proto(np.float32(7.0)))   # looks like a scalar
    write_events(tmp_path, [tensor(2, "acc", np.float32(0.75)), Event(wall_time=time.time(), step=2,
                                                                       summary=bare)])
    run = one(tmp_path)
    assert set(run.series) == {"acc"} and run.series["acc"].values.tolist() == [0.5, 0.75]


def test_steps_going_back_inside_one_file_are_reported(tmp_path):
    write_events(tmp_path, [simple(s, loss=float(s)) for s in (1, 2, 3, 4, 2, 3, 5)])
    run = one(tmp_path)
    assert run.series["loss"].values.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert run.resumed and run.notes[0].startswith("resumed at step 2: steps go back from 4 inside")


def test_add_scalars_sub_folders_merge_into_their_run(tmp_path):
    run_dir = tmp_path / "runs" / "x"
    write_events(run_dir, [simple(s, lr=0.1) for s in range(3)])
    write_events(run_dir / "loss_train", [simple(s, loss=1.0) for s in range(3)])
    write_events(run_dir / "loss_eval", [simple(s, loss=2.0) for s in range(0, 3, 2)])
    write_events(run_dir / "train_kl_mean", [simple(s, train__kl=0.5) for s in range(3)])   # tag train/kl
    write_events(tmp_path / "runs" / "y", [simple(s, lr=0.2) for s in range(3)])
    runs = {r.name: r for r in load(tmp_path / "runs")}
    assert set(runs) == {"x", "y"}
    x = runs["x"]
    assert set(x.series) == {"lr", "loss/train", "loss/eval", "train/kl/mean"}
    assert x.series["loss/eval"].values.tolist() == [2.0, 2.0]


def test_a_sub_directory_that_is_not_a_per_tag_folder_is_a_run_of_its_own(tmp_path):
    write_events(tmp_path / "exp", [simple(1, loss=1.0)])
    write_events(tmp_path / "exp" / "eval", [simple(1, loss=2.0)])
    write_events(tmp_path / "loss_ablation", [simple(1, loss=3.0)])    # looks per-tag, no writer file above
    assert sorted(r.name for r in load(tmp_path)) == ["exp", "exp/eval", "loss_ablation"]


# ---- the files around event files ---------------------------------------------------------------

def test_empty_directory_and_stray_files(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no metric logs"):
        load(tmp_path / "empty")
    run_dir = tmp_path / "run"
    write_events(run_dir, [simple(s, loss=1.0) for s in range(4)])
    (run_dir / "notes.txt").write_text("lr sweep 3\n")
    (run_dir / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64))
    (run_dir / "tiny").write_bytes(b"\x00" * 3)
    (run_dir / "plugins" / "profile").mkdir(parents=True)
    for stray in ("notes.txt", "image.png", "tiny"):
        assert not tb.can_load(str(run_dir / stray))
    (src,) = discover(run_dir)
    assert len(src.files) == 1 and len(one(run_dir).series["loss"]) == 4


def test_a_renamed_event_file_is_recognised_by_its_content(tmp_path):
    path = write_events(tmp_path, [simple(1, loss=1.0)])
    renamed = path.rename(tmp_path / "metrics.bin")
    assert tb.can_load(str(renamed)) and one(renamed).series["loss"].values.tolist() == [1.0]


def test_an_empty_event_file_alone_is_an_error(tmp_path):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"")
    with pytest.raises(InputError, match="empty event file"):
        load(tmp_path)


def test_inputs_are_not_modified_and_the_load_is_quiet(tmp_path, capsys):
    path = write_events(tmp_path, [simple(s, loss=1.0) for s in range(10)])
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    one(tmp_path, progress=True)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert capsys.readouterr().err == ""


def test_progress_bar_appears_only_after_a_second():
    bar = ByteProgress(True, 100, "run")
    bar.update(10)
    assert bar.bar is None
    bar.started -= 2
    bar.update(50)
    assert bar.bar is not None
    bar.__exit__(None, None, None)
    quiet = ByteProgress(False, 100, "run")
    quiet.started -= 2
    quiet.update(50)
    assert quiet.bar is None


# ---- optional dependencies ----------------------------------------------------------------------

def test_import_stabdiag_does_not_import_tensorboard():
    code = ("import sys, stabdiag, stabdiag.read.formats; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorboard', 'google_crc32c')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_missing_crc32c_names_the_extra(tmp_path, monkeypatch):
    path = write_events(tmp_path, [simple(1, loss=1.0)])
    monkeypatch.setitem(sys.modules, "google_crc32c", None)
    with pytest.raises(MissingExtraError, match=r"stabdiag\[tensorboard\]"):
        tb.load(str(path))
    assert not tb.can_load(str(path.rename(tmp_path / "renamed")))


def test_missing_tensorboard_names_the_extra(tmp_path, monkeypatch):
    write_events(tmp_path / "legacy", [simple(1, loss=1.0)])
    write_events(tmp_path / "tf2", [tensor(1, "loss", np.float32(1.0), meta=SCALARS_META)])
    import tensorboard.compat.proto

    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto.summary_pb2", None)
    monkeypatch.delattr(tensorboard.compat.proto, "summary_pb2")
    assert one(tmp_path / "legacy").series["loss"].values.tolist() == [1.0]   # the wire format alone
    with pytest.raises(MissingExtraError, match=r"needs tensorboard.*stabdiag\[tensorboard\]"):
        load(tmp_path / "tf2")


# ---- the bulk decoder against tensorboard's own reader ------------------------------------------

def test_field_numbers_match_tensorboard_protos():
    def number(message, name):
        return message.DESCRIPTOR.fields_by_name[name].number

    assert (_tbevents.EVENT_WALL_TIME, _tbevents.EVENT_STEP, _tbevents.EVENT_SUMMARY) == tuple(
        number(event_pb2.Event, n) for n in ("wall_time", "step", "summary"))
    assert _tbevents.SUMMARY_VALUE == number(summary_pb2.Summary, "value")
    value = summary_pb2.Summary.Value
    assert (_tbevents.VALUE_TAG, _tbevents.VALUE_SIMPLE, _tbevents.VALUE_TENSOR, _tbevents.VALUE_METADATA) == \
        tuple(number(value, n) for n in ("tag", "simple_value", "tensor", "metadata"))
    assert _tbevents.VALUE_OTHER_KINDS == {number(value, n): k for n, k in [
        ("obsolete_old_style_histogram", "histograms"), ("image", "images"), ("histo", "histograms"),
        ("audio", "audio")]}
    t = tensor_pb2.TensorProto
    assert (_tbevents.TENSOR_DTYPE, _tbevents.TENSOR_SHAPE, _tbevents.TENSOR_CONTENT, _tbevents.TENSOR_FLOAT,
            _tbevents.TENSOR_DOUBLE) == tuple(number(t, n) for n in (
                "dtype", "tensor_shape", "tensor_content", "float_val", "double_val"))
    assert _tbevents.TENSOR_VARINT_FIELDS == tuple(number(t, n) for n in (
        "int_val", "int64_val", "bool_val", "half_val", "uint32_val", "uint64_val"))


def random_events(rng: np.random.Generator, count: int) -> list[Event]:
    tags = ["loss", "train/reward", "a" * 130, "eval/x", "ü/ñ"]
    events = []
    for i in range(count):
        step = int(rng.integers(-5, 2**33)) if rng.random() < 0.1 else i
        values = []
        for tag in rng.choice(tags, size=int(rng.integers(0, 4))).tolist():
            kind = rng.random()
            if kind < 0.5:
                values.append(Summary.Value(tag=tag, simple_value=float(rng.normal())))
            else:
                dtype = rng.choice(["float32", "float64", "float16", "int32", "int64"])
                proto = tensor_util.make_tensor_proto(np.array(rng.normal() * 100).astype(dtype))
                values.append(Summary.Value(tag=tag + "_t", tensor=proto,
                                            metadata=SCALARS_META if kind < 0.6 else None))
        events.append(Event(wall_time=1e9 + i, step=step, summary=Summary(value=values)))
    return events


def reference_points(path: Path) -> dict[str, list[tuple[int, float]]]:
    """What tensorboard's own record reader and protos say each tag holds, in write order."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

    points: dict[str, list[tuple[int, float]]] = {}
    for raw in RawEventFileLoader(str(path)).Load():
        event = Event.FromString(raw)
        for v in event.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                points.setdefault(v.tag, []).append((event.step, float(np.float32(v.simple_value))))
            elif kind == "tensor":
                points.setdefault(v.tag, []).append((event.step, float(tensor_util.make_ndarray(v.tensor))))
    return points


def test_bulk_decoder_agrees_with_tensorboard_reader_in_small_batches(tmp_path, monkeypatch):
    path = write_events(tmp_path, random_events(np.random.default_rng(7), 400))
    expected = reference_points(path)
    monkeypatch.setattr(_tbevents, "_CHUNK_BYTES", 300)      # many batches
    monkeypatch.setattr(_tfrecord, "_PROBE_RECORDS", 3)       # guess the record pattern early and often
    records = _tfrecord.read_records(str(path))
    assert records.corrupt == () and records.truncated_at is None
    got = _tbevents.decode_file(records.data, records.starts, records.lengths, {})
    assert set(got.points) == set(expected)
    for tag, pairs in expected.items():
        steps, values, _ = got.points[tag]
        assert list(zip(steps.tolist(), values.tolist())) == pairs


def test_record_pattern_guess_agrees_with_one_by_one_walk(tmp_path, monkeypatch):
    tags = {f"m{i}": 0.5 for i in range(7)}
    path = write_events(tmp_path, [simple(s, **tags) if s % 9 else simple(s, eval=1.0) for s in range(3000)])
    one_by_one = record_offsets(path)
    monkeypatch.setattr(_tfrecord, "_PROBE_RECORDS", 16)
    guessed = []
    extend = _tfrecord._Walker.extend_by_pattern

    def counting(self, pos, stop):
        after = extend(self, pos, stop)
        guessed.append(after - pos)
        return after

    monkeypatch.setattr(_tfrecord._Walker, "extend_by_pattern", counting)
    records = _tfrecord.read_records(str(path))
    assert (records.starts - 12).tolist() == one_by_one
    assert sum(guessed) > path.stat().st_size // 2          # most of the file came from guesses
