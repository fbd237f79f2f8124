"""noise_sd_by_steps: the noise a rise is counted in, read between points a fixed share of the run apart,
so that the logging cadence does not change it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stabdiag import _stats as st
from tests.casegen import wandering_noise


def test_on_independent_noise_it_is_the_point_to_point_noise():
    x = np.random.default_rng(3).normal(0, 0.02, 5000)
    steps = np.arange(1, 5001)
    assert st.noise_sd_by_steps(steps, x) == pytest.approx(st.noise_sd(x), rel=0.08)
    assert st.noise_sd_by_steps(steps, x) == pytest.approx(0.02, rel=0.08)


def test_wandering_noise_reads_the_same_logged_every_step_or_every_5th():
    x = wandering_noise(np.random.default_rng(5), 20_000, 1.0, 0.9)
    steps = np.arange(1, 20_001)
    every_step = st.noise_sd_by_steps(steps, x)
    every_5th = st.noise_sd_by_steps(steps[4::5], x[4::5])
    assert every_5th == pytest.approx(every_step, rel=0.08)
    # neighbours' differences see 0.32 of the marginal sd logged every step, 0.64 every 5th
    assert st.noise_sd(x[4::5]) / st.noise_sd(x) == pytest.approx(math.sqrt((1 - 0.9 ** 5) / (1 - 0.9)), rel=0.1)


def test_a_trend_counts_little_as_noise():
    """The differences inside a climb carry its slope times the lag; the MAD about their median keeps the
    noise of a 25-sd climb over 40% of the run within 15% (measured: +11%)."""
    steps = np.arange(1, 3001)
    noise = np.random.default_rng(7).normal(0, 0.02, 3000)
    ramp = 0.5 * np.clip((steps - 300) / 1200, 0, 1)           # 25 noise sds over 40% of the run
    assert st.noise_sd_by_steps(steps, ramp + noise) == pytest.approx(st.noise_sd_by_steps(steps, noise), rel=0.15)


def test_short_and_uneven_curves():
    assert st.noise_sd_by_steps(np.array([1, 2]), np.array([0.1, 0.3])) == 0.0
    steps, x = np.array([1, 2, 3, 100]), np.array([0.0, 1.0, 0.0, 1.0])
    assert st.noise_sd_by_steps(steps, x) == st.noise_sd(x)           # no 3 pairs a lag apart: neighbours
    x = np.array([0.1, np.nan, 0.2, 0.3, 0.1])
    kept = x.copy()
    assert math.isnan(st.noise_sd_by_steps(np.arange(5), x))
    np.testing.assert_array_equal(x, kept)                              # the input is not modified
