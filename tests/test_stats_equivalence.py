"""The fast robust statistics give the numbers of the slow ones they replaced (issue 14).

Each reference below is the implementation as it was before: np.nanmedian over an n x window view for
the running medians, a Python loop for CUSUM and the non-finite scan, scipy's lfilter for the EMA, and
the per-point median/MAD of every trailing window in spike_vs_recent.  Medians, CUSUM steps, the
non-finite index and spike verdicts must match exactly; the EMA within 1e-12 relative (the two sum in a
different order).  Inputs: noise, ties, +-Inf, NaN, short series, windows longer than the series.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from numpy.lib.stride_tricks import sliding_window_view

from stabdiag import _stats as st
from stabdiag.judge.detectors import spikes
from stabdiag.judge.detectors._base import Curve

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # Inf - Inf and all-NaN windows


# ---- the references (the code before issue 14) ----

def ref_rolling_median(x, window):
    window = max(1, int(window)) | 1
    if window == 1 or len(x) < window:
        return x.astype(np.float64, copy=True) if window == 1 or len(x) == 0 else \
            np.full(len(x), float(np.median(x)))
    half = window // 2
    padded = np.concatenate([np.full(half, np.nan), x, np.full(half, np.nan)])
    return np.nanmedian(sliding_window_view(padded, window), axis=1)


def ref_trailing_median_mad(x, window):
    med = np.full(len(x), np.nan)
    sd = np.full(len(x), np.nan)
    if len(x) <= window:
        return med, sd
    views = sliding_window_view(x[:-1], window)
    m = np.median(views, axis=1)
    med[window:] = m
    sd[window:] = st.MAD_TO_SD * np.median(np.abs(views - m[:, None]), axis=1)
    return med, sd


def ref_recent_median_mad(x, window):
    """spike_vs_recent's recent level before issue 14: the trailing window, or all points so far."""
    med, sd = ref_trailing_median_mad(x, window)
    for i in range(1, min(window, len(x))):
        med[i] = np.median(x[:i])
        sd[i] = st.robust_sd(x[:i])
    return med, sd


def ref_ema_before(x, span):
    lfilter = pytest.importorskip("scipy.signal").lfilter        # a dev dependency since issue 14

    out = np.full(len(x), np.nan)
    if len(x) < 2:
        return out
    alpha = 2.0 / (span + 1.0)
    ema, _ = lfilter([alpha], [1.0, alpha - 1.0], x[1:], zi=[(1.0 - alpha) * x[0]])
    out[1] = x[0]
    out[2:] = ema[:-1]
    return out


def ref_cusum_change(values, baseline_points, *, drift_sd=1.0, threshold_sd=10.0):
    if len(values) <= baseline_points + 2 or baseline_points < 3:
        return None
    base = values[:baseline_points]
    sd = max(st.robust_sd(base), st.noise_sd(values)) or 1e-12
    z = np.clip((values - float(np.median(base))) / sd, -3.0, 3.0)
    high = low = 0.0
    start_high = start_low = baseline_points
    for i in range(baseline_points, len(z)):
        high = max(0.0, high + z[i] - drift_sd)
        low = max(0.0, low - z[i] - drift_sd)
        if high == 0.0:
            start_high = i + 1
        if low == 0.0:
            start_low = i + 1
        if high > threshold_sd:
            return min(start_high, i)
        if low > threshold_sd:
            return min(start_low, i)
    return None


def ref_persistent_nonfinite_index(values, recover_points=3):
    bad = ~np.isfinite(values)
    for i in np.flatnonzero(bad):
        after = bad[i + 1:i + 1 + recover_points]
        if len(after) < recover_points or after.any():
            return int(i)
    return None


# ---- inputs ----

KINDS = ("normal", "ties", "inf", "nan", "constant", "huge")


def series(rng, n, kind):
    if kind == "normal":
        return rng.normal(size=n)
    if kind == "ties":
        return rng.integers(0, 4, n).astype(float)
    if kind == "inf":
        return np.where(rng.random(n) < 0.2, rng.choice([np.inf, -np.inf], n), rng.normal(size=n))
    if kind == "nan":
        return np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n))
    if kind == "constant":
        return np.full(n, 0.25)
    return rng.normal(size=n) * 1e300


