"""The numbers of many lines of a text read at once, with numpy over its UTF-8 bytes.

A line's skeleton is the line with each run of digits written as one 0xFF byte (which UTF-8 never
holds).  Lines of one skeleton differ only in their digits, and where a number pattern built of
digit classes finds a number (the loop reader's _SLOT: `\\d+` takes a whole run, its lookarounds ask
whether a character is a digit, a letter, `.` or a sign) depends on which characters are digits, not
on which digits or how many.  So a skeleton's numbers sit in the same places on all its lines, each
made of the same runs: they are placed once, on one line (SlotForm), and taken from every line of the
skeleton at once (Runs.counters, Runs.floats).

A skeleton places numbers on ASCII lines only (the caller's check): `\\d` and `\\w` hold other
characters too, which a byte does not show.  The numbers are the ones int() and float() give for the
number's text: a mantissa of at most 15 digits is exact in float64, and so is 10**k up to k = 22, so
their product or quotient rounded once is float()'s correctly rounded result (Clinger's fast path);
any other number is read by float() itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_MARK = 0xFF
_FORM = re.compile(r"([-+]?)(D?)(\.?)(D?)(?:[eE]([-+]?)(D))?")       # a number's text, each run written D
_TENS = np.array([float(10 ** k) for k in range(23)])                # every power of ten float64 holds exactly
_INT_TENS = np.array([10 ** k for k in range(19)], np.int64)
_EXACT_DIGITS = 15                                                   # below 2**53: an exact float64
COUNTER_DIGITS = 12                                                 # a step counter's longest (_loop_line._N)


@dataclass(frozen=True, slots=True)
class SlotForm:
    """Where one number sits on the lines of a skeleton: its first and last run (counted among the
    line's runs), the characters before the first (a sign, a `.`) and after the last (a `.`), and its
    text with each run written D (`-D.DeD`)."""

    first: int
    last: int
    before: int
    after: int
    form: str


class Runs:
    """The digit runs of a text's lines (the text split at `\\n`), and the lines of each skeleton."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._bytes = b = np.frombuffer(data, np.uint8)
        digit = (b - np.uint8(48)) < np.uint8(10)
        change = np.flatnonzero(digit[1:] != digit[:-1]) + 1
        bounds = np.concatenate([[0] if digit[:1].any() else [], change, [len(b)] if digit[-1:].any() else []])
        self.run_start, self.run_end = bounds[0::2].astype(np.int64), bounds[1::2].astype(np.int64)
        newlines = np.flatnonzero(b == 10)
        self.line_start, self._line_end = np.concatenate([[0], newlines + 1]), np.append(newlines, len(b))
        # the first run of each line, and where the last line's runs end
        self.first_run = np.searchsorted(self.run_start, np.append(self.line_start, len(b) + 1))
        marked = b.copy()
        marked[self.run_start] = _MARK
        skeletons = marked.tobytes().translate(None, b"0123456789").split(b"\n")    # a run: its mark
        ids: dict[bytes, int] = {}
        self.skeleton = np.array([ids.setdefault(line, len(ids)) for line in skeletons])
        order = np.argsort(self.skeleton, kind="stable")
        bounds = np.searchsorted(self.skeleton[order], np.arange(len(ids) + 1))
        self.members = [order[bounds[k]:bounds[k + 1]] for k in range(len(ids))]   # each skeleton's lines

    @classmethod
    def of(cls, text: str) -> Runs | None:
        """The runs of `text`; None where it has no UTF-8 form (a lone surrogate)."""
        try:
            return cls(text.encode("utf-8"))
        except UnicodeEncodeError:
            return None

    def line_length(self, lines: np.ndarray) -> np.ndarray:
        return self._line_end[lines] - self.line_start[lines]

    def has_digits(self, line: int) -> bool:
        return bool(self.first_run[line + 1] > self.first_run[line])

    def slot_forms(self, line: int, lead: int, segment: str, spans: list[tuple[int, int]]) -> list[SlotForm]:
        """The forms of the numbers at `spans` of `segment`, the line with `lead` characters cut from its
        start (an ASCII line: a character is a byte)."""
        base = self.line_start[line] + lead
        runs = slice(self.first_run[line], self.first_run[line + 1])
        starts, ends = (self.run_start[runs] - base).tolist(), (self.run_end[runs] - base).tolist()
        forms = []
        for start, end in spans:
            first = starts.index(next(at for at in starts if at >= start))
            last = first + sum(1 for at in ends[first + 1:] if at <= end)
            gaps = zip([start] + ends[first:last + 1], starts[first:last + 1] + [end])
            text = "D".join(segment[a:b] for a, b in gaps)
            forms.append(SlotForm(first, last, starts[first] - start, end - ends[last], text))
        return forms

    def _values(self, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each run's digits as an int64 (exact up to 18 digits; a longer run is checked out by its
        caller) and its length."""
        start, length = self.run_start[runs], self.run_end[runs] - self.run_start[runs]
        width = min(int(length.max(initial=0)), 18)
        places = np.arange(width)
        digits = self._bytes[np.minimum(start[:, None] + places, len(self._bytes) - 1)].astype(np.int64) - 48
        power = length[:, None] - 1 - places                  # each digit's power of ten; below 0: past the run
        return (digits * np.where(power >= 0, _INT_TENS[np.clip(power, 0, 18)], 0)).sum(axis=1), length

    def counters(self, lines: np.ndarray, slot: SlotForm) -> tuple[np.ndarray, np.ndarray]:
        """The number at `slot` on each line as a step counter: (int64 values, read) - read where it
        is digits only and at most 12 of them, as int() of a counter's text needs."""
        if slot.form != "D":
            return np.zeros(len(lines), np.int64), np.zeros(len(lines), bool)
        value, length = self._values(self.first_run[lines] + slot.first)
        return value, length <= COUNTER_DIGITS

    def floats(self, lines: np.ndarray, slot: SlotForm) -> np.ndarray:
        """float() of the number at `slot` on each line."""
        sign, whole, _, fraction, exp_sign, exponent = _FORM.fullmatch(slot.form).groups()
        run = self.first_run[lines] + slot.first
        mantissa = digits = scale = np.zeros(len(lines), np.int64)    # value = mantissa x 10**scale
        if whole:
            mantissa, digits = self._values(run)
            run = run + 1
        if fraction:
            value, length = self._values(run)
            mantissa = mantissa * _INT_TENS[np.minimum(length, 18)] + value
            digits, scale = digits + length, -length
            run = run + 1
        if exponent:
            value, length = self._values(run)
            scale = scale + np.where(length <= 5, -value if exp_sign == "-" else value, 10 ** 6)
        # a longer mantissa wrapped around int64 above; it and a larger power are read by float()
        fast = (digits <= _EXACT_DIGITS) & (np.abs(scale) <= 22)
        power = _TENS[np.minimum(np.abs(scale), 22)]
        out = np.where(scale >= 0, mantissa * power, mantissa / power)
        out = -out if sign == "-" else out
        slow = np.flatnonzero(~fast)
        if len(slow):
            start = self.run_start[self.first_run[lines[slow]] + slot.first] - slot.before
            end = self.run_end[self.first_run[lines[slow]] + slot.last] + slot.after
            out[slow] = [float(self.data[a:b]) for a, b in zip(start.tolist(), end.tolist())]
        return out
