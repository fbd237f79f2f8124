"""Run and Series: the raw metric history of one training run, keyed by the run's own metric names.

Every loader returns a Run; nothing downstream knows which file format it came from.  A step that was
written twice (a resumed run) keeps its last write, and the earlier write is kept on the side as
evidence instead of being thrown away.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

# A step is an integer of magnitude at most 2**53: float64 (the detectors' arithmetic) and JSON readers
# hold it exactly, and the difference of two steps never overflows int64.  No training run counts 9e15
# steps; a larger "step" is a damaged or foreign value, and read as one would wrap round or go wrong.
STEP_MAX = 1 << 53
STEP_MIN = -STEP_MAX
STEP_RANGE = "an integer in the step range (-2**53 to 2**53)"


class StepError(ValueError):
    """A step that is not an integer in the step range.  Readers check steps where they know the line
    and say so there; this is the last guard, so that a step is never wrapped round or truncated."""


def exact_step(raw) -> int | None:
    """`raw` (an int, an integral float, or their text) as a step; None when it is not an integer in the
    step range (inf, 1.5, 2**63, a 400-digit number, a word).  Integer text is read exactly, not via
    float64."""
    if isinstance(raw, (bool, np.bool_)):
        return None
    if isinstance(raw, (int, np.integer)):
        value = int(raw)
    elif isinstance(raw, (float, np.floating)):
        number = float(raw)
        if not math.isfinite(number) or number != math.floor(number):
            return None
        value = int(number)
    elif isinstance(raw, str):
        text = raw.strip()
        try:
            value = int(text)
        except ValueError:                       # "1e3", "2.0", or more than Python's 4300 digits
            try:
                number = float(text)
            except ValueError:
                return None
            return exact_step(number)
    else:
        return None
    return value if STEP_MIN <= value <= STEP_MAX else None


def as_float(raw) -> tuple[float, bool]:
    """`raw` (a number) as float64, and whether it was too large for float64 (then it is ±Inf): a
    400-digit integer in JSON is an overflowed value, never an exception."""
    try:
        return float(raw), False
    except OverflowError:
        return (math.inf if raw > 0 else -math.inf), True


def in_step_range(steps: np.ndarray) -> np.ndarray:
    """Which of some int64 steps lie in the step range."""
    return (steps >= STEP_MIN) & (steps <= STEP_MAX)


def off_step_range(arr: np.ndarray) -> np.ndarray:
    """Which numbers of an integer or float array are not an integer in the step range (NaN is not)."""
    if arr.dtype.kind == "u":
        return arr > np.uint64(STEP_MAX)
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return ~np.isfinite(arr) | (np.floor(arr) != arr) | (np.abs(arr) > float(STEP_MAX))
    return ~in_step_range(arr)


def as_steps(steps) -> np.ndarray:
    """Steps as int64; StepError for one that is not an integer in the step range (never wrapped)."""
    try:
        arr = np.asarray(steps)
    except OverflowError:
        arr = np.asarray(steps, dtype=object)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    if arr.dtype.kind in "iuf":
        bad = off_step_range(arr)
    else:
        bad = np.array([exact_step(v) is None for v in arr.ravel()], dtype=bool).reshape(arr.shape)
        if not bad.any():
            return np.array([int(v) for v in arr.ravel()], dtype=np.int64).reshape(arr.shape)
    if bad.any():
        raise StepError(f"step {shown_number(arr.ravel()[np.flatnonzero(bad.ravel())[0]])} is not {STEP_RANGE}")
    return arr.astype(np.int64, copy=False)


def steps_go_back(steps: np.ndarray) -> bool:
    """In write order, a step comes after a larger one (a restart went back)."""
    return len(steps) > 1 and bool(np.any(steps[1:] < np.maximum.accumulate(steps)[:-1]))


def shown_number(value) -> str:
    """A number as an error message quotes it: Python's repr, a long one cut in the middle."""
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value) if isinstance(value, (int, float, str)) else str(value)
    if isinstance(value, int) and len(text) > 24:
        return f"{text[:8]}...{text[-4:]} ({len(text)} digits)"
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True, slots=True)
class Series:
    """One metric's points, sorted by step with one value per step (the last write wins)."""

    key: str
    steps: np.ndarray                   # int64, strictly increasing
    values: np.ndarray                  # float64; NaN and ±Inf are kept: they are findings
    wall_time: np.ndarray | None = None  # float64 seconds since the epoch, where the format has it
    superseded_steps: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    superseded_values: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    source: str = ""                    # the file it was read from (set by assembly), for provenance
    stepped_back: bool = False          # in write order, a step came after a larger one (a restart)

    @classmethod
    def from_points(cls, key: str, steps, values, wall_time=None, *, write_order: bool = True,
                    stepped_back: bool = False) -> "Series":
        """Build a Series from points in write order; for a repeated step the last write wins.
        `write_order=False` is for points gathered from parts already sorted (their own restarts are
        passed as `stepped_back`)."""
        steps = as_steps(steps)
        values = np.asarray(values, dtype=np.float64)
        walls = None if wall_time is None else np.asarray(wall_time, dtype=np.float64)
        if len(steps) < 2 or bool(np.all(steps[1:] > steps[:-1])):   # in order, each step once: kept as given
            return cls(key=key, steps=steps, values=values, wall_time=walls, stepped_back=stepped_back)
        order = np.argsort(steps, kind="stable")
        s_steps = steps[order]
        # the last of each run of equal steps is the latest write of that step
        is_last = np.ones(len(s_steps), dtype=bool)
        if len(s_steps) > 1:
            is_last[:-1] = s_steps[1:] != s_steps[:-1]
        keep = order[is_last]
        dropped = order[~is_last]
        if write_order:
            stepped_back = stepped_back or steps_go_back(steps)
        return cls(
            key=key,
            steps=steps[keep],
            values=values[keep],
            wall_time=None if walls is None else walls[keep],
            superseded_steps=steps[dropped],
            superseded_values=values[dropped],
            stepped_back=stepped_back,
        )

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def nonfinite_count(self) -> int:
        return int(np.count_nonzero(~np.isfinite(self.values)))

    def rewritten_steps(self) -> np.ndarray:
        """Steps whose earlier write holds another value than the one kept (a restart that diverged).

        Writing the same value at the same step again is bookkeeping (an eval record repeating the
        epoch, two ranks printing one line, a checkpoint's copy of the history), not a rewrite."""
        if not len(self.superseded_steps):
            return np.empty(0, np.int64)
        kept = self.values[np.searchsorted(self.steps, self.superseded_steps)]
        old = self.superseded_values
        same = np.isclose(old, kept, rtol=1e-6, atol=0.0) | (np.isnan(old) & np.isnan(kept)) | (old == kept)
        return np.unique(self.superseded_steps[~same])


