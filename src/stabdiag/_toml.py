"""TOML reading with line numbers for error messages (tomllib on 3.11+, tomli before).

The shipped TOML files (the rules in judge/checklist/, the alias table and name patterns in signals/, the
methods map in advise/) are kept parsed beside them in __pycache__ (marshal, keyed by the text's length and
CRC, as Python keeps bytecode; where the folder is not writable every start parses again): tomllib is pure
Python, and parsing them was a tenth of a cold `stabdiag check`.  Files a user gives (rules_dir,
stabdiag.toml) are always parsed.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from pathlib import Path


def _tomllib():
    """tomllib, imported on first parse: a start whose checklist comes from the cache parses nothing."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib


def __getattr__(name: str):
    if name == "TOMLDecodeError":     # read only in `except` clauses, i.e. once parsing failed
        return _tomllib().TOMLDecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def loads(text: str, shipped: str | None = None) -> dict:
    """tomllib.loads; for `shipped`, the path of a shipped TOML file, through the cache beside it."""
    if shipped is None:
        return _tomllib().loads(text)
    raw = text.encode("utf-8", "surrogatepass")
    where = Path(shipped)
    cached = where.parent / "__pycache__" / f"{where.stem}.{len(raw)}-{zlib.crc32(raw):08x}.toml.marshal"
    try:
        data = marshal.loads(cached.read_bytes())
        if isinstance(data, dict):
            return data
    except (OSError, EOFError, ValueError, TypeError):
        pass
    data = _tomllib().loads(text)
    _keep(cached, data)
    return data


def _keep(cached: Path, data: dict) -> None:
    """Write the parsed file (atomically: a check running beside reads a whole one or none) and drop the
    copies of its older texts; any failure only means the next start parses again."""
    try:
        blob = marshal.dumps(data)
        cached.parent.mkdir(exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_bytes(blob)
        os.replace(partial, cached)
        for old in cached.parent.glob(cached.name.split(".", 1)[0] + ".*.toml.marshal"):
            if old != cached:
                old.unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


def line_of(text: str, needle: str, start_line: int = 1) -> int | None:
    """The 1-based line at or after `start_line` where `needle` first appears, for error messages."""
    for number, line in enumerate(text.splitlines()[start_line - 1:], start_line):
        if needle in line:
            return number
    return None
