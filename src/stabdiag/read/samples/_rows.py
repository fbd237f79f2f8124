"""Rows of the files samples are logged in (JSON Lines, plain or gzip; Parquet; W&B table JSON), each with
a locator that finds it again: a byte offset in a plain file, a line number in a gzip file, (row group, row)
in Parquet.  Scanning keeps only locators, never text, so a file of any size is indexed in bounded memory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator

from ...errors import InputError
from .._budget import LINE_MAX
from .._textio import GZIP_ERRORS, is_gzip, open_bytes

_STEP_IN_LINE = re.compile(rb'"(?:step|global_step|iteration|training_step|_step)"\s*:\s*(-?\d+)')
TABLE_MAX_BYTES = 64 << 20            # a W&B table larger than this is not read (a note says so)


def kind_of(path: str) -> str | None:
    low = path.lower()
    if low.endswith(".gz"):
        low = low[:-3]
    if low.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if low.endswith((".parquet", ".pq")):
        return "parquet"
    if low.endswith(".table.json"):
        return "table"
    return None


def head_objects(path: str, rows: int = 64, max_bytes: int = 4 << 20) -> list[dict]:
    """The JSON objects among the first `rows` lines (and `max_bytes`) of a JSON Lines file, plain or gzip;
    [] when it is unreadable or its first line is not an object."""
    out: list[dict] = []
    read = 0
    try:
        with open_bytes(path) as fh:
            for raw in fh:
                read += len(raw)
                if len(raw) > LINE_MAX or read > max_bytes or len(out) == rows:
                    break
                if not raw.strip():
                    continue
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    break
                out.append(obj)
    except ValueError:
        pass                                # a damaged line ends the head; what came before it stands
    except (OSError, UnicodeDecodeError, RecursionError, InputError, *GZIP_ERRORS):
        return []
    return out


def first_object(path: str) -> dict | None:
    """The first JSON object of a JSON Lines file (plain or gzip), or None when it has none or is unreadable."""
    head = head_objects(path, rows=1)
    return head[0] if head else None


def parquet_names(path: str) -> list[str]:
    try:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    except Exception:           # noqa: BLE001 - any pyarrow error: not a samples file we can read
        return []


def table_columns(path: str) -> list[str]:
    """The columns of a W&B table JSON, from the start of the file (W&B writes `columns` first)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return []
    match = re.search(rb'"columns"\s*:\s*(\[[^\]]*\])', head)
    if not match:
        return []
    try:
        cols = json.loads(match.group(1))
    except ValueError:
        return []
    return [str(c) for c in cols]


def steps_in_jsonl(path: str) -> Iterator[tuple[int, int]]:
    """(step, locator) for every line that names a step: a byte offset (plain) or a line number (gzip)."""
    gz = is_gzip(path)
    offset = 0
    with open_bytes(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            match = _STEP_IN_LINE.search(raw)
            if match is not None:
                yield int(match.group(1)), (lineno if gz else offset)
            offset += len(raw)


def jsonl_rows(path: str, locators: Iterable[int] | None = None) -> Iterator[tuple[dict, str]]:
    """(object, "file:line"-style place) for the lines at `locators` (all lines when None)."""
    name = os.path.basename(path)
    if locators is not None and not is_gzip(path):
        with open(path, "rb") as fh:
            for offset in sorted(locators):
                fh.seek(offset)
                obj = _parsed(fh.readline())
                if obj is not None:
                    yield obj, f"{name}@{offset}"
        return
    wanted = None if locators is None else set(locators)
    with open_bytes(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if wanted is not None and lineno not in wanted:
                continue
            obj = _parsed(raw)
            if obj is not None:
                yield obj, f"{name}:{lineno}"


def _parsed(raw: bytes) -> dict | None:
    if len(raw) > LINE_MAX or not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None                        # a damaged line among samples is skipped, never the whole file
    return obj if isinstance(obj, dict) else None


def steps_in_parquet(path: str, step_field: str) -> Iterator[tuple[int, tuple[int, int]]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for group in range(pf.num_row_groups):
        column = pf.read_row_group(group, columns=[step_field]).column(0).to_pylist()
        for i, value in enumerate(column):
            if isinstance(value, (int, float)) and value == value:
                yield int(value), (group, i)


def parquet_rows(path: str, locators: Iterable[tuple[int, int]] | None = None) -> Iterator[tuple[dict, str]]:
    import pyarrow.parquet as pq

    name = os.path.basename(path)
    pf = pq.ParquetFile(path)
    by_group: dict[int, list[int]] = {}
    if locators is None:
        by_group = {g: [] for g in range(pf.num_row_groups)}
    else:
        for group, row in locators:
            by_group.setdefault(group, []).append(row)
    for group in sorted(by_group):
        table = pf.read_row_group(group)
        rows = sorted(by_group[group]) or range(table.num_rows)
        picked = table.take(list(rows)).to_pylist()
        for row, obj in zip(rows, picked):
            yield obj, f"{name}#row{row + 1}"


def table_rows(path: str) -> list[tuple[dict, str]]:
    """The rows of a W&B table JSON (`{"columns": [...], "data": [[...], ...]}`) as objects."""
    if os.path.getsize(path) > TABLE_MAX_BYTES:
        raise InputError(path, f"a W&B table over {TABLE_MAX_BYTES >> 20} MB; not read")
    with open(path, "rb") as fh:
        try:
            doc = json.load(fh)
        except (ValueError, RecursionError):
            raise InputError(path, "not a W&B table (damaged JSON)") from None
    columns, data = doc.get("columns"), doc.get("data")
    if not isinstance(columns, list) or not isinstance(data, list):
        raise InputError(path, "not a W&B table (no columns and data)")
    name = os.path.basename(path)
    return [(dict(zip(map(str, columns), row)), f"{name}#row{i + 1}") for i, row in enumerate(data)
            if isinstance(row, list)]
