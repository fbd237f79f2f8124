"""CSV, TSV, JSONL, Parquet and JSON-array metric logs, wide (a step column + one column per metric) or
long (step, key, value), including the CSV that the W&B web UI exports, verl's FileLogger JSONL and typed
records with a payload (see _records).

Every format is first turned into a Table of columns (stabdiag.read.formats.tabular._columns): per column, its numbers
and which cells were written.  A cell that was never written (a sparse row: eval every 20 steps) is absent;
a cell that holds NaN was logged as NaN, and that is a finding, so the two are never confused.  The readers
are _csv (CSV, TSV; big files in bulk by _csv_bulk), _jsonl and, here, Parquet.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from ....errors import InputError
from ..._budget import check_gzip
from ..._textio import GZIP_ERRORS, is_gzip, open_text
from ...run import Run, Series, run_name_for, series_from_codes
from .. import _arrow
from ._axis import step_axis
from ._columns import KEY_COLUMNS, STEP_COLUMNS, Column, Table, keys_of, numbers_column, numbers_of

__all__ = ["KEY_COLUMNS", "STEP_COLUMNS", "WALL_COLUMNS", "can_load", "is_rollout_dump", "load"]

WALL_COLUMNS = ("_timestamp", "wall_time", "timestamp")
_NOT_METRICS = {"_runtime"}

_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
               ".parquet": "parquet", ".pq": "parquet"}
_WANDB_EXPORT = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")


def _kind(path: str) -> str | None:
    low = path.lower()
    if low.endswith(".json"):              # only an array of metric records (see _json_array)
        from . import _json_array

        return "json" if os.path.isfile(path) and _json_array.sniff(path) else None
    if low.endswith(".gz"):
        low = low[:-3]
    ext = os.path.splitext(low)[1]
    return _EXTENSIONS.get(ext)


def can_load(path: str) -> bool:
    return _kind(path) is not None and os.path.isfile(path) and not is_rollout_dump(path)


_ROLLOUT_FIELDS = {"response_token_ids", "prompt_token_ids", "output_token_logprobs", "meta_info"}


def is_rollout_dump(path: str) -> bool:
    """A JSONL/Parquet file of rollout records (stabdiag probe's input), not a metric log."""
    kind = _kind(path)
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return bool(_ROLLOUT_FIELDS & set(pq.read_schema(path).names))
        if kind == "jsonl":
            with open_text(path) as fh:
                first = next((line for line in fh if line.strip()), "")
            head = json.loads(first) if first.lstrip().startswith("{") else {}
            return isinstance(head, dict) and bool(_ROLLOUT_FIELDS & set(head))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, *GZIP_ERRORS):
        return False            # unreadable here: let load() say what is wrong with it
    except Exception as exc:    # pyarrow's own errors (ArrowException) are not all OSError/ValueError
        if _arrow.is_error(exc):
            return False
        raise
    return False


def load(path: str, **options) -> Run:
    kind = _kind(path)
    try:
        if os.path.getsize(path) == 0:
            raise InputError(path, "file is empty")
        if is_gzip(path):
            check_gzip(path)            # a bomb is refused before it is read (stabdiag.read._budget)
        step_col, progress = options.get("step_col"), bool(options.get("progress"))
        if kind == "parquet":
            table = _read_parquet(path)
        elif kind == "jsonl":
            from ._jsonl import read

            table = read(path, step_col=step_col, progress=progress)
        elif kind == "json":
            from ._json_array import read as read_array

            table = read_array(path, step_col=step_col)
        else:
            from ._csv import read_delimited

            table = read_delimited(path, "\t" if kind == "tsv" else ",", step_col=step_col, progress=progress)
    except InputError:
        raise
    except GZIP_ERRORS as exc:
        raise InputError(path, f"cannot read as {kind.upper()}: the gzip data is damaged ({_short(exc)})") from None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(path, f"cannot read as {kind.upper()}: {_problem(exc, kind)}") from None
    except Exception as exc:
        if _arrow.is_error(exc):               # ArrowNotImplementedError, ArrowTypeError, ...
            raise InputError(path, f"cannot read as {kind.upper()}: {_problem(exc, kind)}") from None
        raise
    if not table.columns or table.rows == 0:
        raise InputError(path, "no rows" + (f" ({table.notes[0]})" if table.notes else ""))
    return _to_run(table, path, kind, options.get("step_col"))


_PARQUET_PROBLEMS = (("magic bytes", "no Parquet footer (not a Parquet file, or cut short)"),
                     ("thrift", "its metadata is damaged"), ("snappy", "a compressed page is damaged"),
                     ("decompress", "a compressed page is damaged"))


def _problem(exc: Exception, kind: str) -> str:
    """What pyarrow or pandas found, in a few words and without the path it repeats."""
    text = _short(exc)
    if kind == "parquet":
        found = next((what for clue, what in _PARQUET_PROBLEMS if clue in text.lower()), None)
        if found is not None:
            return found
        text = re.sub(r"^Could not open Parquet input source '[^']*': ", "", text)
    return text