def same(a, b):
    """Equal to the bit where finite, NaN where NaN (a median of -0.0 and 0.0 may be either)."""
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.fixture(params=["as shipped", "grouped cores"])
def median_path(request, monkeypatch):
    """Run a test once per algorithm: small inputs take the direct path as shipped; shrinking the block
    size sends odd widths through the grouped cores."""
    if request.param == "grouped cores":
        monkeypatch.setattr(st, "_BLOCK_CELLS", 16)
    return request.param


# ---- running medians ----

@pytest.mark.parametrize("kind", KINDS)
def test_rolling_median_matches_nanmedian_reference(kind, median_path):
    rng = np.random.default_rng(hash(kind) % 2**32)
    for _ in range(120):
        n, window = int(rng.integers(0, 90)), int(rng.integers(0, 40))
        x = series(rng, n, kind)
        assert same(st.rolling_median(x, window), ref_rolling_median(x, window)), (kind, n, window, x)


@pytest.mark.parametrize("window", [1, 2, 3, 5, 7, 9, 21, 50, 51])
def test_rolling_median_edges_and_short_series(window, median_path):
    rng = np.random.default_rng(window)
    for n in (0, 1, 2, window - 1, window, window + 1, 2 * window + 3, 200):
        if n < 0:
            continue
        x = rng.normal(size=n)
        assert same(st.rolling_median(x, window), ref_rolling_median(x, window)), (n, window)
    ints = np.arange(12)                            # a window of 1 returns float64, as before
    assert st.rolling_median(ints, 1).dtype == np.float64


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 21, 22, 33])
def test_sliding_median_is_np_median_of_every_window(width, median_path):
    rng = np.random.default_rng(width)
    for kind in ("normal", "ties", "inf", "constant", "huge"):
        for n in (width, width + 1, width + 5, 3 * width + 2, 400):
            x = series(rng, n, kind)
            expected = np.median(sliding_window_view(x, width), axis=1)
            assert same(st.sliding_median(x, width), expected), (kind, n, width)


def test_sliding_median_large_input_uses_each_path_without_a_full_view():
    rng = np.random.default_rng(3)
    x = rng.normal(size=30_000)
    for width in (5, 21, 64, 129, 300, 401, 1001):  # network, grouped cores 4 / 8 / 16 at a time, rows (even)
        expected = np.median(sliding_window_view(x, width), axis=1)
        assert same(st.sliding_median(x, width), expected), width
    for kind in ("ties", "inf", "huge"):
        y = series(rng, 5_003, kind)
        for width in (129, 401, 1001):
            assert same(st.sliding_median(y, width), np.median(sliding_window_view(y, width), axis=1)), (kind, width)


@settings(max_examples=200, deadline=None)
@given(hst.lists(hst.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0, math.inf, -math.inf]), max_size=60),
       hst.integers(1, 25))
def test_rolling_median_property_on_heavy_ties(values, window):
    x = np.array(values, dtype=np.float64)
    assert same(st.rolling_median(x, window), ref_rolling_median(x, window))


def test_expanding_median_is_np_median_of_every_prefix():
    rng = np.random.default_rng(4)
    for kind in ("normal", "ties", "inf", "constant"):
        x = series(rng, 70, kind)
        expected = np.array([np.median(x[:i + 1]) for i in range(len(x))])
        assert same(st.expanding_median(x), expected), kind
    assert len(st.expanding_median(np.empty(0))) == 0


@settings(max_examples=300, deadline=None)
@given(hst.lists(hst.one_of(hst.sampled_from([0.0, 1.0, 1.0, 2.5, math.inf, -math.inf, math.nan]),
                            hst.floats(-1e6, 1e6)), max_size=40))
