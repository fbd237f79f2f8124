"""One onset per finding and per layer, the same number in every format (issue 44): each shipped sample is
rendered in every format, and each one is read back for the onset it quotes: the finding's own (`onset`,
the change point of a trend) and the layer's (its earliest finding's), never a window start."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import stabdiag
from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import LAYER_NAMES
from stabdiag.live.watch.events import changes
from stabdiag.report import render
from stabdiag.report.sparkline import with_trends

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


@pytest.fixture(scope="module")
def diags():
    return [with_trends(diagnose(run), run) for run in stabdiag.load(str(SAMPLES))]


def _layer_onsets(diag) -> dict[int, int]:
    return {r.layer: r.onset_step for r in diag.layers if r.onset_step is not None}


def test_a_layer_onset_is_its_earliest_findings_onset_and_a_trend_dates_at_its_change_point(diags):
    moved = 0
    for d in diags:
        for r in d.layers:
            assert r.onset_step == min((f.onset for f in r.findings), default=None)
        for f in d.findings:
            quoted = re.search(r"onset step (\d+)", f.message)
            if quoted:                           # a trend's text quotes its change point: the onset itself
                assert int(quoted.group(1)) == f.onset, (d.run, f.rule)
                moved += f.onset != f.start_step
    assert moved >= 3      # the samples' trends begin after their windows start (38 -> 78, 139 -> 149, ...)


def test_every_format_quotes_the_same_onsets(diags):
    assert any(_layer_onsets(d) for d in diags)
    doc = json.loads(render(diags, "json"))
    for d, run in zip(diags, doc["runs"]):
        assert [f["onset"] for f in run["findings"]] == [f.onset for f in d.findings]
        assert {r["layer"]: r["onset_step"] for r in run["layers"] if r["onset_step"] is not None} == _layer_onsets(d)

    for d in diags:
        # terminal, one run: the layer table's onset column
        text = render([d], "terminal", width=100)
        for layer, onset in _layer_onsets(d).items():
            row = next(line for line in text.splitlines() if line.startswith(f"{layer} {LAYER_NAMES[layer]} "))
            assert re.match(rf"{layer} {LAYER_NAMES[layer]} +\w+( \(root\))? +(\d+) ", row).group(2) == str(onset)
        # markdown: the layer table's onset cell, and each finding's "(onset N)"
        md = render([d], "markdown")
        for layer, onset in _layer_onsets(d).items():
            row = next(line for line in md.splitlines() if line.startswith(f"| {layer} {LAYER_NAMES[layer]} |"))
            assert row.split("|")[3].strip() == str(onset), row
        for f in d.findings:
            assert f"`{f.rule}`" in md and (f"(onset {f.onset})" in md or f"onset step {f.onset}" in md)
        # html: the findings table's onset cell and the timeline's onset marks
        page = render([d], "html")
        for f in d.findings:
            assert re.search(rf"<code>{re.escape(f.rule)}</code></td><td[^>]*>[^<]*</td><td class=\"finding-onset\">"
                             rf"{f.onset}</td>", page), f.rule
        for onset in _layer_onsets(d).values():
            assert f"onset {onset}<" in page
        # concise and sarif: each finding at its onset
        concise = render([d], "concise")
        sarif = json.loads(render([d], "sarif"))["runs"][0]["results"]
        assert {(r["ruleId"], r["properties"]["onset"]) for r in sarif} == \
            ({(f.rule, f.onset) for f in d.findings} if d.verdict in ("fail", "warn") else set())
        for f in d.findings if d.verdict in ("fail", "warn") else ():
            assert f":{f.onset}: {f.rule} [" in concise
        # github: each annotation of a finding quotes its onset
        for line in render([d], "github").splitlines()[:-1]:
            rule = re.search(r"title=stabdiag (L\d\.[a-z0-9-]+) ", line)
            if rule:
                finding = next(f for f in d.findings if f.rule == rule.group(1))
                assert f"(onset step {finding.onset};" in line
        # junit: the run's onset property is the root layer's onset
        suite = ET.fromstring(render([d], "junit")).find("testsuite")
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        root_onset = _layer_onsets(d).get(d.root_layer) if d.root_layer else None
        assert props["onset"] == ("" if root_onset is None else str(root_onset))
        failure = suite.find("testcase/failure")
        if failure is not None:
            lead = re.match(r"(L\d\.[a-z0-9-]+) \(onset step (\d+)\)", failure.get("message"))
            assert int(lead.group(2)) == next(f.onset for f in d.findings if f.rule == lead.group(1))
        # watch: each event carries the finding's onset
        for event in changes({}, d, now=0.0):
            assert event.onset == next(f.onset for f in d.findings if f.rule == event.finding)

    # the tree's one line per run: the root layer's onset
    table = render(diags, "terminal", width=200, view="quiet", show_passes=True)
    for d in diags:
        if d.root_layer is not None:
            row = next(line for line in table.splitlines() if line.startswith(d.run + " "))
            assert f" {d.layers[d.root_layer - 1].onset_step}  " in row, row


def test_a_runs_table_row_names_its_lead_findings_own_onset_where_the_layers_is_another_findings(diags):
    # the row's onset column is the root layer's (its earliest finding's); a lead dated later says when it began
    from stabdiag.report.terminal import _headline

    blowup = next(d for d in diags if d.run == "grpo_math_numeric_blowup")
    lead, layer_onset = blowup.root_lead, _layer_onsets(blowup)[blowup.root_layer]
    assert lead.onset != layer_onset
    said = f"{lead.rule} (from {lead.onset})"
    assert _headline(blowup).startswith(f"{said}: ")
    # the Markdown and HTML tables of runs say the same
    assert f"| `{said}` " in render(diags, "markdown")
    assert f"<code>{said}</code>" in render(diags, "html")
    hacking = next(d for d in diags if d.run == "grpo_math_reward_hacking")
    assert "(from " not in _headline(hacking)       # its lead dates its layer
