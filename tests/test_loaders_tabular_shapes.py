"""Tables as people keep them (issue 45 items 3, 4 and 6): pandas' `DataFrame.to_csv()` with its unnamed
index and no step column, a hand-written loop's JSONL counted by `iter`, lit-gpt's `iter`/`step` pair whose
`step` repeats over a gradient accumulation, and typed records with a nested payload, one kind per line
(as JSON Lines and as a JSON array).  Every file is written by the real writer at test time: pandas for
the CSVs, the json module for the records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stabdiag.errors import InputError
from stabdiag.read.assemble import load
from stabdiag.signals.resolve import resolve
from tests.clihelp import cli


def one(path, **options):
    [run] = load(str(path), **options)
    return run


def metrics_frame(rows: int = 60) -> pd.DataFrame:
    steps = np.arange(rows)
    return pd.DataFrame({"loss": 3.0 / (1 + 0.05 * steps), "grad_norm": 1.0 + 0.01 * steps})


def test_a_pandas_csv_reads_its_unnamed_index_as_the_step_and_says_so(tmp_path):
    metrics_frame().to_csv(tmp_path / "metrics.csv")          # `,loss,grad_norm` then `0,...`
    assert (tmp_path / "metrics.csv").read_text().startswith(",loss,grad_norm\n0,")
    run = one(tmp_path / "metrics.csv")
    assert set(run.series) == {"loss", "grad_norm"}
    assert run.series["loss"].steps.tolist() == list(range(60))
    assert any("'Unnamed: 0' counts the rows 0..59" in n for n in run.notes)


def test_an_index_that_does_not_count_the_rows_is_refused_with_both_ways_out(tmp_path):
    frame = metrics_frame()
    frame[frame.index % 2 == 0].to_csv(tmp_path / "every_other.csv")     # index 0, 2, 4, ...
    with pytest.raises(InputError) as caught:
        load(str(tmp_path / "every_other.csv"))
    problem = caught.value.problem
    assert "no step column" in problem and "--step-col NAME ('Unnamed: 0' is pandas' index)" in problem
    assert "--step-col @row" in problem
    by_index = one(tmp_path / "every_other.csv", step_col="Unnamed: 0")
    assert by_index.series["loss"].steps.tolist()[:3] == [0, 2, 4]


def test_step_col_at_row_numbers_the_rows_of_any_table(tmp_path):
    metrics_frame(10).to_csv(tmp_path / "plain.csv", index=False)
    run = one(tmp_path / "plain.csv", step_col="@row")
    assert run.series["loss"].steps.tolist() == list(range(10))
    assert any("step = the row number" in n for n in run.notes)
    result = cli("check", str(tmp_path / "plain.csv"), "--step-col", "@row", "--format", "json", "--exit-zero")
    assert result.exit_code == 0, result.output
    refused = cli("check", str(tmp_path / "plain.csv"))
    assert refused.exit_code == 2 and "--step-col @row" in refused.stderr


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_loop_jsonl_counted_by_iter_is_read(tmp_path):
    write_jsonl(tmp_path / "log.jsonl", [{"iter": i, "loss": 2.0 / (1 + i), "lr": 3e-4} for i in range(1, 41)])
    run = one(tmp_path / "log.jsonl")
    assert run.series["loss"].steps.tolist() == list(range(1, 41)) and "iter" not in run.series


@pytest.mark.parametrize("counter", ["it", "iteration", "update", "global_update"])
def test_every_step_like_counter_is_a_step_column(tmp_path, counter):
    write_jsonl(tmp_path / "log.jsonl", [{counter: i, "loss": 1.0} for i in range(5)])
    assert one(tmp_path / "log.jsonl").series["loss"].steps.tolist() == list(range(5))


def test_a_step_that_stays_put_over_an_accumulation_is_not_a_restart(tmp_path):
    # lit-gpt's state: iter_num counts micro-batches, step_count optimizer steps (accumulation of 4)
    records = [{"iter": i, "step": (i + 1) // 4, "loss": 4.0 - 0.01 * i} for i in range(80)]
    write_jsonl(tmp_path / "lit.jsonl", records)
    run = one(tmp_path / "lit.jsonl")
    assert not run.resumed and run.duplicate_steps == 0
    assert run.series["loss"].steps.tolist() == list(range(80))
    assert any("'step' repeats while 'iter' increases" in n for n in run.notes)


def test_a_step_that_goes_back_is_still_a_restart(tmp_path):
    records = [{"iter": i, "step": i, "loss": 1.0} for i in range(1, 21)]
    records += [{"iter": i, "step": i, "loss": 2.0} for i in range(15, 31)]
    write_jsonl(tmp_path / "resumed.jsonl", records)
    run = one(tmp_path / "resumed.jsonl")
    assert run.resumed and run.series["loss"].superseded_steps.tolist() == list(range(15, 21))


def typed_records(steps: int = 120) -> list[dict]:
    """A hand-written GRPO loop's typed records: a config header, a frame per step and an oracle check
    every 20 steps, each with its payload."""
    records = [{"kind": "config", "payload": {"lr": 1e-6, "group_size": 8}}]
    for step in range(1, steps + 1):
        records.append({"kind": "frame", "step": step, "payload": {
            "train_reward": 0.3 + 0.003 * step, "kl_mean": 0.001 * step, "entropy_mean": 0.9 - 0.001 * step,
            "gen_len_mean": 210.0 + step}})
        if step % 20 == 0:
            records.append({"kind": "oracle", "step": step, "payload": {"reward": 0.35 + 0.001 * step}})
    return records


def check_typed(run) -> None:
    assert set(run.series) == {"train_reward", "kl_mean", "entropy_mean", "gen_len_mean", "oracle/reward"}
    assert run.series["oracle/reward"].steps.tolist() == [20, 40, 60, 80, 100, 120]
    assert not run.resumed
    signals = resolve(run)
    assert {"reward", "kl", "entropy", "response_length", "eval:oracle/reward"} <= set(signals.series)
    assert signals.series["reward"].key == "train_reward"


def test_typed_nested_jsonl_is_read_by_its_payloads_leaf_names(tmp_path):
    write_jsonl(tmp_path / "frames.jsonl", typed_records())
    run = one(tmp_path / "frames.jsonl")
    check_typed(run)
    [note] = [n for n in run.notes if "'payload'" in n]
    assert "payload/train_reward -> train_reward" in note and "frame (120), oracle (6), config (1)" in note


def test_a_json_array_of_typed_records_reads_the_same(tmp_path):
    (tmp_path / "frames.json").write_text(json.dumps(typed_records(), indent=1))
    check_typed(one(tmp_path / "frames.json"))


def test_a_json_file_of_something_else_is_no_metric_log(tmp_path):
    (tmp_path / "prompts.json").write_text(json.dumps([{"prompt": "2+2?", "answer": "4"}] * 3))
    (tmp_path / "config.json").write_text(json.dumps({"step": 3, "lr": 1e-4}))
    (tmp_path / "m.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    [run] = load(str(tmp_path))
    assert run.sources == (str(tmp_path / "m.csv"),)


def test_a_kind_that_names_its_key_keeps_it_and_names_stay_unique(tmp_path):
    records = []
    for step in range(1, 11):
        records.append({"type": "train", "step": step, "metrics": {"reward": 0.5, "loss": 1.0}})
        records.append({"type": "eval", "step": step, "metrics": {"reward": 0.4, "eval_loss": 1.1}})
    write_jsonl(tmp_path / "m.jsonl", records)
    run = one(tmp_path / "m.jsonl")
    assert set(run.series) == {"reward", "loss", "eval/reward", "eval_loss"}
    assert not run.resumed


def test_a_loops_jsonl_with_iter_and_its_own_mismatch_names_judges_layer_4(tmp_path):
    # json.dumps of the loop's dict each iteration: its own words for the rollout-vs-trainer gap and weights
    rng = np.random.default_rng(3)
    write_jsonl(tmp_path / "grpo.jsonl", [
        {"iter": i, "reward": 0.3 + 0.002 * i + rng.normal(0, 0.02), "kl": 0.001 * i, "loss": rng.normal(0, 0.05),
         "vllm_vs_fsdp_logprob_gap": 0.02 + rng.normal(0, 0.002), "is_weight_mean": 1.0 + rng.normal(0, 0.01)}
        for i in range(1, 151)])
    run = one(tmp_path / "grpo.jsonl")
    signals = resolve(run)
    assert signals.get("logprob_delta").key == "vllm_vs_fsdp_logprob_gap"
    assert signals.get("is_ratio_mean").key == "is_weight_mean"
    from stabdiag.judge.engine import diagnose

    layer4 = diagnose(run).layers[3]
    assert layer4.status.value != "unknown", layer4
