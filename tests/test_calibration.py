"""A 30-run slice of the calibration corpus (bench/scenarios.py) as a regression test.

The runs are generated into tmp_path in the formats users have (CSV, JSONL, Parquet, long CSV; TRL and
verl names), loaded with stabdiag.read.assemble.load and diagnosed in-process.  Each must get its labelled
root layer and fire its must-fire rules; healthy runs and near misses must not fail.  The full corpus
and its figures are in `python bench/score.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import scenarios  # noqa: E402

from stabdiag.judge.engine import diagnose  # noqa: E402
from stabdiag.read.assemble import load  # noqa: E402

SLICE = (
    # healthy: 50 steps, a resumed run with overlapping steps, long answers with improving evals,
    # an absorbed grad-norm spike (warns, must not fail)
    "healthy-000", "healthy-004", "healthy-007", "healthy-023", "healthy-long-answers-001",
    "healthy-absorbed-spike-001",
    # near misses just under a threshold
    "near-divergence-001", "near-length-001", "near-zero-std-001", "near-kl-entropy-000",
    "near-loss-spike-zero-001", "near-grad-spike-001", "near-logprob-001",
    # each layer's failures
    "reward-hack-001", "length-confound-002", "zero-variance-000", "difficulty-trap-001",
    "kl-entropy-collapse-002", "entropy-floor-001", "loss-spike-001", "explosion-precursor-002",
    "explosion-sudden-002", "nan-in-reward-000", "nan-in-logprob-000", "nan-in-grad-norm-002",
    "logprob-onset-000", "version-lag-002",
    # top-down: a layer-1 / layer-2 cause with layer-3 symptoms later
    "hack-then-blowup-002", "collapse-then-blowup-001", "hack-with-length-002",
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration")
    labels = {lab.name: lab for lab in scenarios.build(out, names=list(SLICE))}
    runs = {run.name: run for run in load(str(out / "runs"))}
    return labels, runs


def test_slice_is_small_and_complete(corpus):
    labels, runs = corpus
    assert len(SLICE) <= 30
    assert set(labels) == set(SLICE) == set(runs)


# Known gaps, recorded rather than deleted (semgrep's todo annotations).  entropy-floor-001: the reward
# creeps 0.33 -> 0.36 (z 27 over 8,000 steps, 72% of its small range) before it stalls, and the eval beside
# it (noise ~0.02 at 0.4) is too coarse to show a gain that small, so L1.reward-eval-divergence fires and
# takes the root from the entropy floor.  The eval's "flat" yardstick is a share of its own level, not of
# what tracking the reward would move it by; see the rule's known_limits.
TODO = {"entropy-floor-001"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason="known gap", strict=True))
                                  if n in TODO else n for n in SLICE])
def test_run_matches_label(corpus, name):
    labels, runs = corpus
    label, diag = labels[name], diagnose(runs[name])
    # a finding explained as the consequence of another rule's is reported, not counted as firing
    fired = {f.rule: f for f in diag.findings if not (f.explained_by or "").startswith("L")}
    if label.kind in ("healthy", "near-miss"):
        assert diag.verdict != "fail", f"{name}: healthy run fails: {[f.message for f in diag.findings]}"
    assert diag.root_layer == label.root_layer, \
        f"{name}: root {diag.root_layer}, expected {label.root_layer}: {[f.message for f in diag.findings]}"
    missing = [r for r in label.must_fire if r not in fired]
    assert not missing, f"{name}: {missing} did not fire"
    wrong = [r for r in label.must_not_fire if r in fired]
    assert not wrong, f"{name}: {wrong} fired: {[fired[r].message for r in wrong]}"
    if label.precursor:
        lead = label.nan_step - min(f.start_step for f in diag.findings
                                    if f.rule in ("L3.grad-norm-precursor", "L3.grad-norm-spike", "L3.loss-spike"))
        assert lead >= 20, f"{name}: precursor only {lead} steps before the first NaN"
    if label.nan_signal:
        assert fired["L3.nonfinite-values"].evidence["signal"] == label.nan_signal
