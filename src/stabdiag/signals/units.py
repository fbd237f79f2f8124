"""Units, decided once per signal from its name and its values together, and shown to the user.

The detectors are free of units (they compare a curve with its own noise and level), so a unit here
only changes what the report prints and what a 0-1 threshold reads:

- an eval score is read as a percentage (and shown on 0-1) when its values reach past 10, or past 1.5
  with an accuracy-like name (acc, pass, exact, match, solve, correct, rate, pct, percent); an LLM
  judge scored 1-10 keeps its own scale;
- a fraction signal (zero-variance groups, truncated responses, clipped tokens) logged 0-100 is
  rescaled to 0-1.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ..read.run import Series

FRACTIONS = ("zero_std_frac", "truncation_rate", "clip_frac", "clip_frac_low", "clip_frac_high")
_ACCURACY_WORDS = re.compile(r"acc|pass|exact|match|solve|correct|rate|pct|percent|%", re.IGNORECASE)


def percent_eval(name: str, series: Series) -> bool:
    """An eval logged in percent: values 0-100 that cannot be a 0-1 score (or a 1-10 judge score)."""
    finite = series.values[np.isfinite(series.values)]
    if not len(finite) or finite.min() < 0 or finite.max() > 100:
        return False
    top = float(finite.max())
    return top > 10 or (top > 1.5 and _ACCURACY_WORDS.search(name) is not None)


def percent_fraction(series: Series) -> bool:
    """A fraction logged 0-100 (past 1.5: a fraction a little over 1 is rounding, not percent)."""
    finite = series.values[np.isfinite(series.values)]
    return bool(len(finite)) and finite.min() >= 0 and 1.5 < finite.max() <= 100


def rescaled(series: Series, factor: float) -> Series:
    return replace(series, values=series.values * factor, superseded_values=series.superseded_values * factor)


def decide_units(series: dict[str, Series], notes: list[str]) -> dict[str, str]:
    """Rescale percentages to 0-1 in place; returns the unit of every signal whose unit was decided."""
    units: dict[str, str] = {}
    for name in list(series):
        s = series[name]
        if name.startswith("eval:"):
            if percent_eval(name + " " + s.key, s):
                series[name] = rescaled(s, 0.01)
                units[name] = "percent, shown 0-1"
                notes.append(f"{s.key}: read as a percentage and shown on 0-1")
            else:
                units[name] = "as logged"
        elif name in FRACTIONS:
            if percent_fraction(s):
                series[name] = rescaled(s, 0.01)
                units[name] = "percent, shown 0-1"
                notes.append(f"{s.key}: a fraction logged in percent; shown on 0-1")
            else:
                units[name] = "fraction 0-1"
    return units
