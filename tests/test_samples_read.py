"""Logged samples read beside a run's metrics (stabdiag.read.samples): every source kind, the lazy window
within its budget, and discovery that never reads a sample file as a metric log."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from stabdiag.errors import InputError
from stabdiag.read.assemble import load
from stabdiag.read.samples import SampleSource, sample_kind
from stabdiag.read.samples import source as source_module

RUNS = Path(__file__).parent / "fixtures" / "sample_runs"


def _files(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file()]


@pytest.mark.parametrize("run, kind, steps", [("trl_length_hack", "trl", 16), ("verl_format_hack", "verl", 16),
                                              ("plain_phrase_hack", "jsonl", 16)])
def test_each_writer_is_read_as_its_kind(run, kind, steps):
    source = SampleSource.of(_files(RUNS / run))
    assert source.kind == kind
    window = source.window()
    assert len(window.steps) == steps
    assert all(s.completion is not None for s in window.samples)      # an empty answer is an answer
    assert all(s.group for s in window.samples)            # the prompt's group, for within-group comparisons
    first = window.samples[0]
    assert first.components                                # reward components per sample
    assert first.step == int(window.steps[0])


def test_trl_reward_columns_are_components_whatever_their_name():
    # TRL names a column after its reward function: `length` is a reward here, not a token count
    window = SampleSource.of(_files(RUNS / "trl_length_hack" / "completions")).window(1, 1)
    assert {"length", "correctness"} <= set(window.samples[0].components)
    assert window.samples[0].tokens is None


def test_wandb_tables_of_trl_give_the_trainer_steps_once():
    tables = [p for p in _files(RUNS / "trl_length_hack") if p.endswith(".table.json")]
    source = SampleSource.of(tables)
    assert source.kind == "wandb-table"
    window = source.window()
    assert list(window.steps) == list(range(1, 17))        # the table's step column, not W&B's _step
    per_step = {s: sum(1 for x in window.samples if x.step == s) for s in window.steps}
    assert set(per_step.values()) == {16}                  # the table logged twice at the end is read once


def test_trl_run_prefers_its_parquet_and_says_so():
    source = SampleSource.of(_files(RUNS / "trl_length_hack"))
    assert source.kind == "trl" and "wandb-table" in source.notes[0]


def test_discovery_attaches_samples_and_never_reads_them_as_metrics():
    run = load(str(RUNS / "trl_length_hack"))[0]
    assert run.samples is not None and run.samples.kind == "trl"
    assert not any("advantage" in key or key == "completion" for key in run.series)
    run = load(str(RUNS / "verl_format_hack"))[0]
    assert run.samples.kind == "verl" and "critic/score/mean" in run.series and "score" not in run.series


def test_a_sample_file_given_alone_is_not_a_metric_log():
    with pytest.raises(InputError, match="logged samples"):
        load(str(RUNS / "verl_format_hack" / "rollout_data" / "3.jsonl"))


def test_tinker_summaries_give_lengths_rewards_and_truncation(tmp_path):
    # the record shape of tinker_cookbook.rl.rollout_logging.serialize_rollout_summaries
    it = tmp_path / "iteration_000007"
    it.mkdir()
    rows = [{"schema_version": 1, "split": "train", "iteration": 7, "group_idx": g, "traj_idx": t, "tags": ["math"],
             "sampling_client_step": 7, "total_reward": float(t), "final_reward": float(t),
             "trajectory_metrics": {"format": 1.0}, "final_ob_len": 90,
             "steps": [{"step_idx": 0, "ob_len": 40, "ac_len": 10 + t, "reward": float(t), "episode_done": True,
                        "stop_reason": "length" if t == 3 else "stop", "metrics": {"correct": 0.0}, "logs": {}}]}
            for g in range(2) for t in range(4)]
    (it / "train_rollout_summaries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (it / "eval_test_rollout_summaries.jsonl").write_text(json.dumps(rows[0]) + "\n")
    source = SampleSource.of(_files(tmp_path))
    assert source.kind == "tinker"
    window = source.window()
    assert len(window.samples) == 8 and {s.step for s in window.samples} == {7}
    assert sorted({s.tokens for s in window.samples}) == [10, 11, 12, 13]
    assert [s.truncated for s in window.samples if s.tokens == 13] == [True, True]
    assert window.samples[0].components == {"correct": 0.0, "format": 1.0} and window.samples[0].completion is None


def _dump(path: Path, steps: int, per_step: int, *, gz: bool = False) -> None:
    lines = "".join(json.dumps({"step": s, "prompt": f"p{s}-{i // 4}", "completion": f"answer {s} {i}",
                                "reward": i / per_step}) + "\n" for s in range(steps) for i in range(per_step))
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(lines)
    else:
        path.write_text(lines)


@pytest.mark.parametrize("gz", [False, True])
def test_a_window_of_a_large_file_stays_within_its_budget(tmp_path, monkeypatch, gz):
    monkeypatch.setattr(source_module, "INDEX_PER_STEP", 12)
    path = tmp_path / ("samples.jsonl.gz" if gz else "samples.jsonl")
    _dump(path, steps=300, per_step=40, gz=gz)
    source = SampleSource.of([str(path)])
    assert source.kind == "jsonl"
    assert all(len(refs) <= 12 for refs in source.index().values())       # a reservoir of locators per step
    window = source.window(max_samples=400)
    assert len(window.samples) <= 400
    assert len(window.steps) == 400 // source_module.MIN_PER_STEP          # steps evenly apart when all do not fit
    assert window.steps[0] == 0 and window.steps[-1] == 299
    inside = source.window(10, 20, max_samples=400)
    assert list(inside.steps) == list(range(10, 21))
    assert len(inside.samples) == 11 * 12 and inside.logged == 11 * 40     # every row logged, not only those indexed


def test_damaged_lines_are_skipped_not_fatal(tmp_path):
    path = tmp_path / "samples.jsonl"
    _dump(path, steps=3, per_step=4)
    with open(path, "a") as fh:
        fh.write('{"step": 3, "completion": "cut sh\n')
    window = SampleSource.of([str(path)]).window()
    assert len(window.samples) == 12


def test_metric_logs_are_not_sample_logs(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "reward": 0.1 * s}) + "\n" for s in range(5)))
    assert sample_kind(str(metrics)) is None


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_metric_log_with_an_example_answer_per_step_is_read_as_metrics(tmp_path, suffix):
    # a loop that logs its metrics and one example response a step: a metric log, never refused as samples
    rows = [{"step": s, "loss": 1.0 / (s + 1), "reward": 0.1 * s, "response": f"example answer {s}"}
            for s in range(1, 21)]
    path = tmp_path / f"metrics{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    assert sample_kind(str(path)) is None
    for given in (path, tmp_path):                      # the file by name, and its folder
        run = load(str(given))[0]
        assert run.samples is None
        assert "loss" in run.series and len(run.series["loss"].steps) == 20


def test_samples_several_to_a_step_are_samples_whatever_the_file_name(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _dump(path, steps=3, per_step=4)
    assert sample_kind(str(path)) == "jsonl"
    with pytest.raises(InputError, match="logged samples"):
        load(str(path))
