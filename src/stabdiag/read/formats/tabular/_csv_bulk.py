"""Big CSV and TSV files in bulk: pyarrow's CSV parser, block by block, into the table the cell-by-cell
reader (stabdiag.read.formats.tabular._csv) would give; None when it cannot be sure of that, and that reader reads it.

Why the two agree:
- metric columns are parsed as float64.  Arrow's parser takes a part of what Python's float() takes, with the
  same correctly rounded values, except `nan(...)` and numbers too large for float64 (both read as NaN or
  Inf), so the cells behind every Inf, and behind every NaN of a file holding a `(`, are read again as text
  and checked.  A column that is not all numbers is read as text: a regular expression finds in bulk the
  cells that float() cannot take, and the others are read one by one;
- steps are parsed as float64 and kept when each is an integer below 2**53; otherwise read as text;
- the key column of a long table is read as codes into its names (no Python string per row);
- a row's line is its row number + 2 when the file has one line per row (the reader counts them); blank
  lines, line breaks inside quotes, ragged rows, text that is not UTF-8, anything the parser refuses: None.
"""

from __future__ import annotations

import csv
import os

import numpy as np

from ..._textio import complete_length, is_gzip, open_bytes, unfinished_line_note
from .. import _arrow
from .._progress import ByteProgress
from ._columns import (
    NAN_WORDS,
    Column,
    ColumnParts,
    Table,
    cells_column,
    kind_of,
    numbers_column,
    numbers_from_cells,
    parse_cell,
)
from ._grammar import LINE, unique_names

_SAMPLE_BYTES = 1 << 16          # the header and the rows that guess which columns are text
_BLOCK_BYTES = 1 << 20
_RETRIES = 3                     # columns found to be text only past the sample, before giving up
_BOM = b"\xef\xbb\xbf"
_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f\x85\pZ]"       # exactly what str.strip() removes
_DIGIT = r"(?:[0-9_]|[^\x00-\x7f])"            # any non-ASCII may be a digit float() reads
# every text float() reads matches (and some it does not: those are read one by one)
MAYBE_NUMBER = rf"^{_WS}*[+-]?(?:{_DIGIT}*\.?{_DIGIT}*(?:[eE][+-]?{_DIGIT}+)?|(?i:nan|inf|infinity)){_WS}*$"
BLANK = rf"^{_WS}*$"


class _Retry(Exception):
    """A column parsed as numbers holds text further down: read again with it as text."""


def read(path: str, sep: str, *, step_col: str | None = None, progress: bool = False) -> Table | None:
    head = _head(path, sep)
    if head is None:
        return None
    names, textual, row_bytes = head
    import pyarrow as pa

    kinds = {name: kind_of(name, step_col) for name in names}
    types = {name: pa.dictionary(pa.int32(), pa.string()) if kinds[name] == "key"
             else pa.string() if name in textual else pa.float64() for name in names}
    limit, tail = (None, False) if is_gzip(path) else complete_length(path)
    capacity = 1 << 16 if limit is None else int(limit / row_bytes * 1.02) + 1024
    with ByteProgress(progress, os.path.getsize(path), os.path.basename(path)) as bar:
        for _ in range(_RETRIES + 1):
            source = _Source(path, limit, bar)
            try:
                rows, columns = _stream(source, sep, names, types, kinds, capacity)
            except _Retry as retry:
                types[str(retry)] = pa.string()
                continue
            except Exception as exc:           # ragged rows, bad UTF-8, damaged gzip...: the text reader says
                if _arrow.is_error(exc) or isinstance(exc, (OSError, EOFError, ValueError)):
                    return None
                raise
            break
        else:
            return None
    if source.lines() != rows + 1:
        return None
    if not _settle(path, sep, columns, types, kinds, limit, source.parens):
        return None
    notes = [unfinished_line_note(path, source.newlines + 1)] if tail else []
    return Table(columns, rows, lambda row: row + 2, notes)


