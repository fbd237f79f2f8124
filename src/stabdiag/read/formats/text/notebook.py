"""The HF Trainer's notebook progress table, as Unsloth / TRL notebooks show it:

- an HTML table (`<th>Step</th><th>Training Loss</th>...`) in a saved .ipynb cell output or an .html file,
- the same table pasted as text with `|` separators.

Columns keep the Trainer's names except the two it renames: `Training Loss` -> `loss` and
`Validation Loss` -> `eval_loss`; `rewards / func` becomes `rewards/func`.  A notebook saved beside a
copy of its own output table is read once (load_group drops an identical table and says so).
Markdown cells are not read: they hold examples, not this run's output.

A notebook is one run, read from the stored outputs of all its code cells: the progress table where
there is one, else the printed text (stream outputs and results: the Trainer's `{'loss': ...}` dicts,
a hand-written loop's `Step 12 | loss: ...` lines, any console format of this package), read as one
console.  The Trainer's `TrainOutput(global_step=..., metrics={...})` result gives the run summary
(`meta["summary"]`, `meta["global_step"]`).
"""

from __future__ import annotations

import ast
import json
import os
import re
from html.parser import HTMLParser

from ....errors import InputError
from ..._textio import unfinished_line_note, without_unfinished_line
from ...run import Run, exact_step, merge_runs, run_name_for
from .. import _common
from .._common import Points, column_of_points
from . import is_console, read_console

_MAX_BYTES = 64 * 1024 * 1024
_HTML_STEP = re.compile(r"<th[^>]*>\s*(?:Step|Epoch)\s*</th>\s*<th[^>]*>\s*Training Loss", re.IGNORECASE)
_PIPE_HEADER = re.compile(r"^\s*\|\s*(?:Step|Epoch)\s*\|\s*Training Loss", re.IGNORECASE | re.MULTILINE)
_RENAME = {"training loss": "loss", "validation loss": "eval_loss"}
_TABLE_OPEN = re.compile(r"<table", re.IGNORECASE)
_SIMPLE_TAG = re.compile(r"<(?:([a-zA-Z][a-zA-Z0-9]*)(?:\s+[a-zA-Z][-a-zA-Z0-9_:]*\s*=\s*(?:'[^'<>]*'|\"[^\"<>]*\"))*"
                         r"\s*(/?)|/([a-zA-Z][a-zA-Z0-9]*)\s*)>")
# tags with no special content model in any Python's HTMLParser (not script, style, textarea, title...)
_SIMPLE_TAGS = frozenset("table thead tbody tfoot tr th td div span p br b i em strong small progress pre code "
                         "caption".split())
_TRAIN_OUTPUT = re.compile(r"TrainOutput\(global_step=(\d{1,18}), training_loss=[^,]*, metrics=(\{[^{}]*\})\)")
_STEP_COLUMNS = ("step", "epoch")   # eval_strategy="epoch" tables count epochs: the epoch is the step
FORMAT = "HF notebook progress table"


class _Tables(HTMLParser):
    """Every <table> in an HTML text as a list of rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _column(name: str) -> str:
    name = " ".join(name.split())
    return _RENAME.get(name.lower(), re.sub(r"\s*/\s*", "/", name))


def _is_header(cells: list[str]) -> bool:
    """The Trainer's table starts Step (or Epoch), Training Loss; other tables in a notebook are not read."""
    return len(cells) >= 2 and cells[0].strip().lower() in _STEP_COLUMNS and cells[1].strip().lower() == "training loss"


def _html_tables(html: str) -> list[list[list[str]]]:
    if _TABLE_OPEN.search(html) is None:
        return []                        # no <table> start tag (HTMLParser reads a tag's name after `<`)
    parser = _Tables()
    if not _feed_simple(parser, html):
        parser.feed(html)
    return [t for t in parser.tables if t and _is_header(t[0])]


