"""MLflow (issue 26 item 1): the SQLite store and the file store, written by the real MLflow client
(tests/fixtures/make_mlflow_stores.py, run by hand) and read here without mlflow; a tracking server
through the optional mlflow client."""

from __future__ import annotations

import importlib.util
import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import discover, load
from stabdiag.read.formats import mlflow as mlflow_loader
from stabdiag.read.formats import uri_loader
from stabdiag.read.formats.mlflow import _sqlite
from stabdiag.read.formats.mlflow._common import Selector
from tests.clihelp import assert_one_error, cli

STORES = Path(__file__).parent / "fixtures" / "mlflow"
EXPECTED = {"healthy": ("pass", None), "reward-hacked": ("fail", 1), "preempted": ("warn", 4),
            "diverging": ("fail", 3), "nan-blowup": ("fail", 3)}
STORE_PATHS = [STORES / "mlflow.db", STORES / "mlruns"]


@pytest.fixture(scope="module", params=STORE_PATHS, ids=["sqlite", "file-store"])
def diagnosed(request):
    return {run.name: (run, diagnose(run)) for run in load(str(request.param))}


def test_one_run_per_mlflow_run_named_by_its_run_name(diagnosed):
    assert sorted(diagnosed) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_run_gets_the_verdict_its_curves_call_for(diagnosed, name):
    _, diag = diagnosed[name]
    assert (diag.verdict, diag.root_layer) == EXPECTED[name], [f.message for f in diag.findings]


def test_params_are_the_config_and_the_status_is_the_ending(diagnosed):
    run, diag = diagnosed["healthy"]
    assert run.meta["config"]["learning_rate"] == 1e-06 and run.meta["config"]["max_steps"] == 400
    assert run.meta["mlflow_experiment"] == "nightly"
    assert diag.ending.kind == "finished" and "FINISHED" in diag.ending.message
    _, preempted = diagnosed["preempted"]
    assert preempted.ending.kind == "unfinished" and (preempted.ending.step, preempted.ending.planned) == (200, 400)
    assert "L4.run-unfinished" in {f.rule for f in preempted.findings}
    nan_run, nan_diag = diagnosed["nan-blowup"]
    assert any(math.isnan(v) for s in nan_run.series.values() for v in s.values)      # NaN kept, not 0
    assert "L3.nonfinite-values" in {f.rule for f in nan_diag.findings}


def test_the_sqlite_store_and_the_file_store_hold_the_same_points():
    by_store = [{r.name: r for r in load(str(path))} for path in STORE_PATHS]
    for name in EXPECTED:
        a, b = by_store[0][name], by_store[1][name]
        assert sorted(a.series) == sorted(b.series)
        for key, s in a.series.items():
            assert list(s.steps) == list(b.series[key].steps)
            assert all((x == y) or (math.isnan(x) and math.isnan(y)) for x, y in zip(s.values, b.series[key].values))


@pytest.mark.parametrize("store", ["mlflow.db", "mlruns"])
def test_an_experiment_or_a_run_is_selected_after_a_hash(store):
    assert sorted(r.name for r in discover(f"{STORES / store}#experiment=nightly")) == [
        "healthy", "preempted", "reward-hacked"]
    assert [r.name for r in discover(f"{STORES / store}#experiment=ablations&run=diverging")] == ["diverging"]
    result = cli("check", f"{STORES / store}#experiment=nightly", "-f", "json")
    assert result.exit_code == 1 and sorted(r["run"] for r in json.loads(result.stdout)["runs"]) == [
        "healthy", "preempted", "reward-hacked"]


def test_a_selector_that_matches_nothing_or_is_malformed_is_one_error():
    assert_one_error(cli("check", f"{STORES / 'mlflow.db'}#experiment=nope"), "found no a run that matches")
    assert_one_error(cli("check", f"{STORES / 'mlflow.db'}#colour=red"), "expected experiment=NAME")


def test_the_sqlite_store_reads_each_runs_metrics_with_one_query(monkeypatch):
    statements: list[str] = []
    real = _sqlite._connect

    def traced(path):
        db = real(path)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(_sqlite, "_connect", traced)
    runs = load(str(STORES / "mlflow.db"))
    metric_queries = [s for s in statements if "FROM metrics" in s]
    assert len(metric_queries) == len(runs) == 5


