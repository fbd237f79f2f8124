"""The spike bar of stats/extremes.py: Student-t quantiles and the order of bars that the spike rules' candidate
pick relies on (detectors/spikes.py picks candidates under the Gaussian tail's bar, then holds each to its own)."""

from __future__ import annotations

import math

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
