"""Character-level features of answers, each computed by C-level string passes rather than a Python loop over
characters: the share of characters that are not text, how often the script of the letters changes (Latin
to CJK and back), and whether a format marker occurs, found by one regex pass over a batch of answers
joined together.
"""

from __future__ import annotations

import math
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

import numpy as np

ODD = re.compile(r"[^\w\s.,;:!?'\"()\[\]{}\-–—/%+=*<>#&@$`|\\~^]")   # not a letter, digit, space or punctuation
_ASCII_TEXT = bytes(c for c in range(128) if not ODD.match(chr(c)))
_SCRIPTS = {"CJK": "C", "HIRAGANA": "H", "KATAKANA": "K", "HANGUL": "G", "CYRILLIC": "Y", "ARABIC": "A",
            "HEBREW": "W", "GREEK": "E", "DEVANAGARI": "D", "THAI": "T", "LATIN": "L"}
_OTHER_SCRIPT = "X"
_NOT_TEXT = "o"
_RUN = re.compile(r"(.)\1*")
_ANCHORED = re.compile(r"\^|\$|\\[AZ]|\(\?<[=!]")    # patterns that would read a joined batch differently
_SEPARATOR = "\x00"
_CACHE_MAX = 1 << 16


class _CharKinds(dict):
    """A str.translate table filled as characters are met: not text -> "o", a letter -> its script's code
    letter, anything else (digit, space, punctuation) -> deleted."""

    def __missing__(self, code: int) -> str | None:
        char = chr(code)
        if ODD.match(char):
            kind = _NOT_TEXT
        elif char.isalpha():
            name = unicodedata.name(char, "")
            kind = next((c for script, c in _SCRIPTS.items() if script in name), _OTHER_SCRIPT)
        else:
            kind = None
        if len(self) < _CACHE_MAX:           # a text of rare characters cannot grow the table without bound
            self[code] = kind
        return kind


_KINDS = _CharKinds()


def text_shape(text: str) -> tuple[float, int]:
    """(share of characters that are not letters, digits, spaces or ordinary punctuation; how many times
    the script of the letters changes, e.g. Latin to CJK)."""
    if not text:
        return 0.0, 0
    if text.isascii():
        return len(text.encode("ascii").translate(None, _ASCII_TEXT)) / len(text), 0
    kinds = text.translate(_KINDS)
    letters = kinds.replace(_NOT_TEXT, "")
    return (len(kinds) - len(letters)) / len(text), max(0, len(_RUN.findall(letters)) - 1)


def marker_hits(texts: Sequence[str | None], pattern: str) -> np.ndarray:
    """1 where `pattern` occurs in the text, 0 where not, NaN where there is no text.  One regex pass over
    the texts joined by NUL (after a hit, the search resumes at the next text); a pattern with anchors or
    a lookbehind is searched text by text instead."""
    rx = re.compile(pattern)
    out = np.array([math.nan if t is None else 0.0 for t in texts])
    if _ANCHORED.search(pattern):
        for i, text in enumerate(texts):
            if text is not None and rx.search(text):
                out[i] = 1.0
        return out
    parts = [t or "" for t in texts]
    joined = _SEPARATOR.join(parts)
    ends = list(accumulate(len(p) + 1 for p in parts))    # text i ends just before ends[i] - 1 (its separator)
    at = 0
    while at <= len(joined) and (match := rx.search(joined, at)) is not None:
        i = bisect_right(ends, match.start())
        if texts[i] is not None:
            out[i] = 1.0
        at = ends[i]
    return out
