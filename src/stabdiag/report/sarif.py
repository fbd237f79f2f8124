"""SARIF 2.1.0, the format GitHub code scanning (github/codeql-action/upload-sarif) and other static
analysis viewers read: one result per finding of a run that needs reading, each rule described once.

A metric log has no line for a step, so a result's region is the log file's first line; the step (the
finding's onset, as every format quotes it), the window, the run and the layer are in its message and its
properties.  `partialFingerprints` (run and rule) keep one alert per finding across uploads, so GitHub
never reads the log to make them.
"""

from __future__ import annotations

import json

from .._version import __version__
from ..judge.diagnosis import Diagnosis
from ..judge.rules import LAYER_NAMES
from . import tree
from ._escape import visible

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"      # an identifier; nothing is fetched
_LEVEL = {"fail": "error", "warn": "warning"}


def _rule(f) -> dict:
    return {"id": f.rule, "name": f.rule.split(".", 1)[-1], "shortDescription": {"text": f.title},
            "fullDescription": {"text": f"Layer {f.layer} ({LAYER_NAMES[f.layer]}): {f.title}"},
            "help": {"text": "Check first:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(f.check_first, 1))},
            "defaultConfiguration": {"level": _LEVEL.get(f.severity, "warning")},
            "properties": {"layer": f.layer, "tags": [f"layer-{f.layer}"]}}


def _result(diag: Diagnosis, f, index: int) -> dict:
    where = tree.source(diag)
    role = ("downstream of layer " + str(diag.root_layer) if f.downstream
            else "root layer" if f.layer == diag.root_layer else f"layer {f.layer}")
    location: dict = {"logicalLocations": [{"name": visible(diag.run), "kind": "module"}]}
    if where:
        location["physicalLocation"] = {"artifactLocation": {"uri": where.replace("\\", "/")},
                                        "region": {"startLine": 1}}
    return {"ruleId": f.rule, "ruleIndex": index, "level": _LEVEL[f.severity],
            "message": {"text": f"{visible(diag.run)}: {visible(f.message)} (onset step {f.onset}, {role})"},
            "locations": [location],
            "partialFingerprints": {"stabdiagFinding/v1": f"{visible(diag.run)}:{f.rule}"},
            "properties": {"run": visible(diag.run), "onset": f.onset, "window": [f.start_step, f.end_step],
                           "layer": f.layer, "root": f.layer == diag.root_layer and not f.downstream,
                           "downstream": f.downstream, "verdict": diag.verdict}}


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False, **options) -> str:
    rules: dict[str, int] = {}
    described: list[dict] = []
    results = []
    for diag in tree.ordered(diagnoses):
        if diag.verdict not in ("fail", "warn"):
            continue
        for f in diag.findings:
            if f.rule not in rules:
                rules[f.rule] = len(described)
                described.append(_rule(f))
            results.append(_result(diag, f, rules[f.rule]))
    summary = tree.count_line(diagnoses, fail_on, allow_unknown=allow_unknown)
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0",
           "runs": [{"tool": {"driver": {"name": "stabdiag", "version": __version__, "rules": described}},
                     "results": results,
                     "invocations": [{"executionSuccessful": True,
                                      "toolExecutionNotifications": [{"message": {"text": summary},
                                                                      "level": "note"}]}]}]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
