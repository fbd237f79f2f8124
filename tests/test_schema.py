"""`stabdiag schema`: the JSON Schema of the reports, versioned with them; every report validates (the
suite also validates each JSON report it makes, tests/conftest.py), and a report that drifts does not."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.judge.diagnosis import SCHEMA_VERSION
from stabdiag.report.schema import SIGNALS_SCHEMA_VERSION, check_schema, validate

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
runner = CliRunner()


def test_the_printed_schema_is_a_valid_draft_2020_12_schema_of_this_version():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION} and SCHEMA_VERSION in schema["$id"]
    signals = json.loads(runner.invoke(app, ["schema", "signals"]).stdout)
    jsonschema.Draft202012Validator.check_schema(signals)
    assert runner.invoke(app, ["schema", "nope"]).exit_code == 2


@pytest.mark.parametrize("args", [
    [str(SAMPLES)], [str(SAMPLES), "--ignore", "L1,L3"], [str(SAMPLES / "grpo_math_healthy"), "--select", "L4"],
    [str(ROOT / "tests" / "fixtures" / "framework_runs"), "--fail-on", "warn"],
    [str(SAMPLES / "grpo_math_numeric_blowup"), "--baseline", str(SAMPLES / "grpo_math_healthy")],
])
def test_check_reports_validate(args, tmp_path):
    target = tmp_path / "r.json"
    result = runner.invoke(app, ["check", *args, "-o", str(target), "--format", "json", "--exit-zero"])
    assert result.exit_code == 0, result.output
    for doc in (json.loads(result.stdout), json.loads(target.read_text())):
        validate(doc)


def test_golden_reports_validate():
    for path in (ROOT / "tests" / "golden").glob("*.json"):
        doc = json.loads(path.read_text())
        doc["stabdiag_version"] = "golden"
        validate(doc)


def test_signals_json_is_versioned_and_validates():
    result = runner.invoke(app, ["signals", str(SAMPLES), "--format", "json"])
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == SIGNALS_SCHEMA_VERSION and isinstance(doc["stabdiag_version"], str)
    validate(doc, "signals")


def test_a_report_that_drifts_from_the_schema_is_refused():
    doc = json.loads(runner.invoke(app, ["check", str(SAMPLES / "grpo_math_healthy"), "--format", "json"]).stdout)
    validate(doc)
    for broken in ({**doc, "schema_version": "1.0"},
                   {**doc, "runs": [{**doc["runs"][0], "undocumented": 1}]},
                   {**doc, "runs": [{**doc["runs"][0], "verdict": "maybe"}]}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)
    assert check_schema()["additionalProperties"] is False
