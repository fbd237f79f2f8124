"""Canonical signals: which of a run's own metric keys feeds reward, kl, grad_norm, eval:<name>, …

The alias table is data (checklist/signals.toml); a user's --map SIGNAL=KEY wins over it.  Evals are found
by pattern, any number of them; an eval logged in percent is rescaled to 0–1 and the rescale noted.
The framework that wrote the run is recognised from fingerprint keys (also data in signals.toml), or
failing that from the loader's knowledge of the file format (Run.meta["framework"]).  Keys nobody
registered are read last by name inference (guess.py), on the keys still unmapped and for the signals
still missing; every guess is kept in `Signals.guessed` and said in the notes.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import _toml
from ..errors import ConfigError, RuleError
from ..read.run import Run, Series
from .checks import CHECK_PREFIX, find_checks, is_correctness_name
from .guess import NamePatterns, guess_signals
from .units import decide_units

EVAL_PREFIX = "eval:"
COMPONENT_PREFIX = "reward:"
GUESS_NOTE = "guessed from names: "
AMBIGUOUS_NOTE = " not guessed: "
_LOGGER_PREFIXES = ("", "train/")


KINDS = ("rl", "sft")          # the kinds of run (Signals.kind): RL, or SFT / pretraining


@dataclass(frozen=True, slots=True)
class SignalDef:
    name: str
    layer: int
    meaning: str
    aliases: tuple[str, ...]
    kinds: tuple[str, ...] = KINDS       # the kinds of run that log it (signals.toml `kinds`)


@dataclass(frozen=True, slots=True)
class Derivation:
    """A signal that a framework splits over several keys: offset + sum(weight * key) feeds it.
    `matching` (a {name} pattern) sums every key it matches, for counts keyed by value."""

    signal: str
    keys: tuple[str, ...]
    weights: tuple[float, ...] = ()
    offset: float = 0.0
    matching: re.Pattern | None = None


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A framework and the key groups that identify it (every key of one group present)."""

    name: str
    groups: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class AliasTable:
    signals: dict[str, SignalDef]
    eval_patterns: tuple[re.Pattern, ...]
    not_scores: tuple[str, ...]
    strip_suffixes: tuple[str, ...]
    eval_loss_patterns: tuple[re.Pattern, ...] = ()
    derivations: tuple[Derivation, ...] = ()
    frameworks: tuple[Fingerprint, ...] = ()
    component_patterns: tuple[re.Pattern, ...] = ()
    not_components: tuple[str, ...] = ()
    correctness: re.Pattern = re.compile(r"(?!)")      # names of checks (signals/checks.py)
    form: re.Pattern = re.compile(r"(?!)")
    check_patterns: tuple[re.Pattern, ...] = ()
    not_checks: tuple[str, ...] = ()

    def is_known(self, signal: str) -> bool:
        return signal in self.signals or any(signal.startswith(p) and len(signal) > len(p)
                                             for p in (EVAL_PREFIX, COMPONENT_PREFIX, CHECK_PREFIX))

    def is_correctness(self, signal: str) -> bool:
        """A reward component named for being right (accuracy, exact match, ...), not for form."""
        return is_correctness_name(signal, self.correctness, self.form)

    def fits(self, signal: str, kind: str) -> bool:
        """Whether a run of this kind ("rl" or "sft") logs the signal, so that it may be told to start
        logging it: an SFT or pretraining run has no reward, reference KL or rollout engine.  A family
        wiring counts as its members (`reward:*` are a reward's components), an unknown name as fitting."""
        if signal.startswith(COMPONENT_PREFIX):
            return kind == "rl"
        sig = self.signals.get(signal)
        return sig is None or kind in sig.kinds


