"""What the terminal a command writes to allows: its width, and whether it takes colour."""

import os
import shutil
import sys

from ._guard import choice


def color(when: str) -> bool:
    """--color always|never, or auto: FORCE_COLOR (set, not 0) forces it, NO_COLOR (set) stops it, else
    colour exactly when stdout is a terminal (https://no-color.org, https://force-color.org)."""
    choice("--color", when, ("auto", "always", "never"))
    if when != "auto":
        return when == "always"
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    return "NO_COLOR" not in os.environ and sys.stdout.isatty()


def width() -> int:
    """The report's width: COLUMNS when set (as a terminal or a CI job sets it), else the terminal's,
    else 100 (a pipe or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
