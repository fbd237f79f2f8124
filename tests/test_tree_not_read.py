"""Trees (issue 26 item 3): every path given and every folder beside the runs that holds no readable log
is named in the report with why, in every format; the runs that were read are always reported; exit 2
only when nothing at all could be read."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stabdiag.read.assemble import discover_tree
from tests.clihelp import cli

SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"
TRACEBACK = ('Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n'
             '    model = load_model(cfg)\nRuntimeError: CUDA error: no kernel image is available for execution\n')


@pytest.fixture()
def nightly(tmp_path):
    tree = tmp_path / "nightly"
    shutil.copytree(SAMPLES / "grpo_math_healthy", tree / "healthy")
    shutil.copytree(SAMPLES / "grpo_easy_data", tree / "easy")
    (tree / "empty_run").mkdir()
    (tree / "crashed_run").mkdir()
    (tree / "crashed_run" / "console.log").write_text("Loading checkpoint shards: 100%|██| 4/4 [00:13<00:00]\n"
                                                      + TRACEBACK)
    return tree


def test_the_tree_names_what_it_did_not_read(nightly):
    runs, not_read = discover_tree(str(nightly))
    assert sorted(r.name for r in runs) == ["easy", "healthy"]
    assert dict(not_read) == {
        str(nightly / "crashed_run"): "console.log: died before its first logged step: RuntimeError: CUDA error: "
                                      "no kernel image is available for execution",
        str(nightly / "empty_run"): "an empty folder"}


def test_a_run_folders_own_subfolders_are_not_named(tmp_path):
    run = tmp_path / "tree" / "run"
    shutil.copytree(SAMPLES / "grpo_math_healthy", run)
    (run / "checkpoint-100").mkdir()                       # inside a run: part of it, not a missing run
    (run / "checkpoint-100" / "optimizer.pt").write_bytes(b"\x00" * 8)
    assert discover_tree(str(tmp_path / "tree"))[1] == ()


@pytest.mark.parametrize("fmt", ["terminal", "json", "markdown", "junit", "github"])
def test_good_runs_are_reported_and_the_rest_named_in_every_format(nightly, fmt):
    missing = nightly.parent / "no_such_run"
    result = cli("check", str(nightly), str(missing), "--format", fmt)
    assert result.exit_code in (0, 1), result.output
    assert f"error: {missing}: " in result.stderr                  # the named path that is gone: an error line
    out = result.stdout
    # the terminal folds a clean pass into one line; GitHub annotates only what needs reading
    named = {"terminal": ("easy", "not listed: --show-passes lists them"), "github": ("easy",)}.get(
        fmt, ("healthy", "easy"))
    for name in named:
        assert name in out
    if fmt == "json":
        doc = json.loads(out)
        assert sorted(r["run"] for r in doc["runs"]) == ["easy", "healthy"]
        reasons = {Path(e["path"]).name: e["reason"] for e in doc["not_read"]}
        assert reasons["empty_run"] == "an empty folder"
        assert reasons["crashed_run"].startswith("console.log: died before its first logged step: RuntimeError")
        assert "does not exist" in reasons["no_such_run"] or "no such" in reasons["no_such_run"].lower()
        return
    if fmt == "junit":
        skipped = {c.get("name"): c.find("skipped").get("message") for c in ET.fromstring(out).iter("testcase")
                   if c.find("skipped") is not None and c.get("classname") == "not_read"}
        assert {Path(p).name for p in skipped} == {"empty_run", "crashed_run", "no_such_run"}
        return
    flat = " ".join(out.split())                    # the terminal wraps long lines
    for name, why in (("empty_run", "an empty folder"), ("crashed_run", "died before its first logged step"),
                      ("no_such_run", "")):
        at = flat.index(name)
        assert why in flat[at:at + 200], flat[at:at + 200]


def test_nothing_readable_at_all_is_still_exit_2(tmp_path):
    (tmp_path / "empty_run").mkdir()
    result = cli("check", str(tmp_path / "empty_run"), str(tmp_path / "gone"))
    assert result.exit_code == 2
    assert result.stderr.count("error:") == 1
