"""nanoGPT-family consoles: modded-nanogpt record logs (the script pasted above the records), llm.c's
console, and Karpathy's nanoGPT (read as a training-loop console).  The published record logs are read
from shared/real_healthy (skipped when that folder is absent), never copied here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats import text as textlog
from stabdiag.read.formats.text import nanogpt
from stabdiag.signals.resolve import resolve

HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy"
real = pytest.mark.skipif(not HEALTHY.is_dir(), reason="shared/real_healthy not present")

# the shape of a record log: the script (with the very f-strings that print the records), a separator,
# nvidia-smi, then the records; a validation line shares its step with a training line
SCRIPT = '''\
import os
import torch
num_iterations = 4 # step:9/9 train_loss:99.0 in a comment is code too
def log(step, val_loss, training_time_ms):
    print(f'step:{step}/{args.num_iterations} val_loss:{val_loss:.4f} train_time:{training_time_ms:.0f}ms')
    print("step:1/4 train_loss:42.0 train_time:1ms step_avg:1.00ms")
'''
MODDED = SCRIPT + "=" * 100 + """
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4                    |
|   0  NVIDIA H100 80GB HBM3          On  | 00000000:19:00.0 Off |                    0 |
+-----------------------------------------------------------------------------------------+
step:0/4 val_loss:10.8258 train_time:0ms step_avg:nanms
step:1/4 train_loss:10.8258 train_time:70ms step_avg:70.50ms
step:2/4 train_loss:8.5000 train_time:140ms step_avg:70.00ms
step:2/4 val_loss:8.4000 train_time:141ms step_avg:70.50ms
step:3/4 train_loss:nan train_time:210ms step_avg:70.00ms
step:4/4 train_loss:6.2500 train_time:280ms step_avg:70.00ms
step:4/4 val_loss:6.1000 train_time:281ms step_avg:70.25ms
peak memory allocated: 30724 MiB reserved: 45952 MiB
"""

LLMC = """\
| Parameter             | Value                                              |
| max_steps             | 3                                                  |
allocated 237 MiB for model parameters
val loss 11.009205
step    1/3 | train loss 11.010050 | norm 15.3887 | lr 8.57e-07 | 2815.17 ms | -100.0% bf16 MFU | 186236 tok/s
step    2/3 | train loss 10.950000 | norm 14.2000 | lr 1.71e-06 | 301.50 ms | 40.1% bf16 MFU | 1738000 tok/s
val loss 10.900000
step    3/3 | train loss 10.850000 | norm 13.0000 | lr 2.57e-06 | 300.25 ms | 40.2% bf16 MFU | 1745000 tok/s
"""

NANOGPT = """\
Overriding config with config/train_shakespeare_char.py:
eval_interval = 250 # keep frequent because we'll overfit
learning_rate = 1e-3 # with baby networks can afford to go a bit higher
tokens per iteration will be: 16,384
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2654, time 29976.89ms, mfu -100.00%
iter 10: loss 3.2458, time 16.39ms, mfu 22.74%
iter 20: loss 2.7914, time 16.47ms, mfu 22.73%
step 250: train loss 1.9664, val loss 2.0615
iter 250: loss 2.0241, time 5392.80ms, mfu 20.41%
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_modded_reads_the_records_and_never_the_pasted_script(tmp_path):
    path = _write(tmp_path, "0a1b2c3d.txt", MODDED)
    assert loaders.loader_for(path) is textlog
    run = textlog.load(path)
    assert run.meta["format"] == "modded-nanogpt log" and run.meta["planned_steps"] == 4
    loss = run.series["train_loss"]
    assert loss.steps.tolist() == [1, 2, 3, 4]              # not the 42.0 or 99.0 of the script
    assert loss.values[0] == 10.8258 and math.isnan(loss.values[2])   # a NaN is kept: it is a finding
    val = run.series["val_loss"]
    assert val.steps.tolist() == [0, 2, 4] and val.values.tolist() == [10.8258, 8.4, 6.1]
    # the unit joins the key; a step's time is its training line's, not the validation line's
    assert run.series["train_time_ms"].values.tolist() == [70, 140, 210, 280]
    assert not run.resumed
    assert set(run.series) == {"train_loss", "val_loss", "train_time_ms", "step_avg_ms"}