@dataclass(frozen=True, slots=True)
class Signals:
    """A run's signals: canonical name -> Series (whose .key is the run's own key)."""

    run: Run
    series: dict[str, Series]
    unmapped: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    framework: str | None = None        # e.g. "verl", from fingerprint keys or the log format
    units: dict[str, str] = field(default_factory=dict)   # signal -> unit, where signals decided one
    guessed: dict[str, str] = field(default_factory=dict)   # signal -> the name pattern that guessed it
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)   # signal -> keys tied for it
    checks: dict[str, str] = field(default_factory=dict)   # independent check -> why (signals/checks.py)

    def get(self, name: str) -> Series | None:
        return self.series.get(name)

    def evals(self) -> dict[str, Series]:
        return {k: v for k, v in self.series.items() if k.startswith(EVAL_PREFIX)}

    def matching(self, pattern: str) -> list[str]:
        """The signal names a rule's `family:*` wiring stands for (every eval:, every reward:)."""
        prefix = pattern[:-1]
        return [k for k in self.series if k.startswith(prefix) and len(k) > len(prefix)]

    def mapping(self) -> dict[str, str]:
        return {name: s.key for name, s in self.series.items()}

    def guessed_keys(self) -> dict[str, str]:
        """signal -> key for the signals read by name inference, not by --map or the alias table."""
        return {name: self.series[name].key for name in self.guessed if name in self.series}

    @property
    def kind(self) -> str:
        """"rl" when the run logs a reward, KL, entropy or rollout signal, else "sft" (supervised
        fine-tuning or pretraining: loss, grad norm, eval loss)."""
        return "rl" if any(name in self.series for name in _RL_SIGNALS) else "sft"


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"(\{name\}|\{n\})", template)
    regex = "".join("(?P<name>.+)" if p == "{name}" else r"\d+" if p == "{n}" else re.escape(p)
                    for p in parts)
    return re.compile(f"^{regex}$")


def parse_alias_table(text: str, path: str, *, shipped: bool = False) -> AliasTable:
    try:
        data = _toml.loads(text, path if shipped else None)
    except _toml.TOMLDecodeError as exc:
        raise RuleError(path, f"not valid TOML: {exc}") from None
    signals: dict[str, SignalDef] = {}
    for name, body in data.get("signal", {}).items():
        unknown = set(body) - {"layer", "meaning", "aliases", "kinds"}
        if unknown:
            raise RuleError(path, f"signal {name}: unknown key {sorted(unknown)[0]!r}",
                            line=_toml.line_of(text, f"[signal.{name}]"))
        kinds = tuple(body.get("kinds", KINDS))
        if not kinds or any(k not in KINDS for k in kinds):
            raise RuleError(path, f"signal {name}: kinds must name some of {', '.join(KINDS)}; got {list(kinds)}",
                            line=_toml.line_of(text, f"[signal.{name}]"))
        signals[name] = SignalDef(name, int(body.get("layer", 0)), str(body.get("meaning", "")),
                                  tuple(dict.fromkeys([name, *body.get("aliases", [])])), kinds)
    ev = data.get("eval", {})
    derivations = []
    for body in data.get("derive", []):
        if body.get("signal") not in signals:
            raise RuleError(path, f"derive: unknown signal {body.get('signal')!r}",
                            line=_toml.line_of(text, "[[derive]]"))
        keys = tuple(body.get("keys", []))
        weights = tuple(float(w) for w in body.get("weights", [1.0] * len(keys)))
        if len(weights) != len(keys):
            raise RuleError(path, f"derive {body['signal']}: {len(weights)} weights for {len(keys)} keys",
                            line=_toml.line_of(text, "[[derive]]"))
        matching = _pattern(body["matching"]) if body.get("matching") else None
        derivations.append(Derivation(body["signal"], keys, weights, float(body.get("offset", 0.0)), matching))
    frameworks = tuple(Fingerprint(str(body["name"]), tuple(tuple(g) for g in body.get("match", [])))
                       for body in data.get("framework", []))
    check = data.get("check", {})
    try:
        correctness, form = re.compile(check.get("correctness", "(?!)"), re.IGNORECASE), \
            re.compile(check.get("form", "(?!)"), re.IGNORECASE)
    except re.error as exc:
        raise RuleError(path, f"check: not a regular expression ({exc})", line=_toml.line_of(text, "[check]")) from None
    return AliasTable(signals, tuple(_pattern(p) for p in ev.get("patterns", [])),
                      tuple(ev.get("not_scores", [])), tuple(ev.get("strip_suffixes", [])),
                      tuple(_pattern(p) for p in ev.get("loss_patterns", [])), tuple(derivations), frameworks,
                      tuple(_pattern(p) for p in data.get("component", {}).get("patterns", [])),
                      tuple(data.get("component", {}).get("not_names", [])), correctness, form,
                      tuple(_pattern(p) for p in check.get("patterns", [])), tuple(check.get("not_names", [])))


@lru_cache(maxsize=1)
def default_alias_table() -> AliasTable:
    ref = Path(__file__).with_name("signals.toml")
    return parse_alias_table(ref.read_text(encoding="utf-8"), str(ref), shipped=True)


