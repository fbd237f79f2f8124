"""Metamorphic invariance on a seeded slice: 20 runs (10 tuning, 10 held-out) x 4 transforms.

A diagnosis must not depend on units, logging cadence or step numbering (DESIGN.md: scale-free and
step-based).  Each run is written as generated and after one transform of its curves, loaded and diagnosed
in-process with the shipped rules; the verdict and the root layer must not change.  The whole corpus:
`python bench/metamorphic.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import metamorphic  # noqa: E402

TRANSFORMS = (metamorphic.Transform("reward 10*r-3", "reward", a=10.0, b=-3.0),
              metamorphic.Transform("evals x100", "evals"),
              metamorphic.Transform("log every 5", "thin", k=5),
              metamorphic.Transform("steps +50,000", "offset"))
PER_PART = 10
SEED = 20261201
MAX_POINTS = 3000          # keeps the slice under a minute


def _slice() -> list[tuple[str, str, str, int]]:
    """10 runs per part, drawn with a fixed seed among those every transform applies to."""
    rng = np.random.default_rng(SEED)
    chosen = []
    for part in ("tuning", "heldout"):
        specs = metamorphic.corpus_specs(part, 1.0)
        got = 0
        for j in rng.permutation(len(specs)):
            name, family, index = specs[j]
            obj, label, extra = metamorphic.build(part, name, family, index)
            if len(obj.steps) > MAX_POINTS:
                continue
            if all(metamorphic.applies(part, t, obj, label, extra) for t in TRANSFORMS):
                chosen.append((part, name, family, index))
                got += 1
                if got == PER_PART:
                    break
    return chosen


SLICE = _slice()


@pytest.fixture(scope="module")
def outcomes():
    return {(part, name): metamorphic.check_run(part, name, family, index, TRANSFORMS)
            for part, name, family, index in SLICE}


def test_slice_is_complete():
    assert len(SLICE) == 2 * PER_PART
    assert len({(part, name) for part, name, _, _ in SLICE}) == len(SLICE)


@pytest.mark.parametrize("part,name", [(p, n) for p, n, _, _ in SLICE])
def test_diagnosis_is_invariant(outcomes, part, name):
    out = outcomes[(part, name)]
    base = out["base"]
    assert not str(base[0]).startswith("error"), f"{part}/{name}: {base[0]}"
    assert set(out["after"]) == {t.name for t in TRANSFORMS}
    changed = {t: after for t, after in out["after"].items() if after != base}
    assert not changed, (f"{part}/{name} ({out['family']}): verdict/root {base[0]}/{base[1]} changed under "
                         + "; ".join(f"{t} -> {v}/{r}" for t, (v, r) in changed.items()))


def test_the_averaged_transform_logs_the_mean_of_k_steps_and_the_last_grad_norm():
    run = metamorphic.scenarios.Curves(steps=np.arange(1, 12), evals={},
                                       sig={"reward": np.arange(11.0), "grad_norm": 2 * np.arange(11.0)})
    out = metamorphic.apply(metamorphic.Transform("mean of every 5", "mean", k=5), run)
    assert out.steps.tolist() == [5, 10]                   # the unfinished interval is not logged
    assert out.sig["reward"].tolist() == [2.0, 7.0]
    assert out.sig["grad_norm"].tolist() == [8.0, 18.0]
    assert run.sig["reward"].tolist() == list(range(11))   # a copy: the run as generated is untouched


def test_a_change_is_point_lost_only_when_all_that_went_is_a_one_point_finding_at_a_dropped_step():
    kept = np.array([5, 10, 15])
    spike = ("L3.grad-norm-spike", 7, 7)
    assert metamorphic._point_lost({spike}, set(), kept)
    assert not metamorphic._point_lost({spike}, {("L2.policy-moving-fast", 3, 9)}, kept)   # something new fired
    assert not metamorphic._point_lost({("L3.grad-norm-spike", 10, 10)}, set(), kept)     # its step was logged
    assert not metamorphic._point_lost({("L1.reward-eval-divergence", 3, 40)}, set(), kept)  # a trend went


def test_a_collapse_logged_every_250_steps_keeps_its_diagnosis_under_the_sparse_transform():
    """bench/metamorphic.py --sparse found it: tuning kl-entropy-collapse-006 (KL x9, entropy -47% within
    200 steps) thinned to every 50th point (one point per 250 steps) was a clean pass."""
    [(name, family, index)] = [s for s in metamorphic.corpus_specs("tuning", 1.0) if s[0] == "kl-entropy-collapse-006"]
    sparse = {t.k: t for t in metamorphic.SPARSER}
    out = metamorphic.check_run("tuning", name, family, index, (sparse[50],))
    assert out["base"] == ("fail", 2) and out["after"] == {"sparse every 50": ("fail", 2)}
