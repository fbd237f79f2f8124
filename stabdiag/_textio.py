"""Reading text logs: plain or gzip-compressed, and JSON Lines with errors that name the line."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator

from .errors import InputError


def open_text(path: str):
    """A text handle on `path`, decompressing `.gz` files; newlines are kept as written."""
    if path.lower().endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def json_lines(path: str) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) for every non-blank line; bad JSON is an InputError at its line."""
    with open_text(path) as fh:
        for lineno, text in enumerate(fh, 1):
            text = text.strip()
            if not text:
                continue
            try:
                yield lineno, json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(path, f"not valid JSON ({exc.msg})", line=lineno) from None
