"""Regression tests for the defects an audit and bench/fuzz.py found (issue 15), each from its minimal input:
damaged gzip, W&B records with valid checksums but text that is not UTF-8, `inf` and huge steps, 400-digit
integers, values beyond float64, numpy warnings on stderr, a catastrophic regex and files still being
written.  Paths (FIFOs, devices, permissions, --output, the W&B cache): test_hardening_paths.py."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import struct
import threading
import time
import warnings
import zlib

import numpy as np
import pytest

from stabdiag.errors import InputError
from stabdiag.read.assemble import load
from stabdiag.read.run import STEP_MAX, Series, StepError, as_steps, exact_step
from tests.clihelp import assert_one_error, cli, one

needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")
HUGE = "9" * 400


# --- steps: never wrapped, truncated or rounded --------------------------------------------------------

def test_steps_outside_the_range_are_refused_not_wrapped():
    assert exact_step("9007199254740992") == STEP_MAX and exact_step(STEP_MAX + 1) is None
    for bad in (2 ** 63, float("inf"), 1.5, "1e400", HUGE, True, "abc"):
        assert exact_step(bad) is None, bad
    assert exact_step("1e3") == 1000 and exact_step(7.0) == 7
    for bad in ([2 ** 63], [1, 2 ** 64], [-1, 2 ** 63], [math.inf], [0.5], np.array([2 ** 62], np.int64)):
        with pytest.raises(StepError, match="step range"):
            as_steps(bad)
    with pytest.raises(StepError):
        Series.from_points("x", [1, 2 ** 63], [1.0, 2.0])


@pytest.mark.parametrize("name, text, line", [
    ("big.csv", "step,loss\n1,2.0\n9223372036854775808,3.0\n", 3),
    ("big.jsonl", '{"step": 1, "loss": 2.0}\n{"step": 9223372036854775808, "loss": 3.0}\n', 2),
    ("inf.csv", "step,loss\n1,2.0\ninf,3.0\n", 3),
    ("digits.jsonl", '{"step": 1, "loss": 2.0}\n{"step": %s, "loss": 3.0}\n' % HUGE, 2),
    ("past53.csv", "step,loss\n1,2.0\n9007199254740993,3.0\n", 3),
])
def test_a_table_step_out_of_range_is_an_error_naming_the_line(tmp_path, name, text, line):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match="step range") as info:
        load(path)
    assert info.value.line == line and str(path) in str(info.value)
    assert_one_error(cli("check", str(path)), f"{path}:{line}")


def test_a_console_step_out_of_range_is_left_out_with_a_note(tmp_path):
    lines = [f" iteration {s:8d}/ 1000 | lm loss: 2.0E+00 | grad norm: 1.0 |" for s in range(1, 6)]
    lines.append(" iteration 9223372036854775808/ 1000 | lm loss: 2.0E+00 | grad norm: 1.0 |")
    (tmp_path / "megatron.log").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "megatron.log")
    assert run.series["lm loss"].steps.tolist() == [1, 2, 3, 4, 5]
    assert any("left out: their step is not an integer in the step range" in n for n in run.notes)


def test_inf_step_in_a_notebook_table_is_left_out_with_a_note(tmp_path):
    (tmp_path / "table.txt").write_text("| Step | Training Loss |\n|---|---|\n| inf | 2.0 |\n| 2 | 1.0 |\n"
                                        "| 3 | 0.9 |\n")
    run = one(tmp_path / "table.txt")
    assert run.series["loss"].steps.tolist() == [2, 3]
    assert any("(first: inf)" in n for n in run.notes)


def test_inf_epoch_in_an_hf_console_is_left_out_with_a_note(tmp_path):
    banner = "  Num Epochs = 1\n  Total optimization steps = 10\n"
    dicts = [f"{{'loss': {1.0 / s}, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': {s / 10}}}" for s in range(1, 6)]
    dicts.insert(2, "{'loss': 1.0, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': inf}")
    (tmp_path / "train.log").write_text(banner + "\n".join(dicts) + "\n")
    run = one(tmp_path / "train.log")
    assert run.series["loss"].steps.tolist() == [1, 2, 3, 4, 5]
    assert any("left out" in n and "inf" in n for n in run.notes)


def test_trainer_state_steps_out_of_range(tmp_path):
    good = [{"loss": 1.0, "step": s} for s in (1, 2, 3)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": good + [{"loss": 1.0, "step": 1e300}]}))
    run = one(tmp_path / "trainer_state.json")
    assert run.series["loss"].steps.tolist() == [1, 2, 3]
    assert any("log_history[3]" in n for n in run.notes)
    bad = '{"log_history": [{"loss": 1.0, "step": %s}]}' % HUGE
    (tmp_path / "trainer_state.json").write_text(bad)
    assert_one_error(cli("check", str(tmp_path / "trainer_state.json")), "[log_history[0]]", "step range")


def test_wandb_history_jsonl_step_out_of_range_is_left_out_naming_the_line(tmp_path):
    files = tmp_path / "wandb" / "run-20240101_000000-abc" / "files"
    files.mkdir(parents=True)
    rows = [{"_step": s, "loss": 1.0 / (s + 1)} for s in range(5)] + [{"_step": 2 ** 63, "loss": 9.0}]
    (files / "wandb-history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = one(files.parent)
    assert run.series["loss"].steps.tolist() == [0, 1, 2, 3, 4]
    assert any("wandb-history.jsonl:6: 1 row(s) left out" in n for n in run.notes)


def test_tensorboard_step_out_of_range_is_left_out_with_a_note(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "tb"))
    for step in (0, 1, 2, 2 ** 63 - 1):
        writer.add_event(Event(wall_time=1.0, step=step, summary=Summary(value=[Summary.Value(tag="loss",
                                                                                          simple_value=1.0)])))
    writer.close()
    run = one(tmp_path / "tb")
    assert run.series["loss"].steps.tolist() == [0, 1, 2]
    assert any("1 point(s) left out" in n for n in run.notes)


# --- values too large for float64: Inf with a note ------------------------------------------------------

@pytest.mark.parametrize("name, text, line", [
    ("digits.jsonl", '{"step": 1, "loss": %s}\n{"step": 2, "loss": 1.0}\n' % HUGE, 1),
    ("e400.csv", "step,loss\n1,1e400\n2,1.0\n", 2),
])
def test_a_value_beyond_float64_is_inf_with_a_note(tmp_path, name, text, line):
    (tmp_path / name).write_text(text)
    run = one(tmp_path / name)
    assert run.series["loss"].values.tolist() == [math.inf, 1.0]
    assert any("too large for float64 read as Inf" in n and f"{name}:{line}:" in n for n in run.notes)


def test_a_400_digit_integer_in_trainer_state_is_inf_with_a_note(tmp_path):
    text = '{"log_history": [{"loss": %s, "step": 1}, {"loss": 1.0, "step": 2}]}' % HUGE
    (tmp_path / "trainer_state.json").write_text(text)
    run = one(tmp_path / "trainer_state.json")
    assert run.series["loss"].values.tolist() == [math.inf, 1.0]
    assert any("too large for float64" in n for n in run.notes)


# --- damaged gzip --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, body", [("m.csv.gz", b"step,loss\n1,2\n2,3\n" * 20),
                                        ("m.jsonl.gz", b'{"step": 1, "loss": 2}\n' * 20)])
@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_damaged_gzip_is_an_error_naming_the_file(tmp_path, name, body, damage):
    data = bytearray(gzip.compress(body, mtime=0))
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[len(data) // 2:]
    path = tmp_path / name
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot read as|not valid JSON") as info:
        load(path)                      # a flipped byte may garble a line before the gzip check fails
    assert str(path) in str(info.value)
    assert_one_error(cli("check", str(path)), str(path))


# --- W&B records with valid checksums and text that is not UTF-8 ---------------------------------------

def _frame(payloads: list[bytes]) -> bytes:
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for payload in payloads:           # all small: one FULL record each, inside the first block
        out += struct.pack("<IHB", zlib.crc32(bytes([1]) + payload), len(payload), 1) + payload
    return bytes(out)


def _history(step: int, **items: float) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record()
    for key, value in {"_step": step, **items}.items():
        item = rec.history.item.add()
        item.nested_key.append(key)
        item.value_json = json.dumps(value)
    rec.history.step.num = step
    return rec.SerializeToString()


def _summary(**items: float) -> bytes:
    from wandb.proto import wandb_internal_pb2 as pb

    rec = pb.Record()
    for key, value in items.items():
        item = rec.summary.update.add()
        item.key = key
        item.value_json = json.dumps(value)
    return rec.SerializeToString()


@needs_wandb
@pytest.mark.parametrize("where", ["history", "summary"])
def test_a_wandb_record_with_text_that_is_not_utf8_is_skipped_with_a_note(tmp_path, where):
    rows = [_history(s, loss=1.0 / (s + 1)) for s in range(6)]
    rows.append(_summary(best=0.5))
    target = 3 if where == "history" else 6
    at = rows[target].index(b"loss" if where == "history" else b"best")
    rows[target] = rows[target][:at] + b"\xff" + rows[target][at + 1:]      # same length, valid checksum
    path = tmp_path / "run-utf8.wandb"
    path.write_bytes(_frame(rows))
    run = one(path)
    if where == "history":
        assert run.series["loss"].steps.tolist() == [0, 1, 2, 4, 5]
        assert any("skipped a record at byte offset" in n and "not UTF-8" in n for n in run.notes)
    else:
        assert len(run.series["loss"]) == 6 and "best" not in run.meta["summary"]
        assert any("summary record(s) that could not be decoded" in n for n in run.notes)
    assert cli("check", str(path), "-f", "json").exit_code in (0, 1, 3)


# --- no raw warnings, no catastrophic regex -------------------------------------------------------------

def test_arithmetic_on_extreme_values_prints_no_numpy_warning(tmp_path):
    rows = [f"{s},{1e308 if s % 7 == 0 else 1.0},{-1e308 if s % 5 == 0 else 0.5},{1e-320}" for s in range(1, 120)]
    (tmp_path / "m.csv").write_text("step,grad_norm,reward,kl\n" + "\n".join(rows) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cli("check", str(tmp_path / "m.csv"), "-f", "json")
    assert result.exit_code in (0, 1, 3), result.output
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert all(line.startswith("warning:") for line in result.stderr.splitlines())


def test_a_long_llmc_line_that_does_not_match_is_read_in_linear_time(tmp_path):
    lines = [f"s:{s} trl:1.0 lr:0.0006 norm:1.2" for s in range(5)]
    lines.append("s:9 " + "trl:1.0000 lr:0.0006 norm:1.2000" * 200 + "\x01 x")   # backtracked for hours before
    (tmp_path / "main.log").write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    run = one(tmp_path / "main.log")
    assert time.perf_counter() - started < 5 and len(run.series["trl"]) == 5


# --- files still being written ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, head, partial, rest", [
    ("m.csv", "step,loss\n1,8.0\n2,8.5\n", "3,8.281", "665186116612\n"),
    ("m.jsonl", '{"step": 1, "loss": 8.0}\n{"step": 2, "loss": 8.5}\n', '{"step": 3, "loss": 8.281', "665186116612}\n"),
    ("train.log", "".join(f"Step {s}/9 | loss: 8.{s} | reward: 0.{s}\n" for s in range(1, 5)),
     "Step 5/9 | loss: 8.281", "665186116612 | reward: 0.5\n"),
    ("table.txt", "| Step | Training Loss |\n|---|---|\n| 1 | 8.0 |\n| 2 | 8.5 |\n", "| 3 | 8.281", "665186116612 |\n"),
])
def test_the_last_line_without_its_newline_is_not_read(tmp_path, name, head, partial, rest):
    path = tmp_path / name
    path.write_text(head + partial)
    run = one(path)
    key = "loss"
    assert 8.281 not in run.series[key].values.tolist()
    assert any("the last line has no newline yet" in n and "not read" in n for n in run.notes)
    path.write_text(head + partial + rest)                           # the writer finishes the line
    assert 8.281665186116612 in one(path).series[key].values.tolist()


def test_a_whole_json_object_without_the_newline_is_read(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 0.5}')
    run = one(tmp_path / "m.jsonl")
    assert run.series["loss"].steps.tolist() == [1, 2] and not run.notes


@pytest.mark.parametrize("name", ["m.csv", "m.jsonl", "train.log"])
def test_loading_while_a_writer_appends_never_reads_half_a_line(tmp_path, name):
    path = tmp_path / name
    values = [1.0 + i / 7.0 + 1e-9 * i for i in range(400)]          # 17 significant digits each

    def row(i: int) -> str:
        if name.endswith(".csv"):
            return f"{i},{values[i]!r}\n"
        if name.endswith(".jsonl"):
            return json.dumps({"step": i, "loss": values[i]}) + "\n"
        return f"Step {i}/400 | loss: {values[i]!r}\n"

    path.write_text(("step,loss\n" if name.endswith(".csv") else "") + row(0) + row(1) + row(2))
    done = threading.Event()

    def append() -> None:
        with open(path, "a") as fh:
            for i in range(3, len(values)):
                text = row(i)
                cut = len(text) // 2
                fh.write(text[:cut])
                fh.flush()
                time.sleep(0.03 if i % 40 == 0 else 0.0005)      # now and then, long enough to be seen
                fh.write(text[cut:])
                fh.flush()
        done.set()

    writer = threading.Thread(target=append)
    writer.start()
    loads = seen_partial = 0
    while not done.is_set() or loads < 5:
        run = one(path)
        series = run.series["loss"]
        for step, value in zip(series.steps.tolist(), series.values.tolist()):
            assert value == values[step], (step, value)
        seen_partial += any("has no newline yet" in n for n in run.notes)
        loads += 1
    writer.join()
    assert seen_partial, "no load met a half-written line"
    assert len(one(path).series["loss"]) == len(values)