# keys a trainer writes again at the same step as part of its bookkeeping (counters, timings such as
# TRL's "profiling/Time taken: ..." logged once per call), never a sign of a restart
_BOOKKEEPING = re.compile(r"(^|/)(epoch|global_step|step|_step|iter|it|iteration|update|global_update|num_updates|"
                          r"_runtime|_timestamp|total_flos|"
                          r"[a-z_]*runtime|[a-z_]*per_second|step_time)$|"
                          r"^(profiling|timing|timing_s|timings|perf|throughput)/|time taken", re.IGNORECASE)


def is_bookkeeping(key: str) -> bool:
    return _BOOKKEEPING.search(key) is not None


@dataclass(frozen=True, slots=True)
class Run:
    """The metric history of one run: series by raw key, where it came from, and load notes.

    `warnings` are problems with the input that the user should see even in a clean report (a file of
    the run that could not be read); they are also in `notes`."""

    name: str
    series: dict[str, Series]
    sources: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    samples: object | None = field(default=None, compare=False)   # read.samples.SampleSource, read lazily

    @property
    def resumed(self) -> bool:
        """True when a metric's steps went backwards or a step was written again with another value, or
        the run was started again in its output dir (a second TensorBoard folder or W&B run: assembly
        counts them in meta["restarts"]); bookkeeping keys re-logged at the same step, and copies of one
        history (a checkpoint's trainer_state.json), are not a resume."""
        return self.duplicate_steps > 0 or bool(self.meta.get("restarts"))

    @property
    def duplicate_steps(self) -> int:
        """Number of distinct steps written again by a restart, over all non-bookkeeping series."""
        steps = [s.superseded_steps if s.stepped_back else s.rewritten_steps()
                 for k, s in self.series.items() if not is_bookkeeping(k)]
        steps = [a for a in steps if len(a)]
        return int(len(np.unique(np.concatenate(steps)))) if steps else 0

    def keys(self) -> list[str]:
        return list(self.series)

    def to_frame(self):
        """The run as a wide pandas DataFrame: one row per step (the index, `step`), one column per
        metric key, NaN where the key was not logged at that step."""
        import pandas as pd

        columns = {key: pd.Series(s.values, index=pd.Index(s.steps, name="step")) for key, s in self.series.items()}
        frame = pd.DataFrame(columns) if columns else pd.DataFrame(index=pd.Index([], name="step", dtype="int64"))
        frame.index.name = "step"
        return frame.sort_index()

    def with_series(self, extra: dict[str, Series], *, note: str | None = None) -> "Run":
        """A copy with more series (same key: the new one replaces the old)."""
        merged = dict(self.series)
        merged.update(extra)
        notes = self.notes + ((note,) if note else ())
        return Run(self.name, merged, self.sources, dict(self.meta), notes, self.warnings, self.samples)


