"""The samples' evidence in every report, escaped (nothing from a sample reaches a terminal or CI log as it
was written), valid against the JSON schema; and `window_text`, the body of `stabdiag samples RUN --step S`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from stabdiag.advise.samples import view, window_text
from stabdiag.advise.samples.forensics import Example, FeatureEffect, SampleForensics
from stabdiag.errors import InputError
from stabdiag.judge.diagnosis import SCHEMA_VERSION, Finding
from stabdiag.report import _escape, html, markdown, schema, terminal
from stabdiag.report import json as json_report

RUNS = Path(__file__).parent / "fixtures" / "sample_runs"
HOSTILE = "\x1b]0;owned\x07::error file=x::forged\n::stop-commands::tok <script>alert(1)</script> ``` \u202e"


def _diagnosis_with(evidence):
    import stabdiag

    run = stabdiag.load(str(RUNS / "verl_format_hack"))
    run = run[0] if isinstance(run, list) else run
    diag = stabdiag.diagnose(run)           # too short for a layer-1 rule: the finding is given
    finding = Finding("L1.reward-component-divergence", 1, "fail", "t", 2, 16, "format_token 0.4 -> 0.9", {},
                      ("Read 20 top-reward rollouts",))
    return replace(diag, findings=(finding,), root_layer=1, samples=evidence)


def _evidence() -> SampleForensics:
    effect = FeatureEffect("has:x", f"contains '{HOSTILE}'", True, 0.9, 0.1, 0.2, 0.95, 8.0, 1e-9, 1e-3, True)
    examples = (Example("highest reward", 12, 1.0, HOSTILE, "12.jsonl:3"),
                Example("early", 1, 0.0, "plain", "1.jsonl:1"))
    return SampleForensics("L1.reward-component-divergence", 1, "verl", 1, 16, 256, 256, 16, (effect,), examples)


def test_every_report_escapes_sample_text():
    diag = _diagnosis_with(_evidence())
    text = terminal.render([diag], width=100)
    md = markdown.render([diag])
    page = html.render([diag])
    for out in (text, md):
        assert "\x1b" not in out and "\u202e" not in out
        assert not any(line.lstrip().startswith("::") for line in out.splitlines())
    assert "<script>" not in page and "\x1b" not in page and "&lt;script&gt;" in page
    assert "samples:" in text and "highest reward (step 12" in text       # under "check first"
    assert text.index("samples:") > text.index("Check first")
    assert "<details><summary>Three samples to read</summary>" in md and "<details>" in page


def test_json_carries_the_evidence_and_follows_the_schema():
    diag = _diagnosis_with(_evidence())
    doc = json.loads(json_report.render([diag]))
    assert doc["schema_version"] == SCHEMA_VERSION
    schema.validate(doc)
    assert doc["runs"][0]["samples"]["named"][0]["feature"] == "has:x"
    plain = replace(diag, samples=None)
    assert "samples" not in json.loads(json_report.render([plain]))["runs"][0]     # runs without samples unchanged


def test_the_view_escapes_as_the_report_policy_does():
    for text in (HOSTILE, "a::b", "tab\tend", "\x85\x9b[2J", "plain text"):
        assert view._shown(text) == _escape.visible(text)


def test_window_text_prints_a_step(tmp_path):
    out = window_text(str(RUNS / "plain_phrase_hack"), step=3, width=100)
    assert out.startswith("samples at step 3 (jsonl")
    assert out.count("  answer: ") == 16 and "phrase_bonus=" in out
    assert all(len(line) <= 100 for line in out.splitlines() if line.startswith("  answer: "))
    missing = window_text(str(RUNS / "verl_format_hack"), step=100)
    assert "no samples at step 100; the nearest logged step is 16" in missing


def test_window_text_escapes_what_a_sample_holds(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps({"step": 1, "prompt": "p", "completion": text, "reward": r}) + "\n"
                            for text, r in ((HOSTILE, 1.0), ("plain", 0.0))))
    out = window_text(str(path), step=1)
    assert "\x1b" not in out and "\u202e" not in out
    assert not any(line.lstrip().startswith("::") for line in out.splitlines())


def test_window_text_says_when_there_are_no_samples(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    with pytest.raises(InputError, match="no logged samples"):
        window_text(str(tmp_path), step=1)
