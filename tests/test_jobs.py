"""`check --jobs N`: a tree of runs checked by a pool of worker processes says exactly what one job says
(stdout, stderr, exit code, in discovery order), a bad run included; a bad --jobs is one error line."""

from __future__ import annotations

import concurrent.futures
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag import batch
from stabdiag.cli import app
from stabdiag.cli.check import said
from stabdiag.errors import ConfigError, InputError, MissingExtraError, RuleError

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
# one run of each format: JSONL, TensorBoard, long CSV, W&B offline, Parquet
MIXED = ("grpo_easy_data", "grpo_math_healthy", "grpo_math_version_mismatch", "grpo_policy_collapse",
         "grpo_math_numeric_blowup")
runner = CliRunner()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Five runs of mixed formats, a run whose only log is binary junk (not read: a warning on the first
    run), a run with one good and one truncated log (the bad file is a warning on its run), and a CSV."""
    root = tmp_path_factory.mktemp("tree")
    for name in MIXED:
        shutil.copytree(SAMPLES / name, root / name)
    (root / "broken").mkdir()
    (root / "broken" / "metrics.csv").write_bytes(b"step,reward\n1,0.5\n\x00\x01\x02garbage\n")
    (root / "grpo_easy_data" / "extra.jsonl").write_text('{"step": 1, "reward": \n', encoding="utf-8")
    (root / "small").mkdir()
    rows = ["step,reward,kl,entropy,grad_norm,loss"]
    rows += [f"{s},{0.3 + s / 400:.4f},{0.01 + s / 1e4:.5f},{1.0 - s / 500:.4f},{0.8 + (s % 7) / 10:.3f},0.1"
             for s in range(1, 201)]
    (root / "small" / "metrics.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


class _PoolSpy(concurrent.futures.ProcessPoolExecutor):
    started: list[int] = []

    def __init__(self, max_workers=None, *args, **kwargs) -> None:
        _PoolSpy.started.append(max_workers)
        super().__init__(max_workers, *args, **kwargs)


@pytest.fixture()
def pools(monkeypatch) -> list[int]:
    """The worker counts of the process pools started (empty when the runs were checked here)."""
    _PoolSpy.started = []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _PoolSpy)
    return _PoolSpy.started


def check(*args: str) -> tuple[str, str, int]:
    result = runner.invoke(app, ["check", *args])
    return result.stdout, result.stderr, result.exit_code


@pytest.mark.parametrize("fmt", ["terminal", "json"])
def test_a_pool_says_byte_for_byte_what_one_job_says(tree, pools, fmt):
    serial = check(str(tree), "-f", fmt, "--jobs", "1", "--show-passes")
    assert pools == []
    pooled = check(str(tree), "-f", fmt, "--jobs", "2", "--show-passes")
    assert pools == [2]
    assert pooled == serial
    out, err, code = serial
    assert code == 1
    assert "warning: grpo_easy_data: extra.jsonl: not read:" in err
    assert "warning: grpo_easy_data: run broken not read:" in err
    names = ["grpo_easy_data", "grpo_math_healthy", "grpo_math_numeric_blowup", "grpo_math_version_mismatch",
             "grpo_policy_collapse", "small"]
    if fmt == "json":
        assert sorted(names, key=out.index) == names        # in discovery order
    else:                                                   # failures first, by name within a verdict
        assert all(name in out for name in names)


@pytest.mark.parametrize("extra", [
    ["--with", "missing.jsonl"],                    # --with cannot be read: after the runs' warnings
    ["--map", "reward=no_such_key"],                # a run lacks a mapped key: the first such run, in order
])
def test_an_error_ends_the_check_as_it_does_serially(tree, pools, extra):
    serial = check(str(tree), "-f", "json", "--jobs", "1", *extra)
    pooled = check(str(tree), "-f", "json", "--jobs", "3", *extra)
    assert pools == [3]
    assert pooled == serial
    assert serial[2] == 2 and serial[1].splitlines()[-1].startswith("error: ")


def test_a_path_with_no_readable_run_is_the_same_error(tree, tmp_path, pools):
    bad = tmp_path / "bad"
    for name in ("a", "b"):
        (bad / name).mkdir(parents=True)
        (bad / name / "metrics.csv").write_bytes(b"\x00\x01junk")
    serial = check(str(tree), str(bad), "--jobs", "1")
    pooled = check(str(tree), str(bad), "--jobs", "2")
    assert pooled == serial and pools == [2]
    # the readable tree still gets its report (issue 26): the bad path is an error line, not exit 2
    assert serial[2] in (0, 1) and f"error: {bad}: no run could be read" in serial[1]
    assert f"{bad}: no run could be read" in serial[0]           # and named in the report's "not read"
    assert check(str(bad), "--jobs", "1")[2] == 2                 # nothing at all readable: exit 2


def test_one_run_starts_no_pool(pools):
    out, err, code = check(str(SAMPLES / "grpo_easy_data"), "--jobs", "4")
    assert code == 0 and "grpo_easy_data" in out and pools == []


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_jobs_value_is_one_error_line(value):
    out, err, code = check(str(SAMPLES / "grpo_easy_data"), "--jobs", value)
    assert code == 2 and out == ""
    assert err == f"error: --jobs: expected a whole number of worker processes, 1 or more; got '{value}'\n"


def test_jobs_in_the_config_file(tree, tmp_path, monkeypatch, pools):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stabdiag.toml").write_text("jobs = 2\n", encoding="utf-8")
    shown = check(str(tree), "--show-settings")[0]
    assert "jobs" in shown and "2  (file stabdiag.toml)" in shown
    check(str(tree), "-f", "json")
    assert pools == [2]
    assert "(flag --jobs)" in check(str(tree), "--show-settings", "--jobs", "1")[0]
    (tmp_path / "stabdiag.toml").write_text("jobs = 0\n", encoding="utf-8")
    out, err, code = check(str(tree))
    assert code == 2 and err == ("error: stabdiag.toml: jobs: expected a whole number of worker processes, "
                                 "1 or more; got 0\n")
    (tmp_path / "stabdiag.toml").write_text("job = 2\n", encoding="utf-8")
    assert "did you mean 'jobs'?" in check(str(tree))[1]


def test_python_m_with_a_pool_matches_one_job(tree):
    """A real `python -m stabdiag` whose workers re-import the main module (which must not run the CLI)."""
    def run(jobs: str):
        return subprocess.run([sys.executable, "-m", "stabdiag", "check", str(tree), "-f", "json", "--jobs", jobs],
                              capture_output=True, timeout=300)
    one, two = run("1"), run("2")
    assert (two.stdout, two.stderr, two.returncode) == (one.stdout, one.stderr, one.returncode)
    assert one.returncode == 1 and b'"runs"' in one.stdout


def test_python_warnings_of_the_runs_are_said_once_in_run_order(capsys):
    odd = (("odd column", UserWarning, "loader.py", 7),)
    outcomes = [batch._Outcome("a", warnings=("w-a",), load_said=odd, diagnosis="A"),
                batch._Outcome("b", warnings=("w-b",), load_said=odd, diagnosis="B", diagnose_said=(
                    ("late", UserWarning, "engine.py", 9),))]
    found = [["a-files", "b-files"]]
    checked = batch._replay(["tree"], found, outcomes, (None, ()))
    assert [run.diagnosis for run in checked.runs] == ["A", "B"] and checked.error is None
    assert [(m.kind, m.text) for m in checked.messages] == [("python", "odd column"), ("python", "odd column"),
                                                             ("warning", "a: w-a"), ("warning", "b: w-b"),
                                                             ("python", "late")]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        said(checked)
    assert [str(w.message) for w in shown] == ["odd column", "late"]
    assert capsys.readouterr().err == "warning: a: w-a\nwarning: b: w-b\n"


def test_errors_cross_a_process_boundary_intact():
    for error in (InputError("runs/a.csv", "no step column", line=3, key="k"), InputError(None, "empty"),
                  RuleError("rules/x.toml", "unknown key", line=2, rule_id="L1.x"),
                  MissingExtraError("probe needs torch", "probe"), ConfigError("--map: bad")):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert vars(again) == vars(error)
