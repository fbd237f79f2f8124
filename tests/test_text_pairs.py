"""text/_pairs: reading rows by shape (one regex per key sequence) gives exactly what reading them
pair by pair gives, whatever the mix of shapes, odd rows, NaN and non-numbers."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stabdiag.read.formats.text._pairs import lines_text, series_by_shape, series_of_rows

HEAD = r"step:(\d{1,18})[ \t]+-[ \t]+"


def _same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].steps.tolist() == b[key].steps.tolist(), key
        assert np.array_equal(a[key].values, b[key].values, equal_nan=True), key
        assert a[key].stepped_back == b[key].stepped_back, key


def _text(lines):
    return lines_text("\n".join(lines))


def _rows(text):
    import re
    return re.findall(HEAD + r"([^\n]*)", text)


@pytest.mark.parametrize("seed", range(12))
def test_by_shape_equals_pair_by_pair(seed):
    rng = random.Random(seed)
    shapes = [("actor/loss", "critic/score/mean", "timing_s/step"), ("val/test_score/gsm8k",),
              ("actor/loss", "critic/score/mean", "timing_s/step", "val/test_score/gsm8k")]
    values = ["0.5", "-0.000", "nan", "1e-3", "np.float64(0.5)", "", "inf", "12"]
    lines = ["config: {'lr': 1e-6}"]
    for step in range(rng.randint(1, 80)):
        keys = rng.choice(shapes) if rng.random() > 0.1 else ("actor/loss", "odd key")
        lines.append(f"(TaskRunner pid=1) step:{step} - " + " - ".join(f"{k}:{rng.choice(values)}" for k in keys))
        if rng.random() < 0.1:                  # the same step printed again (a second rank, a retry)
            lines.append(lines[-1])
    text = _text(lines)
    rows = _rows(text)
    _same(series_by_shape(text, rows, HEAD, " - "), series_of_rows(rows, " - "))


def test_a_key_in_two_shapes_at_one_step_keeps_the_last_write():
    text = _text(["step:1 - a:1 - b:2", "step:1 - a:5", "step:2 - a:3 - b:4"])
    got = series_by_shape(text, _rows(text), HEAD, " - ")
    assert got["a"].steps.tolist() == [1, 2] and got["a"].values.tolist() == [5.0, 3.0]
    _same(got, series_of_rows(_rows(text), " - "))


def test_a_key_in_two_shapes_at_other_steps_did_not_step_back():
    # verl prints a training row at every step and one with the val scores too at some: the rows' shapes
    # are read one after the other, and their joined steps are not in write order
    lines = [f"step:{s} - actor/loss:0.{s} - timing_s/step:1.0" + (f" - val/score:0.{s}" if s % 3 == 0 else "")
             for s in range(1, 40)]
    text = _text(lines)
    got = series_by_shape(text, _rows(text), HEAD, " - ")
    assert got["actor/loss"].steps.tolist() == list(range(1, 40))
    assert not any(series.stepped_back for series in got.values())
    _same(got, series_of_rows(_rows(text), " - "))


def test_units_join_the_key_only_when_asked():
    rows = [("1", "train_time:70ms step_avg:nanms"), ("2", "train_time:140ms step_avg:70.00ms")]
    assert sorted(series_of_rows(rows, None, keep_unit=True)) == ["step_avg_ms", "train_time_ms"]
    assert sorted(series_of_rows(rows, None)) == ["step_avg", "train_time"]
