"""The JUnit XML report, the test-result format Jenkins, GitLab and most CI systems render.

One <testsuite> per run (failures first) holding one <testcase>: a run with a finding at or above
`fail_on` holds a <failure> (its root findings, the first checks, the downstream findings); a run whose
findings are all below it passes with them in <system-out>; a run nothing could judge is <skipped> with
what it lacks (the exit code, 3, is the gate's answer for it; --allow-unknown makes it 0).  A rule that
could not judge a run it judged otherwise is no test of its own: 100 runs are 100 tests, never 3,500.
The suite's properties carry the run's verdict, root layer, onset (the root layer's, as every format
quotes it), the rules too noisy to tell or left out, and what a config file changed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding, Status
from ..judge.rules import LAYER_NAMES
from . import tree
from ._escape import xml
from .settings import junit_properties


def _finding_text(diag: Diagnosis, f: Finding) -> list[str]:
    lines = [f"{f.rule} ({f.severity}): {xml(f.title)}",
             f"  onset step {f.onset} (window {f.start_step}-{f.end_step}): {xml(f.message)}"]
    if f.downstream:
        lines.append(f"  downstream of the root layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]}): likely a "
                     "consequence; fix the root layer first")
    return lines


def _details(diag: Diagnosis) -> str:
    """The run's findings, root first, with the root's checks."""
    lines = [f"{xml(diag.run)}: {xml(diag.verdict_text())}"
             + (f", root layer {diag.root_layer} ({LAYER_NAMES[diag.root_layer]})" if diag.root_layer else "")]
    root = diag.root_findings()
    for f in root:
        lines += _finding_text(diag, f)
    if root:
        lead = sorted(root, key=lambda f: f.severity != "fail")[0]
        lines.append(f"check first (layer {diag.root_layer}, {LAYER_NAMES[diag.root_layer]}):")
        lines += [f"  {i}. {xml(step)}" for i, step in enumerate(lead.check_first, 1)]
    for f in diag.findings:
        if f not in root:
            lines += _finding_text(diag, f)
    for f in diag.ignored_findings:
        lines.append(f"ignored by --select/--ignore, would fire: {f.rule} ({f.severity}): {xml(f.message)}")
    return "\n".join(lines)


def _suite(diag: Diagnosis, fail_on: str, settings: tuple) -> ET.Element:
    """The run's testsuite: its properties (verdict, root layer, onset, steps; then what the config
    changed) and its one testcase."""
    suite = ET.Element("testsuite", name=xml(diag.run))
    props = ET.SubElement(suite, "properties")
    root = diag.root_layer
    onset = None if root is None else diag.layers[root - 1].onset_step
    ignored = (("ignored", diag.ignored_text()),) if diag.ignored else ()
    undecided = (("too_noisy_to_tell", ", ".join(u.rule for u in diag.undecided)),) if diag.undecided else ()
    for name, value in (("verdict", diag.verdict), *ignored, *undecided,
                        ("root_layer", "none" if root is None else str(root)),
                        ("onset", "" if onset is None else str(onset)),
                        ("steps", "" if diag.steps is None else f"{diag.steps[0]}-{diag.steps[1]}"), *settings):
        ET.SubElement(props, "property", name=xml(name), value=xml(value))
    case = ET.SubElement(suite, "testcase", classname="stabdiag", name=xml(diag.run), time="0")
    counts = {"tests": 1, "failures": 0, "errors": 0, "skipped": 0}
    bar = SEVERITY_RANK[fail_on]
    failing = [f for f in diag.findings if SEVERITY_RANK[f.severity] >= bar]
    if failing:
        lead = sorted(diag.root_findings() or failing, key=lambda f: f.severity != "fail")[0]
        failure = ET.SubElement(case, "failure", type=lead.severity,
                                message=xml(f"{lead.rule} (onset step {lead.onset}): {lead.message}"))
        failure.text = _details(diag)
        counts["failures"] = 1
    elif diag.verdict == "unknown":
        lacks = "; ".join(f"layer {r.layer} ({LAYER_NAMES[r.layer]}) {r.unknown_reason}: {tree.lacks(r, diag)}"
                          for r in diag.layers if r.status is Status.UNKNOWN)
        ET.SubElement(case, "skipped", message=xml(f"nothing could be judged: {lacks}"))
        counts["skipped"] = 1
    elif diag.findings or diag.ignored_findings or diag.undecided:
        out = _details(diag)
        if diag.undecided:
            out += "\n" + "\n".join(f"too noisy to tell: {u.rule}: {xml(u.reason)}" for u in diag.undecided)
        ET.SubElement(case, "system-out").text = out
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", "0")
    if diag.notes:
        ET.SubElement(suite, "system-out").text = "\n".join(f"note: {xml(n)}" for n in diag.notes)
    return suite


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", allow_unknown: bool = False, **options) -> str:
    """JUnit XML: a testsuite per run holding its one testcase (failures first), with the run's verdict,
    root layer and onset, and what a config file changed, as properties."""
    root = ET.Element("testsuites", name="stabdiag")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    settings = tuple(junit_properties(options.get("settings")))        # what the config changed
    for diag in tree.ordered(diagnoses):
        suite = _suite(diag, fail_on, settings)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    not_read = options.get("not_read") or ()
    if not_read:            # each path or folder that held nothing readable, as a skipped test naming why
        suite = ET.SubElement(root, "testsuite", name="not read", tests=str(len(not_read)), failures="0",
                              errors="0", skipped=str(len(not_read)), time="0")
        for path, why in not_read:
            case = ET.SubElement(suite, "testcase", classname="not_read", name=xml(path), time="0")
            ET.SubElement(case, "skipped", message=xml(why))
        totals["tests"] += len(not_read)
        totals["skipped"] += len(not_read)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
