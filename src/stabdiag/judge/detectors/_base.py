"""The types every detector shares (Curve in, Evidence out, declared Params) and small helpers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ... import _stats as st

MIN_CLEAN_POINTS = 10     # a finding may rest on fewer points; "judged and clean" needs at least this many
_NO_STEPS = np.empty(0, np.int64)
_NO_VALUES = np.empty(0, np.float64)


@dataclass(frozen=True, slots=True)
class Curve:
    """One resolved signal: its canonical name, the raw key it came from, and its points.  The writes a
    restart replaced (a resumed run's rolled-back segment) ride along as `superseded_*`."""

    signal: str
    key: str
    steps: np.ndarray
    values: np.ndarray
    superseded_steps: np.ndarray = field(default_factory=lambda: _NO_STEPS)
    superseded_values: np.ndarray = field(default_factory=lambda: _NO_VALUES)

    def finite(self) -> "Curve":
        if _all_finite(self.values):
            return self
        ok = np.isfinite(self.values)
        return Curve(self.signal, self.key, self.steps[ok], self.values[ok], self.superseded_steps,
                     self.superseded_values)

    @property
    def span(self) -> int:
        return int(self.steps[-1] - self.steps[0]) if len(self.steps) else 0

    @property
    def cadence(self) -> float:
        """Median steps between logged points (1 when every step is logged)."""
        return _cadence(self.steps)

    def points_for(self, steps: float, minimum: int = 1) -> int:
        """How many logged points cover `steps` training steps at this curve's cadence (at least
        `minimum`): windows are set in steps, so logging every k steps does not stretch them k-fold."""
        return max(int(minimum), int(round(steps / max(self.cadence, 1e-12))))


@st.per_array            # the rules of one judgement ask of the same curves again and again
def _all_finite(values: np.ndarray) -> bool:
    return bool(np.isfinite(values).all())


@st.per_array
def _cadence(steps: np.ndarray) -> float:
    if len(steps) < 2:
        return 1.0
    gaps = np.diff(steps)
    # evenly logged (the usual case): the median is that gap, without a partition of every gap
    return float(gaps[0]) if (gaps == gaps[0]).all() else float(st.median(gaps))


TOO_NOISY = "too noisy to tell"


@dataclass(frozen=True, slots=True)
class NotJudged:
    """A detector had its signals but too little data to judge: why, in words a user can act on.
    `undecided`: the data shows a change of the size the rule looks for, but cannot confirm it or rule
    it out (`too_noisy`); a run that passes beside such a rule is reported with it, never as a bare pass."""

    reason: str
    undecided: bool = False

    @classmethod
    def too_noisy(cls, detail: str) -> NotJudged:
        return cls(f"{TOO_NOISY}: {detail}", undecided=True)


@dataclass(frozen=True, slots=True)
class Quiet:
    """A detector judged the run clean but has something to say about why: a pattern that looks like its
    finding and is read as healthy (entropy falling while an independent eval improves: sharpening)."""

    note: str


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a detector saw: the step range, the numbers behind the message, and two qualifiers.

    severity: a detector may lower a rule's severity (e.g. only one of two joint signals moved).
    explained_by: the signal that explains the pattern away (e.g. all-correct groups explain an
    entropy drop), so the finding is reported as a consequence, not a cause.
    """

    start_step: int
    end_step: int
    values: dict = field(default_factory=dict)
    severity: str | None = None
    explained_by: str | None = None


ROLES = ("decides", "bounds", "words")


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter a detector takes, declared once: its name, the range a value must lie in (one that
    keeps the rule able to fire), what it means with its unit, and its role: it `decides` a verdict (how
    sure, how large, how long), only `bounds` the work (a window cap, a limit on the points read), or only
    `words` a finding (which of its readings the message gives).  No
    value: each rule's `[rule.params]` gives every one (judge/rules.py refuses a rule that leaves one out),
    so a value is written in one place and `rules explain` prints the one in force.  `off`: the value that
    switches its check off (a catastrophic level of inf: no single value fails alone); a rule that ships it
    there takes no decision from it, and `rules explain` says so."""

    name: str
    low: float
    high: float
    meaning: str
    role: str
    off: float | None = None

    def is_off(self, value: float) -> bool:
        return self.off is not None and value == self.off

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"parameter {self.name}: role must be one of {', '.join(ROLES)}; got {self.role!r}")


@dataclass(frozen=True, slots=True)
class DetectorSpec:
    """A detector as rules see it: its function, the parameters it declares, and how it reads its curves.
    What it checks is the function's docstring (its first paragraph), so the words `rules explain`
    prints live beside the code they describe."""

    name: str
    fn: Callable[..., Evidence | None]
    params: tuple[Param, ...]
    sees_nonfinite: bool = False      # gets the whole series, not the part before the first NaN
    trend: bool = False               # its finding is a trend: the onset comes from the change-point model
    evidence: tuple[str, ...] = ()    # the Evidence fields it returns (a rule's message may quote only these)

    def inputs(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The curves it takes, by argument name: (required, optional), or None for a detector that takes
        any (**curves).  Read from the function's signature (the arguments before its keyword-only
        parameters), so the wiring a rule file declares is checked against the detector itself."""
        import inspect
        required, optional = [], []
        for name, p in inspect.signature(self.fn).parameters.items():
            if p.kind is p.VAR_KEYWORD:
                return None
            if p.kind is p.KEYWORD_ONLY:
                break
            (required if p.default is p.empty else optional).append(name)
        return tuple(required), tuple(optional)

    def summary(self) -> str:
        """What the detector checks: the first paragraph of its function's docstring, on one line (empty
        where Python runs with -OO, which strips docstrings)."""
        import inspect
        doc = inspect.cleandoc(self.fn.__doc__ or "")
        return " ".join(doc.split("\n\n", 1)[0].split())


def _smooth_window(n: int) -> int:
    return max(3, min(21, n // 20))


def _level_change(curve: Curve, start_step: float, end_step: float) -> tuple[float, int]:
    """Theil–Sen change of a curve over [start_step, end_step], and the number of points used."""
    inside = (curve.steps >= start_step) & (curve.steps <= end_step)
    steps, values = curve.steps[inside], curve.values[inside]
    if len(steps) < 2:
        return 0.0, len(steps)
    return st.theil_sen_slope(steps, values) * float(end_step - start_step), len(steps)


def _ols_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its standard error (inf when it cannot be estimated)."""
    n = len(x)
    dx = x - x.mean()
    sxx = float(np.sum(dx * dx))
    if n < 3 or sxx <= 0:
        return 0.0, math.inf
    slope = float(np.sum(dx * (y - y.mean())) / sxx)
    resid = y - y.mean() - slope * dx
    sigma = math.sqrt(float(np.sum(resid * resid)) / (n - 2))
    return slope, sigma / math.sqrt(sxx)


def _eval_summary(changes: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:+.3f}" for k, v in changes.items())
