"""Reading text logs: plain or gzip-compressed, and JSON Lines with errors that name the line.

A log may be read while its writer is still appending to it, so a last line without its newline may be
half written (`8.281` of `8.281665186116612`).  Such a line is not read from a plain file, and the caller
gets a note saying so.  A gzip file is complete once it decompresses (its stream has an end), so its last
line is read as it is.  A JSON object line is whole exactly when it parses (no proper prefix of an object
is one), so the last line of a JSON Lines file is read when it parses and left out with a note when not.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from collections.abc import Callable, Iterator

from ..errors import InputError
from ._budget import LINE_MAX, BudgetedGzip, line_too_long

# what a damaged gzip stream raises while it is read (BadGzipFile is an OSError)
GZIP_ERRORS = (zlib.error, EOFError, gzip.BadGzipFile)


def open_text(path: str):
    """A text handle on `path`, decompressing `.gz` files; newlines are kept as written."""
    if is_gzip(path):
        return io.TextIOWrapper(BudgetedGzip(path), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def is_gzip(path: str) -> bool:
    return path.lower().endswith(".gz")


def unfinished_line_note(path: str, line: int, why: str = "") -> str:
    return (f"{os.path.basename(path)}:{line}: the last line has no newline yet{why} (the file is still "
            "being written?); not read")


def open_bytes(path: str):
    """A binary handle on `path`, decompressing `.gz` files within their budget (stabdiag.read._budget)."""
    return BudgetedGzip(path) if is_gzip(path) else open(path, "rb")


def decoded(path: str, data: bytes, line: int | None = None) -> str:
    """UTF-8 text of `data` (the whole file, or its line number `line`); bytes that are not UTF-8 are an
    InputError naming the line and the byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line is None:
            line = 1 + data.count(b"\n", 0, exc.start)
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        else:
            column = exc.start
        raise InputError(path, f"not UTF-8 text (byte 0x{data[exc.start]:02x}, the line's byte {column + 1})",
                         line=line) from None


def complete_text(path: str, notes: list[str]) -> str:
    """The file's text up to its last newline; a last line without one is left out, with a note (see the
    module docstring).  A gzip file's text is returned whole."""
    with open_bytes(path) as fh:
        data = fh.read()
    if not is_gzip(path):
        data, cut = without_unfinished_line(data)       # cut as bytes: half a UTF-8 character is no error
        if cut is not None:
            notes.append(unfinished_line_note(path, cut))
    return decoded(path, data)


def without_unfinished_line(text):
    """`text` (str or bytes) up to its last newline, and the number of the line left out after it (None
    when the text ends with a newline or that line is blank): a writer still appending may be in it."""
    newline = "\n" if isinstance(text, str) else b"\n"
    if not text or text.endswith(newline):
        return text, None
    cut = text.rfind(newline) + 1
    return text[:cut], (text.count(newline) + 1 if text[cut:].strip() else None)


def complete_length(path: str) -> tuple[int, bool]:
    """What complete_text keeps of a plain file, without reading all of it: the length of its whole lines,
    and whether a last line without its newline (holding more than blanks) is left out."""
    with open(path, "rb") as fh:
        pos = fh.seek(0, os.SEEK_END)
        unfinished = False
        while pos > 0:
            step = min(pos, 1 << 16)
            fh.seek(pos - step)
            chunk = fh.read(step)
            cut = chunk.rfind(b"\n")
            unfinished = unfinished or bool(chunk[cut + 1:].strip())
            if cut >= 0:
                return pos - step + cut + 1, unfinished
            pos -= step
        return 0, unfinished


class SkippedLines:
    """Malformed lines in the middle of a text log (a job killed mid-line and resumed appends to the same
    file: one glued or torn line), skipped so that the valid rows around them are still read.  Each is a
    note naming its line (the first few; then how many more); a file whose lines are mostly malformed is
    not a torn log of this format (at least two read lines per skipped one), and is refused with the first
    line's reason."""

    SHOWN = 3

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: list[tuple[int, str]] = []

    def add(self, line: int, why: str) -> None:
        self.lines.append((line, why))

    def check(self, read: int) -> None:
        """Raise the first line's error unless the lines read outnumber those skipped at least two to one."""
        if self.lines and 2 * len(self.lines) > read:
            line, why = self.lines[0]
            raise InputError(self.path, why, line=line)

    def notes(self) -> list[str]:
        name = os.path.basename(self.path)
        out = [f"{name}:{line}: {why}; the line was skipped (a torn or glued line: a job killed mid-line "
               "and resumed?)" for line, why in self.lines[:self.SHOWN]]
        if len(self.lines) > self.SHOWN:
            out.append(f"{name}: {len(self.lines) - self.SHOWN} more malformed line(s) skipped")
        return out


