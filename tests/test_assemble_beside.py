"""A console log beside one run is read with it, never as a run of its own (issue 45 item 7), and the
abbreviated names of a hand-written loop's MLflow store are read as their signals (item 6).  The store under
tests/fixtures/mlflow_loop/run was written by the real MLflow client (make_mlflow_loop.py there, which says
how); the SQLite store is the committed one MLflow wrote (tests/fixtures/make_mlflow_stores.py), cut to one
run with sqlite3."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import discover, load
from stabdiag.signals.resolve import resolve
from tests.clihelp import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOOP = FIXTURES / "mlflow_loop" / "run"
CONSOLE = "".join(f"step {s} | {12000 + s} tok/s | mfu {38 + s % 2:.1f}%\n" for s in range(1, 61))


def test_an_mlflow_store_with_abbreviated_names_and_its_console_are_one_run():
    [run] = load(str(LOOP))
    assert run.name == "qwen-sft-lr2e-5"
    assert {"nll", "dev/nll", "grad_norm_l2", "lr"} <= set(run.series)
    assert any(n.startswith("stdout.log: the console beside the run's logs") for n in run.notes)
    mapping = resolve(run).mapping()
    assert {"loss": "nll", "eval_loss": "dev/nll", "grad_norm": "grad_norm_l2", "lr": "lr"}.items() <= mapping.items()
    diag = diagnose(run)
    statuses = {layer.layer: layer.status.value for layer in diag.layers}
    assert statuses[1] == "pass" and statuses[3] == "pass"         # held-out loss and the numeric layer judged
    result = cli("check", str(LOOP), "--format", "json", "--exit-zero")
    assert [r["run"] for r in json.loads(result.stdout)["runs"]] == ["qwen-sft-lr2e-5"]


def test_a_console_beside_a_one_run_sqlite_store_is_read_with_it(tmp_path):
    shutil.copy(FIXTURES / "mlflow" / "mlflow.db", tmp_path / "mlflow.db")
    with closing(sqlite3.connect(tmp_path / "mlflow.db")) as db:
        keep = db.execute("SELECT run_uuid FROM runs WHERE name = 'healthy'").fetchone()[0]
        for table in ("metrics", "latest_metrics", "params", "tags", "runs"):
            db.execute(f"DELETE FROM {table} WHERE run_uuid != ?", (keep,))
        db.commit()
    (tmp_path / "stdout.log").write_text(CONSOLE)
    [found] = discover(str(tmp_path))
    assert found.name == "healthy" and len(found.files) == 2
    [run] = load(str(tmp_path))
    assert "mfu" in run.series and any("read with the MLflow run beside it" in n for n in run.notes)


def test_a_console_above_one_run_joins_it_and_takes_the_folders_name(tmp_path):
    out = tmp_path / "exp1"
    (out / "metrics").mkdir(parents=True)
    (out / "metrics" / "log.jsonl").write_text("".join(json.dumps({"step": s, "loss": 2.0 - 0.01 * s}) + "\n"
                                                       for s in range(1, 61)))
    (out / "stdout.log").write_text(CONSOLE)
    [run] = load(str(out))
    assert run.name == "exp1" and {"loss", "mfu"} <= set(run.series)


def test_a_console_above_several_runs_stays_apart(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "log.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n"
                                                           for s in range(1, 31)))
    (tmp_path / "sweep.log").write_text(CONSOLE)
    assert len(discover(str(tmp_path))) == 3
