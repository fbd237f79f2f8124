"""Megatron-LM golden values (the JSON its functional tests compare CI runs against) and the
model_config.yaml beside them.  The published files are read from shared/real_healthy (skipped when
that folder is absent), never copied here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stabdiag.errors import InputError
from stabdiag.judge.engine import diagnose
from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats import megatron_golden
from stabdiag.signals.resolve import resolve

HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy" / "megatron_golden"
real = pytest.mark.skipif(not HEALTHY.is_dir(), reason="shared/real_healthy not present")

CONFIG = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 12
  --train-iters: 20
  --clip-grad: 1.0
  --bf16: true
TEST_TYPE: regular
"""


def _metric(start, end, interval, values):
    return {"start_step": start, "end_step": end, "step_interval": interval,
            "values": {str(s): v for s, v in values.items()}}


def _golden(tmp_path, data, config=CONFIG):
    folder = tmp_path / "gpt3_mcore_tp1_pp1"
    folder.mkdir()
    path = folder / "golden_values_dev_dgx_h100.json"
    path.write_text(json.dumps(data, indent=4), encoding="utf-8")       # as Megatron's test harness writes
    if config is not None:
        (folder / "model_config.yaml").write_text(config, encoding="utf-8")
    return path


def _training(steps=range(1, 21)):
    return {
        "lm loss": _metric(1, 20, 1, {s: 10.9 - 0.05 * s for s in steps}),
        "num-zeros": _metric(1, 20, 1, {s: 1700.0 + s for s in steps}),
        "mem-allocated-bytes": _metric(1, 20, 1, {s: 5.8e8 for s in steps}),
        "iteration-time": _metric(1, 20, 1, {s: "nan" if s == 1 else 0.09 for s in steps}),
    }


def test_each_metric_is_a_series_on_its_own_steps(tmp_path):
    path = _golden(tmp_path, _training())
    assert loaders.loader_for(str(path)) is megatron_golden
    [run] = assemble.load(str(path.parent))
    assert run.meta["format"] == "Megatron golden values"
    assert run.series["lm loss"].steps.tolist() == list(range(1, 21))
    assert run.series["lm loss"].values[0] == pytest.approx(10.85)
    timing = run.series["iteration-time"]
    assert math.isnan(timing.values[0]) and timing.values[1] == 0.09      # "nan": a step not timed
    signals = resolve(run)
    assert signals.get("loss").key == "lm loss" and signals.get("grad_zeros").key == "num-zeros"


def test_model_config_gives_the_run_config_and_its_planned_length(tmp_path):
    [run] = assemble.load(str(_golden(tmp_path, _training()).parent))
    assert run.meta["planned_steps"] == 20
    assert run.meta["config"]["clip-grad"] == 1.0 and run.meta["config"]["num-layers"] == 12
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in run.meta["config"]


def test_without_a_config_the_values_still_count(tmp_path):
    [run] = assemble.load(str(_golden(tmp_path, _training(), config=None).parent))
    assert "planned_steps" not in run.meta and len(run.series["lm loss"]) == 20


def test_a_sparse_grid_keeps_its_steps(tmp_path):
    data = {"lm loss": _metric(1, 100, 5, {1: 10.8, 5: 10.7, 10: 10.2, 100: 6.0})}
    [run] = assemble.load(str(_golden(tmp_path, data).parent))
    assert run.series["lm loss"].steps.tolist() == [1, 5, 10, 100]


def test_the_older_list_form_takes_its_steps_from_the_grid(tmp_path):
    data = {"lm loss": {"start_step": 0, "end_step": 15, "step_interval": 5, "values": [11.0, 9.5, 8.8, "nan"]},
            "iteration-time": {"start_step": 0, "end_step": 15, "values": [1.0, 2.0]}}       # no interval
    [run] = assemble.load(str(_golden(tmp_path, data).parent))
    assert run.series["lm loss"].steps.tolist() == [0, 5, 10, 15]
    assert math.isnan(run.series["lm loss"].values[-1])
    assert "iteration-time" not in run.series and any("no values object" in n for n in run.notes)


def test_a_file_without_loss_is_read_with_a_note(tmp_path):
    data = {k: v for k, v in _training().items() if k in ("mem-allocated-bytes", "iteration-time")}
    [run] = assemble.load(str(_golden(tmp_path, data).parent))
    assert set(run.series) == {"mem-allocated-bytes", "iteration-time"}
    assert any("no loss series such as 'lm loss'" in n for n in run.notes)
    assert diagnose(run).verdict == "unknown"


def test_a_nan_loss_is_a_finding_not_a_parse_error(tmp_path):
    data = _training()
    data["lm loss"]["values"]["15"] = "nan"
    [run] = assemble.load(str(_golden(tmp_path, data).parent))
    assert math.isnan(run.series["lm loss"].values[14])


def test_other_json_is_not_claimed(tmp_path):
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0}], "values": {}}), encoding="utf-8")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"start_step": 0, "lr": 1e-4}), encoding="utf-8")
    assert not megatron_golden.can_load(str(state)) and not megatron_golden.can_load(str(cfg))


def test_broken_json_is_one_error_naming_the_file(tmp_path):
    path = _golden(tmp_path, _training())
    path.write_text(path.read_text(encoding="utf-8")[:200], encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        megatron_golden.load(str(path))


@real
def test_every_published_golden_file_is_one_run():
    folders = sorted(p for p in HEALTHY.iterdir() if p.is_dir())
    assert len(folders) >= 15
    for folder in folders:
        [run] = assemble.load(str(folder))
        data = json.loads((folder / "golden_values_dev_dgx_h100.json").read_text(encoding="utf-8"))
        assert set(run.series) == set(data), folder.name
        for key, entry in data.items():
            assert len(run.series[key]) == len(entry["values"]), (folder.name, key)
        if "--train-iters:" in (folder / "model_config.yaml").read_text(encoding="utf-8"):
            assert run.meta["planned_steps"] >= run.series[next(iter(data))].steps[-1], folder.name