def _is_not_score(name: str, words: tuple[str, ...]) -> bool:
    """A word matches the start of a word of the name ('len' in 'response_len', not in 'challenge');
    words of four or more letters, or with a non-letter in them, also match anywhere ('CrossEntropyLoss')."""
    low = name.lower()
    parts = [p for p in re.split(r"[^a-z0-9]+", low) if p]
    for word in words:
        if len(word) >= 4 or not word.isalpha():
            if word in low:
                return True
        elif any(p.startswith(word) for p in parts):
            return True
    return False


def _eval_name(key: str, table: AliasTable) -> str | None:
    for pattern in table.eval_patterns:
        match = pattern.match(key)
        if match is None:
            continue
        name = match.group("name")
        if _is_not_score(name, table.not_scores):
            return None
        for suffix in table.strip_suffixes:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        return name
    return None


def parse_mapping(items: list[str] | None) -> dict[str, str]:
    """`--map SIGNAL=KEY` options into a dict; a malformed item is a ConfigError naming --map."""
    mapping: dict[str, str] = {}
    for item in items or []:
        signal, sep, key = item.partition("=")
        if not sep or not signal.strip() or not key.strip():
            raise ConfigError(f"--map: expected SIGNAL=KEY, got {item!r}")
        mapping[signal.strip()] = key.strip()
    return mapping


def resolve(run: Run, mapping: dict[str, str] | None = None, table: AliasTable | None = None, *,
            guess: bool = True, patterns: NamePatterns | None = None) -> Signals:
    """Resolve a run's keys to canonical signals: user mapping first, then aliases, then eval patterns,
    then (unless `guess` is False) name inference on what is still unmapped."""
    table = table or default_alias_table()
    keys = run.series
    chosen: dict[str, str] = {}
    for signal, key in (mapping or {}).items():
        if not table.is_known(signal):
            close = difflib.get_close_matches(signal, list(table.signals), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"--map: unknown signal '{signal}'{hint}")
        if key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"--map {signal}={key}: run '{run.name}' has no key '{key}'{hint}")
        chosen[signal] = key
    used = set(chosen.values())
    for name, sig in table.signals.items():
        if name in chosen:
            continue
        for alias in sig.aliases:
            hit = next((p + alias for p in _LOGGER_PREFIXES if p + alias in keys and p + alias not in used),
                       None)
            if hit is not None:
                chosen[name] = hit
                used.add(hit)
                break
    notes: list[str] = []
    series: dict[str, Series] = {name: keys[key] for name, key in chosen.items()}
    _derive(series, keys, used, table)
    _eval_loss(series, keys, used, table, notes)
    for key in keys:
        if key in used:
            continue
        name = _eval_name(key, table)
        if name is None or EVAL_PREFIX + name in series:
            continue
        series[EVAL_PREFIX + name] = keys[key]
        used.add(key)
    _components(series, keys, used, table)
    checks = find_checks(series, keys, used, table.correctness, table.form, table.check_patterns, table.not_checks)
    checks.update({name: "given with --map" for name in chosen if name.startswith(CHECK_PREFIX)})
    if checks:
        notes.append("read as independent checks beside the evals: "
                     + ", ".join(f"{name} ({why})" for name, why in checks.items()))
    guessed, ambiguous = _guesses(series, keys, used, notes, patterns) if guess else ({}, {})
    units = decide_units(series, notes)
    unmapped = tuple(k for k in keys if k not in used)
    framework = detect_framework(run, table)
    notes.extend(_coverage_notes(series))
    return Signals(run, series, unmapped, tuple(notes), framework, units, guessed, ambiguous, checks)


def _guesses(series: dict[str, Series], keys: dict[str, Series], used: set[str], notes: list[str],
             patterns: NamePatterns | None) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Name inference on the keys still unmapped, for the signals still missing; says what it did."""
    result = guess_signals([k for k in keys if k not in used], series, patterns)
    guessed: dict[str, str] = {}
    for signal, match in result.chosen.items():
        series[signal] = _ln(keys[match.key]) if match.log else keys[match.key]
        used.add(match.key)
        guessed[signal] = match.pattern
    if guessed:
        notes.append(GUESS_NOTE + ", ".join(f"{s} <- {'ln ' if result.chosen[s].log else ''}{series[s].key}"
                                            for s in guessed)
                     + " (--map SIGNAL=KEY corrects one, --no-guess turns guessing off)")
    for signal, candidates in result.ambiguous.items():
        notes.append(f"{signal}{AMBIGUOUS_NOTE}{len(candidates)} names fit equally ({', '.join(candidates)}); "
                     f"settle it with --map {signal}=KEY")
    return guessed, dict(result.ambiguous)


def _ln(series: Series) -> Series:
    """A perplexity's series as the loss it is exp of; a value at or below 0 is no perplexity: NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(series.values > 0, np.log(series.values), np.nan)
        old = np.where(series.superseded_values > 0, np.log(series.superseded_values), np.nan)
    return replace(series, values=values, superseded_values=old)


