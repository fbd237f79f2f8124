"""Data too easy without a zero-variance signal logged (issue 44 item 4): the shipped easy-data sample read as a
run that does not log TRL's frac_reward_zero_std.  Its reward sits at 0.93-0.97 from the first step, its eval
(gsm8k) is flat and its entropy falls 2.0 -> 0.5: seed 000 reads that fall as the data's ease, so the root is
layer 1 and the policy findings are its consequence, not a policy moving too fast."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load

SAMPLE = Path(__file__).resolve().parent.parent / "sample_logs" / "grpo_easy_data"


def _without_zero_std(run):
    return replace(run, series={k: s for k, s in run.series.items() if "zero_std" not in k})


def test_the_easy_data_sample_without_its_zero_variance_fraction_roots_at_layer_1():
    (run,) = load(SAMPLE)
    diag = diagnose(_without_zero_std(run))
    assert diag.root_layer == 1 and diag.verdict == "warn"
    (cause,) = [f for f in diag.findings if f.rule == "L1.data-too-easy"]
    assert cause.evidence["level"] > 0.9 and "did not move surely" in cause.evidence["evals"]
    layer2 = [f for f in diag.findings if f.layer == 2]
    assert {f.rule for f in layer2} == {"L2.policy-moving-fast", "L2.entropy-below-floor"}
    assert all(f.explained_by == "L1.data-too-easy" and f.downstream for f in layer2)


def test_without_the_rule_the_same_run_roots_at_layer_2():
    # what the issue reported: with no zero-variance signal, the entropy rules rooted the run at layer 2
    (run,) = load(SAMPLE)
    diag = diagnose(_without_zero_std(run), ignore=["L1.data-too-easy"])
    assert diag.root_layer == 2


def test_the_sample_as_logged_is_read_from_its_zero_variance_fraction():
    (run,) = load(SAMPLE)
    diag = diagnose(run)
    assert diag.root_layer == 1
    assert [f.rule for f in diag.findings if f.layer == 1] == ["L1.zero-variance-groups"]
    (unknown,) = [u for u in diag.unknown if u.rule == "L1.data-too-easy"]
    assert "frac_reward_zero_std" in unknown.describe()
