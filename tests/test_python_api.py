"""The Python API: load() takes a pandas DataFrame and a W&B public-API run object; Run.to_frame(),
Diagnosis.to_frame() (one row per finding) and a notebook's _repr_html_."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stabdiag
from stabdiag.errors import InputError
from tests.test_loaders_wandb import FakeRun, online_rows

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def _blowup_frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    loss = 2.0 * np.exp(-np.arange(n) / 150) + rng.normal(0, 0.02, n)
    grad = 1.0 + rng.normal(0, 0.05, n)
    loss[250:] = np.nan
    grad[250:] = np.nan
    return pd.DataFrame({"step": np.arange(1, n + 1), "loss": loss, "grad_norm": grad, "note": "x"})


def test_a_dataframe_is_a_run_and_a_nan_in_it_is_a_finding():
    (run,) = stabdiag.load(_blowup_frame(), name="nb-run")
    assert run.name == "nb-run" and set(run.series) == {"loss", "grad_norm"}      # text columns are not metrics
    assert run.series["loss"].steps[0] == 1 and math.isnan(run.series["loss"].values[-1])
    diag = stabdiag.diagnose(run)
    assert diag.verdict == "fail" and diag.root_layer == 3
    assert "L3.nonfinite-values" in {f.rule for f in diag.findings}


def test_steps_from_the_index_and_nan_missing_for_sparse_frames():
    frame = pd.DataFrame({"loss": [1.0, 0.9, np.nan, 0.7], "eval/acc": [np.nan, 0.5, np.nan, np.nan]},
                         index=pd.Index([10, 20, 30, 40], name="it"))
    (run,) = stabdiag.load(frame)
    assert run.series["loss"].steps.tolist() == [10, 20, 30, 40] and math.isnan(run.series["loss"].values[2])
    assert any("nan='missing'" in note for note in run.notes)
    (sparse,) = stabdiag.load(frame, nan="missing")
    assert sparse.series["loss"].steps.tolist() == [10, 20, 40] and sparse.series["eval/acc"].steps.tolist() == [20]
    with pytest.raises(InputError, match="integers"):
        stabdiag.load(pd.DataFrame({"step": [0.5, 1.5], "loss": [1.0, 2.0]}))


def test_run_to_frame_round_trips():
    (run,) = stabdiag.load(str(SAMPLES / "grpo_math_healthy"))
    frame = run.to_frame()
    assert frame.index.name == "step" and set(frame.columns) == set(run.series)
    (again,) = stabdiag.load(frame, nan="missing", name=run.name)
    for key, series in run.series.items():
        np.testing.assert_array_equal(again.series[key].steps, series.steps)
        np.testing.assert_allclose(again.series[key].values, series.values)
    assert stabdiag.diagnose(again).verdict == stabdiag.diagnose(run).verdict


def test_diagnosis_to_frame_has_one_row_per_finding_and_html_for_notebooks():
    (run,) = stabdiag.load(str(SAMPLES / "grpo_math_reward_hacking"))
    diag = stabdiag.diagnose(run)
    frame = diag.to_frame()
    assert len(frame) == len(diag.findings) and list(frame["rule"]) == [f.rule for f in diag.findings]
    assert set(frame.loc[frame["root"], "layer"]) == {1} and frame["downstream"].any()
    page = diag._repr_html_()
    assert page.startswith('<div class="stabdiag">') and "grpo_math_reward_hacking" in page and "<svg" in page
    assert stabdiag.diagnose(stabdiag.load(_blowup_frame())[0]).to_frame().columns[0] == "run"


def test_a_wandb_public_api_run_object_is_loaded_at_full_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeRun(online_rows())
    (run,) = stabdiag.load(fake)
    assert run.name == "my-run" and run.meta["run_id"] == "r1"
    assert run.series["loss"].steps.tolist() == list(range(100))
    assert run.series["eval/acc"].steps.tolist() == [0, 20, 40, 60, 80]
    assert fake.scans and all(keys for keys, _ in fake.scans)             # scan_history, never history()
    both = stabdiag.load([fake, str(SAMPLES / "grpo_math_healthy")])
    assert len(both) == 2 and both[1].name == "grpo_math_healthy"
