"""Run assembly: which files make one training run, and how their copies of one history merge.

Event files are written by tensorboard's own writer; trainer_state.json and console lines as the HF
Trainer writes them.  The committed framework fixtures (tests/fixtures/framework_runs) check the same
on real TRL / Trainer output dirs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")

from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from stabdiag.cli import app  # noqa: E402
from stabdiag.errors import InputError  # noqa: E402
from stabdiag.read.assemble import discover, load  # noqa: E402


def loss_at(step: int) -> float:
    return round(4.0 / (1 + 0.1 * step), 6)


def write_tb(folder: Path, steps, *, wall0: float = 1_700_000_000.0, loss=loss_at) -> None:
    """What the HF TensorBoardCallback writes: train/* per logging step, eval/* at eval steps."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    for s in steps:
        values = [Summary.Value(tag="train/loss", simple_value=loss(s)),
                  Summary.Value(tag="train/grad_norm", simple_value=1.0),
                  Summary.Value(tag="train/epoch", simple_value=s / 100)]
        writer.add_event(Event(wall_time=wall0 + s, step=s, summary=Summary(value=values)))
        if s % 10 == 0:
            ev = [Summary.Value(tag="eval/loss", simple_value=loss(s) + 0.1),
                  Summary.Value(tag="train/epoch", simple_value=s / 100)]
            writer.add_event(Event(wall_time=wall0 + s + 0.5, step=s, summary=Summary(value=ev)))
    writer.close()


def trainer_state(steps, *, loss=loss_at) -> str:
    history = []
    for s in steps:
        history.append({"epoch": s / 100, "grad_norm": 1.0, "learning_rate": 1e-4, "loss": loss(s), "step": s})
        if s % 10 == 0:
            history.append({"epoch": s / 100, "eval_loss": loss(s) + 0.1, "eval_runtime": 1.0, "step": s})
    return json.dumps({"global_step": max(steps), "log_history": history})


def output_dir(tmp_path: Path, steps=range(1, 31)) -> Path:
    out = tmp_path / "my-sft-run"
    write_tb(out / "runs" / "Nov30_18-44-57_node01", steps)
    (out / "trainer_state.json").write_text(trainer_state(steps))
    (out / "checkpoint-20").mkdir()
    (out / "checkpoint-20" / "trainer_state.json").write_text(trainer_state([s for s in steps if s <= 20]))
    (out / "checkpoint-20" / "config.json").write_text('{"model_type": "llama"}')
    (out / "training_args.bin").write_bytes(b"\x80\x04binary")
    return out


def test_hf_output_dir_is_one_run_named_after_it(tmp_path):
    out = output_dir(tmp_path)
    [found] = discover(str(out))
    assert found.name == "my-sft-run" and len(found.files) == 3
    [run] = load(str(out))
    assert run.name == "my-sft-run"
    # trainer_state's bare names meet the callback names of the same history: one key each
    assert {"train/loss", "train/grad_norm", "eval/loss", "train/learning_rate"} <= set(run.series)
    assert "loss" not in run.series and "eval_loss" not in run.series
    assert run.series["train/loss"].steps.tolist() == list(range(1, 31))
    assert not run.resumed
    assert not [n for n in run.notes if "disagree" in n]
    # provenance: the best source of each key
    assert run.series["train/loss"].source.startswith("runs/Nov30_18-44-57_node01")
    assert run.series["train/learning_rate"].source.endswith("trainer_state.json")


def test_disagreeing_copies_are_noted_not_silently_picked(tmp_path):
    out = output_dir(tmp_path)
    (out / "trainer_state.json").write_text(
        trainer_state(range(1, 31), loss=lambda s: 9.0 if s == 7 else loss_at(s)))
    [run] = load(str(out))
    [note] = [n for n in run.notes if "disagree" in n]
    assert "trainer_state.json" in note and "runs/Nov30_18-44-57_node01" in note and "step 7" in note
    assert run.series["train/loss"].values[6] == pytest.approx(loss_at(7), rel=1e-6)   # the events' value


def test_resumed_output_dir_keeps_the_first_attempt_as_superseded(tmp_path):
    out = tmp_path / "grpo"
    write_tb(out / "runs" / "Nov30_10-00-00_node01", range(1, 61))
    write_tb(out / "runs" / "Nov30_12-00-00_node01", range(51, 101), wall0=1_700_100_000.0,
             loss=lambda s: loss_at(s) * 1.01)
    [run] = load(str(out))
    loss = run.series["train/loss"]
    assert run.resumed and run.duplicate_steps == 10
    assert loss.steps.tolist() == list(range(1, 101))
    assert loss.values[59] == pytest.approx(loss_at(60) * 1.01, rel=1e-6)    # the second attempt's write
    assert sorted(loss.superseded_steps.tolist()) == list(range(51, 61))


def test_bookkeeping_relogged_at_eval_steps_is_not_a_resume(tmp_path):
    write_tb(tmp_path / "runs" / "Nov30_10-00-00_node01", range(1, 41))    # train/epoch twice at 10, 20, ...
    [run] = load(str(tmp_path))
    assert not run.resumed


def test_sibling_experiments_and_bare_wandb_runs_stay_apart(tmp_path):
    write_tb(tmp_path / "exp-a" / "runs" / "Nov30_10-00-00_node01", range(1, 21))
    (tmp_path / "exp-a" / "trainer_state.json").write_text(trainer_state(range(1, 21)))
    write_tb(tmp_path / "exp-b" / "tb", range(1, 21))
    write_tb(tmp_path / "exp-b" / "tb2", range(1, 21))   # two writers' folders, no owner: two runs
    names = sorted(r.name for r in discover(str(tmp_path)))
    assert names == ["exp-a", "exp-b/tb", "exp-b/tb2"]


def test_console_log_beside_the_output_dir_joins_it(tmp_path):
    out = output_dir(tmp_path)
    lines = [f"{{'loss': {loss_at(s):.4f}, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': {s / 100}}}"
             for s in range(1, 31)]
    (out / "console.log").write_text("\n".join(lines) + "\n")
    [found] = discover(str(out))
    assert any(f.endswith("console.log") for f in found.files)
    [run] = load(str(out))
    assert run.name == "my-sft-run" and not run.resumed


def test_wandb_internals_are_never_metric_logs(tmp_path):
    out = output_dir(tmp_path)
    logs = out / "wandb" / "run-20261130_184457-abc123" / "logs"
    logs.mkdir(parents=True)
    # wandb's own debug log prints the run config, which looks like an HF dict
    (logs / "debug.log").write_text("2026-11-30 18:44:57 INFO config: {'loss': 1.0, 'LABEL_0': 0, 'LABEL_1': 1}\n")
    files = out / "wandb" / "run-20261130_184457-abc123" / "files"
    files.mkdir()
    (files / "requirements.txt").write_text("torch==2.13.0\ntrl==1.16.0\n")
    [found] = discover(str(out))
    assert not any("wandb" in os.path.relpath(f, out) for f in found.files)


def test_an_unreadable_file_beside_readable_ones_is_a_warning(tmp_path):
    out = output_dir(tmp_path)
    bad = out / "metrics.jsonl"
    bad.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": \n')
    [run] = load(str(out))
    assert any(w.startswith("metrics.jsonl: not read: line 2") for w in run.warnings)
    result = CliRunner().invoke(app, ["check", str(out), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert "warning: my-sft-run: metrics.jsonl: not read" in result.stderr


def test_nothing_readable_names_every_file_tried(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"step": 1, "loss": \n')
    (tmp_path / "notes.txt").write_text("we changed the lr today\n")
    with pytest.raises(InputError) as info:
        load(str(tmp_path))
    message = str(info.value)
    assert "a.jsonl" in message and "notes.txt" in message


def test_split_sources_gives_the_per_file_view(tmp_path):
    out = output_dir(tmp_path)
    names = sorted(r.name for r in discover(str(out), split_sources=True))
    assert names == ["checkpoint-20", "my-sft-run", "runs/Nov30_18-44-57_node01"]
    assert len(load(str(out), split_sources=True)) == 3


def test_plot_reads_an_output_dir_as_one_run(tmp_path):
    pytest.importorskip("matplotlib")
    out = output_dir(tmp_path)
    target = tmp_path / "t.png"
    result = CliRunner().invoke(app, ["plot", str(out), "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert target.stat().st_size > 1000 and os.path.basename(str(out)) in result.stdout


def test_checkpoint_only_output_dir(tmp_path):
    # save_state() never called: only checkpoints and the TensorBoard folder
    out = tmp_path / "run"
    write_tb(out / "runs" / "Nov30_10-00-00_node01", range(1, 41))
    for at in (20, 40):
        (out / f"checkpoint-{at}").mkdir(parents=True)
        (out / f"checkpoint-{at}" / "trainer_state.json").write_text(trainer_state(range(1, at + 1)))
    [run] = load(str(out))
    assert run.name == "run" and not run.resumed
    assert run.series["train/loss"].steps.tolist() == list(range(1, 41))
    assert np.isfinite(run.series["train/learning_rate"].values).all()
