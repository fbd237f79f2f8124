"""Nightly selection: `check wandb://ENTITY/PROJECT --since 24h --tag nightly --state finished` checks the
runs the filters pick (newest first), against a stand-in of W&B's public API (no network), and
`--baseline last-pass` compares each with the newest passing run before it; MLflow plugs in the same way."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.advise import nightly
from stabdiag.cli import app
from tests.test_loaders_wandb import FakeRun

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
NOW = datetime.now(timezone.utc)
runner = CliRunner()


def rows_of(sample: str) -> list[dict]:
    """A sample run's history as the W&B backend would keep its rows."""
    frame = stabdiag.load(str(SAMPLES / sample))[0].to_frame()
    rows = []
    for step, row in frame.iterrows():
        out = {"_step": int(step)}
        for key, value in row.items():
            if not (isinstance(value, float) and math.isnan(value)):
                out[key] = value
            elif frame[key].notna().any() and step >= frame[key].first_valid_index():
                out[key] = "NaN"
        rows.append(out)
    return rows


def made(run_id: str, sample: str, *, hours: float, tags=("nightly",), state="finished") -> FakeRun:
    run = FakeRun(rows_of(sample), state=state)
    run.id, run.name, run.tags = run_id, f"{run_id}-{sample}", list(tags)
    run.created_at = (NOW - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S")
    return run


@pytest.fixture(scope="module")
def project_runs():
    return [made("old", "grpo_math_healthy", hours=72), made("good", "grpo_math_healthy", hours=10),
            made("bad", "grpo_math_numeric_blowup", hours=2),
            made("live", "grpo_math_healthy", hours=1, state="running"),
            made("adhoc", "grpo_math_healthy", hours=5, tags=())]


@pytest.fixture()
def api(monkeypatch, tmp_path, project_runs):
    import wandb

    asked: dict = {}

    class StandInApi:
        def __init__(self, **kwargs):
            pass

        def runs(self, path, filters=None, order=None):
            asked.update(path=path, filters=filters, order=order)
            return list(project_runs)                       # the backend's filtering is not relied on

        def run(self, path):
            entity, project, run_id = path.split("/")
            return next(r for r in project_runs if r.id == run_id)

    monkeypatch.setattr(wandb, "Api", StandInApi)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    for run in project_runs:
        run.entity, run.project = "ent", "proj"
    return asked


def test_ages_filters_and_the_query_sent_to_wandb():
    since = nightly.parse_age("24h", NOW)
    assert since == NOW - timedelta(hours=24) and nightly.parse_age("7d", NOW) == NOW - timedelta(days=7)
    with pytest.raises(stabdiag.ConfigError, match="expected an age"):
        nightly.parse_age("yesterday")
    chosen = nightly.filters("24h", ["nightly"], "finished", NOW)
    assert chosen.keeps(NOW, ["nightly", "x"], "finished") and not chosen.keeps(NOW, [], "finished")
    assert not chosen.keeps(NOW - timedelta(days=2), ["nightly"], "finished")
    query = nightly.wandb_filters(chosen)["$and"]
    assert {"tags": "nightly"} in query and {"state": "finished"} in query and "createdAt" in query[0]
    assert nightly.is_project("wandb://ent/proj") and not nightly.is_project("wandb://ent/proj/r1")


def test_a_nightly_selection_checks_the_runs_the_filters_pick_newest_first(api):
    result = runner.invoke(app, ["check", "wandb://ent/proj", "--since", "24h", "--tag", "nightly", "--state",
                                 "finished", "--format", "json", "--jobs", "1"])
    assert result.exit_code == 1, result.output
    runs = json.loads(result.stdout)["runs"]
    assert [r["run"] for r in runs] == ["bad-grpo_math_numeric_blowup", "good-grpo_math_healthy"]
    assert [r["verdict"] for r in runs] == ["fail", "pass"]
    assert api["path"] == "ent/proj" and api["order"] == "-created_at" and "$and" in api["filters"]


def test_baseline_last_pass_compares_each_run_with_the_newest_passing_run_before_it(api):
    result = runner.invoke(app, ["check", "wandb://ent/proj", "--tag", "nightly", "--state", "finished",
                                 "--baseline", "last-pass", "--format", "json", "--jobs", "1"])
    doc = json.loads(result.stdout)
    assert [r["run"] for r in doc["runs"]] == ["bad-grpo_math_numeric_blowup", "good-grpo_math_healthy",
                                               "old-grpo_math_healthy"]
    pairs = [(c["baseline"], c["run"]) for c in doc["comparisons"]]
    assert pairs == [("good-grpo_math_healthy", "bad-grpo_math_numeric_blowup"),
                     ("old-grpo_math_healthy", "good-grpo_math_healthy")]
    assert doc["comparisons"][0]["verdict_before"] == "pass" and doc["comparisons"][0]["verdict_after"] == "fail"


def test_selection_errors_are_one_line(api):
    none = runner.invoke(app, ["check", "wandb://ent/proj", "--tag", "release"])
    assert none.exit_code == 2 and none.stderr.startswith("error: wandb://ent/proj: no run matches (tag release)")
    alone = runner.invoke(app, ["check", str(SAMPLES), "--baseline", "last-pass"])
    assert alone.exit_code == 2 and "--baseline last-pass: compares the runs of a selection" in alone.stderr


def test_mlflow_plugs_in_through_the_same_hook(monkeypatch):
    monkeypatch.delitem(nightly.SELECTORS, "mlflow", raising=False)
    assert not nightly.is_project("mlflow://host:5000/nightly-exp")     # the MLflow reader's own URI
    missing = runner.invoke(app, ["check", "mlflow://host:5000/nightly-exp", "--since", "1d"])
    assert missing.exit_code == 2 and "select runs of a project" in missing.stderr
    seen = []

    def select(uri, chosen):
        seen.append((uri, chosen.since is not None))
        return [nightly.Selected(str(SAMPLES / "grpo_math_numeric_blowup"), NOW),
                nightly.Selected(str(SAMPLES / "grpo_math_healthy"), NOW - timedelta(hours=3))]

    monkeypatch.setitem(nightly.SELECTORS, "mlflow", select)
    assert nightly.is_project("mlflow://host:5000/nightly-exp")
    assert not nightly.is_project("mlflow://host:5000/nightly-exp/run1")
    result = runner.invoke(app, ["check", "mlflow://host:5000/nightly-exp", "--since", "1d", "--baseline", "last-pass",
                                 "--format", "json", "--jobs", "1"])
    doc = json.loads(result.stdout)
    assert seen == [("mlflow://host:5000/nightly-exp", True)] and len(doc["runs"]) == 2
    assert [(c["baseline"], c["run"]) for c in doc["comparisons"]] == [("grpo_math_healthy",
                                                                         "grpo_math_numeric_blowup")]
