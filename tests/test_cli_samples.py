"""`stabdiag samples RUN --step S`: a step's logged samples from the command line, on the committed sample
runs (tests/fixtures/sample_runs, written by TRL, verl's rollout dump and a plain JSONL writer); bad input
is one `error:` line and exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.clihelp import assert_one_error, cli

RUNS = Path(__file__).parent / "fixtures" / "sample_runs"


def answers(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("  answer: ")]


def test_prints_the_samples_of_a_step():
    result = cli("samples", str(RUNS / "plain_phrase_hack"), "--step", "3", "--width", "80")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("samples at step 3 (jsonl: 16 logged, 16 shown)")
    assert len(answers(result.stdout)) == 16 and "phrase_bonus=" in result.stdout
    assert all(len(line) <= 80 for line in answers(result.stdout))


def test_limit_and_width_bound_what_is_shown():
    wide = cli("samples", str(RUNS / "trl_length_hack"), "--step", "7", "--width", "200", "--limit", "3")
    narrow = cli("samples", str(RUNS / "trl_length_hack"), "--step", "7", "--width", "50", "--limit", "3")
    assert wide.exit_code == narrow.exit_code == 0, wide.output + narrow.output
    assert "(trl: 16 logged, 3 shown)" in wide.stdout and len(answers(wide.stdout)) == 3
    assert max(map(len, answers(narrow.stdout))) <= 50 < max(map(len, answers(wide.stdout)))


def test_a_step_with_no_samples_shows_the_nearest_and_says_so():
    result = cli("samples", str(RUNS / "verl_format_hack"), "--step", "100")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("samples at step 16 (verl")
    assert "note: no samples at step 100; the nearest logged step is 16" in result.stdout


def test_a_path_that_does_not_exist_is_one_error(tmp_path):
    missing = tmp_path / "nowhere"
    assert_one_error(cli("samples", str(missing), "--step", "1"), str(missing), "no such file")


def test_a_run_without_samples_is_one_error():
    # framework runs log metrics only: nothing to show, and the error says which files would have been read
    run = Path(__file__).parent / "fixtures" / "framework_runs" / "sft_healthy"
    assert_one_error(cli("samples", str(run), "--step", "1"), str(run), "no logged samples found")


def test_a_damaged_sample_file_is_one_error(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUNS / "trl_length_hack", run)
    damaged = run / "completions" / "completions_00007.parquet"
    damaged.write_bytes(damaged.read_bytes()[:6])          # cut short, as by a full disk or a killed copy
    result = cli("samples", str(run), "--step", "7")
    assert_one_error(result, str(run), "could not read the samples")


def test_bad_limit_or_width_is_one_error():
    run = str(RUNS / "plain_phrase_hack")
    assert_one_error(cli("samples", run, "--step", "3", "--limit", "0"), "--limit", "got 0")
    assert_one_error(cli("samples", run, "--step", "3", "--width", "10"), "--width", "got 10")


def test_sample_text_is_escaped(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    hostile = "\x1b]0;owned\x07::error file=x::forged\n::stop-commands::tok \u202e"
    rows = [{"step": 1, "prompt": "p", "completion": text, "reward": r} for text, r in ((hostile, 1.0), ("ok", 0.0))]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = cli("samples", str(tmp_path), "--step", "1")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert not any(line.lstrip().startswith("::") for line in result.stdout.splitlines())
    assert "\\x1b]0;owned" in result.stdout
