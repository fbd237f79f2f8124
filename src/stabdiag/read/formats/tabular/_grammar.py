"""What both CSV readers (the line-by-line one in _csv and the bulk one in _csv_bulk) take a table to be:
where a line ends, as the csv module reads it, and the column names pandas gives a header."""

from __future__ import annotations

import re

LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")    # what the csv module takes for a line


def unique_names(header: list[str]) -> list[str]:
    """Column names as pandas gives them: `Unnamed: <i>` for an empty one, `<name>.<k>` for a repeat."""
    seen: set[str] = set()
    names = []
    for i, name in enumerate(header):
        base = name if name else f"Unnamed: {i}"
        candidate, k = base, 0
        while candidate in seen:
            k += 1
            candidate = f"{base}.{k}"
        seen.add(candidate)
        names.append(candidate)
    return names