def test_modded_val_loss_is_the_eval_loss_and_train_loss_the_loss(tmp_path):
    run = textlog.load(_write(tmp_path, "record.txt", MODDED))
    signals = resolve(run)
    assert signals.get("eval_loss").key == "val_loss"
    assert signals.get("loss").key == "train_loss"


def test_modded_without_train_loss_is_still_one_run(tmp_path):
    # newer records print no train_loss at all: the validation loss carries the run
    text = SCRIPT + "=" * 100 + "\n" + "".join(
        f"step:{s}/500 train_time:{s * 60}ms step_avg:60.00ms\n" + (
            f"step:{s}/500 val_loss:{10 - s / 100:.4f} train_time:{s * 60 + 1}ms step_avg:60.00ms\n"
            if s % 125 == 0 else "") for s in range(0, 501))
    [run] = assemble.load(_write(tmp_path, "run.txt", text))
    assert run.series["val_loss"].steps.tolist() == [0, 125, 250, 375, 500]
    assert "train_loss" not in run.series


def test_llmc_console_val_loss_takes_the_step_printed_before_it(tmp_path):
    run = textlog.load(_write(tmp_path, "train.log", LLMC))
    assert run.meta["format"] == "llm.c console" and run.meta["planned_steps"] == 3
    assert run.series["train_loss"].values.tolist() == [11.01005, 10.95, 10.85]
    assert run.series["norm"].values.tolist() == [15.3887, 14.2, 13.0]
    assert run.series["lr"].values[0] == pytest.approx(8.57e-07)
    assert run.series["step_time_ms"].values.tolist() == [2815.17, 301.5, 300.25]
    assert run.series["tokens_per_second"].values[-1] == 1745000
    assert run.series["val_loss"].steps.tolist() == [0, 2]
    assert "parameter" not in " ".join(run.series)          # the argument table is no record


def _same_series(a, b):
    assert list(a.series) == list(b.series)
    for key, series in a.series.items():
        assert series.steps.tolist() == b.series[key].steps.tolist(), key
        np.testing.assert_array_equal(series.values, b.series[key].values)
        np.testing.assert_array_equal(series.superseded_values, b.series[key].superseded_values)


LLMC_ODD_ROWS = "".join(f"step {s:4d}/40 | train loss {v} | norm 1.5 | lr 3e-4 | 301.25 ms | 40.1% bf16 MFU | "
                        f"17 tok/s\n" for s, v in ((5, "nan"), (6, "-"), (4, "9.5"), (7, "1e3"), (7, "2.5")))


@pytest.mark.parametrize("by_shape,extra", [
    (True, ""),
    (True, "val loss 3.0\nstep    8/40 | train loss 1.0 | norm 1.5 | lr 3e-4 | 301.25 ms | 40.1% bf16 MFU | 9 tok/s"
           " | more\n"),
    (False, "step 9/9 | loss 1.0\n"),                                            # a `step` line that is no row
    (False, "step    8/40 | train loss 1.0 | norm 1.5 | lr 3e-4 | 300.1 ms | 1745000 tok/s\n"),    # no MFU
    (False, "step    8/40 | train loss 1.0 | norm 1.5 | lr 3e-4 | grad scale 2 | 300.1 ms\n"),  # a key more
])
def test_llmc_rows_read_by_their_shape_equal_rows_read_one_by_one(tmp_path, monkeypatch, by_shape, extra):
    # rows of one shape are read by one regex whose groups are the columns; any other line starting
    # with `step ` sends the file through the row-by-row reading: both give the same series
    path = _write(tmp_path, "train.log", LLMC + LLMC_ODD_ROWS + extra)
    text = textlog._pairs.lines_text(open(path, encoding="utf-8").read())
    assert (nanogpt._llmc_by_shape(text) is not None) == by_shape
    fast = textlog.load(path)
    monkeypatch.setattr(nanogpt, "_llmc_by_shape", lambda text: None)
    slow = textlog.load(path)
    _same_series(fast, slow)
    assert fast.meta == slow.meta and fast.notes == slow.notes
    assert fast.series["train_loss"].steps.tolist()[:6] == [1, 2, 3, 4, 5, 7]      # "-" is no number
    assert fast.series["train_loss"].superseded_values.tolist() == [1e3]          # step 7 written twice


