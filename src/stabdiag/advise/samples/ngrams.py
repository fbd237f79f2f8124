"""Word n-grams of many answers at once, for the text features: repetition and phrases.

The words of a batch of answers are one flat array of 64-bit word hashes, and an n-gram's id is a
polynomial hash of its words read off prefix sums (sum of h_j R^j, rescaled by R^-i: the same words give
the same id wherever they stand).  Whether an n-gram occurs twice in an answer is then one sort of
(answer, id) keys for the whole batch, instead of a Counter per answer.  Ids keep 52 bits, 40 where the
key also holds the n-gram's place: two different n-grams of one answer share an id with odds of about 1e-5
at 4096 words and 4e-8 at 300 (where the longest repeat is searched).  Sums modulo 2^64 are safe from the
Thue-Morse collision under 2048 words: the exact searches look at the first 300 words.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

ANSWER_BITS = 12                      # answers in one batch: at most 4096 (their index heads a sort key)
MAX_ANSWERS = 1 << ANSWER_BITS
_ID_BITS = 64 - ANSWER_BITS
_ID_MASK = np.uint64((1 << _ID_BITS) - 1)
_POS_BITS = 12                        # places kept inside a key: an answer has at most 4096 words
MAX_WORDS = 1 << _POS_BITS
_POS_MASK = np.uint64(MAX_WORDS - 1)
_R = 0x9E3779B97F4A7C15               # odd, so invertible modulo 2^64
_R_INV = pow(_R, -1, 1 << 64)
_powers_cache: dict[int, np.ndarray] = {}


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) modulo 2^64 (kept for the largest n asked so far)."""
    have = _powers_cache.get(base)
    if have is None or len(have) < n:
        have = np.full(max(n, 1024), base, dtype=np.uint64)
        have[0] = 1
        np.cumprod(have, out=have)                     # unsigned: wraps modulo 2^64
        _powers_cache[base] = have
    return have[:n]


