"""Helpers shared by the loaders of text logs: sniffing a file's head, reading numbers as frameworks
print them (nan, inf, 1.234E+00), and collecting (step, key, value) points into a Run."""

from __future__ import annotations

import math
import os
import re
import stat

import numpy as np

from ...errors import InputError
from ..run import (
    STEP_RANGE,
    Run,
    Series,
    as_float,
    exact_step,
    run_name_for,
    series_from_long,
    shown_number,
)

SNIFF_BYTES = 65536
# extensions that are documentation, code or another loader's business, never a console log
NOT_LOGS = {".md", ".rst", ".py", ".ipynb", ".html", ".htm", ".json", ".csv", ".tsv", ".jsonl", ".ndjson",
            ".parquet", ".pq", ".gz", ".yaml", ".yml", ".toml", ".sh", ".png", ".jpg", ".pdf", ".pt",
            ".bin", ".safetensors", ".zip", ".tar", ".tfevents", ".pyi", ".pyx", ".c", ".h", ".cc", ".cpp",
            ".hpp", ".cu", ".cuh", ".js", ".ts", ".java", ".go", ".rs", ".jl", ".lua", ".tex", ".xml", ".svg",
            ".css", ".cfg", ".ini", ".lock"}
# names that are documentation or a package list whatever they quote (a README pasting a training log)
NOT_LOG_NAMES = re.compile(r"^(readme|license|licence|changelog|changes|contributing|authors|notice|"
                           r"requirements[\w.-]*|constraints[\w.-]*)(\.\w+)?$", re.IGNORECASE)
_WORDS = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan, "inf": math.inf, "+inf": math.inf,
          "-inf": -math.inf, "infinity": math.inf, "-infinity": -math.inf, "+infinity": math.inf}


def is_regular_file(path: str) -> bool:
    """True for a regular file that is not a symbolic link: what a loader may open beside the file it was
    given (a named pipe would block it, a link may point out of the tree; the tree walk names both)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def extension(path: str) -> str:
    return os.path.splitext(path.lower())[1]


def is_not_log(path: str) -> bool:
    """Documentation, code or another loader's file, by its extension or its name."""
    return extension(path) in NOT_LOGS or NOT_LOG_NAMES.match(os.path.basename(path)) is not None


