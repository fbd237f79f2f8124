"""The terminal report leads: one line per run first, a compact block for each run at or above
--fail-on, the not-judged lists said once; -v is the full view of every run, -q the table alone; one run
keeps its full view with the verdict, root and check-first on the first screen."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
NAMES = ("grpo_math_healthy", "grpo_math_reward_hacking", "grpo_math_numeric_blowup", "grpo_math_version_mismatch",
         "grpo_policy_collapse", "grpo_easy_data")
runner = CliRunner()


@pytest.fixture(scope="module")
def ten_runs(tmp_path_factory):
    tree = tmp_path_factory.mktemp("nightly")
    for i in range(10):
        name = NAMES[i % len(NAMES)]
        shutil.copytree(SAMPLES / name, tree / f"night{i:02d}_{name}")
    return tree


def lines(*args) -> list[str]:
    result = runner.invoke(app, ["check", *args, "--jobs", "1"])
    assert result.exit_code in (0, 1), result.output
    return result.stdout.splitlines()


def _table(out: list[str]) -> list[str]:
    """The table's rows (a wrapped headline's lines folded into its row), up to the line after it."""
    rows = []
    for line in out[2:]:
        if not line.strip() or not line.startswith(" ") and rows and "not listed" in line:
            break
        if line.startswith(" "):
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
    return rows


def test_a_ten_run_tree_leads_with_its_failures_and_folds_its_passes(ten_runs):
    out = lines(str(ten_runs))
    assert len(out) <= 120, len(out)
    assert out[0] == "10 runs: 7 fail, 1 warn, 2 pass" and out[-1] == out[0]      # opening and closing line
    assert out[1].split() == ["run", "verdict", "root", "onset", "headline"]
    rows = _table(out)
    verdicts = [row.split()[1] for row in rows]
    assert verdicts == ["FAIL"] * 7 + ["WARN"]                         # failures first, no PASS row
    assert "2 pass, not listed: --show-passes lists them" in out
    assert not any("healthy" in row for row in rows)
    shown = lines(str(ten_runs), "--show-passes")
    assert [row.split()[1] for row in _table(shown)] == ["FAIL"] * 7 + ["WARN"] + ["PASS"] * 2
    assert sum("start logging" in line for line in out) == 1         # said once for the runs that lack the same
    assert not any(line != line.rstrip() for line in out)            # no trailing spaces when piped


def test_blocks_only_for_runs_at_or_above_fail_on(ten_runs):
    out = "\n".join(lines(str(ten_runs)))
    assert "night00_grpo_math_healthy  PASS" not in out               # a pass gets its table line only
    assert "night05_grpo_easy_data  WARN" not in out                  # below --fail-on fail
    warn = "\n".join(lines(str(ten_runs), "--fail-on", "warn"))
    assert "night05_grpo_easy_data  WARN  root: layer 1" in warn


def test_quiet_is_the_table_and_verbose_the_full_view(ten_runs):
    quiet = lines(str(ten_runs), "-q")
    assert len(_table(quiet)) == 8 and quiet[-1] == quiet[0] and not any("check first" in line for line in quiet)
    assert len(quiet) <= 30
    verbose = lines(str(ten_runs), "-v")
    assert len(verbose) > 150 and sum(line.startswith("layer ") and "key evidence" in line for line in verbose) == 10
    assert sum("start logging" in line for line in verbose) == 1
    result = runner.invoke(app, ["check", str(ten_runs), "-q", "-v"])
    assert result.exit_code == 2 and "--verbose and --quiet" in result.stderr


def test_one_run_leads_with_its_verdict_and_what_to_check_first():
    out = lines(str(SAMPLES / "grpo_math_reward_hacking"))
    # the sample's AIME falls 0.197 -> 0.151 (the seed's 18% -> 15%), not surely: its headline also names
    # L1.eval-below-start as too noisy to tell, between the verdict and the root
    assert out[0].startswith("grpo_math_reward_hacking  FAIL") and out[0].endswith("root: layer 1 (data & reward)")
    screen = "\n".join(out[:24])
    assert "Check first (layer 1, data & reward):" in screen and "1. Read 20 of the highest-reward" in screen
    assert "key evidence" in "\n".join(out)
    assert sum("start logging" in line for line in out) == 1
