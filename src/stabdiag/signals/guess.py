"""Name inference: the canonical signal a metric key most likely feeds, from the words of its name.

Hand-written training loops, notebooks and research code name their metrics freely (`avg_reward`,
`val_acc`, `kl_div`, `gen_len_mean`); the alias table knows only the frameworks' exact names.  A run
whose keys nobody registered would otherwise be read as "nothing logged" and judged on nothing.

The patterns are data (checklist/name_patterns.toml).  A key is split into words, the words are
rewritten to canonical forms, and each pattern scores them; only a confident match that no other key
rivals for the same signal is used, and every guess is reported (see `Guesses`).  Resolution
(signals.resolve) calls this last, on the keys still unmapped and for the signals still missing, so
--map and the alias table always win.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .. import _toml
from ..errors import RuleError

EVAL = "eval"                  # a pattern's signal "eval" yields eval:<key>, one signal per key
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_PERCENTILE = re.compile(r"p\d+")
_PATTERN_KEYS = {"id", "signal", "all", "allow", "none", "confidence", "free", "common", "numbers", "log"}


@dataclass(frozen=True, slots=True)
class Pattern:
    """One way of naming a signal: every group of `groups` present, `none` absent, the rest explained."""

    id: str
    signal: str
    groups: tuple[frozenset[str], ...]
    allow: frozenset[str] = frozenset()
    none: frozenset[str] = frozenset()
    confidence: float = 0.9
    free: bool = False           # unexplained words are the eval's name, not a doubt
    common: bool = True          # the shared folder/aggregation words explain words too
    numbers: bool = False        # digits explain nothing but change nothing (lr group 0)
    log: bool = False            # the key holds exp of the signal (a perplexity): the signal is its ln


@dataclass(frozen=True, slots=True)
class NamePatterns:
    """The parsed name_patterns.toml: vocabulary, patterns and the confidence settings."""

    patterns: tuple[Pattern, ...]
    splits: dict[str, tuple[str, ...]]
    synonyms: dict[str, str]
    pairs: dict[tuple[str, str], str]
    stats: frozenset[str]
    held_out: frozenset[str]
    common: frozenset[str]
    min_confidence: float = 0.7
    margin: float = 0.05
    unexplained_penalty: float = 0.3


@dataclass(frozen=True, slots=True)
class Match:
    """A key read as a signal by one pattern, with the confidence of the reading."""

    key: str
    signal: str                  # "eval" for an eval score: the signal is then eval:<key>
    pattern: str
    confidence: float
    log: bool = False            # the signal is ln of the key's values (see Pattern.log)

    @property
    def target(self) -> str:
        return f"{EVAL}:{self.key}" if self.signal == EVAL else self.signal


@dataclass(frozen=True, slots=True)
class Guesses:
    """What inference decided: signal -> the match used, and signal -> the keys that tied for it."""

    chosen: dict[str, Match] = field(default_factory=dict)
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)


def tokenize(key: str) -> tuple[str, ...]:
    """The words of a key, lower-cased: split at / _ - . space and other punctuation, at camelCase humps
    and between letters and digits ('policyEntropy' -> policy entropy, 'pass@1' -> pass 1)."""
    return tuple(w.lower() for part in _SEPARATORS.split(key) for w in _WORD.findall(part))


def canonical_words(key: str, patterns: NamePatterns | None = None) -> tuple[str, ...]:
    """The key's words in canonical form: splits, then synonyms, then p<digits> (a percentile), l<digits>
    (a norm) and pass@k joined, then adjacent pairs joined ('learning rate' -> lr)."""
    table = patterns or default_patterns()
    words = [part for w in tokenize(key) for part in table.splits.get(w, (w,))]
    words = [table.synonyms.get(w, w) for w in words]
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        after = words[i + 2] if i + 2 < len(words) else ""
        if w == "p" and nxt.isdigit():
            out.append("p" + nxt)
            i += 2
        elif w == "l" and nxt.isdigit():           # an Lp norm: grad_norm_l2
            out.append("l" + nxt)
            i += 2
        elif w == "pass" and _is_k(nxt):
            out.append("passk")
            i += 2
        elif w == "pass" and nxt == "at" and _is_k(after):
            out.append("passk")
            i += 3
        elif (w, nxt) in table.pairs:
            out.append(table.pairs[(w, nxt)])
            i += 2
        else:
            out.append(w)
            i += 1
    return tuple(out)


def _is_k(word: str) -> bool:
    return word.isdigit() or word in ("k", "n")


def _is_stat(word: str, stats: frozenset[str]) -> bool:
    return word in stats or _PERCENTILE.fullmatch(word) is not None


def score(words: tuple[str, ...], pattern: Pattern, table: NamePatterns) -> float | None:
    """The pattern's confidence for these canonical words, or None when it does not apply."""
    required = frozenset().union(*pattern.groups)
    if any(w in pattern.none for w in words):
        return None
    if any(_is_stat(w, table.stats) and w not in required for w in words):
        return None
    if not any(g & table.held_out for g in pattern.groups) and any(w in table.held_out for w in words):
        return None
    if not all(g.intersection(words) for g in pattern.groups):
        return None
    if pattern.free:
        return pattern.confidence
    explained = required | pattern.allow | (table.common if pattern.common else frozenset())
    unexplained = {w for w in words if w not in explained and not (pattern.numbers and w.isdigit())}
    return round(pattern.confidence - table.unexplained_penalty * len(unexplained), 6)


