"""Per-sample features computed from the text alone (no model): length, truncation, repetition, answer and
format markers, non-text share, script switches, identical answers within a prompt's group, and phrases
that many answers share.  Each is a column of floats (NaN: cannot be told for that sample), binary ones
holding 0/1, so the forensics can treat every feature the same way.

Words are the answer's lower-cased whitespace-separated words, split once per answer; everything built on
them (repetition, phrases) runs on batches of answers as arrays (ngrams.py), and the character features
by C-level string passes (textscan.py): 100k answers cost about ten times what splitting them does
(bench/samples_speed.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...read.samples import Sample
from .ngrams import MAX_ANSWERS, HashedWords, Words
from .textscan import marker_hits, text_shape

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
_MAX_WORDS = 4000                # words of one answer looked at for repetition and phrases
_REPEAT_SPAN_WORDS = 300         # ... and for the longest repeated span
_BATCH_WORDS = 200_000           # words worked on at once (about 100 bytes each while a batch is worked on)


@dataclass(frozen=True, slots=True)
class FeatureTable:
    """Features of some samples: columns by name, with their labels and which are shares (0/1)."""

    samples: tuple[Sample, ...]
    columns: dict[str, np.ndarray]
    labels: dict[str, str]
    binary: frozenset[str] = field(default_factory=frozenset)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))     # each sample's step

    def row(self, i: int) -> dict[str, float]:
        return {name: float(col[i]) for name, col in self.columns.items()}


def words_of(sample: Sample) -> list:
    """All the words looked at: the answer's lower-cased words, else its token ids."""
    if sample.completion is not None:
        return sample.completion.lower().split()
    if sample.response_ids is not None:
        return list(sample.response_ids)
    return []


def _batches(samples: Sequence[Sample]):
    """(first index, texts, word counts, the first _MAX_WORDS words hashed) of consecutive samples, at most
    MAX_ANSWERS and about _BATCH_WORDS words at a time (a text without spaces counts a word per 16
    characters), so that memory stays bounded whatever the answers hold."""
    start, texts, counts, hashed, total = 0, [], [], HashedWords(), 0
    for i, sample in enumerate(samples):
        every = words_of(sample)
        texts.append(sample.completion)
        counts.append(len(every))
        hashed.add(every if len(every) <= _MAX_WORDS else every[:_MAX_WORDS])
        total += min(len(every), _MAX_WORDS) + len(sample.completion or "") // 16
        if len(hashed) == MAX_ANSWERS or total >= _BATCH_WORDS:
            yield start, texts, counts, Words(hashed)
            start, texts, counts, hashed, total = i + 1, [], [], HashedWords(), 0
    if len(hashed):
        yield start, texts, counts, Words(hashed)


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