def _feed_simple(parser: _Tables, html: str) -> bool:
    """Give `parser` the start tags, end tags and text HTMLParser would report for HTML as the Trainer
    writes its table (known tags, quoted attributes, no entity, comment or `<` in text), split by one
    regex instead of the parser's Python step per tag; False (nothing given) for any other HTML."""
    if "&" in html:
        return False
    pieces = _SIMPLE_TAG.split(html)         # text, then (start name, "/" or "", end name), text, ...
    tags = (len(pieces) - 1) // 4
    if html.count("<") != tags:              # a `<` that starts no such tag: a comment, a stray `<`
        return False
    names = {name.lower() for name in set(pieces[1::4]) | set(pieces[3::4]) if name}
    if not _SIMPLE_TAGS.issuperset(names):
        return False
    for i in range(0, 4 * tags, 4):
        if pieces[i]:
            parser.handle_data(pieces[i])
        start, closed, end = pieces[i + 1], pieces[i + 2], pieces[i + 3]
        if start:
            parser.handle_starttag(start.lower(), [])
            if closed:                   # <td/>: HTMLParser's handle_startendtag is a start and an end
                parser.handle_endtag(start.lower())
        else:
            parser.handle_endtag(end.lower())
    if pieces[-1]:
        parser.handle_data(pieces[-1])
    return True


def _pipe_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if _is_header(cells):
            current = [cells]
            tables.append(current)
        elif current is not None and not all(set(c) <= set("-: ") for c in cells):
            current.append(cells)
    return tables


