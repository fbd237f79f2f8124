"""CSV, TSV, JSONL and Parquet metric logs, wide (a step column + one column per metric) or long
(step, key, value), including the CSV that the W&B web UI exports and verl's FileLogger JSONL.

Every format is first turned into a Table: per column, the cells and a mask of the cells that were
written.  A cell that was never written (a sparse row: eval every 20 steps) is absent; a cell that
holds NaN was logged as NaN, and that is a finding, so the two are never confused.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from .._textio import GZIP_ERRORS, complete_text, json_lines, open_bytes, open_text
from ..errors import InputError
from ..run import STEP_RANGE, Run, Series, as_float, exact_step, run_name_for, series_from_long, shown_number

STEP_COLUMNS = ("step", "_step", "global_step", "iteration", "Step", "trainer/global_step",
                "train/global_step", "training/global_step")
KEY_COLUMNS = ("key", "tag", "metric")
WALL_COLUMNS = ("_timestamp", "wall_time", "timestamp")
_NOT_METRICS = {"_runtime"}

_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
               ".parquet": "parquet", ".pq": "parquet"}
_WANDB_EXPORT = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")
_TEXT_NUMBERS = {"nan": math.nan, "-nan": math.nan, "inf": math.inf, "+inf": math.inf,
                 "-inf": -math.inf, "infinity": math.inf, "+infinity": math.inf,
                 "-infinity": -math.inf}


@dataclass(slots=True)
class Table:
    """Columns of cells plus which cells were written; `lines` maps a row to its line in the file;
    `notes` says what was left out or read as Inf on the way."""

    cells: dict[str, np.ndarray]
    written: dict[str, np.ndarray]
    lines: np.ndarray
    notes: list[str]


def _kind(path: str) -> str | None:
    low = path.lower()
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
        if _is_arrow_error(exc):
            return False
        raise
    return False


def _is_arrow_error(exc: Exception) -> bool:
    return type(exc).__module__.startswith("pyarrow")


def load(path: str, **options) -> Run:
    kind = _kind(path)
    try:
        if os.path.getsize(path) == 0:
            raise InputError(path, "file is empty")
        if kind == "parquet":
            table = _read_parquet(path)
        elif kind == "jsonl":
            table = _read_jsonl(path)
        else:
            table = _read_delimited(path, "\t" if kind == "tsv" else ",")
    except InputError:
        raise
    except GZIP_ERRORS as exc:
        raise InputError(path, f"cannot read as {kind.upper()}: the gzip data is damaged ({_short(exc)})") from None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(path, f"cannot read as {kind.upper()}: {_problem(exc, kind)}") from None
    except Exception as exc:
        if _is_arrow_error(exc):               # ArrowNotImplementedError, ArrowTypeError, ...
            raise InputError(path, f"cannot read as {kind.upper()}: {_problem(exc, kind)}") from None
        raise
    if not table.cells or len(table.lines) == 0:
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


def _read_delimited(path: str, sep: str) -> Table:
    import io

    import pandas as pd

    with open_bytes(path) as fh:
        if b"\x00" in fh.read(4096):
            raise InputError(path, "binary data, not a text table")
    notes: list[str] = []
    text = complete_text(path, notes)
    if not text.strip():
        raise InputError(path, "no rows" + (f" ({notes[0]})" if notes else ""))
    # every cell as text: an empty cell is absent, "nan"/"inf" are logged values, junk is located
    frame = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, na_filter=False,
                        skip_blank_lines=True)
    cells = {str(c): frame[c].to_numpy(dtype=object) for c in frame.columns}
    written = {c: np.array([isinstance(v, str) and v.strip() != "" for v in col], dtype=bool)
               for c, col in cells.items()}
    return Table(cells, written, np.arange(2, len(frame) + 2), notes)


def _flatten(obj: dict, prefix: str, out: dict) -> None:
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _flatten(value, name + "/", out)
        else:
            out[name] = value


def _read_jsonl(path: str) -> Table:
    rows: list[dict] = []
    lines: list[int] = []
    notes: list[str] = []
    for lineno, obj in json_lines(path, notes):
        if not isinstance(obj, dict):
            raise InputError(path, "each line must be a JSON object", line=lineno)
        # verl's FileLogger writes {"step": N, "data": {...}}
        if isinstance(obj.get("data"), dict):
            inner = {k: v for k, v in obj.items() if k != "data"}
            inner.update(obj["data"])
            obj = inner
        flat: dict = {}
        _flatten(obj, "", flat)
        rows.append(flat)
        lines.append(lineno)
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    cells = {c: np.empty(len(rows), dtype=object) for c in columns}
    written = {c: np.zeros(len(rows), dtype=bool) for c in columns}
    for i, row in enumerate(rows):
        for key, value in row.items():
            cells[key][i] = value
            written[key][i] = value is not None
    return Table(cells, written, np.asarray(lines), notes)


def _read_parquet(path: str) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    cells: dict[str, np.ndarray] = {}
    written: dict[str, np.ndarray] = {}
    for name, col in zip(table.column_names, table.columns):
        written[name] = ~col.is_null().to_numpy(zero_copy_only=False)
        if pa.types.is_integer(col.type):          # kept exact: a step of 2**62 is not a float64
            cells[name] = col.fill_null(0).to_numpy(zero_copy_only=False)
        elif pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
            cells[name] = col.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        else:
            cells[name] = col.to_numpy(zero_copy_only=False).astype(object)
    return Table(cells, written, np.arange(1, len(table) + 1), [])


def _pick(columns, names) -> str | None:
    for name in names:
        if name in columns:
            return name
    lowered = {c.lower(): c for c in columns}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    return None


def _parse_cell(cell) -> tuple[float | None, bool]:
    """A cell as a number (None: not a scalar number), and whether it was too large for float64."""
    if isinstance(cell, (bool, np.bool_)):
        return float(cell), False
    if isinstance(cell, (int, float, np.floating, np.integer)):
        return as_float(cell)
    if isinstance(cell, str):
        text = cell.strip()
        try:
            number = float(text)
        except ValueError:
            return _TEXT_NUMBERS.get(text.lower()), False
        return number, math.isinf(number) and "inf" not in text.lower()     # 1e400
    return None, False   # lists, dicts (media, tables): not a scalar


def _numeric(table: Table, name: str, path: str) -> np.ndarray | None:
    """The column as float64 (absent cells NaN), or None for a text column (run name, tags).
    Junk inside an otherwise numeric column is an input error naming its line."""
    cells, written = table.cells[name], table.written[name]
    if cells.dtype != object:
        return cells.astype(np.float64)
    values = np.full(len(cells), np.nan)
    bad: list[int] = []
    overflowed: list[int] = []
    parsed_any = False
    for i in np.flatnonzero(written):
        number, overflow = _parse_cell(cells[i])
        if number is None:
            bad.append(int(i))
            continue
        values[i] = number
        parsed_any = True
        if overflow:
            overflowed.append(int(i))
    if not parsed_any:
        return None
    if bad:
        i = bad[0]
        raise InputError(path, f"non-numeric value {str(cells[i])[:40]!r} in metric column '{name}'",
                         line=int(table.lines[i]))
    if overflowed:
        table.notes.append(f"{os.path.basename(path)}:{int(table.lines[overflowed[0]])}: {len(overflowed)} "
                           f"value(s) of '{name}' too large for float64 read as Inf")
    return values


def _is_nan_cell(cell) -> bool:
    if isinstance(cell, str):
        return cell.strip().lower() in ("nan", "-nan", "+nan")
    return isinstance(cell, (float, np.floating)) and math.isnan(cell)


def _step_values(table: Table, name: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    """The step column as exact int64 steps, and which rows have one.  A step written as NaN marks a
    row without a step; any other cell that is not an integer in the step range is an error naming
    its line: a step is never truncated, rounded or wrapped round."""
    cells, written = table.cells[name], table.written[name]
    steps = np.zeros(len(cells), dtype=np.int64)
    has = np.zeros(len(cells), dtype=bool)
    for i in np.flatnonzero(written):
        cell = cells[i]
        if _is_nan_cell(cell):
            continue
        step = exact_step(cell)
        if step is None:
            raise InputError(path, f"step column '{name}' holds {shown_number(cell)}: {_not_a_step(cell)}",
                             line=int(table.lines[i]))
        steps[i], has[i] = step, True
    if not has.any():
        raise InputError(path, f"step column '{name}' holds no numbers")
    return steps, has


def _not_a_step(cell) -> str:
    number, _ = _parse_cell(cell)
    if number is None:
        return "not a number"
    if math.isfinite(number) and number != math.floor(number):
        return "a non-integer step"
    return f"not {STEP_RANGE}"


def _to_run(table: Table, path: str, kind: str, step_col: str | None) -> Run:
    columns = list(table.cells)
    if step_col is not None and step_col not in columns:
        raise InputError(path, f"no column '{step_col}' (passed with --step-col)")
    step_name = step_col or _pick(columns, STEP_COLUMNS)
    if step_name is None:
        raise InputError(path, f"no step column (looked for {', '.join(STEP_COLUMNS[:5])}, ...); "
                               "pass --step-col NAME")
    steps, has_step = _step_values(table, step_name, path)
    key_name = _pick(columns, KEY_COLUMNS)
    if key_name is not None and "value" in columns:
        return _long_run(table, path, kind, steps, has_step, key_name)
    wandb_run = _wandb_export_run(columns, path)
    wall_name = _pick(columns, WALL_COLUMNS)
    walls = _numeric(table, wall_name, path) if wall_name else None
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
        values = _numeric(table, col, path)
        if values is None:
            skipped.append(col)
            continue
        rows = has_step & table.written[col]
        if rows.any():
            series[key] = Series.from_points(key, steps[rows], values[rows],
                                             None if walls is None else walls[rows])
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
    values = _numeric(table, "value", path)
    if values is None:
        raise InputError(path, "the 'value' column holds no numbers")
    keep = has_step & table.written["value"] & table.written[key_name]
    keys = np.array([str(k) for k in table.cells[key_name]], dtype=object)
    series = series_from_long(keys[keep], steps[keep], values[keep])
    if not series:
        raise InputError(path, "no numeric values in the long-format table")
    return Run(run_name_for(path), series, (path,), {"format": kind, "shape": "long"}, tuple(table.notes))
