"""`key:value` pairs of many console lines read at once, without a Python loop over the pairs.

A console reader finds its record lines with one regex over the whole text (`findall` gives the rows
as (step, body) strings); `series_of_rows` then reads every pair of every body with one more regex
and groups them with numpy.  Python touches each row once (to join the bodies) and each distinct key
once, so a reader built on it keeps up with a bare `for line in file` loop even on a 2 MB verl log
whose lines hold a hundred pairs (bench/text_readers.py measures it).
"""

from __future__ import annotations

import re

import numpy as np

from ...run import Series, series_from_codes
from .._common import number

_ROW = "\x01"      # never in a console line: separates a row's step from its body once they are joined
_STEP_MARK = r"^(\d{1,18})\x01"


def combined(pair: str) -> re.Pattern:
    """The pattern that reads joined rows: a row's step, or one of its pairs.  `pair` has two groups
    (key, value) and may have a third (a unit printed after the value, `ms`, `%`)."""
    return re.compile(f"{_STEP_MARK}|{pair}", re.MULTILINE)


def series_of_rows(rows: list[tuple[str, str]], pattern: re.Pattern, *,
                   keep_unit: bool = False) -> dict[str, Series]:
    """Series of every pair in `rows` ((step text, body) tuples, in write order) read with `pattern`
    (from `combined`).  A value that is no number is left out; NaN and Inf are kept.  With `keep_unit`
    a unit printed after the value joins the key (`train_time` in ms -> `train_time_ms`)."""
    if not rows:
        return {}
    found = pattern.findall("\n".join(map(_ROW.join, rows)))
    if not found:
        return {}
    columns = list(zip(*found))
    marks = np.array(columns[0])
    is_row = marks != ""
    row_of = np.cumsum(is_row) - 1
    row_steps = marks[is_row].astype(np.int64)
    is_pair = ~is_row & (row_of >= 0)
    keys = np.array(columns[1])[is_pair]
    raw = np.array(columns[2])[is_pair]
    if not len(keys):
        return {}
    steps = row_steps[row_of[is_pair]]
    if keep_unit and len(columns) > 3:
        units = np.array(columns[3])[is_pair]
        with_unit = units != ""
        if with_unit.any():
            keys = np.where(with_unit, np.char.add(np.char.add(keys, "_"), units), keys)
    values = _floats(raw)
    missing = np.isnan(values)
    ok = ~missing | _is_nan_text(raw) if missing.any() else np.ones(len(values), bool)
    names, codes = np.unique(keys[ok], return_inverse=True)
    return series_from_codes([str(n) for n in names], codes, steps[ok], values[ok])


def _floats(raw: np.ndarray) -> np.ndarray:
    """The values as float64 (numpy reads `1e-3`, `nan`, `-inf`); a token it refuses is read on its own
    (`1,024`), and one that is no number becomes NaN (told apart from a printed nan by `_is_nan_text`)."""
    try:
        return raw.astype(np.float64)
    except (ValueError, OverflowError):
        out = np.empty(len(raw), np.float64)
        for i, token in enumerate(raw.tolist()):
            value = number(token)
            out[i] = np.nan if value is None else value
        return out


def _is_nan_text(raw: np.ndarray) -> np.ndarray:
    return np.char.lower(np.char.lstrip(raw, "+-")) == "nan"
