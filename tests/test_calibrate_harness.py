"""bench/calibrate.py and bench/_families.py (issue 43): the generators draw what their docstring says (same
seed, same run; AR(1) phi, log-normal sigma and cadence as declared; columns that stabdiag reads as the
intended signals), Wilson's interval gives the known numbers, and a tiny run of the harness returns its tables."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import stabdiag

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import _families as fam  # noqa: E402
import calibrate  # noqa: E402


def _same(a: fam.Generated, b: fam.Generated) -> bool:
    parts = [(a.train, b.train), (a.evals, b.evals)]
    return a.info == b.info and all(x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=True) for k in x)
                                    for x, y in parts)


def _find(family: str, want, seed: int = 5, t_max: int = 100_000, min_steps: int = 0,
          tries: int = 400) -> fam.Generated:
    for index in range(tries):
        if fam.null_run_steps(family, index, seed, t_max) < min_steps:
            continue
        gen = fam.null_run(family, index, seed, t_max)
        if want(gen):
            return gen
    raise AssertionError(f"no {family} run of the kind wanted in {tries} draws")


def test_generators_are_deterministic_per_seed():
    for family in fam.FAMILIES:
        assert _same(fam.null_run(family, 3, 11, 2_000), fam.null_run(family, 3, 11, 2_000))
        assert not _same(fam.null_run(family, 3, 11, 2_000), fam.null_run(family, 3, 12, 2_000))
    for shape in fam.SHAPES:
        assert _same(fam.shape_run(shape, "medium", 0.3, 300, 1, 11), fam.shape_run(shape, "medium", 0.3, 300, 1, 11))
    assert fam.null_run_steps("ar_0.9", 7, 11, 2_000) == fam.null_run("ar_0.9", 7, 11, 2_000).info["steps"]


def test_shape_draws_are_paired_across_effect_and_noise():
    small, large = (fam.shape_run("eval_flat", e, 1.0, 400, 0, 3) for e in ("small", "large"))
    assert np.array_equal(small.evals["eval_math500_accuracy"], large.evals["eval_math500_accuracy"])
    assert large.train["reward"][-1] - small.train["reward"][-1] == pytest.approx(0.30, abs=0.02)
    quiet = fam.shape_run("eval_flat", "small", 0.0, 400, 0, 3)
    assert np.ptp(quiet.evals["eval_math500_accuracy"]) == 0.0       # a flat eval without noise is constant


def test_supervised_shapes_climb_and_recover_as_declared():
    for effect, share in zip(fam.EFFECTS, fam.SHAPES["sft_loss_climb"].effects):
        gen = fam.shape_run("sft_loss_climb", effect, 0.0, 1_000, 2, 3)
        loss, at = gen.train["loss"], gen.info["event_step"]
        best = loss[at]
        # climbed back by `share` of the way it came down (start to where the climb began), and holds
        assert (loss[-1] - best) / (loss[0] - best) == pytest.approx(share, rel=0.05)
    gen = fam.shape_run("loss_excursion", "large", 0.0, 5_000, 2, 3)
    loss, at = gen.train["loss"], gen.info["event_step"]
    assert loss[at + 2] - loss[at - 1] > 0.9 * (loss[0] - loss[at - 1])      # a jump of the whole descent
    assert loss[-1] < loss[at - 1]                                          # and back by the end
    restart = fam.shape_run("cosine_restart", "large", 0.0, 4_000, 2, 3)
    lr = restart.train["learning_rate"]
    assert lr[1_000] > 10 * lr[999] and lr[3_000] > 10 * lr[2_999]          # the schedule restarts


@pytest.mark.parametrize("phi", [0.5, 0.9, 0.97, 0.99])
def test_ar1_lag1_autocorrelation_is_phi(phi):
    x = fam.unit_noise(np.random.default_rng(0), "ar", 200_000, 1, phi)[:, 0]
    assert np.corrcoef(x[1:], x[:-1])[0, 1] == pytest.approx(phi, abs=0.01)
    assert np.var(x) == pytest.approx(1.0, abs=0.15)


def test_ar_family_reward_carries_its_phi():
    gen = _find("ar_0.9", lambda g: g.info["kind"] == "rl" and g.info["cadence"] == 1, min_steps=20_000)
    reward = gen.train["reward"]
    assert np.corrcoef(reward[1:], reward[:-1])[0, 1] == pytest.approx(0.9, abs=0.02)


def test_lognormal_grad_sigma_is_as_declared():
    gen = _find("lognormal_grad", lambda g: g.info["cadence"] == 1, min_steps=20_000)
    sigma = gen.info["grad_sigma"]
    assert 0.2 <= sigma <= 1.0
    # i.i.d. log-normal noise: a step-to-step difference of log values has sd sigma * sqrt(2), whatever the
    # slow mean
    assert np.std(np.diff(np.log(gen.train["grad_norm"]))) / math.sqrt(2) == pytest.approx(sigma, rel=0.05)


def test_cadence_keeps_every_kth_step():
    x = np.arange(100.0)
    assert fam.logged_index(100, 5).tolist() == list(range(4, 100, 5))
    assert np.array_equal(fam.log_every(x, 5, "sub"), x[4::5])
    assert np.allclose(fam.log_every(x, 5, "mean"), x.reshape(20, 5).mean(axis=1))
    assert np.array_equal(fam.log_every(x, 1, "mean"), x)
    for cadence in (5, 25):
        gen = _find("iid_gauss", lambda g, k=cadence: g.info["cadence"] == k, t_max=5_000)
        start = gen.info["start"]
        steps = gen.train["step"]
        assert np.all(np.diff(steps) == cadence) and (steps[0] - start) == cadence - 1
        offsets = gen.evals["step"] - start
        assert np.all((offsets == 0) | ((offsets + 1) % cadence == 0))


INTENDED_RL = {"reward", "eval:math500", "response_length", "kl", "entropy", "loss", "grad_norm", "lr"}
INTENDED_PRETRAIN = {"loss", "grad_norm", "lr", "eval_loss"}


def _resolved(gen: fam.Generated) -> dict[str, str]:
    return stabdiag.diagnose(calibrate.to_run(stabdiag, gen, "resolve")).to_dict()["signals"]


def test_each_family_columns_resolve_to_the_intended_signals():
    for family in fam.FAMILIES:
        kinds = ("rl",) if family == "binomial" else ("pretrain",) if family == "flat_loss" else ("rl", "pretrain")
        for kind in kinds:
            gen = _find(family, lambda g, k=kind: g.info["kind"] == k and g.info.get("n_evals", 1) == 2 - (k != "rl"),
                        t_max=300)
            assert set(gen.signals) >= (INTENDED_RL | {"eval:gsm8k"} if kind == "rl" else INTENDED_PRETRAIN)
            read = _resolved(gen)
            assert {s: read.get(s) for s in gen.signals} == gen.signals, (family, kind)


def test_each_shape_columns_resolve_to_the_intended_signals():
    for shape in fam.SHAPES:
        gen = fam.shape_run(shape, "large", 1.0, 200, 0, 1)
        # a shape drawn without evals (weight0_check_flat: the run's own check is a weight-0 reward function)
        # has every other signal
        evals = gen.info.get("n_evals", 1) > 0
        intended = INTENDED_PRETRAIN if shape in fam.SUPERVISED_SHAPES else \
            {s for s in INTENDED_RL if evals or not s.startswith("eval:")}
        assert set(gen.signals) >= intended, shape
        read = _resolved(gen)
        assert {s: read.get(s) for s in gen.signals} == gen.signals, shape
    assert fam.shape_run("logprob_drift", "large", 1.0, 200, 0, 1).signals["logprob_delta"] == fam.LOGPROB_KEY


def test_wilson_interval_known_values():
    assert calibrate.wilson(0, 200) == (0.0, pytest.approx(0.018846, abs=1e-5))     # 0/200: upper ~1.9%
    assert calibrate.wilson(10, 100) == (pytest.approx(0.05523, abs=1e-4), pytest.approx(0.17437, abs=1e-4))
    assert calibrate.wilson(200, 200) == (pytest.approx(0.981154, abs=1e-5), 1.0)
    assert calibrate.wilson(0, 0) == (0.0, 1.0)
    assert calibrate.target_text(0, 200, 0.01) == "met (upper MISSED)"
    assert calibrate.target_text(0, 400, 0.01) == "met (upper met)"


def _tiny(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / name
    argv = ["--quick", "--runs", "2", "--shape-runs", "1", "--t-max", "300", "--seed", "3",
            "--shapes", "eval_flat,nan_precursor", "--save", str(out), *extra]
    assert calibrate.main(argv) == 0
    return json.loads(out.read_text())


def test_tiny_harness_run_returns_the_tables(tmp_path, capsys):
    saved = _tiny(tmp_path, "a.json")
    text = capsys.readouterr().out
    assert "NULL FAMILIES" in text and "FAILURE SHAPES" in text and "SUMMARY" in text
    assert list(saved["families"]) == list(fam.FAMILIES)
    for s in saved["families"].values():
        assert s["runs"] == 2 and sum(s["verdicts"].values()) == 2
        assert set(s["verdicts"]) >= set(calibrate.VERDICTS)
    assert set(saved["shapes"]) == {"eval_flat", "nan_precursor"}
    cells = saved["shapes"]["eval_flat"]
    assert set(cells) == {f"{e}|{n:g}|{t}" for e in fam.EFFECTS for n in (1.0, 0.3, 0.0) for t in (300, 3_000)}
    assert all(c["runs"] == 1 and c["detected"] <= c["fired"] for c in cells.values())
    records = saved["records"]
    assert len(records) == 2 * len(fam.FAMILIES) + 2 * 3 * 3 * 2
    assert not [r["name"] for r in records if r["verdict"] == "error" or r["signals_off"]]
    assert all(r["detected"] in (True, False) for r in records if r["task"] == "shape")
    # the same seed gives the same runs, whatever the number of processes; --compare reads the saved file
    again = _tiny(tmp_path, "b.json", "-j", "2", "--families", "iid_gauss,binomial",
                  "--compare", str(tmp_path / "a.json"))
    assert "COMPARE with this checkout" in capsys.readouterr().out

    def strip(rec):
        return {k: v for k, v in rec.items() if k != "seconds"}

    before = {r["name"]: strip(r) for r in records}
    assert all(before[r["name"]] == strip(r) for r in again["records"])
