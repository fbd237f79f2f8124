"""Several reports from one read: `check -o r.json -o r.xml -o r.md` writes each file in the format its
extension names (report.FORMATS), while `--format` sets what goes to stdout."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ..errors import ConfigError
from . import FORMATS

EXTENSIONS = {ext: name for name, fmt in FORMATS.items() for ext in fmt.extensions}   # ".xml" -> "junit"


class Output(NamedTuple):
    path: str
    format: str


def format_of(path: str, fallback: str | None) -> str:
    """The format a file's extension names; a file whose extension names none takes `--format` when it
    was given, and is refused otherwise (a guess would write the wrong thing under the right name)."""
    suffix = Path(path).suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    if fallback is not None:
        return fallback
    raise ConfigError(f"--output {path}: cannot tell the format from the name; end it in {', '.join(EXTENSIONS)}, "
                      "or give --format")


def plan(paths: list[str], fallback: str | None) -> list[Output]:
    """One Output per -o, in the order given; the same file named twice is refused."""
    seen: set[str] = set()
    out = []
    for path in paths:
        key = str(Path(path).resolve())
        if key in seen:
            raise ConfigError(f"--output {path}: named twice")
        seen.add(key)
        out.append(Output(path, format_of(path, fallback)))
    return out


def with_trends(formats) -> bool:
    """Whether any of these formats draws the signals, so that the runs are judged with their trends."""
    return any(FORMATS[name].trends for name in formats)
