"""One read, many outputs: each -o file in the format its extension names, --format for stdout, and notes
inside every format instead of `warning:` lines on stderr."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag.read.assemble
from stabdiag.cli import app
from stabdiag.errors import ConfigError
from stabdiag.report.outputs import format_of, plan

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()


def test_the_extension_names_the_format_and_an_unnamed_one_takes_format_or_is_refused():
    assert [format_of(p, None) for p in ("a.json", "b.XML", "c.md", "d.txt")] == \
        ["json", "junit", "markdown", "terminal"]
    assert format_of("report.out", "junit") == "junit"
    with pytest.raises(ConfigError, match="cannot tell the format"):
        format_of("report.out", None)
    with pytest.raises(ConfigError, match="named twice"):
        plan(["a.json", "./a.json"], None)


def test_several_outputs_come_from_one_read(tmp_path, monkeypatch):
    reads = []
    real = stabdiag.read.assemble.load_run
    monkeypatch.setattr(stabdiag.read.assemble, "load_run",
                        lambda files, **kw: reads.append(files.name) or real(files, **kw))
    targets = [tmp_path / name for name in ("r.json", "r.xml", "r.md", "r.txt")]
    result = runner.invoke(app, ["check", str(SAMPLES), "--jobs", "1", *[a for t in targets for a in ("-o", str(t))],
                                 "--format", "json"])
    assert result.exit_code == 1, result.output
    assert sorted(reads) == sorted(set(reads)) and len(reads) == 6          # each run read once
    doc = json.loads(targets[0].read_text())
    assert json.loads(result.stdout) == doc and len(doc["runs"]) == 6     # --format set stdout
    assert len(ET.fromstring(targets[1].read_text()).findall("testsuite")) == 6
    assert targets[2].read_text().startswith("## stabdiag") and "| run | verdict |" in targets[2].read_text()
    text = targets[3].read_text()
    assert "root: layer 1 (data & reward)" in text and "\x1b[" not in text


def test_an_output_named_for_no_format_is_one_error_line(tmp_path):
    result = runner.invoke(app, ["check", str(SAMPLES / "grpo_math_healthy"), "-o", str(tmp_path / "r.out")])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "cannot tell the format from the name" in result.stderr and not (tmp_path / "r.out").exists()


@pytest.mark.parametrize("fmt", ["json", "junit", "markdown", "github"])
def test_notes_are_notes_in_every_format_not_warnings_on_stderr(fmt):
    hacking = str(SAMPLES / "grpo_math_reward_hacking")      # resumed: it carries a note
    result = runner.invoke(app, ["check", hacking, "--format", fmt])
    assert "warning:" not in result.stderr
    assert "resumed run: 10 step(s) were written again" in result.stdout
    if fmt == "github":
        assert "::notice file=" in result.stdout and "title=stabdiag note::" in result.stdout
