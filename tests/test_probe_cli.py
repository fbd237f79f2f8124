"""`stabdiag probe` through a Typer mounted the way the main CLI mounts it: exit codes, one-line errors,
outputs, and the series file read back by stabdiag's own loader."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from stabdiag.probe.adapters import write_jsonl
from stabdiag.probe.cli import app as probe_app

main = typer.Typer()


@main.command()
def check(run: str) -> None:
    """Stand-in for the real `check`, so `probe` is one sub-command among several."""


main.add_typer(probe_app, name="probe")
runner = CliRunner()


def invoke(*args):
    return runner.invoke(main, ["probe", *map(str, args)])


def _assert_one_line_error(result, fragment):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


def _record(i, step=0, shift=0.0):
    lps = [-0.5 - shift, -1.0 - shift, -2.0 - shift]
    return {"id": f"r{i}", "step": step, "prompt_token_ids": [1, 5, 6], "response_token_ids": [7, 8, 2],
            "response_logprobs": lps, "train_logprobs": [-0.5, -1.0, -2.0],
            "meta": {"logprobs_mode": "raw"}}


@pytest.fixture()
def sidecar_file(tmp_path):
    path = tmp_path / "roll.jsonl"
    write_jsonl([_record(i, step=10 * (i % 2)) for i in range(6)], path)
    return path


def test_sidecar_mode_needs_no_model(tmp_path, sidecar_file):
    series = tmp_path / "drift.csv"
    out = tmp_path / "report.json"
    result = invoke(sidecar_file, "--series-out", series, "--out", out)
    assert result.exit_code == 0, result.output
    assert "verdict: OK" in result.stdout and "sidecar logprobs" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["schema"] == "stabdiag.probe/1" and doc["verdict"]["level"] == "ok"
    assert doc["inputs"]["precisions"] == ["sidecar"] and doc["metrics"]["frac_exact"] == 1.0
    assert doc["thresholds"]["k3_kl"]["source"].startswith("[")
    assert series.read_text().splitlines()[0] == \
        "step,logprob_delta,logprob_k3_kl,is_ratio_mean,mult_prob_error,prob_delta"


def test_series_out_is_read_back_by_the_loader(tmp_path):
    from stabdiag.read.assemble import load

    rows = [_record(i, step=s, shift=0.01 * s) for s in (1, 2, 3) for i in range(2)]
    for r in rows:
        r["policy_version"] = r["step"] - 1
    write_jsonl(rows, tmp_path / "roll.jsonl")
    series = tmp_path / "drift.csv"
    result = invoke(tmp_path / "roll.jsonl", "--series-out", series, "--fail-on", "never")
    assert result.exit_code == 0, result.output
    (run,) = load(str(series))
    assert {"logprob_delta", "logprob_k3_kl", "is_ratio_mean", "mult_prob_error", "prob_delta",
            "policy_version_lag"} <= set(run.keys())
    s = run.series["logprob_delta"]
    assert s.steps.tolist() == [1, 2, 3]
    assert s.values.tolist() == pytest.approx([0.01, 0.02, 0.03])
    assert run.series["policy_version_lag"].values.tolist() == [1.0, 1.0, 1.0]


def test_fail_on_and_json_format(tmp_path):
    write_jsonl([_record(i, shift=0.3) for i in range(6)], tmp_path / "roll.jsonl")
    result = invoke(tmp_path / "roll.jsonl")
    assert result.exit_code == 1 and "verdict: DANGER" in result.stdout
    assert invoke(tmp_path / "roll.jsonl", "--fail-on", "never").exit_code == 0
    result = invoke(tmp_path / "roll.jsonl", "--format", "json", "--set", "k3_kl.danger=1",
                    "--set", "abs_mean_dlogp.danger=1", "--set", "seq_mean_abs_dlogp.danger=1",
                    "--set", "mult_prob_error.danger=2", "--set", "chi2_token.danger=5",
                    "--set", "mean_abs_dprob.danger=1", "--set", "is_mean.warn=0:2", "--set", "is_mean.danger=0:2",
                    "--set", "frac_ratio_out[0.5,2].danger=1")
    doc = json.loads(result.stdout)
    assert doc["verdict"]["level"] == "warn" and result.exit_code == 0
    ok = invoke(tmp_path / "roll.jsonl", "--fail-on", "warn", "--set", "k3_kl.danger=1")
    assert ok.exit_code == 1


@pytest.mark.parametrize("args, fragment", [
    (["missing.jsonl"], "missing.jsonl: no such file"),
    (["{dir}/bad.jsonl"], "bad.jsonl:2: response_logprobs has 2 values for 3 response tokens"),
    (["{dir}/nomodel.jsonl"], "nothing to compare the engine logprobs with"),
    (["{dir}/ok.jsonl", "--fail-on", "sometimes"], "--fail-on 'sometimes'"),
    (["{dir}/ok.jsonl", "--dtype", "fp8", "--model", "x"], "--dtype 'fp8'"),
    (["{dir}/ok.jsonl", "--set", "k3_kl.danger=lots"], "is not a number"),
    (["{dir}/*.nothing"], "matches no file"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    good = _record(0)
    bad = dict(_record(1), response_logprobs=[-0.1, -0.2])
    write_jsonl([good, bad], tmp_path / "bad.jsonl")
    write_jsonl([good], tmp_path / "ok.jsonl")
    write_jsonl([{k: v for k, v in good.items() if k != "train_logprobs"}], tmp_path / "nomodel.jsonl")
    args = [a.format(dir=tmp_path) if "{dir}" in a else (a if a != "missing.jsonl" else str(tmp_path / a))
            for a in args]
    _assert_one_line_error(invoke(*args), fragment)


def test_inconclusive_exits_2(tmp_path):
    rows = [_record(i) for i in range(3)]
    rows[0]["response_logprobs"][0] = -999999999.0
    write_jsonl(rows, tmp_path / "roll.jsonl")
    result = invoke(tmp_path / "roll.jsonl")
    assert result.exit_code == 2 and "INCONCLUSIVE" in result.stdout
    assert result.stderr.startswith("error: verdict inconclusive")
    assert invoke(tmp_path / "roll.jsonl", "--fail-on", "never").exit_code == 0


def test_help_and_no_args():
    result = invoke("--help")
    assert result.exit_code == 0 and "--series-out" in result.stdout
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert "probe" in usage and "COMMAND" not in usage
    assert invoke().exit_code == 2


def test_importing_the_cli_does_not_import_torch():
    code = ("import sys, stabdiag.probe.cli, stabdiag.probe.pipeline, stabdiag.probe.report; "
            "print(any(m in sys.modules for m in ('torch', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_torch_names_the_extra(tmp_path, monkeypatch, sidecar_file):
    monkeypatch.setitem(sys.modules, "torch", None)        # import torch now raises ImportError
    result = invoke(sidecar_file, "--model", tmp_path)
    _assert_one_line_error(result, "pip install 'stabdiag[probe]'")


@pytest.mark.torch
def test_probe_with_model_end_to_end(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)                       # tiny model: one thread is fastest and robust to load
    try:
        _end_to_end(tmp_path)
    finally:
        torch.set_num_threads(threads)


def _end_to_end(tmp_path):
    import pyarrow.parquet as pq

    from stabdiag.probe.model import Precision, load_model
    from stabdiag.probe.synthetic import build_tiny_model, sample_rollouts

    model_dir = build_tiny_model(tmp_path / "m")
    rows = sample_rollouts(load_model(model_dir, Precision("fp32"), device="cpu"), n_records=8, steps=2)
    write_jsonl(rows, tmp_path / "roll.jsonl.gz")
    tokens, out = tmp_path / "tok.parquet", tmp_path / "r.json"
    result = invoke(tmp_path / "roll.jsonl.gz", "--model", model_dir, "--dtype", "fp32,bf16",
                    "--device", "auto", "--tokens-out", tokens, "--out", out, "--fail-on", "never")
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["inputs"]["precisions"] == ["fp32", "bf16"] and doc["inputs"]["device"] == "cpu"
    assert doc["per_dtype"]["fp32"]["metrics"]["max_abs_dlogp"] < 1e-5
    assert doc["per_dtype"]["bf16"]["vs_reference"]["k3_kl"] > 0
    assert doc["recompute"]["fp32"]["tokens_per_s"] > 0
    table = pq.read_table(tokens)
    assert {"record_id", "pos", "token_id", "lp_roll", "lp_train_fp32", "lp_train_bf16", "entropy_fp32",
            "loss_mask"} <= set(table.column_names)
    assert table.num_rows == sum(len(r["response_token_ids"]) for r in rows)
    bad = dict(rows[0], response_token_ids=[300] * len(rows[0]["response_token_ids"]))
    write_jsonl([bad], tmp_path / "bad.jsonl")
    _assert_one_line_error(invoke(tmp_path / "bad.jsonl", "--model", model_dir, "--dtype", "fp32"),
                           "bad.jsonl:1: record s0: token id 300 is not below the model's vocab size 256")
    write_jsonl([dict(rows[0], meta={})], tmp_path / "nometa.jsonl")
    _assert_one_line_error(invoke(tmp_path / "nometa.jsonl", "--model", model_dir, "--dtype", "fp32"),
                           "--logprobs-mode")
    _assert_one_line_error(invoke(tmp_path / "nometa.jsonl", "--model", tmp_path / "nope", "--logprobs-mode", "raw"),
                           "cannot load a causal LM")