MODDED_MANY = MODDED + "".join(
    f"step:{s}/90 train_loss:{3 + 1 / s:.4f} train_time:{70 * s}ms step_avg:70.{s % 10}0ms\n" if s % 7 else
    f"step:{s}/90 train_time:{70 * s}ms step_avg:nanms\n" for s in range(5, 90)) + "step:12/90 train_loss:9.0 " \
    "train_time:840ms step_avg:70.00ms\nstep:88/90 val_loss:3.5 train_time:9ms step_avg:1.00ms\n"


@pytest.mark.parametrize("extra,by_shape", [("", True), ("step:3/4\n", False)])
def test_modded_rows_read_by_their_shapes_equal_rows_read_one_by_one(tmp_path, monkeypatch, extra, by_shape):
    # two shapes (with and without train_loss), a rewritten step and val lines; a `step:` line that is
    # no row sends the file through the findall of every row, which must give the same series
    path = _write(tmp_path, "record.txt", MODDED_MANY + extra)
    fast = textlog.load(path)
    calls = []
    real = textlog._pairs.shaped_series
    monkeypatch.setattr(nanogpt, "shaped_series", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    textlog.load(path)
    training_rows = sum(1 for line in MODDED_MANY.split("\n") if line.startswith("step:") and " val_" not in line)
    assert (calls[0] == training_rows) == by_shape         # the `step:` lines less the val lines: the rows
    monkeypatch.setattr(nanogpt, "_first_and_last_train_rows", lambda text: None)
    slow = textlog.load(path)
    _same_series(fast, slow)
    assert fast.meta == slow.meta and fast.notes == slow.notes
    assert fast.series["train_loss"].superseded_values.tolist() == [3 + round(1 / 12, 4)]
    assert 7 not in fast.series["train_loss"].steps and 7 in fast.series["train_time_ms"].steps


def test_karpathy_nanogpt_eval_and_iter_lines(tmp_path):
    run = textlog.load(_write(tmp_path, "train.log", NANOGPT))
    assert run.meta["format"] == "training-loop console"
    assert run.series["val_loss"].steps.tolist() == [0, 250]
    assert run.series["train_loss"].values.tolist() == [4.2874, 1.9664]
    assert run.series["loss"].steps.tolist() == [0, 10, 20, 250]
    assert run.series["time"].values[1] == 16.39
    assert run.series["mfu"].values[1] == 22.74
    assert resolve(run).get("eval_loss").key == "val_loss"
    assert "learning_rate" not in run.series and "eval_interval" not in run.series   # config, not records


def test_a_script_alone_is_not_a_nanogpt_log(tmp_path):
    assert textlog._format_of(SCRIPT) != "nanogpt"


@real
def test_every_published_record_log_is_one_run_with_its_eval_loss():
    folders = sorted(p for p in (HEALTHY / "moddednanogpt").iterdir() if p.is_dir())
    assert len(folders) >= 40
    for folder in folders:
        [run] = assemble.load(str(folder))
        val = run.series["val_loss"]
        # every record ends at its planned step on a validation loss near the record's target
        assert val.steps[-1] == run.meta["planned_steps"], folder.name
        assert 2.8 < val.values[-1] < 3.4, folder.name
        assert np.all(np.isfinite(val.values)), folder.name


@real
def test_a_published_record_log_is_judged_on_its_losses():
    [run] = assemble.load(str(HEALTHY / "moddednanogpt" / "t1_2024_10_10_muon"))
    assert len(run.series["train_loss"]) == 6200
    diag = diagnose(run)
    assert diag.verdict != "fail", [f.message for f in diag.findings]
