"""Per-sample features computed from the text alone (no model): length, truncation, repetition, answer and
format markers, non-text share, script switches, identical answers within a prompt's group, and phrases
that many answers share.  Each is a column of floats (NaN: cannot be told for that sample), binary ones
holding 0/1, so the forensics can treat every feature the same way.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...read.samples import Sample

# format markers: name -> (label, pattern); `markers=` replaces them (a run's own format)
MARKERS = {
    "boxed": ("\\boxed{} answer", r"\\boxed\{"),
    "answer_tag": ("<answer> tag", r"<answer>"),
    "code_fence": ("code fence", r"```"),
    "think_tag": ("<think> tag", r"<think>"),
}
REPEAT_NGRAM = 3                 # words in the n-grams whose repetition is measured
PHRASE_MIN_SHARE = 0.15          # a phrase is a candidate when at least this share of answers hold it...
PHRASE_MAX_SHARE = 0.90          # ...and not nearly all of them (then it cannot tell answers apart)
PHRASE_CANDIDATES = 12           # per kind (contains / opens with), the most frequent
PHRASE_MINING_SAMPLES = 2000     # answers the candidates are mined from (all are then measured)
_MINING_WORDS = 200              # words of each of them mined
_MAX_WORDS = 4000                # words of one answer looked at for repetition
_REPEAT_SPAN_WORDS = 300         # ... and for the longest repeated span (a search over all pairs of places)
_WORD = re.compile(r"\S+")
_ODD = re.compile(r"[^\w\s.,;:!?'\"()\[\]{}\-–—/%+=*<>#&@$`|\\~^]")   # not a letter, digit, space or punctuation


@dataclass(frozen=True, slots=True)
class FeatureTable:
    """Features of some samples: columns by name, with their labels and which are shares (0/1)."""

    samples: tuple[Sample, ...]
    columns: dict[str, np.ndarray]
    labels: dict[str, str]
    binary: frozenset[str] = field(default_factory=frozenset)

    @property
    def steps(self) -> np.ndarray:
        return np.array([s.step for s in self.samples], dtype=np.int64)

    @property
    def scores(self) -> np.ndarray:
        return np.array([s.score for s in self.samples], dtype=np.float64)

    def row(self, i: int) -> dict[str, float]:
        return {name: float(col[i]) for name, col in self.columns.items()}


def words_of(sample: Sample) -> list[str]:
    if sample.completion is not None:
        return _WORD.findall(sample.completion)
    if sample.response_ids is not None:
        return [str(t) for t in sample.response_ids]
    return []


def repetition(words: Sequence[str]) -> tuple[float, int]:
    """(share of the answer's REPEAT_NGRAM-grams that occur more than once, the longest span of words that
    occurs twice)."""
    words = words[:_MAX_WORDS]
    grams = [tuple(words[i:i + REPEAT_NGRAM]) for i in range(len(words) - REPEAT_NGRAM + 1)]
    if not grams:
        return 0.0, 0
    counts = Counter(grams)
    share = sum(c for c in counts.values() if c > 1) / len(grams)
    if share == 0:                   # no 3-gram occurs twice: the longest repeat is 0, 1 or 2 words
        return share, 2 if len(set(zip(words, words[1:]))) < len(words) - 1 else (1 if len(set(words)) < len(words)
                                                                                   else 0)
    return share, _longest_repeat(words[:_REPEAT_SPAN_WORDS])


def _longest_repeat(words: Sequence[str]) -> int:
    """The longest run of words that occurs at two places (binary search on the length: a repeated span of
    n words holds one of every shorter length)."""
    def repeats(n: int) -> bool:
        seen = set()
        for i in range(len(words) - n + 1):
            key = hash(tuple(words[i:i + n]))
            if key in seen:
                return True
            seen.add(key)
        return False

    low, high = 0, len(words) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if repeats(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _script(char: str) -> str | None:
    if not char.isalpha():
        return None
    try:
        name = unicodedata.name(char)
    except ValueError:
        return "other"
    for script in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "CYRILLIC", "ARABIC", "HEBREW", "GREEK",
                   "DEVANAGARI", "THAI", "LATIN"):
        if script in name:
            return script
    return "other"


def text_shape(text: str) -> tuple[float, int]:
    """(share of characters that are not letters, digits, spaces or ordinary punctuation; how many times
    the script of the letters changes, e.g. Latin to CJK)."""
    if not text:
        return 0.0, 0
    odd = len(_ODD.findall(text))
    if text.isascii():
        return odd / len(text), 0
    switches, last = 0, None
    for c in text:
        script = _script(c) if ord(c) > 127 or c.isalpha() else None
        if script is None:
            continue
        if last is not None and script != last:
            switches += 1
        last = script
    return odd / len(text), switches


def same_in_group(samples: Sequence[Sample]) -> np.ndarray:
    """1 where another sample of the same step and prompt group has the identical answer; NaN where the
    group is unknown or alone."""
    out = np.full(len(samples), math.nan)
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(samples):
        if s.group is not None:
            groups.setdefault((s.step, s.group), []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        answers = Counter(samples[i].completion if samples[i].completion is not None else samples[i].response_ids
                          for i in members)
        for i in members:
            key = samples[i].completion if samples[i].completion is not None else samples[i].response_ids
            out[i] = 1.0 if answers[key] > 1 else 0.0
    return out


def phrase_candidates(texts: Sequence[list[str]]) -> tuple[list[str], list[str]]:
    """(phrases many answers contain, phrases many answers open with): word 1- to 3-grams held by between
    PHRASE_MIN_SHARE and PHRASE_MAX_SHARE of the answers.  Chosen from how often they occur, never from the
    rewards or the steps, so testing them against either stays fair."""
    if not texts:
        return [], []
    step = max(1, len(texts) // PHRASE_MINING_SAMPLES)
    mined = texts[::step]
    contains: Counter = Counter()
    opens: Counter = Counter()
    for words in mined:
        low = [w.lower() for w in words[:_MINING_WORDS]]
        grams = {" ".join(low[i:i + n]) for n in (1, 2, 3) for i in range(len(low) - n + 1)}
        contains.update(grams)
        opens.update({" ".join(low[:n]) for n in (1, 2, 3) if len(low) >= n})
    n = len(mined)

    def pick(counts: Counter) -> list[str]:
        ok = [(c, g) for g, c in counts.items() if PHRASE_MIN_SHARE * n <= c <= PHRASE_MAX_SHARE * n]
        ok.sort(key=lambda t: (-t[0], -len(t[1]), t[1]))
        chosen: list[str] = []
        for _, gram in ok:                   # a phrase inside a chosen longer one, as often, says nothing new
            if not any(gram in other and counts[other] >= 0.9 * counts[gram] for other in chosen):
                chosen.append(gram)
            if len(chosen) == PHRASE_CANDIDATES:
                break
        return chosen

    return pick(contains), pick(opens)


def features(samples: Sequence[Sample], *, markers: dict[str, tuple[str, str]] | None = None) -> FeatureTable:
    """The features of `samples` (see the module docstring)."""
    samples = tuple(samples)
    markers = MARKERS if markers is None else markers
    texts = [words_of(s) for s in samples]
    has_text = np.array([s.completion is not None for s in samples])
    cols: dict[str, np.ndarray] = {}
    labels: dict[str, str] = {}
    binary: set[str] = set()

    def add(name: str, label: str, values, is_binary: bool = False) -> None:
        arr = np.asarray(values, dtype=np.float64)
        if np.isfinite(arr).any():
            cols[name], labels[name] = arr, label
            if is_binary:
                binary.add(name)

    add("chars", "characters", [s.chars if s.chars is not None else math.nan for s in samples])
    add("tokens", "tokens", [s.tokens if s.tokens is not None else math.nan for s in samples])
    if not np.isfinite(cols.get("tokens", np.array([math.nan]))).any():
        add("words", "words", [len(w) if (s.completion is not None or s.response_ids is not None) else math.nan
                               for s, w in zip(samples, texts)])
    add("truncated", "truncated", [math.nan if s.truncated is None else float(s.truncated) for s in samples], True)
    reps = [repetition(w) if w else (math.nan, math.nan) for w in texts]
    add("repeated_ngrams", f"repeated {REPEAT_NGRAM}-word share", [r[0] for r in reps])
    add("longest_repeat", "longest repeated span (words)", [r[1] for r in reps])
    for name, (label, pattern) in markers.items():
        rx = re.compile(pattern)
        add(name, label, [float(bool(rx.search(s.completion))) if s.completion is not None else math.nan
                          for s in samples], True)
    shapes = [text_shape(s.completion) if s.completion is not None else (math.nan, math.nan) for s in samples]
    add("non_text", "non-text character share", [sh[0] for sh in shapes])
    add("script_switch", "switches script (language)", [math.nan if math.isnan(sh[1]) else float(sh[1] > 0)
                                                        for sh in shapes], True)
    add("same_in_group", "identical to another answer in its group", same_in_group(samples), True)
    contains, opens = phrase_candidates([t for t, ok in zip(texts, has_text) if ok])
    lowered = [" " + " ".join(w.lower() for w in t[:_MAX_WORDS]) + " " if ok else None
               for t, ok in zip(texts, has_text)]
    for gram in contains:
        add(f"has:{gram}", f"contains '{gram}'", [math.nan if t is None else float(f" {gram} " in t) for t in lowered],
            True)
    for gram in opens:
        add(f"opens:{gram}", f"opens with '{gram}'",
            [math.nan if t is None else float(t.startswith(f" {gram} ")) for t in lowered], True)
    return FeatureTable(samples, cols, labels, frozenset(binary))
