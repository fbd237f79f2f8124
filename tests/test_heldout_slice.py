"""A 22-run slice of the frozen held-out corpus (bench/heldout.py), diagnosed in-process.

The held-out corpus is built by code that shares nothing with the tuning corpus but the label schema: other
reward shapes and scales, noise models, cadences, step offsets, formats and metric names, and the newly
reported failure patterns.  Each run must get its labelled verdict (pass / warn / fail / unknown) and root
layer, fire its must-fire rules, keep its must-not-fire rules quiet, and say "not judged" for the rules its
label names; the corpus itself must stay frozen (DIGEST).  The whole corpus and its figures:
`python bench/score.py --part heldout`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import heldout  # noqa: E402
import scenarios  # noqa: E402

import stabdiag  # noqa: E402

SLICE = (
    # healthy, in shapes the tuning corpus does not have: GRPO on other scales/cadences, SFT, pretraining
    "h-grpo-000", "h-grpo-002", "h-grpo-offset-000", "h-sft-000", "h-pretrain-001",
    # near misses of the new patterns: TRL's rounded loss, KL at the target, a healthy rewrite
    "nm-frozen-000", "nm-kl-level-000", "nm-rolled-back-000",
    # the newly reported failure patterns
    "instant-collapse-000", "frozen-updates-001", "kl-level-high-000", "sft-divergence-000",
    "reward-components-001", "truncation-climb-000", "transient-inf-hack-000", "rolled-back-blowup-000",
    "l4-few-points-000",
    # the tuning corpus's failures in new shapes
    "reward-hack-000", "policy-moving-fast-000",
    # honest "not judged"
    "short-reward-rise-000", "reward-only-000", "crash-after-2-steps-000",
)
VERDICTS = {"pass", "warn", "fail", "unknown"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("heldout")
    labels = {lab.name: lab for lab in heldout.build(out, names=list(SLICE))}
    runs = {run.name: run for run in stabdiag.load(str(out / "runs"))}
    return labels, runs


def test_corpus_is_frozen():
    """The held-out corpus is a pure function of its seed: any edit that changes a run or a label must be
    argued for on its own and comes with a new DIGEST - never to suit a detector."""
    assert heldout.digest() == heldout.DIGEST


def test_slice_builds_and_labels_are_well_formed(corpus):
    labels, runs = corpus
    assert set(labels) == set(SLICE) == set(runs)
    for lab in labels.values():
        assert lab.verdict in VERDICTS
        assert lab.kind in ("healthy", "near-miss", "failing", "not-judged")
        assert (lab.root_layer is None) == (lab.verdict in ("pass", "unknown"))
        named = set(lab.must_fire) | set(lab.must_not_fire) | set(lab.not_judged)
        assert named <= set(scenarios.ALL_RULES), named - set(scenarios.ALL_RULES)
        assert not set(lab.must_fire) & (set(lab.must_not_fire) | set(lab.not_judged))


def _not_judged(diag) -> set[str]:
    """Rules the diagnosis says it could not judge (missing signal or too little data)."""
    return {u.rule for u in diag.unknown}


def _judged(diag) -> set[str] | None:
    """Rules the diagnosis says judged the run, where it says so (None: it does not)."""
    layers = [getattr(layer, "judged", None) for layer in diag.layers]
    if any(x is None for x in layers):
        return None
    return {r for x in layers for r in x}


@pytest.mark.parametrize("name", SLICE)
def test_run_matches_label(corpus, name):
    labels, runs = corpus
    label, diag = labels[name], stabdiag.diagnose(runs[name])
    # a finding explained as the consequence of another rule's is reported, not counted as firing
    fired = {f.rule: f for f in diag.findings if not (f.explained_by or "").startswith("L")}
    said = [f"{f.rule}: {f.message}" for f in diag.findings]
    assert diag.verdict == label.verdict, f"{name}: verdict {diag.verdict}, expected {label.verdict}: {said}"
    assert diag.root_layer == label.root_layer, f"{name}: root {diag.root_layer}, expected {label.root_layer}: {said}"
    missing = [r for r in label.must_fire if r not in fired]
    assert not missing, f"{name}: {missing} did not fire: {said}"
    wrong = [r for r in label.must_not_fire if r in fired]
    assert not wrong, f"{name}: {wrong} fired: {[fired[r].message for r in wrong]}"
    judged = _judged(diag)
    for rule in label.not_judged:
        assert rule not in fired, f"{name}: {rule} fired, expected not judged: {fired[rule].message}"
        assert rule in _not_judged(diag) or (judged is not None and rule not in judged), \
            f"{name}: {rule} judged the run, expected not judged"
    for rule, severity in label.params.get("rule_severity", {}).items():
        assert fired[rule].severity == severity, f"{name}: {rule} is {fired[rule].severity}, expected {severity}"
