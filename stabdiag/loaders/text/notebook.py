"""The HF Trainer's notebook progress table, as Unsloth / TRL notebooks show it:

- an HTML table (`<th>Step</th><th>Training Loss</th>...`) in a saved .ipynb cell output or an .html file,
- the same table pasted as text with `|` separators.

Columns keep the Trainer's names except the two it renames: `Training Loss` -> `loss` and
`Validation Loss` -> `eval_loss`; `rewards / func` becomes `rewards/func`.  A notebook saved beside a
copy of its own output table is read once (load_group drops an identical table and says so).
Markdown cells are not read: they hold examples, not this run's output.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser

from ..._textio import unfinished_line_note, without_unfinished_line
from ...errors import InputError
from ...run import Run, merge_runs, run_name_for
from .. import _common
from .._common import Points

_MAX_BYTES = 64 * 1024 * 1024
_HTML_STEP = re.compile(r"<th[^>]*>\s*(?:Step|Epoch)\s*</th>\s*<th[^>]*>\s*Training Loss", re.IGNORECASE)
_PIPE_HEADER = re.compile(r"^\s*\|\s*(?:Step|Epoch)\s*\|\s*Training Loss", re.IGNORECASE | re.MULTILINE)
_RENAME = {"training loss": "loss", "validation loss": "eval_loss"}
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
    parser = _Tables()
    parser.feed(html)
    return [t for t in parser.tables if t and _is_header(t[0])]


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


def _ipynb_html(path: str, raw: str) -> list[str]:
    try:
        nb = json.loads(raw)
    except RecursionError:
        raise InputError(path, "not a valid notebook: nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(path, f"not a valid notebook: {exc}") from None
    out = []
    for cell in _dicts(nb.get("cells") if isinstance(nb, dict) else None):
        for output in _dicts(cell.get("outputs")) if cell.get("cell_type") == "code" else []:
            data = output.get("data")
            html = data.get("text/html") if isinstance(data, dict) else None
            if isinstance(html, list):
                html = "".join(part for part in html if isinstance(part, str))
            if isinstance(html, str) and html:
                out.append(html)
    return out


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
    if ext in (".ipynb", ".html", ".htm"):
        raw = _read_raw(path)
        return raw is not None and _HTML_STEP.search(raw) is not None
    if ext in _common.NOT_LOGS:
        return False
    text = _common.head(path)
    return text is not None and _PIPE_HEADER.search(text) is not None


def _tables_of(path: str, notes: list[str]) -> list[list[list[str]]]:
    raw = _read_raw(path)
    if raw is None:
        raise InputError(path, "cannot read (missing, binary or over 64 MB)")
    ext = _common.extension(path)
    if ext == ".ipynb":
        return [t for html in _ipynb_html(path, raw) for t in _html_tables(html)]
    if ext in (".html", ".htm"):
        return _html_tables(raw)
    complete, cut = without_unfinished_line(raw)      # a pasted table still being written
    if cut is not None:
        notes.append(unfinished_line_note(path, cut))
    return _pipe_tables(complete)


def load(path: str, **options) -> Run:
    cut: list[str] = []
    tables = _tables_of(path, cut)
    points, rows, blank = Points(), 0, 0
    for table in tables:
        header = [_column(c) for c in table[0]]
        for cells in table[1:]:
            step = _common.number(cells[0]) if cells else None
            if step is None:
                continue
            rows += 1
            for key, cell in zip(header[1:], cells[1:]):
                value = _common.number(cell)
                if value is None:
                    blank += cell.strip() != ""   # "No log" cells are absent, not NaN
                    continue
                points.add(step, key, value)
    if not rows:
        raise InputError(path, "no progress-table rows with a Step column found")
    notes = [f"{os.path.basename(path)}: read {rows} row(s) of {len(tables)} progress table(s)"]
    if any(t[0][0].strip().lower() == "epoch" for t in tables):
        notes.append(f"{os.path.basename(path)}: the table counts epochs, not steps: step = epoch")
    if blank:
        notes.append(f"{os.path.basename(path)}: {blank} cell(s) without a number ('No log') left out")
    notes += cut
    return points.to_run(path, framework=None, fmt=FORMAT, notes=notes)


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