def _points_in_sql_order(path: Path, run_id: str) -> dict[str, list[tuple]]:
    """Each key's (step, value, timestamp) points in write order, as SQLite sorts them."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, step, value, timestamp FROM metrics WHERE run_uuid = ? "
                          "ORDER BY key, timestamp, rowid", (run_id,)).fetchall()
    out: dict[str, list[tuple]] = {}
    for key, step, value, stamp in rows:
        out.setdefault(key, []).append((step, value, stamp))
    return out


def _last_write_per_step(points: list[tuple]) -> list[tuple]:
    last = {step: (value, stamp / 1000.0) for step, value, stamp in points}
    return sorted((step, value, wall) for step, (value, wall) in last.items())


@pytest.mark.parametrize("odd_row", [False, True], ids=["rowid-order", "hand-written-row"])
def test_points_written_out_of_order_keep_each_keys_write_order(tmp_path, odd_row):
    # the rows are read in table order and sorted by key, timestamp and write order in numpy; a key
    # written at one timestamp twice keeps its later write; a store with a fractional timestamp (not written by
    # MLflow) is sorted by SQLite
    copy = tmp_path / "mlflow.db"
    copy.write_bytes((STORES / "mlflow.db").read_bytes())
    run_id = _sqlite.members(str(copy), Selector())[0][0]
    rows = [("zeta", 5.0, 900, 3), ("alpha", 1.0, 2000, 1), ("alpha", 2.0, 1000, 1), ("alpha", 3.0, 1000, 2),
            ("Beta", 4.0, 1000, 2), ("alpha", 7.0, 1000, 1), ("\u00e9t\u00e9", 6.0, 5, 0), ("zeta", 8.0, 900, 3)]
    with sqlite3.connect(copy) as db:
        db.execute("DELETE FROM metrics WHERE run_uuid = ?", (run_id,))
        db.executemany("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, ?, 0)",
                       [(k, v, t, run_id, s) for k, v, t, s in rows])
        if odd_row:
            db.execute("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                       "VALUES ('alpha', 9.0, 1500.5, ?, 4, 0)", (run_id,))
    run = mlflow_loader.load_member(str(copy), run_id)
    expected = _points_in_sql_order(copy, run_id)
    assert sorted(run.series) == sorted(expected) == sorted(["zeta", "alpha", "Beta", "\u00e9t\u00e9"])
    for key, points in expected.items():
        series = run.series[key]
        assert list(zip(series.steps.tolist(), series.values.tolist(), series.wall_time.tolist())) == \
            _last_write_per_step(points)
    # alpha's writes by timestamp: 2.0 then 3.0 then 7.0 at ts 1000 (rowid order), then 1.0 at ts 2000
    assert run.series["alpha"].values[:2].tolist() == [1.0, 3.0]
    assert run.series["zeta"].values.tolist() == [8.0]
    if odd_row:
        assert run.series["alpha"].values.tolist() == [1.0, 3.0, 9.0]


def test_the_store_is_opened_read_only(tmp_path):
    copy = tmp_path / "mlflow.db"
    copy.write_bytes((STORES / "mlflow.db").read_bytes())
    db = _sqlite._connect(str(copy))
    with pytest.raises(sqlite3.OperationalError):
        db.execute("DELETE FROM metrics")
    db.close()


def test_reading_the_stores_needs_no_mlflow():
    code = ("import sys; from stabdiag.read.assemble import load; "
            f"runs = load({str(STORES / 'mlflow.db')!r}) + load({str(STORES / 'mlruns')!r}); "
            "assert 'mlflow' not in sys.modules and len(runs) == 10")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tracking_server_uris_are_claimed_without_taking_wandbs():
    assert uri_loader("mlflow://localhost:5000/nightly") is mlflow_loader
    assert uri_loader("http://mlflow.internal:5000/#/experiments/3/runs/abc123") is mlflow_loader
    assert uri_loader("https://wandb.ai/team/proj/runs/abc123").__name__.endswith(".wandb")


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is not None, reason="mlflow is installed here")
def test_a_tracking_server_without_the_mlflow_extra_names_the_extra():
    result = cli("check", "mlflow://localhost:5000/nightly")
    assert result.exit_code == 2
    assert "pip install 'stabdiag[mlflow]'" in result.stderr and "Traceback" not in result.output


def test_in_a_tree_repeated_run_names_get_their_experiment_and_store():
    names = [r.name for r in discover(str(STORES))]
    assert len(names) == len(set(names)) == 10
    assert {"mlflow.db:nightly/healthy", "mlruns:nightly/healthy", "mlruns:ablations/nan-blowup"} <= set(names)


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="needs the mlflow extra")
def test_a_tracking_server_is_read_through_the_mlflow_client(tmp_path, monkeypatch):
    # the client of a server, pointed at a copy of the SQLite store: the same runs and verdicts
    from mlflow.tracking import MlflowClient

    from stabdiag.read.formats.mlflow import _server

    copy = tmp_path / "mlflow.db"
    copy.write_bytes((STORES / "mlflow.db").read_bytes())
    client = MlflowClient(tracking_uri=f"sqlite:///{copy}")
    monkeypatch.setattr(_server, "_client", lambda tracking: client)
    runs = {r.name: diagnose(r) for r in load("mlflow://localhost:5000/nightly")}
    assert {name: (d.verdict, d.root_layer) for name, d in runs.items()} == {
        name: EXPECTED[name] for name in ("healthy", "reward-hacked", "preempted")}
    eid = client.get_experiment_by_name("ablations").experiment_id
    assert sorted(r.name for r in load(f"http://localhost:5000/#/experiments/{eid}")) == ["diverging", "nan-blowup"]


def test_a_single_metric_file_of_a_file_store_run_is_one_error():
    [metric] = list((STORES / "mlruns").glob("*/*/metrics/train/loss"))[:1]
    assert_one_error(cli("check", str(metric)), "a file of an MLflow run")
