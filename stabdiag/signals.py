"""Canonical signals: which of a run's own metric keys feeds reward, kl, grad_norm, eval:<name>, …

The alias table is data (rules/signals.toml); a user's --map SIGNAL=KEY wins over it.  Evals are found
by pattern, any number of them; an eval logged in percent is rescaled to 0–1 and the rescale noted.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np

from . import _toml
from .errors import ConfigError, RuleError
from .run import Run, Series

EVAL_PREFIX = "eval:"
_LOGGER_PREFIXES = ("", "train/")


@dataclass(frozen=True, slots=True)
class SignalDef:
    name: str
    layer: int
    meaning: str
    aliases: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AliasTable:
    signals: dict[str, SignalDef]
    eval_patterns: tuple[re.Pattern, ...]
    not_scores: tuple[str, ...]
    strip_suffixes: tuple[str, ...]

    def is_known(self, signal: str) -> bool:
        return signal in self.signals or (signal.startswith(EVAL_PREFIX) and len(signal) > len(EVAL_PREFIX))


@dataclass(frozen=True, slots=True)
class Signals:
    """A run's signals: canonical name -> Series (whose .key is the run's own key)."""

    run: Run
    series: dict[str, Series]
    unmapped: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    def get(self, name: str) -> Series | None:
        return self.series.get(name)

    def evals(self) -> dict[str, Series]:
        return {k: v for k, v in self.series.items() if k.startswith(EVAL_PREFIX)}

    def mapping(self) -> dict[str, str]:
        return {name: s.key for name, s in self.series.items()}


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"(\{name\}|\{n\})", template)
    regex = "".join("(?P<name>.+)" if p == "{name}" else r"\d+" if p == "{n}" else re.escape(p)
                    for p in parts)
    return re.compile(f"^{regex}$")


def parse_alias_table(text: str, path: str) -> AliasTable:
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise RuleError(path, f"not valid TOML: {exc}") from None
    signals: dict[str, SignalDef] = {}
    for name, body in data.get("signal", {}).items():
        unknown = set(body) - {"layer", "meaning", "aliases"}
        if unknown:
            raise RuleError(path, f"signal {name}: unknown key {sorted(unknown)[0]!r}",
                            line=_toml.line_of(text, f"[signal.{name}]"))
        signals[name] = SignalDef(name, int(body.get("layer", 0)), str(body.get("meaning", "")),
                                  tuple(dict.fromkeys([name, *body.get("aliases", [])])))
    ev = data.get("eval", {})
    return AliasTable(signals, tuple(_pattern(p) for p in ev.get("patterns", [])),
                      tuple(ev.get("not_scores", [])), tuple(ev.get("strip_suffixes", [])))


@lru_cache(maxsize=1)
def default_alias_table() -> AliasTable:
    ref = resources.files("stabdiag") / "rules" / "signals.toml"
    return parse_alias_table(ref.read_text(encoding="utf-8"), str(ref))


def _eval_name(key: str, table: AliasTable) -> str | None:
    for pattern in table.eval_patterns:
        match = pattern.match(key)
        if match is None:
            continue
        name = match.group("name")
        low = name.lower()
        if any(word in low for word in table.not_scores):
            return None
        for suffix in table.strip_suffixes:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                break
        return name
    return None


def _as_fraction(series: Series) -> tuple[Series, bool]:
    """An eval logged in percent (values in 1.5–100) is rescaled to 0–1."""
    finite = series.values[np.isfinite(series.values)]
    if len(finite) and finite.min() >= 0 and 1.5 < finite.max() <= 100:
        return Series(series.key, series.steps, series.values / 100.0, series.wall_time,
                      series.superseded_steps, series.superseded_values / 100.0), True
    return series, False


def parse_mapping(items: list[str] | None) -> dict[str, str]:
    """`--map SIGNAL=KEY` options into a dict; a malformed item is a ConfigError naming --map."""
    mapping: dict[str, str] = {}
    for item in items or []:
        signal, sep, key = item.partition("=")
        if not sep or not signal.strip() or not key.strip():
            raise ConfigError(f"--map: expected SIGNAL=KEY, got {item!r}")
        mapping[signal.strip()] = key.strip()
    return mapping


def resolve(run: Run, mapping: dict[str, str] | None = None, table: AliasTable | None = None) -> Signals:
    """Resolve a run's keys to canonical signals: user mapping first, then aliases, then eval patterns."""
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
    for key in keys:
        if key in used:
            continue
        name = _eval_name(key, table)
        if name is None or EVAL_PREFIX + name in series:
            continue
        scaled, rescaled = _as_fraction(keys[key])
        if rescaled:
            notes.append(f"{key}: read as a percentage and rescaled to 0-1")
        series[EVAL_PREFIX + name] = scaled
        used.add(key)
    for signal, key in chosen.items():
        if signal.startswith(EVAL_PREFIX):
            series[signal], _ = _as_fraction(keys[key])
    unmapped = tuple(k for k in keys if k not in used)
    return Signals(run, series, unmapped, tuple(notes))