def _short(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _read_parquet(path: str) -> Table:
    """A Parquet file column by column: Arrow's memory for one column at a time besides the numbers (a
    whole-table read holds the file's pages and the table at once, twice the data)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as source:
        names, rows = source.schema_arrow.names, source.metadata.num_rows
        if len(set(names)) != len(names):           # a name twice: only the whole table tells them apart
            table = source.read(use_threads=False)
            return Table({name: _parquet_column(col, rows) for name, col in zip(names, table.columns)}, rows,
                         lambda row: row + 1)
        columns = {name: _parquet_column(source.read(columns=[name], use_threads=False).column(0), rows)
                   for name in names}
    return Table(columns, rows, lambda row: row + 1)


def _parquet_column(col, rows: int) -> Column:
    import pyarrow as pa

    if pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
        return numbers_column(*_arrow.floats(col.cast(pa.float64(), safe=False)))     # the cast keeps the nulls
    written = _arrow.valid(col)
    if pa.types.is_integer(col.type):          # kept exact: a step of 2**62 is not a float64
        return Column(written, ints=_arrow.fixed(col))
    return Column(written, cells=np.fromiter(_python_cells(col), object, rows))


def _python_cells(col) -> list:
    """The column's cells as Python values; a date or time past what Python's datetime holds (year 9999, a
    damaged file) is left unread (None) instead of failing the whole file."""
    try:
        return col.to_pylist()
    except OverflowError:
        pass
    cells = []
    for scalar in col:
        try:
            cells.append(scalar.as_py())
        except OverflowError:
            cells.append(None)
    return cells


def _pick(columns, names) -> str | None:
    for name in names:
        if name in columns:
            return name
    lowered = {c.lower(): c for c in columns}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None


def _to_run(table: Table, path: str, kind: str, step_col: str | None) -> Run:
    columns = list(table.columns)
    axis = step_axis(table, path, step_col)
    table.notes.extend(axis.notes)
    step_name, steps, has_step = axis.column, axis.steps, axis.has_step
    steps.flags.writeable = False              # one array shared by every series of a dense table
    key_name = _pick(columns, KEY_COLUMNS)
    if key_name is not None and "value" in columns:
        return _long_run(table, path, kind, steps, has_step, key_name)
    wandb_run = _wandb_export_run(columns, path)
    wall_name = _pick(columns, WALL_COLUMNS)
    walls = numbers_of(table, wall_name, path) if wall_name else None
    series: dict[str, Series] = {}
    skipped: list[str] = []
    for col in columns:
        if col in (step_name, wall_name) or col in _NOT_METRICS:
            continue
        key = col
        if wandb_run is not None:
            match = _WANDB_EXPORT.match(col)
            if match.group("agg"):
                continue           # __MIN / __MAX companions of a smoothed W&B chart
            key = match.group("metric")
        values = numbers_of(table, col, path)
        if values is None:
            skipped.append(col)
            continue
        rows = has_step & table.columns[col].written
        if rows.all():             # every row: the arrays as they are, no copies
            series[key] = Series.from_points(key, steps, values, walls)
        elif rows.any():
            series[key] = Series.from_points(key, steps[rows], values[rows], None if walls is None else walls[rows])
    if not series:
        raise InputError(path, "no numeric metric columns besides the step column")
    meta = {"format": kind, "skipped_columns": skipped}
    if wandb_run is not None:
        meta["wandb_run"] = wandb_run
    return Run(run_name_for(path), series, (path,), meta, tuple(table.notes))


def _wandb_export_run(columns: list[str], path: str) -> str | None:
    """The run name when these are the columns of a W&B UI export (`Step`, `<run> - <metric>`)."""
    if "Step" not in columns or len(columns) < 2:
        return None
    matches = [_WANDB_EXPORT.match(c) for c in columns if c != "Step"]
    if not all(matches):
        return None
    runs = sorted({m.group("run") for m in matches})
    if len(runs) > 1:
        raise InputError(path, f"W&B export holds {len(runs)} runs ({', '.join(runs[:3])}); "
                               "export one run per file")
    return runs[0]


def _long_run(table: Table, path: str, kind: str, steps, has_step, key_name: str) -> Run:
    values = numbers_of(table, "value", path)
    if values is None:
        raise InputError(path, "the 'value' column holds no numbers")
    names, codes, has_key = keys_of(table, key_name)
    keep = has_step & table.columns["value"].written & has_key
    series = series_from_codes(names, codes[keep], steps[keep], values[keep])
    if not series:
        raise InputError(path, "no numeric values in the long-format table")
    return Run(run_name_for(path), series, (path,), {"format": kind, "shape": "long"}, tuple(table.notes))