def phrase_candidates(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """(phrases many answers contain, phrases many answers open with): word 1- to 3-grams held by between
    PHRASE_MIN_SHARE and PHRASE_MAX_SHARE of the answers (at most PHRASE_MINING_SAMPLES of them, evenly
    spread).  Chosen from how often they occur, never from the rewards or the steps, so testing them
    against either stays fair."""
    if not texts:
        return [], []
    mined = texts[::math.ceil(len(texts) / PHRASE_MINING_SAMPLES)]
    hashed = HashedWords()
    for text in mined:
        hashed.add(text.lower().split()[:_MINING_WORDS])
    words = Words(hashed)
    n = len(mined)

    split: dict[int, list[str]] = {}         # the words of the answers a phrase is spelled from

    def pick(opening: bool) -> list[str]:
        ok: list[tuple[int, str]] = []
        for size in (1, 2, 3):
            counts, at = words.shares(size, opening=opening)
            keep = (counts >= PHRASE_MIN_SHARE * n) & (counts <= PHRASE_MAX_SHARE * n)
            for count, flat in zip(counts[keep], at[keep]):
                answer, pos = int(words.answer[flat]), int(words.pos[flat])
                if answer not in split:
                    split[answer] = mined[answer].lower().split()[:_MINING_WORDS]
                ok.append((int(count), " ".join(split[answer][pos:pos + size])))
        ok.sort(key=lambda t: (-t[0], -len(t[1]), t[1]))
        counted = {gram: count for count, gram in ok}
        chosen: list[str] = []
        for count, gram in ok:               # a phrase inside a chosen longer one, as often, says nothing new
            if not any(gram in other and counted[other] >= 0.9 * count for other in chosen):
                chosen.append(gram)
            if len(chosen) == PHRASE_CANDIDATES:
                break
        return chosen

    return pick(False), pick(True)


def features(samples: Sequence[Sample], *, markers: dict[str, tuple[str, str]] | None = None) -> FeatureTable:
    """The features of `samples` (see the module docstring)."""
    samples = tuple(samples)
    markers = MARKERS if markers is None else markers
    n = len(samples)
    has_text = np.array([s.completion is not None for s in samples], dtype=bool)
    has_words = has_text | np.array([s.response_ids is not None for s in samples], dtype=bool)
    contains, opens = phrase_candidates([s.completion for s in samples if s.completion is not None])
    words, repeated, longest = np.full(n, math.nan), np.full(n, math.nan), np.full(n, math.nan)
    holds = np.zeros((n, len(contains)))
    opens_with = np.zeros((n, len(opens)))
    found = {name: np.full(n, math.nan) for name in markers}
    for start, texts, counts, batch in _batches(samples):
        end = start + len(batch)
        twice, grams = batch.repeated(REPEAT_NGRAM)
        words[start:end] = counts
        repeated[start:end] = np.where(grams > 0, twice / np.maximum(grams, 1), 0.0)
        longest[start:end] = batch.longest_repeat(_REPEAT_SPAN_WORDS)
        holds[start:end] = batch.match([g.split() for g in contains])
        opens_with[start:end] = batch.match([g.split() for g in opens], opening=True)
        for name, (_, pattern) in markers.items():
            found[name][start:end] = marker_hits(texts, pattern)
    empty = ~has_words | (words == 0)
    repeated[empty], longest[empty] = math.nan, math.nan
    words[~has_words] = math.nan
    holds[~has_text], opens_with[~has_text] = math.nan, math.nan
    shapes = np.array([text_shape(s.completion) if s.completion is not None else (math.nan, math.nan)
                       for s in samples], dtype=np.float64).reshape(n, 2)

    cols: dict[str, np.ndarray] = {}
    labels: dict[str, str] = {}
    binary: set[str] = set()

    def add(name: str, label: str, values, is_binary: bool = False) -> None:
        arr = np.asarray(values, dtype=np.float64)
        if not np.isfinite(arr).any():
            return
        if is_binary and any(np.array_equal(arr, cols[b], equal_nan=True) for b in binary):
            return                           # a phrase that is a marker ('<answer>') is one feature, not two
        cols[name], labels[name] = arr, label
        if is_binary:
            binary.add(name)

    add("chars", "characters", [s.chars if s.chars is not None else math.nan for s in samples])
    add("tokens", "tokens", [s.tokens if s.tokens is not None else math.nan for s in samples])
    if "tokens" not in cols:
        add("words", "words", words)
    add("truncated", "truncated", [math.nan if s.truncated is None else float(s.truncated) for s in samples], True)
    add("repeated_ngrams", f"repeated {REPEAT_NGRAM}-word share", repeated)
    add("longest_repeat", "longest repeated span (words)", longest)
    for name, (label, _) in markers.items():
        add(name, label, found[name], True)
    add("non_text", "non-text character share", shapes[:, 0])
    add("script_switch", "switches script (language)", np.where(np.isnan(shapes[:, 1]), math.nan,
                                                                 shapes[:, 1] > 0), True)
    add("same_in_group", "identical to another answer in its group", same_in_group(samples), True)
    for j, gram in enumerate(contains):
        add(f"has:{gram}", f"contains '{gram}'", holds[:, j], True)
    for j, gram in enumerate(opens):
        add(f"opens:{gram}", f"opens with '{gram}'", opens_with[:, j], True)
    return FeatureTable(samples, cols, labels, frozenset(binary),
                        np.fromiter((s.step for s in samples), dtype=np.int64, count=n))
