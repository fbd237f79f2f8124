"""CSV and TSV tables: a big file in bulk with pyarrow's parser (stabdiag.read.formats.tabular._csv_bulk), a small one
(or one the bulk reader is not sure of) here, with the csv module, so that a check of a small file never
imports pyarrow or pandas.  Both give the same table; this reader is the one meaning.

- the first non-blank row is the header; an empty name is `Unnamed: <i>` and a repeated one `<name>.<k>`
  (as pandas names them); a blank line (empty or whitespace only) is skipped
- a row with fewer cells than the header, or more (unless the extra cells are blank: a trailing
  delimiter), is not read: it is skipped with a note naming its line (a torn or glued line, as a job
  killed mid-line and resumed leaves), never read as values; a table whose rows are mostly such rows is
  an error naming the first
- an empty or blank cell was not written; the last line without its newline is left out with a note
  (stabdiag.read._textio), and a first byte-order mark is dropped
"""

from __future__ import annotations

import csv
import os
from itertools import zip_longest

import numpy as np

from ....errors import InputError
from ..._budget import KEYS_MAX, gzip_size, too_many_keys
from ..._textio import SkippedLines, complete_text, is_gzip, open_bytes
from ...run import in_step_range
from .._progress import ByteProgress
from ._columns import Column, ColumnParts, Table, cells_column, kind_of, lines_from, numbers_column, numbers_from_cells
from ._grammar import LINE, unique_names

BULK_BYTES = 4 << 20        # from this size on (decompressed) the bulk reader goes first
_BLOCK_ROWS = 16384


def read_delimited(path: str, sep: str, *, step_col: str | None = None, progress: bool = False) -> Table:
    with open_bytes(path) as fh:
        if b"\x00" in fh.read(4096):
            raise InputError(path, "binary data, not a text table")
    if (gzip_size(path) if is_gzip(path) else os.path.getsize(path)) >= BULK_BYTES:     # decompressed size
        from . import _csv_bulk

        table = _csv_bulk.read(path, sep, step_col=step_col, progress=progress)
        if table is not None:
            return table
    return read_text(path, sep, step_col=step_col, progress=progress)


def read_text(path: str, sep: str, *, step_col: str | None = None, progress: bool = False) -> Table:
    """The table read row by row with the csv module, in blocks of rows turned into columns."""
    notes: list[str] = []
    text = complete_text(path, notes)
    if not text.strip():
        raise InputError(path, "no rows" + (f" ({notes[0]})" if notes else ""))
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = _Lines(text)
    reader = csv.reader(lines, delimiter=sep)
    try:
        with ByteProgress(progress, len(text), os.path.basename(path)) as bar:
            return _read_rows(path, reader, lines, bar, step_col, notes)
    except csv.Error as exc:
        raise InputError(path, f"cannot read as CSV: {exc}", line=reader.line_num) from None


def _read_rows(path: str, reader, lines: _Lines, bar: ByteProgress, step_col, notes: list[str]) -> Table:
    header = None
    parts = ColumnParts(lines.text.count("\n") + 1)
    block: list[list[str]] = []
    row_lines: list[int] = []
    last = 0
    skipped = SkippedLines(path)
    for row in reader:
        first, last = last + 1, reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if header is None:
            if len(row) > KEYS_MAX:
                raise too_many_keys(path, len(row))
            header = unique_names(row)
            kinds = [kind_of(name, step_col) for name in header]
            continue
        if len(row) < len(header) or (len(row) > len(header) and any(cell.strip() for cell in row[len(header):])):
            skipped.add(first, f"{len(row)} cells in a row under a header of {len(header)}")
            continue
        block.append(row)
        row_lines.append(first)
        if len(block) == _BLOCK_ROWS:
            parts.add(_block_columns(block, header, kinds), len(block))
            block = []
            bar.update(lines.done)
    if header is None:
        raise InputError(path, "no rows")
    if block:
        parts.add(_block_columns(block, header, kinds), len(block))
    bar.update(lines.done)
    skipped.check(len(row_lines))
    notes.extend(skipped.notes())
    return Table(parts.columns(), parts.rows, lines_from(np.asarray(row_lines, dtype=np.int64)), notes)


class _Lines:
    """The lines of a text for the csv module, with their ends (so that a quoted cell keeps its line
    breaks), and how far they have got."""

    def __init__(self, text: str, piece_chars: int = 1 << 16) -> None:
        self.text, self.piece_chars, self.done = text, piece_chars, 0

    def __iter__(self):
        text, start = self.text, 0
        while start < len(text):
            cut = text.find("\n", start + self.piece_chars)
            stop = len(text) if cut < 0 else cut + 1
            yield from LINE.findall(text, start, stop)
            start = self.done = stop


def _block_columns(block: list[list[str]], header: list[str], kinds: list[str]) -> dict[str, Column]:
    width = len(header)
    if all(len(row) == width for row in block):
        columns = list(zip(*block))
    else:
        columns = list(zip_longest(*block, fillvalue=""))[:width]
        columns += [("",) * len(block)] * (width - len(columns))
    return {name: text_column(cells, kind) for name, cells, kind in zip(header, columns, kinds)}


def text_column(cells: tuple[str, ...], kind: str) -> Column:
    """A block of text cells as a column: numbers in bulk with float() (int() for a step), cell by cell
    where a cell is not one, and keys for the key column of a long table."""
    if kind == "key":
        index: dict[str, int] = {}
        codes = np.array([index.setdefault(c, len(index)) if c.strip() else -1 for c in cells], dtype=np.int64)
        return Column(codes >= 0, codes=codes, names=list(index))
    if "" in cells:
        arr = np.array(cells, dtype=object)
        written = arr != ""
        texts = arr[written].tolist()
    else:
        written, texts = np.ones(len(cells), dtype=bool), cells
    try:
        if kind == "step":
            ints = np.fromiter(map(int, texts), np.int64, len(texts))
            if not in_step_range(ints).all():
                raise OverflowError
            full = np.zeros(len(cells), dtype=np.int64)
            full[written] = ints
            return Column(written, ints=full)
        values = np.fromiter(map(float, texts), np.float64, len(texts))
    except (ValueError, OverflowError):
        arr = np.array(cells, dtype=object)
        return cells_column(arr) if kind == "step" else numbers_from_cells(arr, cells_column(arr).written)
    full = np.full(len(cells), np.nan)
    full[written] = values
    col = numbers_column(full, written)
    infinite = np.flatnonzero(np.isinf(values))
    if len(infinite):                 # Inf that was not written as inf: a number too large for float64
        rows = np.flatnonzero(written)[infinite]
        over = [int(r) for r, i in zip(rows, infinite) if "inf" not in texts[i].lower()]
        if over:
            col.overflow = (len(over), over[0])
    return col
