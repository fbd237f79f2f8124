"""CSV, TSV, JSONL and Parquet logs written by the real writers (csv, json, pyarrow), wide and long."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stabdiag.errors import InputError
from stabdiag.read.assemble import discover, load


def one(path, **options):
    runs = load(path, **options)
    assert len(runs) == 1
    return runs[0]


def test_wide_csv_with_sparse_eval(tmp_path):
    lines = ["step,train/reward,eval/math500_accuracy"]
    lines += [f"{s},{0.3 + s / 1000},{0.4 if s % 20 == 0 else ''}" for s in range(1, 101)]
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "m.csv")
    assert len(run.series["train/reward"]) == 100
    assert run.series["eval/math500_accuracy"].steps.tolist() == [20, 40, 60, 80, 100]
    assert not run.resumed


def test_nan_and_inf_written_as_text_are_values(tmp_path):
    (tmp_path / "m.tsv").write_text("global_step\tloss\tgrad_norm\n1\t1.0\t0.5\n2\tnan\tinf\n3\tNaN\t-Infinity\n")
    run = one(tmp_path / "m.tsv")
    assert math.isnan(run.series["loss"].values[1]) and math.isinf(run.series["grad_norm"].values[1])
    assert run.series["loss"].nonfinite_count == 2


def test_resumed_run_last_write_wins_and_earlier_kept(tmp_path):
    rows = [{"step": s, "loss": 1.0} for s in range(1, 11)] + [{"step": s, "loss": 2.0} for s in range(8, 15)]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    s = one(tmp_path / "m.jsonl").series["loss"]
    assert s.steps.tolist() == list(range(1, 15))
    assert s.values[7:].tolist() == [2.0] * 7
    assert s.superseded_steps.tolist() == [8, 9, 10]
    assert one(tmp_path / "m.jsonl").resumed


def test_verl_file_logger_jsonl_with_bare_nan(tmp_path):
    text = '{"step": 1, "data": {"actor/pg_loss": 0.1, "critic/score/mean": 0.3}}\n' \
           '{"step": 2, "data": {"actor/pg_loss": NaN, "critic/score/mean": 0.4}}\n'
    (tmp_path / "exp.jsonl").write_text(text)
    run = one(tmp_path / "exp.jsonl")
    assert set(run.series) == {"actor/pg_loss", "critic/score/mean"}
    assert math.isnan(run.series["actor/pg_loss"].values[1])


def test_parquet_null_is_absent_but_nan_is_a_value(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"_step": [1, 2, 3], "loss": [1.0, float("nan"), 0.5], "eval/acc": [None, 0.5, None]})
    pq.write_table(table, tmp_path / "m.parquet")
    run = one(tmp_path / "m.parquet")
    assert run.series["eval/acc"].steps.tolist() == [2]
    assert math.isnan(run.series["loss"].values[1])


@pytest.mark.parametrize("key_col", ["key", "tag", "metric"])
def test_long_format(tmp_path, key_col):
    (tmp_path / "m.csv").write_text(f"step,{key_col},value\n1,loss,1.0\n1,kl,0.1\n2,loss,0.9\n2,kl,nan\n")
    run = one(tmp_path / "m.csv")
    assert run.series["loss"].values.tolist() == [1.0, 0.9]
    assert math.isnan(run.series["kl"].values[1])


def test_wandb_ui_export_drops_min_max_and_run_prefix(tmp_path):
    header = "Step,myrun - train/reward,myrun - train/reward__MIN,myrun - train/reward__MAX"
    (tmp_path / "export.csv").write_text(header + "\n1,0.3,0.2,0.4\n2,0.35,0.3,0.4\n")
    run = one(tmp_path / "export.csv")
    assert list(run.series) == ["train/reward"]
    assert run.meta["wandb_run"] == "myrun"


def test_directory_of_files_is_one_run_and_tree_gives_several(tmp_path):
    a = tmp_path / "runA"
    a.mkdir()
    (a / "train.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    (a / "eval.csv").write_text("step,eval/acc\n2,0.5\n")
    (a / "notes.txt").write_text("stray file")
    b = tmp_path / "runB"
    b.mkdir()
    (b / "m.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    runs = load(tmp_path)
    assert [r.name for r in runs] == ["runA", "runB"]
    assert set(runs[0].series) == {"loss", "eval/acc"}
    assert [s.name for s in discover(a)] == ["runA"]


@pytest.mark.parametrize("name, content, problem", [
    ("empty.csv", "", "file is empty"),
    ("nostep.csv", "epoch_frac,loss\n0.1,1.0\n", "no step column"),
    ("junk.csv", "step,loss\n1,1.0\n2,abc\n", "non-numeric value 'abc' in metric column 'loss'"),
    ("bad.jsonl", '{"step": 1, "loss": 1.0}\n{"step": 2, "loss": \n', "not valid JSON"),
    ("frac.csv", "step,loss\n1.5,1.0\n", "non-integer step"),
    ("text.csv", "step,name\n1,abc\n", "no numeric metric columns"),
])
def test_bad_inputs_raise_input_error_naming_the_file(tmp_path, name, content, problem):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError, match=problem) as info:
        load(path)
    assert str(path) in str(info.value)


def test_junk_error_names_the_line(tmp_path):
    (tmp_path / "j.csv").write_text("step,loss\n1,1.0\n2,0.5\n3,oops\n")
    with pytest.raises(InputError) as info:
        load(tmp_path / "j.csv")
    assert info.value.line == 4


def test_missing_path_and_empty_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no metric logs"):
        load(tmp_path / "empty")


def test_inputs_are_not_modified(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss\n1,1.0\n1,2.0\n")
    before = path.read_bytes(), path.stat().st_mtime_ns
    load(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_large_sparse_wide_csv_keeps_every_point(tmp_path):
    steps = np.arange(1, 20001)
    lines = ["step,loss,eval/acc"] + [f"{s},{1.0 / s},{0.5 if s % 200 == 0 else ''}" for s in steps]
    (tmp_path / "big.csv").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "big.csv")
    assert len(run.series["loss"]) == 20000 and len(run.series["eval/acc"]) == 100
