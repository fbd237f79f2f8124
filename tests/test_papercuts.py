"""Issue 46's papercuts: `rules explain` takes what --select takes, a bare `rules` lists, the probe's help
reads as every command's, piped `signals` has no trailing spaces, no rule text promises a later version
or a TODO, and the default --jobs uses a pool only where it pays."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from stabdiag._version import __version__
from stabdiag.batch import POOL_MIN_BYTES, default_workers
from stabdiag.cli import app
from stabdiag.judge.rules import load_rules
from stabdiag.read.assemble import RunFiles

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()


def test_rules_explain_takes_ids_and_prefixes_in_any_case_as_select_does():
    one = runner.invoke(app, ["rules", "explain", "l3.GRAD-norm-spike"])
    assert one.exit_code == 0 and one.stdout.startswith("L3.grad-norm-spike: ")
    several = runner.invoke(app, ["rules", "explain", "l3.grad"])
    assert several.exit_code == 0
    assert ("note: 'l3.grad' picks 3 rules: L3.grad-norm-spike, L3.grad-norm-precursor, L3.grad-norm-excursion"
            in several.stderr)
    assert several.stdout.count("What it checks") == 3
    unknown = runner.invoke(app, ["rules", "explain", "L9.nothing"])
    assert unknown.exit_code == 2 and unknown.stderr.startswith("error: rules: no rule 'L9.nothing'")


def test_a_bare_rules_lists_them_and_exits_0():
    result = runner.invoke(app, ["rules"])
    assert result.exit_code == 0
    assert result.stdout == runner.invoke(app, ["rules", "list"]).stdout


def test_the_probe_help_shows_words_not_python_types():
    result = runner.invoke(app, ["probe", "-h"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "<" not in result.stdout and "list[" not in result.stdout
    assert "FILE" in result.stdout


def test_piped_signals_have_no_trailing_spaces():
    result = runner.invoke(app, ["signals", str(SAMPLES / "grpo_easy_data")])
    assert result.exit_code == 0 and result.stdout.strip()
    assert not [line for line in result.stdout.splitlines() if line != line.rstrip()]


def test_no_rule_promises_a_later_version_or_a_todo():
    version = tuple(int(x) for x in __version__.split(".")[:3])
    for rule in load_rules():
        assert tuple(int(x) for x in rule.since.split(".")) <= version, (rule.id, rule.since)
        assert "TODO" not in rule.explain(), rule.id


def test_the_default_jobs_use_a_pool_only_where_it_pays(tmp_path):
    small = [RunFiles(name=p.name, files=tuple(str(f) for f in p.iterdir())) for p in SAMPLES.iterdir()
             if p.is_dir() and p.name != "probe"]
    assert default_workers(2, small) == 1            # 2 cores: the pool's start and its parent eat the gain
    assert default_workers(8, small) == 1            # 6 small runs: a few seconds of serial work
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(POOL_MIN_BYTES)                  # sparse: the size is what counts
    assert default_workers(8, small + [RunFiles(name="big", files=(str(big),))]) == 8
    assert default_workers(8, [RunFiles(name="online", uri="wandb://e/p/r")]) == 8
