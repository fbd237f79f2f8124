"""Several runs kept in one folder (issue 45 item 2): logs whose names differ by a dtype or seed token, or
that each start at the first step and overlap, are separate runs, one diagnosis each, named by file; a
resume and the parts of one run stay one run; the decision is in a note and `one_run` / `split_files`
override it.  The nanoGPT logs are the committed fixtures (tests/fixtures/pasted/make_pasted.py writes
them from nanoGPT's print statements); the JSON Lines are written by the json module at test time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stabdiag.errors import ConfigError
from stabdiag.read.assemble import discover, load
from tests.clihelp import cli

DTYPES = Path(__file__).resolve().parent / "fixtures" / "pasted" / "nanogpt_dtypes"


def write_jsonl(path: Path, steps, **keys) -> None:
    path.write_text("".join(json.dumps({"step": s, **{k: f(s) for k, f in keys.items()}}) + "\n" for s in steps))


def test_two_dtype_logs_in_one_folder_are_two_runs_named_by_file():
    runs = load(str(DTYPES))
    assert [r.name for r in runs] == ["nanogpt_dtypes/bf16", "nanogpt_dtypes/fp16"]
    for run in runs:
        assert not run.resumed and run.series["loss"].steps.tolist() == list(range(301))
        [note] = [n for n in run.notes if "read as 2 runs" in n]
        assert "dtype token (bf16, fp16)" in note and "--one-run" in note
    [merged] = load(str(DTYPES), one_run=True)
    assert merged.resumed                       # read as one, the second file rewrites the first's steps


def test_the_cli_gives_one_diagnosis_per_run_in_the_folder():
    result = cli("check", str(DTYPES), "--format", "json", "--exit-zero")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [r["run"] for r in report["runs"]] == ["nanogpt_dtypes/bf16", "nanogpt_dtypes/fp16"]


def test_a_folder_of_seed_files_is_one_run_per_seed(tmp_path):
    for seed in range(30):
        write_jsonl(tmp_path / f"grpo_seed{seed}.jsonl", range(1, 41),
                    reward=lambda s, k=seed: 0.3 + 0.01 * s + k / 1e3, kl=lambda s: 0.001 * s)
    runs = discover(str(tmp_path))
    assert len(runs) == 30 and {r.name for r in runs} == {f"{tmp_path.name}/grpo_seed{k}" for k in range(30)}
    assert all(not r.resumed for r in load(str(tmp_path)))


def test_a_resume_stays_one_run(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", range(1, 101), loss=lambda s: 2.0 - 0.01 * s)
    write_jsonl(tmp_path / "train_resumed.jsonl", range(81, 151), loss=lambda s: 2.01 - 0.01 * s)
    [run] = load(str(tmp_path))
    assert run.resumed and run.series["loss"].steps.tolist() == list(range(1, 151))
    assert any("read as one run (their names differ by a resume, part or rank token" in n for n in run.notes)


def test_overlapping_logs_with_other_names_are_told_apart_by_what_they_hold(tmp_path):
    write_jsonl(tmp_path / "alpha.jsonl", range(1, 101), loss=lambda s: 2.0 - 0.01 * s, grad_norm=lambda s: 1.0)
    write_jsonl(tmp_path / "beta.jsonl", range(1, 101), loss=lambda s: 2.5 - 0.01 * s, grad_norm=lambda s: 1.1)
    runs = load(str(tmp_path))
    assert len(runs) == 2 and not any(r.resumed for r in runs)
    assert any("each starts at the first step and they overlap" in n for n in runs[0].notes)
    # a train table and an eval table of one run hold other metrics: one run
    other = tmp_path / "one"
    other.mkdir()
    write_jsonl(other / "train.jsonl", range(1, 101), loss=lambda s: 2.0 - 0.01 * s, grad_norm=lambda s: 1.0)
    write_jsonl(other / "eval.jsonl", range(10, 101, 10), eval_loss=lambda s: 2.1 - 0.01 * s)
    [run] = load(str(other))
    assert {"loss", "eval_loss"} <= set(run.series)


def test_a_table_and_the_console_that_printed_the_same_numbers_are_one_run(tmp_path):
    # a script that logs to metrics.csv and prints the same numbers (to 4 decimals) to train.log, which ends on
    # an ECC error: one run, whose ending is the console's (they were two runs, the CSV's a plain pass)
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    steps = np.arange(1, 301)
    loss, grad = 2.0 + 0.02 * rng.standard_normal(300), 0.8 * np.exp(0.05 * rng.standard_normal(300))
    pd.DataFrame({"step": steps, "loss": loss, "grad_norm": grad, "learning_rate": 1e-5}).to_csv(
        tmp_path / "metrics.csv", index=False)
    lines = [f"step {s} loss={x:.4f} grad_norm={g:.4f} lr=1.00e-05" for s, x, g in zip(steps, loss, grad)]
    lines += ["Traceback (most recent call last):", '  File "train.py", line 211, in <module>',
              "    loss.backward()", "RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    [run] = load(str(tmp_path))
    assert any("the same values at the same steps" in n for n in run.notes)
    # two seeds that print their own numbers stay two runs
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "train.log").write_text("\n".join(lines[:300]) + "\n")
    pd.DataFrame({"step": steps, "loss": loss + 0.05, "grad_norm": grad, "learning_rate": 1e-5}).to_csv(
        seeds / "metrics.csv", index=False)
    assert len(load(str(seeds))) == 2


def test_configs_named_like_the_logs_tell_runs_apart(tmp_path):
    for name, lr in (("first", 1e-4), ("second", 3e-4)):
        (tmp_path / f"{name}.log").write_text("".join(f"step {s}: loss {2.0 - 0.01 * s:.4f}\n" for s in range(1, 31)))
        (tmp_path / f"{name}.yaml").write_text(f"lr: {lr}\nseed: 1\n")
    runs = discover(str(tmp_path))
    assert len(runs) == 2 and "their configs differ (first.yaml, second.yaml)" in runs[0].notes[0]


def test_split_files_and_one_run_override_and_exclude_each_other(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", range(1, 101), loss=lambda s: 2.0 - 0.01 * s)
    write_jsonl(tmp_path / "train_resumed.jsonl", range(81, 151), loss=lambda s: 2.01 - 0.01 * s)
    assert len(discover(str(tmp_path), split_files=True)) == 2
    assert len(discover(str(DTYPES), one_run=True)) == 1
    with pytest.raises(ConfigError):
        discover(str(tmp_path), one_run=True, split_files=True)