def is_guess_note(note: str) -> bool:
    """A note written by name inference (the reporters that list guesses themselves skip it)."""
    return note.startswith(GUESS_NOTE) or AMBIGUOUS_NOTE in note


def _has(keys, key: str) -> str | None:
    return next((p + key for p in _LOGGER_PREFIXES if p + key in keys), None)


def _derive(series: dict[str, Series], keys: dict[str, Series], used: set[str], table: AliasTable) -> None:
    """A signal split over several keys (ROLL all-correct + all-incorrect groups) is their weighted sum."""
    for rule in table.derivations:
        if rule.signal in series:
            continue
        if rule.matching is not None:
            found = [k for k in keys if k not in used and rule.matching.match(k)]
            weights = [1.0] * len(found)
        else:
            found = [_has(keys, k) for k in rule.keys]
            weights = list(rule.weights)
        if not found or None in found:
            continue
        parts = [keys[k] for k in found]
        steps = parts[0].steps
        for p in parts[1:]:
            steps = np.intersect1d(steps, p.steps)
        if len(steps) == 0:
            continue
        total = rule.offset + sum(w * p.values[np.searchsorted(p.steps, steps)] for w, p in zip(weights, parts))
        terms = [k if w == 1.0 else f"{w:g}*{k}" for w, k in zip(weights, found)]
        label = (f"{rule.offset:g} + " if rule.offset else "") + " + ".join(terms)
        series[rule.signal] = Series(label.replace("+ -1*", "- ").replace("+ -", "- "), steps,
                                     np.asarray(total, dtype=np.float64))
        used.update(found)


def _components(series: dict[str, Series], keys: dict[str, Series], used: set[str], table: AliasTable) -> None:
    """Reward components, one reward:<fn> per reward function (TRL rewards/<fn>/mean)."""
    for key in keys:
        if key in used:
            continue
        for pattern in table.component_patterns:
            match = pattern.match(key)
            if match and "/" not in match.group("name") and match.group("name") not in table.not_components:
                series.setdefault(COMPONENT_PREFIX + match.group("name"), keys[key])
                used.add(key)
                break


def _eval_loss(series: dict[str, Series], keys: dict[str, Series], used: set[str], table: AliasTable,
               notes: list[str]) -> None:
    """Eval losses by pattern (OLMo-core eval/<evaluator>/CE loss): the first feeds eval_loss."""
    if "eval_loss" in series or "eval_loss" not in table.signals:
        return
    hits = [k for k in keys if k not in used and any(p.match(k) for p in table.eval_loss_patterns)]
    if hits:
        series["eval_loss"] = keys[hits[0]]
        used.add(hits[0])
        if len(hits) > 1:
            notes.append(f"eval_loss <- {hits[0]}; other eval losses not judged: {', '.join(hits[1:])}")


def detect_framework(run: Run, table: AliasTable | None = None) -> str | None:
    """The framework that wrote the run: the first fingerprint whose keys are all present, else the
    loader's word for the file format (Run.meta["framework"])."""
    table = table or default_alias_table()
    for fp in table.frameworks:
        if any(group and all(_has(run.series, k) for k in group) for group in fp.groups):
            return fp.name
    meta = run.meta.get("framework") if isinstance(run.meta, dict) else None
    return str(meta) if meta else None


_RL_SIGNALS = ("reward", "kl", "entropy", "clip_frac", "update_kl", "logprob_delta", "prob_delta")


def _coverage_notes(series: dict[str, Series]) -> list[str]:
    """A pretraining / SFT run has no reward or KL: say which layers it can be judged on (layer 1 only from
    an eval loss; layers 2 and 4 read an RL run's policy and rollout engine)."""
    if any(name in series for name in _RL_SIGNALS) or "loss" not in series:
        return []
    if "eval_loss" in series:
        return ["no reward, KL or rollout signals: a pretraining/SFT run; layer 1 reads its eval loss, layer 3 "
                "its loss and grad norm, and layers 2 and 4 (an RL run's policy and rollout engine) stay unknown"]
    return ["no reward, KL or rollout signals: a pretraining/SFT run; layers 1, 2 and 4 stay unknown and "
            "the verdict rests on layer 3 (loss, grad norm) (no eval loss logged)"]
