"""The HTML report: one self-contained file (no URL, no script), a summary table, and per run a
four-layer SVG timeline with every finding, each onset and the first NaN/Inf marked; a supervised run
gets rows only for the layers it logged signals for."""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.cli import app
from stabdiag.judge.engine import diagnose
from stabdiag.report import render
from stabdiag.report.sparkline import with_trends

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
SFT = ROOT / "tests" / "fixtures" / "framework_runs" / "sft_diverging"
VOID = {"meta", "br", "hr", "img", "input", "link", "circle", "line", "rect", "polyline"}
runner = CliRunner()


class _Tags(HTMLParser):
    """Balanced tags, and every element with its attributes."""

    def __init__(self):
        super().__init__()
        self.stack, self.elements, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def parse(text: str) -> _Tags:
    tags = _Tags()
    tags.feed(text)
    assert not tags.errors and not tags.stack, (tags.errors, tags.stack)
    return tags


def diagnosed(path) -> stabdiag.Diagnosis:
    run = stabdiag.load(str(path))[0]
    return with_trends(diagnose(run), run)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    target = tmp_path_factory.mktemp("html") / "r.html"
    result = runner.invoke(app, ["check", str(SAMPLES), str(SFT), "-o", str(target), "-q"])
    assert result.exit_code == 1, result.output
    return target.read_text(encoding="utf-8")


def test_the_report_is_one_self_contained_page(report):
    assert report.startswith("<!DOCTYPE html>") and report.rstrip().endswith("</html>")
    assert not re.search(r"https?://|<script|<link|\bsrc=|@import|url\(", report)
    tags = parse(report)
    assert sum(tag == "svg" for tag, _ in tags.elements) == 7          # a timeline per run


def test_every_finding_onset_and_nonfinite_step_is_marked(report):
    tags = parse(report)
    marked = [a["data-rule"] for tag, a in tags.elements if tag == "rect" and a.get("class") == "finding"]
    expected, onsets = [], 0
    for path in [p for p in sorted(SAMPLES.iterdir()) if p.is_dir() and p.name != "probe"] + [SFT]:
        diag = diagnosed(path)
        expected += [f.rule for f in diag.findings]
        onsets += sum(r.onset_step is not None for r in diag.layers)
        assert f'id="run-{diag.run}"' in report
    assert sorted(marked) == sorted(expected) and report.count('class="onset"') == onsets
    blowup = diagnosed(SAMPLES / "grpo_math_numeric_blowup")
    page = render([blowup], "html")
    assert page.count('class="onset"') == sum(r.onset_step is not None for r in blowup.layers) > 0
    assert page.count('class="nonfinite"') == 1 and f"first NaN/Inf: step {blowup.first_nonfinite_step}" in page
    assert 'stroke-width="2.5"' in page            # the root layer's row is framed


def test_a_supervised_run_gets_rows_only_for_the_layers_it_logged():
    sft = diagnosed(SFT)
    assert sft.kind == "sft"
    page = render([sft], "html")
    rows = [int(a["data-layer"]) for tag, a in parse(page).elements if tag == "g" and "data-layer" in a]
    assert rows == sorted({t.layer for t in sft.trends}) and 4 not in rows
    rl = render([diagnosed(SAMPLES / "grpo_math_healthy")], "html")
    assert [int(a["data-layer"]) for tag, a in parse(rl).elements if tag == "g" and "data-layer" in a] == [1, 2, 3, 4]


def test_text_is_text_not_markup():
    diag = replace(diagnosed(SAMPLES / "grpo_policy_collapse"), run="<b>evil</b> & co")
    page = render([diag], "html")
    parse(page)
    assert "<b>evil</b>" not in page and "&lt;b&gt;evil&lt;/b&gt; &amp; co" in page
