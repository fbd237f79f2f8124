"""Sharding the recompute over 2 CPU processes with torchrun (gloo); rank 0 gathers and reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.torch


def test_torchrun_two_processes_match_one(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import pyarrow.parquet as pq

    from stabdiag.probe.adapters import write_jsonl
    from stabdiag.probe.model import Precision, load_model
    from stabdiag.probe.synthetic import build_tiny_model, sample_rollouts

    model_dir = build_tiny_model(tmp_path / "m")
    rows = sample_rollouts(load_model(model_dir, Precision("fp32"), device="cpu"), n_records=10, seed=5)
    write_jsonl(rows, tmp_path / "roll.jsonl")
    common = [str(tmp_path / "roll.jsonl"), "--model", model_dir, "--dtype", "fp32", "--device", "cpu",
              "--fail-on", "never", "--format", "json"]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    dist = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "stabdiag.probe", *common, "--tokens-out", str(tmp_path / "dist.parquet")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert dist.returncode == 0, dist.stderr[-2000:]
    doc = json.loads(dist.stdout)                       # only rank 0 printed a report
    assert doc["inputs"]["world_size"] == 2 and doc["inputs"]["n_records"] == 10

    from typer.testing import CliRunner

    from stabdiag.probe.cli import app

    single = CliRunner().invoke(app, [*common, "--tokens-out", str(tmp_path / "one.parquet")])
    assert single.exit_code == 0, single.output
    a = pq.read_table(tmp_path / "dist.parquet").to_pandas()
    b = pq.read_table(tmp_path / "one.parquet").to_pandas()
    assert a["record_id"].tolist() == b["record_id"].tolist()
    assert np.abs(a["lp_train_fp32"].to_numpy() - b["lp_train_fp32"].to_numpy()).max() < 1e-5
    assert doc["metrics"]["n_tokens"] == json.loads(single.stdout)["metrics"]["n_tokens"]