def json_lines(path: str, notes: list[str] | None = None) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) for every non-blank line; bad JSON is an InputError at its line,
    except a last line without its newline (given `notes`): that one is left out with a note."""
    for linenos, values in json_blocks(path, notes):
        yield from zip(linenos, values)


def json_blocks(path: str, notes: list[str] | None = None, *, lines_per_block: int = 8192,
                on_bytes: Callable[[int], None] | None = None) -> Iterator[tuple[list[int], list[object]]]:
    """json_lines in blocks of (line numbers, values), for readers that turn a block into columns at once;
    `on_bytes` hears how many bytes of the file (compressed, for gzip) are read after each block.  The
    lines before a bad one come as a block before its error, so that a reader meets problems in line order.
    Given `notes`, a bad line in the middle is skipped and named in a note (SkippedLines)."""
    gz = is_gzip(path)
    scan = json.decoder.JSONDecoder().scan_once      # json.loads without its wrapping, for a stripped line
    skipped = SkippedLines(path) if notes is not None else None
    read = 0
    linenos: list[int] = []
    values: list[object] = []
    with open_bytes(path) as fh:
        raw_file = getattr(fh, "fileobj", None) or fh
        try:
            for lineno, raw in enumerate(iter(lambda: fh.readline(LINE_MAX + 1), b""), 1):
                if len(raw) > LINE_MAX:
                    raise line_too_long(path, lineno)
                try:
                    text = raw.decode("utf-8").strip()
                    if not text:
                        continue
                    value, end = scan(text, 0)
                    if end != len(text):
                        raise ValueError("extra data")
                except Exception:
                    if values:
                        yield linenos, values
                        linenos, values = [], []
                    if notes is None or skipped is None or (not raw.endswith(b"\n") and not gz):
                        _refuse_line(path, raw, lineno, gz, notes)  # raises, or notes an unfinished last line
                        return
                    try:                                # a bad line in the middle: skipped, named in a note
                        _refuse_line(path, raw, lineno, gz, None)
                    except InputError as exc:
                        skipped.add(lineno, exc.problem)
                    continue
                linenos.append(lineno)
                values.append(value)
                read += 1
                if len(values) >= lines_per_block:
                    yield linenos, values
                    linenos, values = [], []
                    if on_bytes is not None:
                        on_bytes(raw_file.tell())
        except Exception:                           # a damaged gzip stream: the lines before it first
            if values:
                yield linenos, values
            raise
    if values:
        yield linenos, values
    if skipped is not None:
        skipped.check(read)
        notes.extend(skipped.notes())


def _refuse_line(path: str, raw: bytes, lineno: int, gz: bool, notes: list[str] | None) -> None:
    """A non-blank line that did not parse, read again with json.loads to say why: an InputError at its
    line, or, for an unfinished last line (given `notes`), a note, after which the reading stops.  json.loads
    reads a stripped line as the scanner does, so it fails here too."""
    unfinished = not raw.endswith(b"\n") and not gz
    try:
        json.loads(decoded(path, raw, lineno).strip())
    except (json.JSONDecodeError, InputError) as exc:
        if unfinished and notes is not None:
            notes.append(unfinished_line_note(path, lineno, " and is not whole JSON"))
            return
        if isinstance(exc, InputError):
            raise
        raise InputError(path, f"not valid JSON ({exc.msg})", line=lineno) from None
    except RecursionError:
        raise InputError(path, "not valid JSON (nested too deeply to read)", line=lineno) from None
    except ValueError as exc:            # e.g. an integer of more than 4300 digits
        raise InputError(path, f"not valid JSON ({str(exc).splitlines()[0][:120]})", line=lineno) from None
    raise InputError(path, "not valid JSON", line=lineno)