def match_key(key: str, patterns: NamePatterns | None = None) -> Match | None:
    """The confident reading of one key, or None (no pattern confident, or two signals tied)."""
    table = patterns or default_patterns()
    words = canonical_words(key, table)
    best: dict[str, Match] = {}
    for pattern in table.patterns:
        conf = score(words, pattern, table)
        if conf is None or conf < table.min_confidence:
            continue
        if pattern.signal not in best or conf > best[pattern.signal].confidence:
            best[pattern.signal] = Match(key, pattern.signal, pattern.id, conf, pattern.log)
    if not best:
        return None
    ranked = sorted(best.values(), key=lambda m: -m.confidence)
    if len(ranked) > 1 and ranked[0].confidence - ranked[1].confidence <= table.margin:
        return None
    return ranked[0]


def guess_signals(keys: Iterable[str], present: Iterable[str], patterns: NamePatterns | None = None) -> Guesses:
    """Guess signals for `keys` (the run's unmapped keys), skipping the signals already `present`.

    An eval is one signal per key (eval:<key>).  Any other signal is guessed only when one key leads
    every other candidate by more than the margin; otherwise its candidates are reported as ambiguous."""
    table = patterns or default_patterns()
    have = set(present)
    candidates: dict[str, list[Match]] = {}
    for key in keys:
        match = match_key(key, table)
        if match is not None and match.target not in have:
            candidates.setdefault(match.signal, []).append(match)
    chosen: dict[str, Match] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    for signal, matches in candidates.items():
        if signal == EVAL:
            chosen.update((m.target, m) for m in matches)
            continue
        top = max(m.confidence for m in matches)
        close = sorted((m for m in matches if top - m.confidence <= table.margin), key=lambda m: -m.confidence)
        if len(close) == 1:
            chosen[signal] = close[0]
        else:
            ambiguous[signal] = tuple(m.key for m in close)
    return Guesses(chosen, ambiguous)


def _words(value, path: str, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuleError(path, f"{where}: expected a list of words; got {value!r}")
    return frozenset(value)


def _pattern(body: dict, path: str, text: str) -> Pattern:
    pid = str(body.get("id", "?"))

    def fail(problem: str) -> RuleError:      # the line is looked up only for an error: not at every start-up
        return RuleError(path, f"pattern {pid}: {problem}", line=_toml.line_of(text, f'id = "{pid}"'))

    unknown = set(body) - _PATTERN_KEYS
    if unknown:
        raise fail(f"unknown key {sorted(unknown)[0]!r}")
    groups = body.get("all")
    if not pid or "signal" not in body or not isinstance(groups, list) or not groups:
        raise fail("needs id, signal and a non-empty `all`")
    return Pattern(pid, str(body["signal"]),
                   tuple(_words(g if isinstance(g, list) else [g], path, f"pattern {pid}: all") for g in groups),
                   _words(body.get("allow", []), path, f"pattern {pid}: allow"),
                   _words(body.get("none", []), path, f"pattern {pid}: none"),
                   float(body.get("confidence", 0.9)), bool(body.get("free", False)),
                   bool(body.get("common", True)), bool(body.get("numbers", False)), bool(body.get("log", False)))


def parse_name_patterns(text: str, path: str, *, shipped: bool = False) -> NamePatterns:
    """Parse name_patterns.toml; a malformed pattern is a RuleError naming the file, line and pattern."""
    try:
        data = _toml.loads(text, path if shipped else None)
    except _toml.TOMLDecodeError as exc:
        raise RuleError(path, f"not valid TOML: {exc}") from None
    vocab = data.get("vocabulary", {})
    settings = data.get("settings", {})
    pairs = {}
    for joined, word in vocab.get("pairs", {}).items():
        first, _, second = joined.partition(" ")
        if not second or " " in second:
            raise RuleError(path, f"vocabulary.pairs: '{joined}' is not two words")
        pairs[(first, second)] = str(word)
    return NamePatterns(
        patterns=tuple(_pattern(body, path, text) for body in data.get("pattern", [])),
        splits={k: tuple(v) for k, v in vocab.get("splits", {}).items()},
        synonyms={k: str(v) for k, v in vocab.get("synonyms", {}).items()},
        pairs=pairs,
        stats=_words(vocab.get("stats", []), path, "vocabulary.stats"),
        held_out=_words(vocab.get("held_out", []), path, "vocabulary.held_out"),
        common=_words(vocab.get("common", []), path, "vocabulary.common"),
        min_confidence=float(settings.get("min_confidence", 0.7)),
        margin=float(settings.get("margin", 0.05)),
        unexplained_penalty=float(settings.get("unexplained_penalty", 0.3)),
    )


@lru_cache(maxsize=1)
def default_patterns() -> NamePatterns:
    ref = Path(__file__).with_name("name_patterns.toml")
    return parse_name_patterns(ref.read_text(encoding="utf-8"), str(ref), shipped=True)