def series_from_long(keys, steps, values, wall_time=None) -> dict[str, Series]:
    """Group long-format points (key, step, value) into Series, keeping write order per key."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(str(k), len(index)) for k in keys), np.int64)
    return series_from_codes(list(index), codes, steps, values, wall_time)


def series_from_codes(names: list[str], codes, steps, values, wall_time=None) -> dict[str, Series]:
    """Long-format points whose keys are codes into `names` (-1: none) grouped into Series, keeping write
    order per key; the Series come sorted by key."""
    codes = np.asarray(codes, dtype=np.int64)
    steps = as_steps(steps)
    values = np.asarray(values, dtype=np.float64)
    walls = None if wall_time is None else np.asarray(wall_time, dtype=np.float64)
    if len(codes) == 0:
        return {}
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    out: dict[str, Series] = {}
    for code in sorted(range(len(names)), key=names.__getitem__):
        idx = order[bounds[code]:bounds[code + 1]]
        if len(idx):
            out[names[code]] = Series.from_points(names[code], steps[idx], values[idx],
                                                  None if walls is None else walls[idx])
    return out


def merge_runs(name: str, runs: list[Run]) -> Run:
    """Merge runs read from several files of one run; for a key in several, later files win a step."""
    if len(runs) == 1:
        r = runs[0]
        return Run(name, r.series, r.sources, r.meta, r.notes, r.warnings)
    by_key: dict[str, list[Series]] = {}
    for r in runs:
        for key, s in r.series.items():
            by_key.setdefault(key, []).append(s)
    series: dict[str, Series] = {}
    for key, parts in by_key.items():
        if len(parts) == 1:
            series[key] = parts[0]
            continue
        steps = np.concatenate([np.concatenate([p.superseded_steps, p.steps]) for p in parts])
        values = np.concatenate([np.concatenate([p.superseded_values, p.values]) for p in parts])
        series[key] = Series.from_points(key, steps, values, write_order=False,
                                         stepped_back=any(p.stepped_back for p in parts))
    meta: dict = {}
    notes: list[str] = []
    warnings: list[str] = []
    sources: list[str] = []
    for r in runs:
        meta.update(r.meta)
        notes.extend(r.notes)
        warnings.extend(r.warnings)
        sources.extend(r.sources)
    return Run(name, series, tuple(sources), meta, tuple(notes), tuple(warnings))


def run_name_for(path: str | os.PathLike[str]) -> str:
    """A run's display name: the directory or file name without log extensions."""
    base = os.path.basename(os.path.normpath(str(path)))
    for ext in (".gz", ".jsonl", ".json", ".csv", ".tsv", ".parquet", ".log", ".txt"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base or str(path)
