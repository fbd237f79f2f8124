"""The settings of a `check` as every report shows them: the config file used, and each value that is not
the default with where it came from (the file or a flag).

A setting can change a verdict (`ignore = ["L1"]`, `fail-on = "warn"`, a parameter, a mapping, extra
rules), so a report never leaves one out: the terminal and Markdown reports print one line, JUnit adds
properties, GitHub annotations a notice, and the JSON report a `settings` object holding every value
with its origin.
"""

from __future__ import annotations

import math


def _keys_and_defaults() -> tuple[tuple[str, ...], dict[str, object]]:
    from ..judge.config import DEFAULTS, KEYS

    return KEYS, DEFAULTS


def _plain(value):
    """A value as JSON holds it: tuples as lists, tables as dicts, inf as "inf" (JSON has no infinity)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _text(key: str, value) -> str:
    if key == "map":
        return ", ".join(f"{signal}={metric}" for signal, metric in value.items())
    if key == "params":
        return ", ".join(f"{rule}.{name}={number:g}" for rule, ps in value.items() for name, number in ps.items())
    if isinstance(value, (tuple, list)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def changed(settings) -> list[tuple[str, str, str]]:
    """(key, value as text, origin) for every setting that is not the default, in the keys' order."""
    if settings is None:
        return []
    keys, defaults = _keys_and_defaults()
    out = []
    for key in keys:
        value = settings.value(key)
        if _plain(value) != _plain(defaults.get(key)):
            out.append((key, _text(key, value), settings.origin.get(key, "default")))
    return out


def _origin(origin: str, config: str | None) -> str:
    return origin.replace(f"file {config}", "file") if config else origin


def summary_line(settings) -> str | None:
    """One line: the config file used and what differs from the defaults; None when neither applies."""
    if settings is None:
        return None
    changes = changed(settings)
    if not changes and not settings.file:
        return None
    where = f"config {settings.file}" if settings.file else "no config file"
    if not changes:
        return f"settings: {where}; all values are the defaults"
    shown = "; ".join(f"{key} {text} ({_origin(origin, settings.file)})" for key, text, origin in changes)
    return f"settings: {where}; {shown}"


def to_dict(settings) -> dict:
    """The JSON report's `settings`: the config file, the keys that differ from the defaults, and every
    value with its origin ("default", "file <where>", "flag --x", or both for tables)."""
    keys, _ = _keys_and_defaults()
    return {"config": settings.file,
            "changed": [key for key, _, _ in changed(settings)],
            "values": {key: {"value": _plain(settings.value(key)), "origin": settings.origin.get(key, "default")}
                       for key in keys}}


def junit_properties(settings) -> list[tuple[str, str]]:
    """(name, value) JUnit properties: the config file and each changed setting."""
    if settings is None:
        return []
    props = [("stabdiag.config", settings.file or "none")]
    props += [(f"stabdiag.setting.{key}", f"{text} ({origin})") for key, text, origin in changed(settings)]
    return props
