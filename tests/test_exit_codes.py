"""Exit codes as pytest's: 0 clean, 1 findings, 2 usage or input error, 3 nothing could be judged;
--allow-unknown maps 3 to 0, --exit-zero forces 0 (2 stays 2), and --debug never changes a code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.judge.diagnosis import EXIT_FINDINGS, EXIT_NOT_JUDGED, exit_code_of
from stabdiag.judge.engine import diagnose
from tests.casegen import make_run

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()


def _too_short(folder: Path) -> Path:
    """A run that crashed after two steps: every layer unknown, nothing judged."""
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("step,reward,loss,grad_norm,entropy\n1,0.1,0.01,0.4,3.9\n2,0.15,0.02,0.5,3.8\n")
    return folder


def code(*args) -> int:
    return runner.invoke(app, list(args)).exit_code


def test_nothing_judged_exits_3_and_allow_unknown_maps_it_to_0(tmp_path):
    run = _too_short(tmp_path / "crashed")
    assert code("check", str(run)) == 3
    assert code("check", str(run), "--allow-unknown") == 0
    assert code("check", str(run), "--exit-zero") == 0
    assert code("check", str(run), "--format", "json") == 3


def test_findings_outrank_runs_never_judged_which_outrank_clean_ones(tmp_path):
    _too_short(tmp_path / "tree" / "crashed")
    shutil.copytree(SAMPLES / "grpo_math_healthy", tmp_path / "tree" / "healthy")
    assert code("check", str(tmp_path / "tree")) == 3
    shutil.copytree(SAMPLES / "grpo_math_numeric_blowup", tmp_path / "tree" / "blowup")
    assert code("check", str(tmp_path / "tree")) == 1
    assert code("check", str(tmp_path / "tree"), "--allow-unknown") == 1


def test_exit_code_of_orders_the_codes():
    unknown = diagnose(make_run("short", {"reward": {"values": [0.1, 0.2]}}))
    spiky = diagnose(make_run("nan", {"loss": {"values": [1.0] * 60 + [float("nan")] * 5},
                                      "grad_norm": {"values": [0.5] * 65}}))
    assert unknown.verdict == "unknown" and spiky.verdict == "fail"
    assert exit_code_of([unknown]) == EXIT_NOT_JUDGED
    assert exit_code_of([unknown, spiky]) == exit_code_of([spiky, unknown]) == EXIT_FINDINGS
    assert exit_code_of([unknown], allow_unknown=True) == 0
    assert exit_code_of([]) == 0


@pytest.mark.parametrize("extra", [[], ["--format", "json"]])
def test_debug_never_changes_an_exit_code(tmp_path, extra):
    short = _too_short(tmp_path / "crashed")
    missing = str(tmp_path / "nowhere.csv")
    for args in (["check", str(short)], ["check", str(SAMPLES / "grpo_math_healthy")],
                 ["check", str(SAMPLES / "grpo_policy_collapse")], ["check", missing],
                 ["check", str(short), "--fail-on", "bogus"]):
        plain = runner.invoke(app, [*args, *extra])
        debug = runner.invoke(app, [*args, *extra, "--debug"])
        assert plain.exit_code == debug.exit_code, (args, plain.output, debug.output)
        assert not isinstance(debug.exception, Exception) or isinstance(debug.exception, SystemExit)
    result = runner.invoke(app, ["check", missing, "--debug"])
    assert result.exit_code == 2 and "Traceback" in result.stderr and "error:" in result.stderr
