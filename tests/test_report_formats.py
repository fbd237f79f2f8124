"""The CI-facing outputs: JUnit XML (checked against the structure of the JUnit schema Jenkins and GitLab
read), Markdown (a real table), GitHub annotations (workflow-command syntax), --output, sparklines and
the baseline comparison."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.advise.baseline import compare
from stabdiag.cli import app
from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import load_rules
from stabdiag.report import FORMATS, render
from stabdiag.report.github import command, escape_data, escape_property
from stabdiag.report.sparkline import BLOCKS, rebin, sparkline, with_trends
from tests.casegen import make_run

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()


@pytest.fixture(scope="module")
def runs():
    return {r.name: r for r in stabdiag.load(str(SAMPLES))}


@pytest.fixture(scope="module")
def diags(runs):
    return {name: with_trends(diagnose(run), run) for name, run in runs.items()}


# --- JUnit ------------------------------------------------------------------------------------------
# The JUnit schema CI systems read (Jenkins' junit-10.xsd, which GitLab follows): which attributes and
# children each element may have, which are required, and in what order a testsuite's children come.
_ATTRS = {
    "testsuites": ({"name", "time", "tests", "failures", "errors", "skipped", "disabled"}, set()),
    "testsuite": ({"name", "tests", "failures", "errors", "skipped", "time", "disabled", "timestamp",
                   "hostname", "id", "package", "file"}, {"name", "tests"}),
    "testcase": ({"name", "classname", "time", "assertions", "status", "file", "line"}, {"name"}),
    "failure": ({"message", "type"}, set()),
    "error": ({"message", "type"}, set()),
    "skipped": ({"message"}, set()),
    "properties": (set(), set()),
    "property": ({"name", "value"}, {"name", "value"}),
    "system-out": (set(), set()),
    "system-err": (set(), set()),
}
_CHILDREN = {
    "testsuites": ["testsuite"],
    "testsuite": ["properties", "testcase", "system-out", "system-err"],   # in this order
    "testcase": ["skipped", "error", "failure", "system-out", "system-err"],
    "properties": ["property"],
}
_INTS = {"tests", "failures", "errors", "skipped", "disabled"}


def _validate_junit(text: str) -> ET.Element:
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    for el in root.iter():
        allowed, required = _ATTRS[el.tag]
        assert set(el.attrib) <= allowed, (el.tag, set(el.attrib) - allowed)
        assert required <= set(el.attrib), (el.tag, required - set(el.attrib))
        for name in _INTS & set(el.attrib):
            assert el.attrib[name].isdigit(), (el.tag, name)
        if "time" in el.attrib:
            float(el.attrib["time"])
        order = _CHILDREN.get(el.tag)
        if order is not None:
            ranks = [order.index(child.tag) for child in el]   # ValueError: a child the schema forbids
            if el.tag == "testsuite":
                assert ranks == sorted(ranks), f"testsuite children out of order: {[c.tag for c in el]}"
        elif el.tag in ("failure", "error", "skipped", "system-out", "system-err", "property"):
            assert len(el) == 0
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(len(c.findall("failure")) for c in cases)
        assert int(suite.get("skipped")) == sum(len(c.findall("skipped")) for c in cases)
        assert int(suite.get("errors")) == sum(len(c.findall("error")) for c in cases)
        for case in cases:
            assert len(case.findall("skipped")) + len(case.findall("failure")) <= 1
    for key in ("tests", "failures", "skipped", "errors"):
        assert int(root.get(key)) == sum(int(s.get(key)) for s in root.findall("testsuite"))
    return root


def test_new_formats_are_registered():
    assert {"junit", "markdown", "github"} <= set(FORMATS)


def test_junit_is_one_testcase_per_run_failures_first(diags):
    root = _validate_junit(render(list(diags.values()), "junit", rules=load_rules()))
    suites = root.findall("testsuite")
    assert {s.get("name") for s in suites} == set(diags)
    assert int(root.get("tests")) == len(diags)                     # 6 runs are 6 tests, never one per rule
    for suite in suites:
        (case,) = suite.findall("testcase")
        assert case.get("name") == suite.get("name") and case.get("classname") == "stabdiag"
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        diag = diags[suite.get("name")]
        assert props["verdict"] == diag.verdict
        onset = "" if diag.root_layer is None else str(diag.layers[diag.root_layer - 1].onset_step)
        assert props["onset"] == onset
    verdicts = [diags[s.get("name")].verdict for s in suites]
    rank = ["fail", "warn", "unknown", "pass"]
    assert [rank.index(v) for v in verdicts] == sorted(rank.index(v) for v in verdicts)   # failures first
    failed = {s.get("name") for s in suites if s.find("testcase/failure") is not None}
    assert failed == {name for name, d in diags.items() if any(f.severity == "fail" for f in d.findings)}


def test_junit_failures_follow_fail_on(diags):
    d = diags["grpo_math_reward_hacking"]
    strict = _validate_junit(render([diags["grpo_easy_data"]], "junit", fail_on="warn"))
    lenient = _validate_junit(render([diags["grpo_easy_data"]], "junit", fail_on="fail"))
    assert strict.get("failures") == "1" and lenient.get("failures") == "0"
    warned = lenient.find(".//testcase")
    assert warned.find("failure") is None and "warn" in warned.find("system-out").text   # below --fail-on: kept
    failure = _validate_junit(render([d], "junit")).find(".//testcase/failure")
    lead = next(f for f in d.findings if f.rule == "L1.reward-eval-divergence")
    assert failure.get("type") == "fail"
    assert failure.get("message") == f"L1.reward-eval-divergence (onset step {lead.onset}): {lead.message}"
    assert "check first" in failure.text and "L3.nonfinite-values" in failure.text   # downstream named too


def test_junit_skips_only_a_run_nothing_could_judge_with_the_reason():
    from stabdiag.read.run import Run, Series

    run = Run("blank", {"my_metric": Series("my_metric", __import__("numpy").arange(30), __import__("numpy").ones(30))})
    blank = diagnose(run)
    assert blank.verdict == "unknown"
    root = _validate_junit(render([blank], "junit"))
    skipped = root.find(".//testcase/skipped")
    assert root.get("skipped") == "1" and root.get("failures") == "0"
    assert skipped.get("message").startswith("nothing could be judged: layer 1 (data & reward) missing signal")
    assert root.find(".//testcase").get("name") == "blank"                 # the run, not a case named `judged`


def test_junit_escapes_xml_in_messages(diags):
    d = diags["grpo_math_reward_hacking"]
    from dataclasses import replace

    f = replace(d.findings[0], message='a <b> & "c" ]]> \x1b', title="t & <u>")
    text = render([replace(d, findings=(f,), layers=tuple(replace(r, findings=tuple(x for x in r.findings if x.rule
                                                                                   != f.rule) + ((f,) if r.layer == 1
                                                                                                 else ()))
                                                         for r in d.layers))], "junit")
    root = _validate_junit(text.replace("\x1b", ""))
    assert 'a <b> & "c" ]]>' in root.find(".//failure").get("message")


# --- Markdown ---------------------------------------------------------------------------------------
def _tables(text: str) -> list[list[list[str]]]:
    """GitHub-flavoured Markdown tables: header, a delimiter row, then rows with as many cells."""
    tables, lines = [], text.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", lines[i + 1]):
            rows = [lines[i]]
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(lines[j])
                j += 1
            split = [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]
            width = lines[i + 1].count("|") - 1
            assert all(len(r) == width for r in split), rows
            tables.append(split)
    return tables


def test_markdown_has_a_layer_table_per_run_and_a_summary(diags):
    text = render(list(diags.values()), "markdown")
    tables = _tables(text)
    summary = tables[0]
    assert summary[0] == ["run", "verdict", "root layer", "onset", "first finding"]
    needing = [d for d in diags.values() if d.verdict != "pass"]
    assert len(summary) == 1 + len(needing)                             # the passes are folded
    assert "<details><summary>1 pass</summary>" in text and "`grpo_math_healthy`" in text
    assert summary[1][1].startswith("❌ fail")                          # failures first
    layer_tables = [t for t in tables if t[0][:4] == ["layer", "status", "onset", "key evidence"]]
    assert len(layer_tables) == len(needing)
    assert all(len(t) == 5 for t in layer_tables)
    count = "**6 runs: 4 fail, 1 warn, 1 pass**"
    assert text.startswith(f"## stabdiag\n\n{count}") and text.rstrip().endswith(count)


def test_markdown_of_a_large_tree_stays_under_its_cap(diags):
    from dataclasses import replace

    many = [replace(d, run=f"night{i:03d}_{d.run}") for i in range(60) for d in diags.values()]
    text = render(many, "markdown", max_bytes=60_000)
    assert len(text.encode()) < 60_000
    assert "have no section here, to keep this summary under 60 kB" in text
    assert "Every run is in the full reports" in text
    table = _tables(text)[0]
    assert len(table) == 1 + sum(d.verdict != "pass" for d in many)   # every run that needs reading is listed


def test_markdown_names_root_check_first_downstream_and_unknown(diags):
    text = render([diags["grpo_math_reward_hacking"]], "markdown")
    assert "root layer 1 (data & reward)" in text
    assert "**(root)**" in text
    assert "**Check first**" in text and "\n1. " in text
    assert "Downstream of layer 1" in text and "`L3.nonfinite-values`" in text
    assert "Not judged" in text and "logprob_delta" in text
    assert len(_tables(text)) == 1


def test_markdown_escapes_pipes_in_cells(diags):
    from dataclasses import replace

    d = diags["grpo_policy_collapse"]
    f = replace(d.root_findings()[0], message="a | b")
    layers = list(d.layers)
    layers[1] = replace(layers[1], findings=(f,))
    text = render([replace(d, layers=tuple(layers))], "markdown")
    assert r"a \| b" in text
    _tables(text)   # cells still line up


# --- GitHub annotations -----------------------------------------------------------------------------
_ANNOTATION = re.compile(r"^::(error|warning|notice)( [a-z]+=[^,:\n]*(,[a-z]+=[^,:\n]*)*)?::[^\r\n]*$")


def test_github_annotations_follow_the_workflow_command_syntax(diags):
    text = render(list(diags.values()), "github")
    lines = text.splitlines()
    assert lines and all(_ANNOTATION.match(line) for line in lines), lines
    hacking = [line for line in lines if "grpo_math_reward_hacking" in line]
    assert any(line.startswith("::error file=") and "title=stabdiag L1.reward-eval-divergence (root layer 1)"
               in line for line in hacking)
    assert any(line.startswith("::warning ") and "L1.length-confound" in line for line in hacking)
    assert any("Downstream of layer 1" in line and "L3.nonfinite-values (fail" in line for line in hacking)
    assert not any("title=stabdiag L3." in line for line in hacking)     # a consequence is no annotation of its own
    assert not any("grpo_math_healthy" in line for line in lines[:-1])     # a pass has no annotation
    assert "grpo_math_healthy" not in lines[-1]       # a clean pass is counted, not named (one too noisy to
    #                                                   tell is named: test_every_format_names_the_rule_...)
    assert lines[-1].startswith("::notice title=stabdiag 6 runs%3A 4 fail%2C 1 warn%2C 1 pass::")


def test_github_annotations_stay_within_what_github_shows(diags):
    from dataclasses import replace

    many = [replace(d, run=f"night{i:03d}_{d.run}") for i in range(30) for d in diags.values()]
    lines = render(many, "github").splitlines()
    kinds = [line.split(" ", 1)[0].split("::")[1] for line in lines]
    assert kinds.count("error") == 10 and kinds.count("warning") == 10 and kinds.count("notice") <= 10
    assert "Not shown here (GitHub shows 10 annotations of a kind per step)" in lines[-1]
    assert all("file=sample_logs/" in line or "file=" not in line for line in lines if str(SAMPLES) not in line)


def test_github_escaping():
    assert escape_data("50% done\nnext") == "50%25 done%0Anext"
    assert escape_property("a:b,c") == "a%3Ab%2Cc"
    assert command("error", "m", file="x.csv", title="L1.x: y") == "::error file=x.csv,title=L1.x%3A y::m"
    assert command("notice", "m") == "::notice::m"


# --- a pass beside a rule too noisy to tell ------------------------------------------------------------
@pytest.fixture(scope="module")
def noisy_pass():
    """Layer 1 judged clean by the length rule while the reward-eval rule sees a large rise it cannot confirm
    (0.3 -> 0.8 under per-point noise 0.3, 16 points): the run passes, and every format says which rule
    could not tell."""
    run = make_run("noisy", {"reward": {"ramp": [0.3, 0.8], "steps": 64, "every": 4, "noise": 0.3, "seed": 2},
                             "eval/math_accuracy": {"ramp": [0.42, 0.42], "every": 8, "steps": 64},
                             "response_length": {"ramp": [300, 300], "steps": 64, "noise": 5},
                             "grad_norm": {"ramp": [1.0, 1.0], "steps": 64, "noise": 0.05}})
    diag = diagnose(run)
    assert diag.verdict == "pass" and diag.layers[0].status.value == "pass"
    assert [u.rule for u in diag.undecided] == ["L1.reward-eval-divergence"]
    return diag


def test_every_format_names_the_rule_too_noisy_to_tell_beside_a_pass(noisy_pass):
    said = "L1.reward-eval-divergence too noisy to tell"
    assert noisy_pass.verdict_text() == f"pass, {said}"
    terminal = render([noisy_pass], "terminal")
    assert f"PASS, {said}" in terminal.splitlines()[0]
    assert "Too noisy to tell - changes these rules could neither confirm nor rule out" in terminal
    assert re.search(r"L1\.reward-eval-divergence +too noisy to tell: reward 0\.\d+ -> 0\.\d+", terminal)
    report = json.loads(render([noisy_pass], "json"))["runs"][0]
    assert report["verdict"] == "pass" and report["verdict_text"] == f"pass, {said}"
    assert [u["rule"] for u in report["unknown"] if u["undecided"]] == ["L1.reward-eval-divergence"]
    assert f"✅ pass, {said}" in render([noisy_pass], "markdown")
    suite = _validate_junit(render([noisy_pass], "junit")).find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "pass" and props["too_noisy_to_tell"] == "L1.reward-eval-divergence"
    github = render([noisy_pass], "github").splitlines()
    assert any(line.startswith("::notice ") and f"noisy: pass, {said}" in line for line in github)
    assert f"PASS</span>, {said}" in render([noisy_pass], "html")      # the rule id keeps its case
    # the tree view's one line per run says it too
    table = render([noisy_pass, noisy_pass], "terminal", view="quiet", show_passes=True)
    assert table.count(said) == 2


def test_a_clean_pass_names_no_undecided_rule():
    # the reward's rise is followed by the eval, surely: every rule that judged it could tell
    run = make_run("clean", {"reward": {"ramp": [0.3, 0.8], "steps": 200, "noise": 0.03, "seed": 2},
                             "eval/math_accuracy": {"ramp": [0.40, 0.60], "every": 10, "steps": 200,
                                                    "noise": 0.01, "seed": 3},
                             "response_length": {"ramp": [300, 300], "steps": 200, "noise": 5},
                             "grad_norm": {"ramp": [1.0, 1.0], "steps": 200, "noise": 0.05}})
    healthy = diagnose(run)
    assert healthy.verdict == "pass" and healthy.undecided == () and healthy.verdict_text() == "pass"
    assert "too noisy" not in render([healthy], "terminal")


# --- CLI: --format, --output ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["junit", "markdown", "github"])
def test_cli_formats_print_to_stdout(fmt):
    result = runner.invoke(app, ["check", str(SAMPLES / "grpo_math_reward_hacking"), "--format", fmt])
    assert result.exit_code == 1, result.output
    if fmt == "junit":
        _validate_junit(result.stdout)
    elif fmt == "markdown":
        assert _tables(result.stdout)
    else:
        assert all(_ANNOTATION.match(line) for line in result.stdout.splitlines())


def test_output_writes_the_format_its_extension_names_and_the_terminal_report_still_prints(tmp_path):
    target = tmp_path / "report.xml"
    result = runner.invoke(app, ["check", str(SAMPLES), "--output", str(target)])
    assert result.exit_code == 1
    assert "root: layer 1 (data & reward)" in result.stdout and "<testsuites" not in result.stdout
    root = _validate_junit(target.read_text(encoding="utf-8"))
    assert len(root.findall("testsuite")) == 6 and root.get("tests") == "6"


def test_output_to_an_unwritable_place_is_one_error_line(tmp_path):
    result = runner.invoke(app, ["check", str(SAMPLES / "grpo_math_healthy"), "-o", str(tmp_path / "no" / "x.md"),
                                 "--format", "markdown"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --output ") and result.stderr.count("\n") == 1


def test_unknown_format_lists_the_choices():
    result = runner.invoke(app, ["check", str(SAMPLES), "--format", "xml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --format: expected one of terminal, json, junit, markdown, github, html, "
                                     "concise, sarif; got 'xml'")


# --- sparklines -------------------------------------------------------------------------------------
def test_sparkline_scales_blocks_and_marks_gaps_and_nonfinite():
    assert sparkline([0.0, 1.0, 2.0, 3.0]) == BLOCKS[0] + BLOCKS[2] + BLOCKS[5] + BLOCKS[7]
    assert sparkline([None, 1.0, float("nan"), 1.0]) == " " + BLOCKS[0] + "×" + BLOCKS[0]
    assert rebin(tuple(float(i) for i in range(64)), 16) == [i * 4 + 1.5 for i in range(16)]
    assert rebin((1.0, float("nan"), None, None), 2)[0] != rebin((1.0, float("nan"), None, None), 2)[0]
    assert rebin((1.0, float("nan"), None, None), 2)[1] is None


def test_terminal_layer_table_has_a_sparkline_per_signal(diags):
    d = diags["grpo_math_numeric_blowup"]
    text = render([d], "terminal", width=100)
    assert d.trends
    for trend in d.trends:
        spark = re.compile(rf"\s{re.escape(trend.signal)}\s+[{BLOCKS}× ]{{8,}}")
        assert sum(bool(spark.search(line)) for line in text.splitlines()) == 1, trend.signal
    loss = next(line for line in text.splitlines() if re.search(rf"\sloss\s+[{BLOCKS}]", line))
    assert "×" in loss      # the NaN at the end of the run
    assert "\x1b[" not in text


def test_sparklines_leave_narrow_terminals_and_no_color_alone(diags):
    d = diags["grpo_math_reward_hacking"]
    narrow = render([d], "terminal", width=50)
    assert not any(ch in narrow for ch in BLOCKS)
    colored = render([d], "terminal", width=120, color=True)
    assert "\x1b[" in colored and any(ch in colored for ch in BLOCKS)
    assert render([d], "terminal", width=120, sparklines=False).count("▁") == 0


def test_json_is_unchanged_by_trends(diags, runs):
    plain = diagnose(runs["grpo_easy_data"])
    assert diags["grpo_easy_data"].to_dict() == plain.to_dict()
    assert "trends" not in plain.to_dict()


# --- baseline ---------------------------------------------------------------------------------------
def test_baseline_fix_on_the_root_layer(diags):
    c = compare(diags["grpo_math_reward_hacking"], diags["grpo_math_healthy"])
    assert c.acted_on_root is True and c.root_before == 1 and c.root_after is None
    assert c.layers[0].change == "better" and "L1.reward-eval-divergence" in c.layers[0].resolved
    assert "acted on the root layer 1" in c.summary


def test_baseline_fix_that_only_treated_downstream_symptoms(diags):
    from dataclasses import replace

    before = diags["grpo_math_reward_hacking"]
    # "after": the layer-3 blow-up is gone, the reward loophole is not
    layers = list(before.layers)
    layers[2] = replace(layers[2], status=stabdiag.Status.PASS, onset_step=None, findings=())
    after = replace(before, layers=tuple(layers), findings=tuple(f for f in before.findings if f.layer != 3))
    c = compare(before, after)
    assert c.acted_on_root is False
    assert c.layers[2].change == "better" and c.layers[0].change == "same"
    assert "did not act on the root layer 1" in c.summary and "bottom up" in c.summary


def test_baseline_regression_from_a_clean_run(diags):
    c = compare(diags["grpo_math_healthy"], diags["grpo_policy_collapse"])
    assert c.acted_on_root is None and c.root_after == 2 and "regression" in c.summary
    assert c.to_dict()["layers"][1]["change"] == "worse"


def test_cli_baseline_prints_the_comparison_and_json_carries_it():
    import json

    args = ["check", str(SAMPLES / "grpo_math_healthy"), "--baseline", str(SAMPLES / "grpo_math_numeric_blowup")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Baseline grpo_math_numeric_blowup -> grpo_math_healthy" in result.stdout
    assert "acted on the root layer 3" in result.stdout
    doc = json.loads(runner.invoke(app, args + ["--format", "json"]).stdout)
    assert doc["comparisons"][0]["acted_on_root"] is True and doc["runs"][0]["run"] == "grpo_math_healthy"
    md = runner.invoke(app, args + ["--format", "markdown"]).stdout
    assert "### Baseline" in md


def test_cli_baseline_must_be_one_run():
    result = runner.invoke(app, ["check", str(SAMPLES / "grpo_math_healthy"), "--baseline", str(SAMPLES)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: --baseline {SAMPLES}: expected one run; found 6")
