"""The GitHub Action at the repository root: a composite action whose inputs reach its scripts only as
environment variables, and whose check script, run here as the runner runs it, writes the annotations,
the job summary, the reports and the step outputs, and exits with stabdiag's code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
SCRIPT = ROOT / "action" / "check.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the action's script is a bash script")


def test_action_yml_is_composite_and_splices_no_input_into_a_script():
    yaml = pytest.importorskip("yaml")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite" and {"paths", "fail-on", "args"} <= set(action["inputs"])
    assert action["inputs"]["paths"]["required"] is True
    assert {"verdict", "runs", "fail", "warn", "unknown", "pass", "exit-code", "report-dir"} == set(action["outputs"])
    for step in action["runs"]["steps"]:
        if "uses" in step:                                    # pip's cache, and no other action (no upload)
            assert step["uses"] == "actions/cache@v4" and "run" not in step
            continue
        assert "${{" not in step["run"], step["run"]          # inputs come in through env only
        assert step["shell"] == "bash"
    assert os.access(SCRIPT, os.X_OK) and os.access(ROOT / "action" / "install.sh", os.X_OK)


def run_action(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    full = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(outputs),
            "RUNNER_TEMP": str(tmp_path), "STABDIAG_PYTHON": sys.executable, **env}
    done = subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=300, cwd=ROOT)
    return done, tmp_path


def test_the_check_script_writes_annotations_report_summary_reports_and_outputs(tmp_path):
    spaced = tmp_path / "runs with spaces" / "hacking"            # a path with spaces is one path
    shutil.copytree(SAMPLES / "grpo_math_reward_hacking", spaced)
    paths = f"{spaced}\n\n{SAMPLES / 'grpo_math_healthy'}\n"
    done, where = run_action(tmp_path, STABDIAG_PATHS=paths,
                             STABDIAG_ARGS="--select L1,L3\n--jobs 1  --param 'L3.grad-norm-spike.ratio_vs_ema=8'")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("::error ") and "title=stabdiag L1.reward-eval-divergence" in line for line in lines)
    # the readable report is in the log, between commands stopped and resumed: no line of it is a command
    start = lines.index("::group::stabdiag report")
    token = lines[start + 1].removeprefix("::stop-commands::")
    end = lines.index(f"::{token}::")
    assert lines[start + 2].startswith("settings: no config file; select L1, L3") and lines[end + 1] == "::endgroup::"
    assert "2 runs: 1 fail, 1 pass" in lines[start + 2:end]
    assert all(line.startswith("::") for line in lines[:start] + lines[end + 1:])
    summary = (where / "summary.md").read_text()
    assert summary.startswith("## stabdiag") and "hacking" in summary and "`report-dir` output" in summary
    reports = where / "stabdiag"
    assert sorted(p.name for p in reports.iterdir()) == ["stabdiag.html", "stabdiag.json", "stabdiag.md",
                                                         "stabdiag.sarif", "stabdiag.txt", "stabdiag.xml"]
    doc = json.loads((reports / "stabdiag.json").read_text())
    assert [r["run"] for r in doc["runs"]] == ["hacking", "grpo_math_healthy"]
    assert doc["settings"]["values"]["select"]["value"] == ["L1", "L3"]
    assert doc["settings"]["config"] is None                           # --isolated: no project config read
    assert (where / "outputs").read_text() == (f"exit-code=1\nreport-dir={reports}\nverdict=fail\nruns=2\nfail=1\n"
                                               "warn=0\nunknown=0\npass=1\n")


def test_args_that_cannot_be_split_are_one_error(tmp_path):
    done, _ = run_action(tmp_path, STABDIAG_PATHS=str(SAMPLES / "grpo_easy_data"), STABDIAG_ARGS="--select 'L1")
    assert done.returncode == 2 and "cannot be split into words" in done.stdout


def test_fail_on_and_a_clean_run(tmp_path):
    done, _ = run_action(tmp_path, STABDIAG_PATHS=str(SAMPLES / "grpo_easy_data"), STABDIAG_FAIL_ON="warn",
                             STABDIAG_OUTPUT_DIR=str(tmp_path / "out"))
    assert done.returncode == 1 and "::warning" in done.stdout
    done, _ = run_action(tmp_path, STABDIAG_PATHS=str(SAMPLES / "grpo_easy_data"))
    assert done.returncode == 0


def test_a_bad_path_says_so_in_the_summary_and_exits_2(tmp_path):
    done, where = run_action(tmp_path, STABDIAG_PATHS=str(tmp_path / "missing"))
    assert done.returncode == 2 and "error:" in done.stderr
    assert "could not check the runs (exit 2)" in (where / "summary.md").read_text()
    done, _ = run_action(tmp_path, STABDIAG_PATHS="")
    assert done.returncode == 2 and "::error" in done.stdout
