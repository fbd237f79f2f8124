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
    marked = [a["data-rule"] for tag, a in tags.elements if tag in ("rect", "g") and a.get("class") == "finding"]
    expected, onsets = [], 0
    for path in [p for p in sorted(SAMPLES.iterdir()) if p.is_dir() and p.name != "probe"] + [SFT]:
        diag = diagnosed(path)
        expected += [f.rule for f in diag.findings]
        onsets += sum(r.onset_step is not None for r in diag.layers)
        assert f'id="run-{diag.run}"' in report
    assert sorted(marked) == sorted(expected) and report.count('class="onset"') == onsets
    blowup = diagnosed(SAMPLES / "grpo_math_numeric_blowup")
    page = render([blowup], "html", panels="svg")          # the built-in SVG
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


def test_the_page_leads_with_the_runs_that_need_reading_and_filters_the_passes(report):
    rows = re.findall(r'<tr class="run-(\w+)">', report)
    rank = ["fail", "warn", "unknown", "pass"]
    assert rows and [rank.index(v) for v in rows] == sorted(rank.index(v) for v in rows)
    assert '<input type="radio" name="sd-filter" id="sd-needs" checked>' in report
    assert ".stabdiag #sd-needs:checked~table.runs tr.run-pass{display:none}" in report
    assert '<details class="passes"><summary>1 pass</summary>' in report


def test_every_style_rule_is_scoped_and_a_notebook_keeps_its_own():
    from stabdiag.report.html import _CSS

    selectors = [part.strip() for rule in re.findall(r"([^{}]+)\{", _CSS) for part in rule.split(",")]
    assert selectors and all(sel.startswith(".stabdiag") for sel in selectors), selectors
    fragment = diagnosed(SAMPLES / "grpo_math_healthy")._repr_html_()
    assert fragment.startswith('<div class="stabdiag"><style>') and "body{" not in fragment
    assert fragment.split("<style>")[1].split("</style>")[0] == _CSS           # the scoped rules, no others


def test_a_pass_too_noisy_to_tell_shows_the_reason_and_its_interval():
    """A reward up 0.3 -> 0.6 on 20 noisy points beside a flat eval: the rise can be neither confirmed nor
    ruled out, and the page says so with the interval."""
    import numpy as np

    rng = np.random.default_rng(5)
    steps = np.arange(1, 21) * 50
    frame = {"reward": 0.3 + 0.3 * np.linspace(0, 1, 20) + rng.normal(0, 0.08, 20),
             "eval/math500_accuracy": 0.42 + rng.normal(0, 0.005, 20),
             "loss": 0.02 + rng.normal(0, 0.002, 20), "grad_norm": 0.5 * np.exp(rng.normal(0, 0.1, 20))}
    run = stabdiag.Run("noisy", {k: stabdiag.Series.from_points(k, steps, v) for k, v in frame.items()})
    diag = with_trends(diagnose(run), run)
    assert diag.verdict == "pass" and diag.undecided
    page = render([diag], "html", panels="svg")
    item = re.search(r'<li class="undecided"><code>L1\.reward-eval-divergence</code> ([^<]+)</li>', page)
    assert item and "interval" in item.group(1)


def test_built_in_panels_have_value_axes_evals_in_layer_1_and_open_gaps():
    from stabdiag.report.html import timeline_svg

    hacking = diagnosed(SAMPLES / "grpo_math_reward_hacking")
    svg = timeline_svg(hacking)
    layer1 = svg.split('data-layer="1"')[1].split("</g>")[0]
    assert layer1.count('class="tick"') >= 3 and "eval:math500" in layer1 and "eval:aime24" in layer1
    reward = next(t for t in hacking.trends if t.signal == "reward")
    holed = replace(reward, values=tuple(None if 20 <= i < 40 else v for i, v in enumerate(reward.values)))
    gapped = timeline_svg(replace(hacking, trends=(holed,)))
    assert gapped.split('data-layer="1"')[1].split("</g>")[0].count("<polyline") == 2    # not drawn across


def test_matplotlib_panels_sit_inline_with_no_url_style_or_clip():
    pytest.importorskip("matplotlib")
    hacking = diagnosed(SAMPLES / "grpo_math_reward_hacking")
    page = render([hacking], "html", panels="matplotlib")
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert not re.search(r"https?://|url\(|<style|xmlns|<!DOCTYPE|<\?xml", svg)
    tags = parse(page)
    assert [int(a["data-layer"]) for tag, a in tags.elements if tag == "g" and "data-layer" in a] == [1, 2, 3, 4]
    assert sorted(a["data-rule"] for tag, a in tags.elements if a.get("class") == "finding") == \
        sorted(f.rule for f in hacking.findings)
    assert svg.count('class="nonfinite"') == 1 and "eval:math500" in svg and "eval:aime24" in svg
    ids = re.findall(r' id="([^"]+)"', svg)
    assert set(ids) <= set(re.findall(r'href="#([^"]+)"', svg))         # ids only where a <use> needs them
