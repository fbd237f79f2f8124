"""`stabdiag.check_many`: the library checks a tree of runs, in parallel or not, as `stabdiag check` does,
prints nothing, and hands back what a check says as data (the runs, what was not read, the messages, the
error that ends it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.cli import app
from stabdiag.errors import ConfigError, InputError

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
RUNS = ("grpo_easy_data", "grpo_math_healthy", "grpo_math_numeric_blowup")


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Three sample runs, one with a truncated extra log (a warning on its run), and a run dir whose only
    log is binary junk (not read: named on the first run)."""
    root = tmp_path_factory.mktemp("runs")
    for name in RUNS:
        shutil.copytree(SAMPLES / name, root / name)
    (root / "grpo_easy_data" / "extra.jsonl").write_text('{"step": 1, "reward": \n', encoding="utf-8")
    (root / "broken").mkdir()
    (root / "broken" / "metrics.csv").write_bytes(b"step,reward\n1,0.5\n\x00\x01\x02garbage\n")
    return root


def test_check_many_judges_a_tree_as_check_does_and_prints_nothing(tree, capsys):
    batch = stabdiag.check_many([tree], jobs=1)
    assert capsys.readouterr() == ("", "")
    assert batch.error is None
    cli = json.loads(CliRunner().invoke(app, ["check", str(tree), "-f", "json", "--jobs", "1"]).stdout)
    assert [(r.name, r.diagnosis.verdict, r.diagnosis.root_layer) for r in batch.runs] == \
        [(r["run"], r["verdict"], r["root_layer"]) for r in cli["runs"]]
    assert [r.name for r in batch.runs] == list(RUNS)
    assert any(name == "broken" or "broken" in name for name, _ in batch.not_read)
    said = [(m.kind, m.text) for m in batch.messages if m.kind == "warning"]
    assert any(text.startswith("grpo_easy_data: extra.jsonl: not read:") for _, text in said)
    assert any(text.startswith("grpo_easy_data: run broken not read:") for _, text in said)


def test_a_pool_gives_what_one_process_gives(tree):
    one, pooled = stabdiag.check_many([tree], jobs=1), stabdiag.check_many([tree], jobs=2)
    assert [(r.name, r.warnings) for r in pooled.runs] == [(r.name, r.warnings) for r in one.runs]
    assert [r.diagnosis.to_dict() for r in pooled.runs] == [r.diagnosis.to_dict() for r in one.runs]
    assert (pooled.not_read, pooled.messages, pooled.error) == (one.not_read, one.messages, one.error)


def test_a_path_with_nothing_readable_ends_the_check_as_data(tree, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.csv").write_bytes(b"\x00\x01junk")
    beside = stabdiag.check_many([tree, bad], jobs=1)         # beside a readable tree: an error line, named
    assert beside.error is None and [r.name for r in beside.runs] == list(RUNS)
    assert (str(bad), "binary data, not a text table") in beside.not_read
    assert ("error", f"{bad / 'metrics.csv'}: binary data, not a text table") in \
        [(m.kind, m.text) for m in beside.messages]
    alone = stabdiag.check_many([bad], jobs=1)              # nothing at all: the error a serial check stops on
    assert alone.runs == () and isinstance(alone.error, InputError)
    with pytest.raises(InputError):
        alone.raise_for_error()


def test_selection_and_parameters_are_checked_and_applied():
    path = [SAMPLES / "grpo_math_numeric_blowup"]
    (run,) = stabdiag.check_many(path, jobs=1, select=["L1"]).runs
    assert run.diagnosis.ignored and all(rule.startswith(("L2", "L3", "L4")) for rule in run.diagnosis.ignored)
    with pytest.raises(ConfigError, match="unknown rule id or prefix 'L9'"):
        stabdiag.check_many(path, select=["L9"])
    with pytest.raises(ConfigError, match="no parameter 'nope'"):
        stabdiag.check_many(path, params={"L3.grad-norm-spike": {"nope": 1.0}})
    with pytest.raises(ConfigError, match="worker processes"):
        stabdiag.check_many(path, jobs=0)