def _mixed(hashes: np.ndarray) -> np.ndarray:
    """Word hashes spread over all 64 bits (splitmix64's finaliser): Python hashes small ints to themselves,
    and token ids that differ in low bits only would share an n-gram id once its low bits are dropped."""
    z = hashes.view(np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class HashedWords:
    """Answers' words as they are read, kept as hashes only (8 bytes a word: the word strings go at once)."""

    def __init__(self) -> None:
        self.counts = array("q")
        self.hashes = array("q")

    def add(self, words: Sequence) -> None:
        self.counts.append(len(words))
        self.hashes.fromlist(list(map(hash, words)))      # faster than extending from the iterator

    def __len__(self) -> int:
        return len(self.counts)


class Words:
    """The words of up to MAX_ANSWERS answers: answer i holds flat positions starts[i] .. starts[i]+counts[i]-1.
    Words are hashed as they are (str or token id), so the caller chooses case and tokenisation."""

    def __init__(self, hashed: HashedWords) -> None:
        if len(hashed) > MAX_ANSWERS:
            raise ValueError(f"at most {MAX_ANSWERS} answers in a batch")
        self.counts = np.asarray(hashed.counts, dtype=np.int64)
        if len(self.counts) and self.counts.max() > MAX_WORDS:
            raise ValueError(f"at most {MAX_WORDS} words an answer")
        total = int(self.counts.sum())
        self._hashes = hashes = _mixed(np.asarray(hashed.hashes, dtype=np.int64))
        self._placed: dict[int, np.ndarray] = {}
        self.starts = np.cumsum(self.counts) - self.counts
        self.answer = np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)
        self.pos = np.arange(total, dtype=np.int64) - self.starts[self.answer]
        self._prefix = np.concatenate((np.zeros(1, np.uint64), np.cumsum(hashes * _powers(_R, total))))
        self._inverse = _powers(_R_INV, total)

    @classmethod
    def of(cls, answers: Sequence[Sequence]) -> Words:
        hashed = HashedWords()
        for words in answers:
            hashed.add(words)
        return cls(hashed)

    def __len__(self) -> int:
        return len(self.counts)

    def grams(self, n, *, limit: int | None = None, at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(flat position, id) of every n-gram inside the first `limit` words of its answer, among the flat
        positions `at` (all when None); `n` is one length or one per answer."""
        span = self.counts if limit is None else np.minimum(self.counts, limit)
        if at is None:
            answer, pos = self.answer, self.pos
        else:
            answer, pos = self.answer[at], self.pos[at]
        n_at = n[answer] if isinstance(n, np.ndarray) else n
        ok = pos + n_at <= span[answer]
        idx = np.flatnonzero(ok) if at is None else at[ok]
        return idx, self._ids_at(idx, n_at[ok] if isinstance(n_at, np.ndarray) else n_at)

    def _ids_at(self, idx: np.ndarray, n) -> np.ndarray:
        """The ids of the n-grams starting at flat positions `idx` (the prefix-sum hash, rescaled)."""
        return ((self._prefix[idx + n] - self._prefix[idx]) * self._inverse[idx]) >> np.uint64(ANSWER_BITS)

    def _keys(self, idx: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Sort keys: the answer in the high bits, so that equal keys are one n-gram twice in one answer."""
        return (self.answer[idx].astype(np.uint64) << np.uint64(_ID_BITS)) | ids

    def _owners(self, keys: np.ndarray) -> np.ndarray:
        return (keys >> np.uint64(_ID_BITS)).astype(np.int64)

    def placed(self, n: int) -> np.ndarray:
        """The n-grams of every answer as sorted keys (answer, id, place): equal n-grams of one answer are
        neighbours, earliest first.  Kept, as repetition and the longest repeat both read them."""
        if n not in self._placed:
            idx, ids = self.grams(n)
            self._placed[n] = np.sort(self._keys(idx, (ids >> np.uint64(_POS_BITS) << np.uint64(_POS_BITS))
                                                 | self.pos[idx].astype(np.uint64)))
        return self._placed[n]

    def _flat(self, keys: np.ndarray) -> np.ndarray:
        return self.starts[self._owners(keys)] + (keys & _POS_MASK).astype(np.int64)

    def repeated(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(per answer: how many of its n-grams occur more than once in it, how many n-grams it has)."""
        keys = self.placed(n)
        gram = keys >> np.uint64(_POS_BITS)
        same = gram[1:] == gram[:-1]
        twice = np.zeros(len(keys), dtype=bool)
        twice[1:] |= same
        twice[:-1] |= same
        grams = np.maximum(self.counts - n + 1, 0)
        return np.bincount(self._owners(keys), weights=twice, minlength=len(self)), grams

    def any_repeat(self, n, *, limit: int, at: np.ndarray | None = None) -> np.ndarray:
        """Per answer: does some n-gram (`n` per answer or one) occur twice in its first `limit` words (looking
        at the flat positions `at` only, when given)?"""
        keys = np.sort(self._keys(*self.grams(n, limit=limit, at=at)))
        twice = keys[1:][keys[1:] == keys[:-1]]
        return np.bincount(self._owners(twice), minlength=len(self)) > 0

    def longest_repeat(self, limit: int) -> np.ndarray:
        """Per answer: the most consecutive words that occur at two places in its first `limit` words.

        From the answer's repeated 3-grams: a lower bound (chains of them whose nearest earlier occurrence is
        the same distance back: a loop of any period is found whole) and an upper one (the longest run of
        consecutive repeated 3-grams, plus 2).  Between the two, a galloping search upwards from the lower
        bound (1, 2, 4... words longer) and a binary search inside its last step, a span of n words that
        repeats holding a repeated span of every shorter length.  A repeated n-gram starts where n - 2
        repeated 3-grams follow one another, so each round looks at those places only."""
        span = np.minimum(self.counts, limit)
        low, reach, longest_run = self._three_gram_repeats(limit)
        high = np.where(low >= 3, np.minimum(span - 1, longest_run + 2), low)
        places = np.flatnonzero(reach > 0)

        def repeats(n: np.ndarray, searched: np.ndarray) -> np.ndarray:
            owner = self.answer[places]
            return self.any_repeat(n, limit=limit, at=places[searched[owner] & (reach[places] >= n[owner] - 2)])

        step = np.ones(len(self), dtype=np.int64)
        galloping = low < high
        while galloping.any():
            n = np.minimum(low + step, high)
            found = repeats(n, galloping)
            low = np.where(galloping & found, n, low)
            high = np.where(galloping & ~found, n - 1, high)
            step *= 2
            galloping &= found & (low < high)
        while (searched := low < high).any():
            mid = (low + high + 1) // 2
            found = repeats(mid, searched)
            low = np.where(searched & found, mid, low)
            high = np.where(searched & ~found, mid - 1, high)
        for n in (2, 1):                             # no 3-gram repeats: is it a pair of words, or one word?
            left = low == 0
            if left.any():
                at = np.flatnonzero(left[self.answer] & (self.pos < span[self.answer]))
                low[left & self.any_repeat(n, limit=limit, at=at)] = n
        return low

    def _three_gram_repeats(self, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(per answer: the chain lower bound of its longest repeat, 0 when no 3-gram repeats; per flat
        position: how many repeated 3-grams start there one after another; per answer: the most of them)."""
        keys = self.placed(3)
        keys = keys[(keys & _POS_MASK).astype(np.int64) + 3 <= np.minimum(self.counts, limit)[self._owners(keys)]]
        flat = self._flat(keys)
        gram = keys >> np.uint64(_POS_BITS)
        again = np.flatnonzero(gram[1:] == gram[:-1]) + 1          # a later occurrence and the one before it
        twice = np.zeros(len(self.pos), dtype=bool)
        twice[flat[again]] = twice[flat[again - 1]] = True
        back = np.zeros(len(self.pos), dtype=np.int64)             # per flat position: distance to its nearest
        back[flat[again]] = flat[again] - flat[again - 1]         # earlier occurrence
        on = back > 0
        chain_first, chain_length = _runs(on, on & (np.roll(back, 1) == back) & (self.pos > 0))
        best = np.zeros(len(self), dtype=np.int64)
        np.maximum.at(best, self.answer[chain_first], chain_length + 2)
        run_first, run_length = _runs(twice, twice & np.roll(twice, 1) & (self.pos > 0))
        reach = np.zeros(len(self.pos), dtype=np.int64)          # the positions of the runs, run after run
        reach[twice] = np.repeat(run_first + run_length, run_length) - np.flatnonzero(twice)
        most = np.zeros(len(self), dtype=np.int64)
        np.maximum.at(most, self.answer[run_first], run_length)
        return best, reach, most

    def match(self, phrases: Sequence[Sequence], *, opening: bool = False) -> np.ndarray:
        """answers x phrases, True where the answer holds the phrase (a word sequence) anywhere, or
        (`opening`) as its first words.  Only the places that hold a phrase's first word are looked at."""
        out = np.zeros((len(self), len(phrases)), dtype=bool)
        if not phrases:
            return out
        wanted = Words.of(phrases)
        lengths = wanted.counts
        _, wanted_ids = wanted.grams(lengths)
        at = self.starts[self.counts > 0] if opening else np.arange(len(self.pos))
        at = at[_found(wanted._hashes[wanted.starts], self._hashes[at])[0]]
        for n in np.unique(lengths):
            cols = np.flatnonzero(lengths == n)
            idx, ids = self.grams(int(n), at=at)
            hit, which = _found(wanted_ids[cols], ids)
            out[self.answer[idx[hit]], cols[which]] = True
        return out

    def shares(self, n: int, *, opening: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(how many answers hold it, one flat position of it) for every distinct n-gram the answers hold
        anywhere, or (`opening`) as their first n words."""
        if opening:
            idx = self.starts[self.counts >= n]
            ids = self._ids_at(idx, n)
        else:
            idx, ids = self.grams(n)
        distinct, first = np.unique(self._keys(idx, ids), return_index=True)     # each n-gram once per answer
        _, where, counts = np.unique(distinct & _ID_MASK, return_index=True, return_counts=True)
        return counts, idx[first[where]]


def _runs(on: np.ndarray, joins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first flat position, length) of each run of `on` positions, where position i carries on the run of
    position i - 1 when `joins[i]` (which implies on[i - 1] and on[i])."""
    starts = on & ~joins
    first = np.flatnonzero(starts)
    return first, np.bincount(np.cumsum(starts[on]), minlength=len(first) + 1)[1:]


def _found(wanted: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which values are among `wanted`, and for those, their index in `wanted`)."""
    order = np.argsort(wanted)
    ranked = wanted[order]
    j = np.minimum(np.searchsorted(ranked, values), len(ranked) - 1)
    hit = ranked[j] == values
    return hit, order[j[hit]]