def head(path: str, size: int = SNIFF_BYTES, *, stray_nuls: bool = False) -> str | None:
    """The first `size` bytes of a file as text, or None for a directory, a binary or unreadable file.
    With `stray_nuls` a few NUL bytes (one, and one more per 4 KB) do not make the file binary: NCCL prints
    one after "ProcessGroupNCCL created ncclComm_ ... on CUDA device: " into many a console log."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            # read(size) allocates `size` bytes first: a 64 MB buffer for a notebook of 1 MB
            known = os.fstat(fh.fileno()).st_size
            raw = fh.read(min(size, known + 1))
            if known < len(raw) < size:            # it grew while read (or reports no size): up to `size`
                raw += fh.read(size - len(raw))
    except OSError:
        return None
    nuls = raw.count(b"\x00") if b"\x00" in raw else 0
    if nuls and not (stray_nuls and nuls <= 1 + len(raw) // 4096):
        return None
    return raw.decode("utf-8", errors="replace")


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def number(token: str) -> float | None:
    """A number as a log prints it: 2.3E+00, nan, -inf, 1,024; None when it is not a number."""
    try:
        value = float(token)      # most tokens, at C speed: float() strips the blanks str.strip() does, and a
    except (ValueError, TypeError):       # token it reads holds no `,` or `;`, so the steps below give the same
        pass
    else:
        if value == value and isinstance(token, str):     # NaN: below, as _WORDS writes it (never -nan)
            return value
    text = token.strip().strip(",;").replace(",", "")
    if not text:
        return None
    low = text.lower()
    if low in _WORDS:
        return _WORDS[low]
    try:
        return float(text)
    except ValueError:
        return None


def column_of_points(key: str, steps: list[int], values, *, skip_repeats: bool = False) -> Series | None:
    """One key's points (int steps in the step range, and as many floats, in write order) as the
    Series that Points.add of each of them gives, without a Python step per point; None for no points.
    With `skip_repeats` a point is dropped when it repeats the value last written for its step (NaN
    repeats NaN), as in Points(skip_repeats=True)."""
    if not steps:
        return None
    steps_arr = np.fromiter(steps, np.int64, len(steps))
    values_arr = np.fromiter(values, np.float64, len(steps))
    if skip_repeats and len(steps_arr) > 1:
        # a dropped point equals the last kept one at its step, so comparing each point with the one
        # written before it at the same step is comparing it with the last kept one
        order = np.argsort(steps_arr, kind="stable")
        s, v = steps_arr[order], values_arr[order]
        repeat = (s[1:] == s[:-1]) & ((v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1])))
        drop = np.zeros(len(s), bool)
        drop[order[1:][repeat]] = True
        steps_arr, values_arr = steps_arr[~drop], values_arr[~drop]
    return Series.from_points(key, steps_arr, values_arr)


class Points:
    """Long-format points collected in write order, turned into a Run at the end.  With `skip_repeats`
    a point that repeats the value already written for its step and key is dropped: several ranks
    printing the same line, or an eval record repeating the step's epoch, is not a resumed run.

    A point whose step is not an integer in the step range (`inf`, a 20-digit counter) is left out and
    counted, and a value too large for float64 is Inf: both are said in a note, never an exception."""

    def __init__(self, skip_repeats: bool = False) -> None:
        self.keys: list[str] = []
        self.steps: list[int] = []
        self.values: list[float] = []
        self._last: dict[tuple[int, str], float] | None = {} if skip_repeats else None
        self.bad_steps: list[tuple[object, int | None]] = []      # (step as given, line) left out
        self.overflows: list[tuple[str, int | None]] = []         # (key, line) read as ±Inf

    def add(self, step, key: str, value, line: int | None = None) -> None:
        exact = exact_step(step)
        if exact is None:
            self.bad_steps.append((step, line))
            return
        number, overflowed = as_float(value)
        if overflowed:
            self.overflows.append((key, line))
        if self._last is not None:
            prev = self._last.get((exact, key))
            if prev is not None and (prev == number or (math.isnan(prev) and math.isnan(number))):
                return
            self._last[(exact, key)] = number
        self.keys.append(key)
        self.steps.append(exact)
        self.values.append(number)

    def __len__(self) -> int:
        return len(self.keys)

    def problem_notes(self, path: str) -> list[str]:
        """What was left out or read as Inf, for the run's notes."""
        name = os.path.basename(path)
        notes = []
        if self.bad_steps:
            step, line = self.bad_steps[0]
            where = f" (line {line})" if line is not None else ""
            notes.append(f"{name}: {len(self.bad_steps)} point(s) left out: their step is not {STEP_RANGE} "
                         f"(first: {shown_number(step)}{where})")
        if self.overflows:
            key, line = self.overflows[0]
            where = f" at line {line}" if line is not None else ""
            notes.append(f"{name}: {len(self.overflows)} value(s) too large for float64 read as Inf "
                         f"(first: {key}{where})")
        return notes

    def to_run(self, path: str, *, framework: str | None, fmt: str, notes: list[str],
               meta: dict | None = None, series: dict[str, Series] | None = None) -> Run:
        """The Run of the points; `meta` adds what the reader knows beyond the format (the step axis),
        `series` the keys a reader built whole (none of them among the points)."""
        if not self.keys and not series:
            why = f"; {self.problem_notes(path)[0].split(': ', 1)[1]}" if self.bad_steps else ""
            raise InputError(path, f"no metric lines found (read as {fmt}){why}")
        meta = {"format": fmt, **(meta or {})}
        if framework:
            meta["framework"] = framework
        built = series_from_long(self.keys, self.steps, self.values)
        if series:
            built = dict(sorted({**built, **series}.items()))
        return Run(run_name_for(path), built, (path,), meta, tuple(notes) + tuple(self.problem_notes(path)))
