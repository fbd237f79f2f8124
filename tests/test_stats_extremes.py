"""The spike bar of stats/extremes.py: Student-t quantiles and the order of bars that the spike rules' candidate
pick relies on (detectors/spikes.py picks candidates under the Gaussian tail's bar, then holds each to its own)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stabdiag.judge.stats import extremes as ex


@pytest.mark.parametrize(("p", "dof", "quantile"), [
    (0.025, 2.0, 4.303), (0.025, 5.0, 2.571), (0.025, 30.0, 2.042), (0.025, math.inf, 1.960),
    (0.25, 3.0, 0.765), (0.005, 10.0, 3.169)])
def test_t_isf_matches_the_printed_tables(p, dof, quantile):
    assert ex.t_isf(p, dof) == pytest.approx(quantile, abs=6e-4)
    assert ex.t_sf(ex.t_isf(p, dof), dof) == pytest.approx(p, rel=1e-9)
    assert ex.t_isf(p, dof) == ex.t_isf(p, dof)          # remembered: the same number the second time


@pytest.mark.parametrize("tested", [10, 1_000, 1_000_000])
def test_a_heavier_tail_or_fewer_scale_points_never_lowers_the_bar(tested):
    for points in (2, 5, 17, 64, 128, 191, 1000):
        bars = [ex.point_threshold(tested, 0.005, ex.studentized_dof(dof, points)) for dof in ex.DOF_GRID]
        assert all(a >= b for a, b in zip(bars, bars[1:])), points
    for dof in ex.DOF_GRID:
        bars = [ex.point_threshold(tested, 0.005, ex.studentized_dof(dof, points)) for points in range(2, 200, 7)]
        assert all(a >= b for a, b in zip(bars, bars[1:])), dof


@pytest.mark.parametrize(("p", "dof", "quantile"), [
    (0.05, 1.0, 0.0039321), (0.05, 4.0, 0.71072), (0.01, 10.0, 2.558), (0.025, 30.0, 16.791),
    (0.05, 100.0, 77.929), (0.00135, 4.0, 0.105767), (0.05, 2_000.0, 1897.12), (0.01, 10_000.0, 9673.95)])
def test_chi2_lower_quantile_matches_the_printed_tables(p, dof, quantile):
    # the series below 1,000 degrees of freedom, the Wilson-Hilferty cube above
    assert ex.chi2_lower_quantile(p, dof) == pytest.approx(quantile, rel=2e-4)


def test_the_sd_upper_bound_covers_the_true_sd_at_its_stated_rate():
    # five Gaussian points, 20,000 draws: the bound at z = 2 (one-sided 2.28%) falls under the true sd 1 in
    # 2.28% of draws (binomial sd 0.1%), whatever the count; the plain sample sd falls under half of it often
    rng = np.random.default_rng(7)
    for n in (5, 12):
        draws = rng.normal(0.0, 1.0, size=(20_000, n))
        below = np.mean([ex.sd_upper_bound(row, 2.0) < 1.0 for row in draws])
        assert below == pytest.approx(0.0228, abs=0.004), n
    assert np.mean(np.std(rng.normal(size=(20_000, 5)), axis=1) < 0.5) > 0.05


def test_a_block_that_is_mostly_ties_reads_its_noise_on_the_points_that_are_not():
    # a block of 128 residuals: 33 of Gaussian noise (sd 0.05), then 95 exact 0s (a loss that collapsed to
    # 0): its MAD is 0, and a floor of one printed step would make every noisy point "thousands of sds" out
    rng = np.random.default_rng(3)
    noisy = rng.normal(0.0, 0.05, 33)
    residuals = np.concatenate([noisy, np.zeros(95), rng.normal(0.0, 0.05, 128)])
    scale = ex.local_scale(residuals, 128, floor=1e-4)
    assert scale[0] == pytest.approx(np.median(np.abs(noisy - np.median(noisy))) * 1.4826, rel=1e-9)
    assert 0.03 < scale[0] < 0.08 and 0.03 < scale[-1] < 0.08
    # a block with fewer than half ties keeps its plain MAD (the ties are part of what it reads)
    some = np.concatenate([rng.normal(0.0, 0.05, 100), np.zeros(28)])
    assert ex.local_scale(some, 128)[0] == pytest.approx(1.4826 * np.median(np.abs(some - np.median(some))))