def _head(path: str, sep: str) -> tuple[list[str], set[str], float] | None:
    """The header, the columns that the first rows show to be text and the bytes of a row; None when the
    head is not one plain header line with rows of its width under it."""
    with open_bytes(path) as fh:
        raw = fh.read(_SAMPLE_BYTES)
    raw = raw[len(_BOM):] if raw.startswith(_BOM) else raw
    cut = raw.rfind(b"\n")
    try:
        text = raw[:cut + 1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows = list(csv.reader(LINE.findall(text), delimiter=sep))
    if not rows or not rows[0] or unique_names(rows[0]) != rows[0] or any(len(r) != len(rows[0]) for r in rows):
        return None
    textual = set()
    for name, cells in zip(rows[0], zip(*rows[1:])):
        if any(parse_cell(c)[0] is None for c in cells if c.strip()):
            textual.add(name)
    return rows[0], textual, (cut + 1) / len(rows)


class _Source:
    """The bytes the parser reads: the file up to its last whole line, with the newlines counted, whether
    a `(` was seen, and how far it has got for the progress bar."""

    def __init__(self, path: str, limit: int | None, bar: ByteProgress) -> None:
        self.fh = open_bytes(path)
        self.raw = getattr(self.fh, "fileobj", None) or self.fh      # the compressed bytes of a gzip file
        self.left, self.bar = limit, bar
        self.newlines, self.parens, self.last, self.first = 0, False, b"\n", True
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        if self.left is not None:
            size = self.left if size < 0 else min(size, self.left)
        data = self.fh.read(size)
        if self.first:
            self.first = False
            data = data[len(_BOM):] if data.startswith(_BOM) else data
        if self.left is not None:
            self.left -= len(data)
        if data:
            self.newlines += data.count(b"\n")
            self.parens = self.parens or b"(" in data
            self.last = data[-1:]
        self.bar.update(self.raw.tell())
        return data

    def lines(self) -> int:
        return self.newlines + (self.last != b"\n")

    def close(self) -> None:
        self.closed = True
        self.fh.close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def _stream(source: _Source, sep: str, names: list[str], types: dict, kinds: dict[str, str],
            capacity: int) -> tuple[int, dict[str, Column]]:
    """The rows and the columns of the file, read batch by batch."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True,
                                   quoted_strings_can_be_null=True)
    parts = ColumnParts(capacity)
    with pa.PythonFile(source, mode="r") as stream:
        try:                                     # opening reads the first block
            reader = pacsv.open_csv(stream, read_options=pacsv.ReadOptions(use_threads=False, block_size=_BLOCK_BYTES),
                                    parse_options=pacsv.ParseOptions(delimiter=sep), convert_options=options)
        except pa.ArrowInvalid as exc:
            raise _failed_column(exc, names, types) from None
        if reader.schema.names != names:
            raise ValueError("the parser reads another header")
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as exc:
                raise _failed_column(exc, names, types) from None
            parts.add({name: _column(batch.column(i), kinds[name]) for i, name in enumerate(names)}, batch.num_rows)
    rows = parts.rows
    return rows, parts.columns()


def _failed_column(exc: Exception, names: list[str], types: dict) -> Exception:
    """_Retry naming a column read as numbers that holds text further down; else the error itself."""
    import pyarrow as pa

    text = str(exc)
    if text.startswith("In CSV column #") and "conversion error to double" in text:
        index = int(text[len("In CSV column #"):].split(":", 1)[0])
        if types[names[index]] == pa.float64():
            return _Retry(names[index])
    return exc


def _column(arr, kind: str) -> Column:
    import pyarrow as pa

    if arr.type == pa.float64():
        return numbers_column(*_arrow.floats(arr))
    if pa.types.is_dictionary(arr.type):
        names = arr.dictionary.to_pylist()
        blank = np.array([not name.strip() for name in names] + [True], dtype=bool)
        codes = np.where(_arrow.valid(arr), _arrow.fixed(arr.indices), -1).astype(np.int64)
        codes[blank[codes]] = -1                    # a blank key is not written, as in the text reader
        return Column(codes >= 0, codes=codes, names=names)
    if kind == "step":
        return cells_column(np.fromiter(arr.to_pylist(), object, len(arr)))
    return text_numbers(arr)


def text_numbers(arr) -> Column:
    """A column of text as numbers: the cells float() cannot read found in bulk, the rest read one by one."""
    import pyarrow.compute as pc

    written = _arrow.valid(arr) & ~_arrow.booleans(pc.match_substring_regex(arr, BLANK))
    maybe = _arrow.booleans(pc.match_substring_regex(arr, MAYBE_NUMBER)) & written
    rows = np.flatnonzero(maybe)
    cells = np.empty(len(arr), dtype=object)
    cells[rows] = _texts_at(arr, rows.tolist())
    col = numbers_from_cells(cells, maybe)
    junk = col.junk
    not_numbers = np.flatnonzero(written & ~maybe)
    if len(not_numbers) and (junk is None or not_numbers[0] < junk[0]):
        junk = (int(not_numbers[0]), arr[int(not_numbers[0])].as_py()[:40])
    return Column(written, values=col.values, parsed=col.parsed, junk=junk, overflow=col.overflow)


def _texts_at(arr, rows: list[int]) -> list[str]:
    """The texts of some rows of a string array."""
    if len(rows) > len(arr) // 64:
        every = arr.to_pylist()
        return [every[row] for row in rows]
    return [arr[row].as_py() for row in rows]


def _settle(path: str, sep: str, columns: dict[str, Column], types: dict, kinds: dict[str, str],
            limit: int | None, parens: bool) -> bool:
    """Turn float64 steps into exact steps and check the cells behind NaN and Inf, reading the columns
    that need it again as text; False when that second read fails."""
    import pyarrow as pa

    again = []
    for name, col in columns.items():
        if col.values is None or types[name] != pa.float64():
            continue
        values, written = col.values, col.written
        if kinds[name] == "step":
            with np.errstate(invalid="ignore"):
                exact = np.isfinite(values) & (np.floor(values) == values) & (np.abs(values) < 2.0 ** 53)
            if (exact | ~written).all():
                columns[name] = Column(written, ints=np.where(written, values, 0).astype(np.int64))
                continue
        elif not (np.isinf(values) & written).any() and not (parens and (np.isnan(values) & written).any()):
            continue
        again.append(name)
    if not again:
        return True
    try:
        texts = _texts(_Source(path, limit, ByteProgress(False, 1, "")), sep, again)
    except Exception as exc:
        if _arrow.is_error(exc) or isinstance(exc, (OSError, EOFError, ValueError)):
            return False
        raise
    for name in again:
        if kinds[name] == "step":
            columns[name] = cells_column(np.fromiter(texts[name].to_pylist(), object, len(texts[name])))
        else:
            columns[name] = _checked(columns[name], texts[name])
    return True


def _texts(source: _Source, sep: str, only: list[str]) -> dict:
    """Some columns read again as text (pyarrow string arrays)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.ConvertOptions(column_types={name: pa.string() for name in only}, null_values=[""],
                                   strings_can_be_null=True, quoted_strings_can_be_null=True, include_columns=only)
    with pa.PythonFile(source, mode="r") as stream:
        table = pacsv.read_csv(stream, read_options=pacsv.ReadOptions(use_threads=False, block_size=_BLOCK_BYTES),
                               parse_options=pacsv.ParseOptions(delimiter=sep), convert_options=options)
    return {name: pa.concat_arrays(table.column(name).chunks) if table.column(name).num_chunks != 1
            else table.column(name).chunk(0) for name in only}


def _checked(col: Column, texts) -> Column:
    """The float64 column with what its text says behind each NaN and Inf: a NaN float() would not read is
    junk (the column is then read from its text), an Inf written as a number is an overflow."""
    rows = np.flatnonzero(col.written & ~np.isfinite(col.values)).tolist()
    overflows = []
    for row, text in zip(rows, _texts_at(texts, rows)):
        low = text.strip().lower()
        if np.isnan(col.values[row]) and low not in NAN_WORDS:
            return text_numbers(texts)
        if np.isinf(col.values[row]) and "inf" not in low:
            overflows.append(row)
    col.overflow = (len(overflows), overflows[0]) if overflows else None
    return col