def test_robust_and_noise_sd_are_the_two_median_formula_and_leave_the_input(values):
    x = np.array(values, dtype=np.float64)
    before = x.copy()

    def reference(v):
        return float(st.MAD_TO_SD * np.median(np.abs(v - np.median(v)))) if len(v) else 0.0

    assert same(np.array([st.robust_sd(x)]), np.array([reference(x)]))
    if len(x) >= 3:
        assert same(np.array([st.noise_sd(x)]), np.array([reference(np.diff(x)) / np.sqrt(2.0)]))
    assert same(x, before)


# ---- spike_vs_recent's recent level ----

@pytest.mark.parametrize("window", [10, 11, 16, 23, 64, 100, 257])
def test_recent_median_floor_is_under_the_median_and_exact_on_the_head(window):
    rng = np.random.default_rng(window)
    for kind in ("normal", "ties", "inf", "constant"):
        for n in (1, window - 1, window, window + 1, 5 * window + 7):
            x = series(rng, n, kind)
            floor = st.recent_median_floor(x, window)
            med, _ = ref_recent_median_mad(x, window)
            head = min(window, n)
            assert same(floor[:head], med[:head]), (kind, n)
            tail = np.isfinite(med[head:])
            assert np.all(floor[head:][tail] <= med[head:][tail]), (kind, n)


def test_recent_median_floor_is_close_on_noise():
    """A bound far under the median would send every point to the exact path: on unit noise it stays
    within a small fraction of spike_vs_recent's jump (15 noise sds by default)."""
    x = np.random.default_rng(5).normal(size=20_000)
    floor = st.recent_median_floor(x, 100)
    med, _ = ref_trailing_median_mad(x, 100)
    gap = med[100:] - floor[100:]
    assert np.quantile(gap, 0.99) < 1.5 and gap.max() < 2.5


@pytest.mark.parametrize("window", [10, 37, 100])
def test_recent_median_mad_matches_the_trailing_reference(window):
    rng = np.random.default_rng(window)
    for kind in ("normal", "ties", "inf", "constant", "huge"):
        x = series(rng, 4 * window + 3, kind)
        at = np.concatenate([[0, 1, 5], rng.integers(0, len(x), 40)]).astype(int)
        med, sd = st.recent_median_mad(x, window, at)
        ref_med, ref_sd = ref_recent_median_mad(x, window)
        assert same(med, ref_med[at]) and same(sd, ref_sd[at]), kind


def _noisy_losses(rng, count):
    for trial in range(count):
        n = int(rng.integers(5, 1500))
        kind = trial % 5
        x = (rng.normal(1.0, 0.05, n) if kind == 0 else rng.standard_t(3, n) * 0.01 + 0.002 if kind == 1
             else np.round(rng.normal(0, 0.0002, n), 4) if kind == 2 else np.exp(rng.normal(0, 0.5, n))
             if kind == 3 else np.full(n, 0.5))
        for _ in range(int(rng.integers(0, 4))):
            i = int(rng.integers(0, n))
            x[i:i + int(rng.integers(1, 8))] *= float(rng.choice([3, 12, 50, -20]))
        if rng.random() < 0.2:
            x[rng.random(n) < 0.05] = np.nan
        yield x, np.arange(n) * int(rng.choice([1, 1, 2, 10]))


def test_spike_vs_recent_gives_the_verdicts_of_the_full_trailing_computation(monkeypatch):
    """The cheap lower bound of each point's recent median only spares the exact median where no jump that
    large is possible: with every point sent to the exact path (the bound at -inf), every verdict is the same."""
    rng = np.random.default_rng(6)
    fired, cases = 0, []
    for x, steps in _noisy_losses(rng, 200):
        params = dict(window_steps=float(rng.choice([20, 100, 300])), min_ratio=10.0,
                      run_alpha=float(rng.choice([0.001, 0.01, 0.1])), huge_ratio=100.0, min_tail_points=30,
                      isolated_max_count=1, isolated_window_steps=1000, recover_steps=5, recover_sd=5.0)
        reward = Curve("reward", "r", steps, np.ones(len(steps))) if rng.random() < 0.5 else None
        loss = Curve("loss", "k", steps, x)
        result = spikes.spike_vs_recent(loss, reward, **params)
        cases.append((loss, reward, params, repr(result)))
        fired += isinstance(result, spikes.Evidence)
    monkeypatch.setattr(spikes.st, "recent_median_floor", lambda x, window: np.full(len(x), -np.inf))
    for loss, reward, params, expected in cases:
        assert repr(spikes.spike_vs_recent(loss, reward, **params)) == expected
    assert fired > 25                                   # the comparison covers runs that spike


