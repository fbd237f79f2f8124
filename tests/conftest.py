"""Shared pytest options: `pytest --update-golden` rewrites tests/golden/ from the current output.

Every JSON report the suite makes in this process (`check` and `signals`, through the CLI or the
library) is validated against the published schema (src/stabdiag/report/schema.py) as it is made: a report field
that the schema does not document fails the test that produced it."""

from __future__ import annotations

import json

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output (review the diff like code)")


@pytest.fixture(autouse=True, scope="session")
def _every_json_report_follows_the_schema():
    import stabdiag.report
    import stabdiag.report.json
    import stabdiag.report.signals
    from stabdiag.report.schema import validate

    check_render = stabdiag.report.json.render
    signals_dict = stabdiag.report.signals.signals_dict
    with_comparisons = stabdiag.report.with_comparisons

    def render(*args, **kwargs):
        text = check_render(*args, **kwargs)
        validate(json.loads(text), "check")
        return text

    def signals(*args, **kwargs):
        doc = signals_dict(*args, **kwargs)
        validate(json.loads(json.dumps(doc, allow_nan=False)), "signals")
        return doc

    def compared(text, fmt, comparisons):
        out = with_comparisons(text, fmt, comparisons)
        if fmt == "json":
            validate(json.loads(out), "check")
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stabdiag.report.json, "render", render)
        patch.setattr(stabdiag.report.signals, "signals_dict", signals)
        patch.setattr(stabdiag.report, "with_comparisons", compared)
        yield
