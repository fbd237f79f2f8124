"""TOML reading with line numbers for error messages (tomllib on 3.11+, tomli before)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError
# the shipped checklist, beside this file (a plain path: importlib.resources costs a start-up for nothing)
CHECKLIST = Path(__file__).with_name("checklist")


def loads(text: str) -> dict:
    return tomllib.loads(text)


def line_of(text: str, needle: str, start_line: int = 1) -> int | None:
    """The 1-based line at or after `start_line` where `needle` first appears, for error messages."""
    for number, line in enumerate(text.splitlines()[start_line - 1:], start_line):
        if needle in line:
            return number
    return None