# ---- EMA, CUSUM, the non-finite scan ----

@pytest.mark.parametrize("span", [1, 1.5, 2, 3, 20, 100, 1000, 1e4, 1e6])
def test_ema_before_matches_lfilter(span):
    rng = np.random.default_rng(int(span * 10))
    for x in (rng.lognormal(0, 2, 3000), rng.normal(5, 1, 2500), rng.lognormal(0, 1, 900) * 1e300,
              rng.normal(0, 1, 50), np.array([2.0]), np.array([1.0, 3.0]), np.empty(0)):
        got, expected = st.ema_before(x, span), ref_ema_before(x, span)
        assert np.array_equal(np.isnan(got), np.isnan(expected))
        ok = ~np.isnan(expected)
        np.testing.assert_allclose(got[ok], expected[ok], rtol=1e-12, atol=0)


def test_ema_before_non_finite_points_behave_as_in_lfilter():
    rng = np.random.default_rng(8)
    for _ in range(2000):
        n = int(rng.integers(0, 15))
        x = rng.normal(size=n)
        bad = rng.random(n) < 0.25
        x[bad] = rng.choice([np.nan, np.inf, -np.inf], bad.sum())
        span = float(rng.choice([1, 2, 5]))
        got, expected = st.ema_before(x, span), ref_ema_before(x, span)
        assert np.array_equal(np.isnan(got), np.isnan(expected)), x
        ok = np.isfinite(expected)
        assert np.array_equal(got[~ok & ~np.isnan(got)], expected[~ok & ~np.isnan(expected)]), x
        np.testing.assert_allclose(got[ok], expected[ok], rtol=1e-12)


def test_ema_before_of_a_million_points_stays_close():
    x = np.random.default_rng(9).lognormal(0, 1, 1_000_000)
    np.testing.assert_allclose(st.ema_before(x, 20), ref_ema_before(x, 20), rtol=1e-12)


