"""The JUnit XML report, the test-result format Jenkins, GitLab and most CI systems render.

One <testsuite> per run and one <testcase> per rule that was selected: a rule that fired at or above
`fail_on` holds a <failure>; one that fired below it passes with the finding in <system-out>; a rule the
run could not judge (missing signals) is <skipped>.  classname is "<run>.L<layer>", so CI tables group
the rules of a layer together.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..judge.diagnosis import SEVERITY_RANK, Diagnosis, Finding
from ..judge.rules import LAYER_NAMES
from ._escape import xml
from .settings import junit_properties


def _rule_list(diag: Diagnosis, rules) -> list[tuple[str, int]]:
    """(rule id, layer) for every rule that was checked, in layer order."""
    seen: dict[str, int] = {}
    for rule in rules or ():
        seen.setdefault(rule.id, rule.layer)
    for item in (*diag.findings, *diag.unknown):
        seen.setdefault(item.rule, item.layer)
    for rule_id in diag.ignored:              # ids are L<layer>.<name>
        seen.setdefault(rule_id, int(rule_id[1]))
    return sorted(seen.items(), key=lambda kv: kv[1])


def _failure_text(diag: Diagnosis, f: Finding) -> str:
    lines = [f"{f.rule}: {xml(f.title)}", f"steps {f.start_step}-{f.end_step}: {xml(f.message)}"]
    if f.downstream:
        lines.append(f"downstream of the root layer {diag.root_layer} "
                     f"({LAYER_NAMES[diag.root_layer]}): likely a consequence; fix the root layer first")
    elif f.layer == diag.root_layer:
        lines.append(f"root layer {f.layer} ({LAYER_NAMES[f.layer]}) - check first:")
        lines += [f"  {i}. {xml(step)}" for i, step in enumerate(f.check_first, 1)]
    return "\n".join(lines)


def _suite(diag: Diagnosis, rules, fail_on: str, allow_unknown: bool, settings: tuple) -> ET.Element:
    """One run's testsuite; `settings` are the properties of what the config changed, after the run's own."""
    suite = ET.Element("testsuite", name=xml(diag.run))
    found = {f.rule: f for f in diag.findings}
    missing = {u.rule: u for u in diag.unknown}
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    bar = SEVERITY_RANK[fail_on]
    fired = {f.rule: f for f in diag.ignored_findings}
    for rule_id, layer in _rule_list(diag, rules):
        case = ET.SubElement(suite, "testcase", classname=f"{xml(diag.run)}.L{layer}", name=xml(rule_id), time="0")
        counts["tests"] += 1
        if rule_id in diag.ignored:
            would = f"; would fire ({fired[rule_id].severity}): {fired[rule_id].message}" if rule_id in fired else ""
            ET.SubElement(case, "skipped", message=f"ignored (--select/--ignore){would}")
            counts["skipped"] += 1
        elif rule_id in missing:
            ET.SubElement(case, "skipped", message=f"not judged ({missing[rule_id].kind}): "
                                                   f"{xml(missing[rule_id].describe())}")
            counts["skipped"] += 1
        elif rule_id in found:
            f = found[rule_id]
            if SEVERITY_RANK[f.severity] >= bar:
                failure = ET.SubElement(case, "failure", message=xml(f.message), type=f.severity)
                failure.text = _failure_text(diag, f)
                counts["failures"] += 1
            else:
                ET.SubElement(case, "system-out").text = f"{f.severity}: " + _failure_text(diag, f)
    if diag.verdict == "unknown":
        # nothing judged is not a pass: the gate fails it unless told otherwise (--allow-unknown)
        case = ET.SubElement(suite, "testcase", classname=f"{xml(diag.run)}.run", name="judged", time="0")
        counts["tests"] += 1
        if not allow_unknown:
            ET.SubElement(case, "failure", message="no layer could be judged", type="unknown").text = "\n".join(
                f"layer {r.layer}: {r.unknown_reason}: {xml(r.not_judged_text())}" for r in diag.layers)
            counts["failures"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    suite.set("time", "0")
    props = ET.Element("properties")
    root = "none" if diag.root_layer is None else str(diag.root_layer)
    ignored = (("ignored", diag.ignored_text()),) if diag.ignored else ()
    undecided = (("too_noisy_to_tell", ", ".join(u.rule for u in diag.undecided)),) if diag.undecided else ()
    for name, value in (("verdict", diag.verdict), *ignored, *undecided, ("root_layer", root),
                        ("steps", "" if diag.steps is None else f"{diag.steps[0]}-{diag.steps[1]}"), *settings):
        ET.SubElement(props, "property", name=xml(name), value=xml(value))
    suite.insert(0, props)
    if diag.notes:
        ET.SubElement(suite, "system-out").text = "\n".join(f"note: {xml(n)}" for n in diag.notes)
    return suite


def render(diagnoses: list[Diagnosis], *, fail_on: str = "fail", rules=None, allow_unknown: bool = False,
           **options) -> str:
    """JUnit XML for the runs; `rules` are the selected rules (passing ones become passing testcases;
    without it only the rules that fired or could not run are listed)."""
    root = ET.Element("testsuites", name="stabdiag")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    settings = tuple(junit_properties(options.get("settings")))        # what the config changed
    for diag in diagnoses:
        suite = _suite(diag, rules, fail_on, allow_unknown, settings)
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