def _ipynb_outputs(path: str, raw: str) -> tuple[list[str], str]:
    """The HTML outputs of a notebook's code cells, and their printed text (stream outputs and the
    plain text of results) joined in cell order."""
    try:
        nb = json.loads(raw)
    except RecursionError:
        raise InputError(path, "not a valid notebook: nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(path, f"not a valid notebook: {exc}") from None
    html_parts, printed = [], []
    for cell in _dicts(nb.get("cells") if isinstance(nb, dict) else None):
        for output in _dicts(cell.get("outputs")) if cell.get("cell_type") == "code" else []:
            data = output.get("data")
            html = _joined(data.get("text/html")) if isinstance(data, dict) else ""
            if html:
                html_parts.append(html)
            if output.get("output_type") == "stream":
                printed.append(_joined(output.get("text")))
            elif output.get("output_type") == "execute_result" and isinstance(data, dict):
                printed.append(_joined(data.get("text/plain")))
    return html_parts, "\n".join(part.rstrip("\n") for part in printed if part) + "\n"


def _joined(value) -> str:
    """A notebook text field: a string, or a list of strings as Jupyter stores them."""
    if isinstance(value, list):
        try:
            return "".join(value)
        except TypeError:                # a hand-edited notebook: only its strings
            return "".join(part for part in value if isinstance(part, str))
    return value if isinstance(value, str) else ""


def _dicts(items) -> list[dict]:
    """The dict entries of a notebook list (a hand-edited notebook may hold anything)."""
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _read_raw(path: str) -> str | None:
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
    except OSError:
        return None
    return _common.head(path, _MAX_BYTES)


def can_load(path: str) -> bool:
    ext = _common.extension(path)
    if ext == ".ipynb":
        raw = _read_raw(path)
        if raw is None:
            return False
        try:
            html_parts, printed = _ipynb_outputs(path, raw)
        except InputError:
            return False
        # the stored HTML is a list of lines: the table's header spans several of them
        return any(_HTML_STEP.search(html) for html in html_parts) or is_console(printed)
    if ext in (".html", ".htm"):
        raw = _read_raw(path)
        return raw is not None and _HTML_STEP.search(raw) is not None
    if ext in _common.NOT_LOGS:
        return False
    text = _common.head(path)
    return text is not None and _PIPE_HEADER.search(text) is not None


def _contents(path: str, notes: list[str]) -> tuple[list[list[list[str]]], str]:
    """The progress tables of a file, and for a notebook the printed text of its cells."""
    raw = _read_raw(path)
    if raw is None:
        raise InputError(path, "cannot read (missing, binary or over 64 MB)")
    ext = _common.extension(path)
    if ext == ".ipynb":
        html_parts, printed = _ipynb_outputs(path, raw)
        return [t for html in html_parts for t in _html_tables(html)], printed
    if ext in (".html", ".htm"):
        return _html_tables(raw), ""
    complete, cut = without_unfinished_line(raw)      # a pasted table still being written
    if cut is not None:
        notes.append(unfinished_line_note(path, cut))
    return _pipe_tables(complete), ""


def load(path: str, **options) -> Run:
    cut: list[str] = []
    tables, printed = _contents(path, cut)
    run = _table_run(path, tables, cut)
    if run is None:
        if not printed.strip() or not is_console(printed):
            raise InputError(path, "no progress-table rows with a Step column found"
                             + (" and no metric lines in the cells' printed output" if printed.strip() else ""))
        console = read_console(path, printed)
        run = Run(console.name, console.series, console.sources, {**console.meta, "notebook": "printed output"},
                  (f"{os.path.basename(path)}: no progress table: read the printed output of its code cells",)
                  + console.notes)
    summary = _train_output(printed)
    if summary is not None:
        run.meta["global_step"], run.meta["summary"] = summary
    return run


def _table_run(path: str, tables: list[list[list[str]]], cut: list[str]) -> Run | None:
    """The run of the progress tables, or None when they hold no row.  Tables with the same columns are
    one training continued (merged, a later row replacing an earlier one); a table with other columns is
    another trainer (Unsloth's GRPO notebooks fine-tune the format with SFTTrainer before GRPOTrainer):
    then the last table is the run, and the note says what was left out."""
    skipped = ""
    kept = [t for t in tables if t and t[0] == tables[-1][0]] if tables else []
    if len(kept) < len(tables):
        others = len(tables) - len(kept)
        skipped = (f"{os.path.basename(path)}: {others} earlier progress table(s) with other columns (another "
                   "trainer, e.g. an SFT warm-up) not read; the last table's training is the run")
        tables = kept
    points, rows, blank = Points(), 0, 0
    # each key's points gathered and converted at the end, unless a step is no integer in the step range
    # (Points notes it): a Points.add per cell was most of the read
    columns: dict[str, tuple[list[int], list[float]]] | None = {}
    for table in tables:
        for cells in table[1:]:
            step = _common.number(cells[0]) if cells else None
            if step is not None and exact_step(step) is None:
                columns = None
    for table in tables:
        header = [_column(c) for c in table[0]]
        for cells in table[1:]:
            step = _common.number(cells[0]) if cells else None
            if step is None:
                continue
            rows += 1
            at = exact_step(step) if columns is not None else None
            for key, cell in zip(header[1:], cells[1:]):
                value = _common.number(cell)
                if value is None:
                    blank += cell.strip() != ""   # "No log" cells are absent, not NaN
                    continue
                if columns is None:
                    points.add(step, key, value)
                else:
                    column = columns.get(key) or columns.setdefault(key, ([], []))
                    column[0].append(at)
                    column[1].append(value)
    if not rows:
        return None
    notes = [f"{os.path.basename(path)}: read {rows} row(s) of {len(tables)} progress table(s)"] + \
        ([skipped] if skipped else [])
    if any(t[0][0].strip().lower() == "epoch" for t in tables):
        notes.append(f"{os.path.basename(path)}: the table counts epochs, not steps: step = epoch")
    if blank:
        notes.append(f"{os.path.basename(path)}: {blank} cell(s) without a number ('No log') left out")
    notes += cut
    whole = {key: column_of_points(key, steps, values) for key, (steps, values) in (columns or {}).items()}
    return points.to_run(path, framework=None, fmt=FORMAT, notes=notes, series=whole)


def _train_output(printed: str) -> tuple[int, dict[str, float]] | None:
    """(global step, metrics) of the last `TrainOutput(...)` a cell returned, or None."""
    found = _TRAIN_OUTPUT.findall(printed)
    if not found:
        return None
    step, metrics = found[-1]
    try:
        values = ast.literal_eval(metrics)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(values, dict):
        return None
    return int(step), {str(k): float(v) for k, v in values.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _signature(run: Run) -> tuple:
    return tuple(sorted((k, s.steps.tobytes(), s.values.tobytes()) for k, s in run.series.items()))


def load_group(paths: list[str], **options) -> Run:
    """Read a run's notebooks and tables; a table identical to one already read is read once."""
    runs: list[Run] = []
    seen: dict[tuple, str] = {}
    dropped: list[str] = []
    for path in sorted(paths, key=lambda p: (_common.extension(p) != ".ipynb", p)):
        run = load(path, **options)
        sig = _signature(run)
        if sig in seen:
            dropped.append(f"{os.path.basename(path)}: same table as {os.path.basename(seen[sig])}; read once")
            continue
        seen[sig] = path
        runs.append(run)
    merged = merge_runs(run_name_for(os.path.dirname(paths[0]) or paths[0]), runs)
    return Run(merged.name, merged.series, merged.sources, merged.meta, merged.notes + tuple(dropped))