def test_cusum_change_gives_the_loops_change_step():
    rng = np.random.default_rng(10)
    alarms = 0
    for trial in range(600):
        n = int(rng.integers(5, 500))
        x = rng.normal(size=n)
        kind = trial % 5
        if kind == 1:
            x[int(rng.integers(0, n)):] += rng.normal(0, 3)
        elif kind == 2:
            x = np.round(x * 2) / 2
            x[n // 2:] += 1
        elif kind == 3:
            x[rng.random(n) < 0.1] = np.nan
        elif kind == 4:
            x[n // 3:] = np.inf if trial % 2 else -np.inf
        baseline = int(rng.integers(0, n))
        for drift, threshold in ((1.0, 10.0), (0.5, 2.0), (0.0, 0.5), (1.0, 0.0)):
            expected = ref_cusum_change(x, baseline, drift_sd=drift, threshold_sd=threshold)
            assert st.cusum_change(x, baseline, drift_sd=drift, threshold_sd=threshold) == expected, (trial, drift)
            alarms += expected is not None
    assert alarms > 400


def test_cusum_change_on_a_long_shifted_run():
    x = np.random.default_rng(11).normal(size=200_000)
    x[150_000:] += 1.0
    assert st.cusum_change(x, 1000) == ref_cusum_change(x, 1000) is not None


def test_persistent_nonfinite_index_matches_the_loop():
    rng = np.random.default_rng(12)
    for _ in range(3000):
        n = int(rng.integers(0, 30))
        x = rng.normal(size=n)
        x[rng.random(n) < rng.random()] = np.nan
        for k in (0, 1, 3, 5):
            assert st.persistent_nonfinite_index(x, k) == ref_persistent_nonfinite_index(x, k)


# ---- median, quantile, distinct: numpy's numbers without numpy.ma (a cold start imported it for them) ----

_FLOATS = hst.lists(hst.one_of(hst.floats(-1e6, 1e6), hst.sampled_from([0.0, 1.0, 0.5])), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(values=_FLOATS, with_nan=hst.booleans())
def test_median_is_np_median(values, with_nan):
    x = np.array(values + ([math.nan] if with_nan else []))
    expected = float(np.median(x))
    assert st.median(x) == expected or (math.isnan(expected) and math.isnan(st.median(x)))
    assert math.isnan(st.median(np.empty(0)))


@settings(max_examples=200, deadline=None)
@given(values=_FLOATS, q=hst.lists(hst.floats(0, 1), min_size=1, max_size=4))
def test_quantile_is_np_quantile(values, q):
    x = np.array(values)
    np.testing.assert_allclose(st.quantile(x, q), np.quantile(x, q), rtol=1e-12, atol=1e-9)
    assert st.quantile(x, q[0]) == pytest.approx(float(np.quantile(x, q[0])), rel=1e-12, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(values=hst.lists(hst.floats(-1e3, 1e3), max_size=60))
def test_distinct_is_np_unique(values):
    np.testing.assert_array_equal(st.distinct(np.array(values)), np.unique(np.array(values)))


@pytest.mark.parametrize("width", [1, 2, 7, 8])
def test_median_of_rows_is_np_median_by_row(width):
    rows = np.random.default_rng(width).normal(size=(40, width)).round(1)    # ties too
    rows[3, 0] = math.nan
    np.testing.assert_array_equal(st.median_of_rows(rows), np.median(rows, axis=1))


def test_a_check_of_a_small_table_never_imports_numpy_ma(tmp_path):
    """np.median, np.quantile and np.unique import numpy.ma on first use (~20 ms of a 0.5 s cold check);
    the detectors use the partition-based ones above."""
    import subprocess
    import sys
    rng = np.random.default_rng(0)
    table = tmp_path / "small.csv"
    rows = ["step,reward,kl,entropy,loss,grad_norm,eval/math500_accuracy"]
    rows += [f"{i},{0.3 + 0.001 * i + rng.normal(0, 0.02):.4f},{0.001 * i:.5f},{1.2 - 0.001 * i:.4f},"
             f"{rng.normal(0, 0.05):.4f},{abs(rng.normal(1, 0.2)):.4f},{'0.42' if i % 20 == 0 else ''}"
             for i in range(1, 201)]
    table.write_text("\n".join(rows) + "\n")
    code = ("import sys; from stabdiag.cli import main; sys.argv = ['stabdiag', 'check', sys.argv[1], '--exit-zero']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('numpy.ma' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, str(table)], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr


@pytest.mark.parametrize("window", [1, 3, 8, 101])
def test_rolling_median_at_is_rolling_median_at_those_points(window):
    rng = np.random.default_rng(window)
    for n in (5, 60, 2_000):
        x = rng.normal(size=n).round(1)
        if n > 60:
            x[[3, n // 2]] = math.nan
        at = np.unique(rng.integers(0, n, 40))
        np.testing.assert_array_equal(st.rolling_median_at(x, window, at), st.rolling_median(x, window)[at])


def test_the_kl_entropy_grid_of_a_long_log_is_the_full_running_median_interpolated():
    """policy._on_grid reads a log past 20,000 points at the points around its 201 grid steps only."""
    from stabdiag.judge.detectors import policy
    from stabdiag.judge.detectors._base import _smooth_window
    rng = np.random.default_rng(0)
    steps = np.arange(50_000) * 3 + 7
    curve = Curve("kl", "kl", steps, rng.normal(size=len(steps)).cumsum())
    grid = np.linspace(steps[0] + 1.0, steps[-1], 201)
    for window in (30, 600, 6_000):
        points = max(_smooth_window(len(steps)), min(policy.MAX_SMOOTH_POINTS, curve.points_for(window / 2, 7)))
        full = np.interp(grid, steps, st.rolling_median(curve.values, points))
        np.testing.assert_array_equal(policy._on_grid(curve, grid, window), full)
