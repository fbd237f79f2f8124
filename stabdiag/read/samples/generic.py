"""Samples a training loop wrote itself: JSON Lines (plain or gzip) or Parquet with one row per sample and at
least a step and a completion (`completion`, `response`, `output` or `generation`), and usually the prompt,
the reward (`reward`, `score`) with its components (`rewards: {fn: value}` or `reward/<fn>` columns), the
advantage and the length in tokens.  One file may hold a whole run: it is indexed by a scan that keeps, per
step, a bounded random choice of row locators (never the rows), and only the chosen rows are parsed."""

from __future__ import annotations

from . import _rows
from .record import COMPLETION_FIELDS, STEP_FIELDS, sample_from_row

KIND = "jsonl"


def _fields_ok(names) -> bool:
    names = set(names)
    return bool(names & set(COMPLETION_FIELDS)) and bool(names & set(STEP_FIELDS))


def claims(path: str) -> bool:
    kind = _rows.kind_of(path)
    if kind == "jsonl":
        head = _rows.first_object(path)
        return head is not None and _fields_ok(head) and any(
            isinstance(head.get(f), (str, list)) for f in COMPLETION_FIELDS)
    if kind == "parquet":
        return _fields_ok(_rows.parquet_names(path))
    return False


def steps(path: str):
    if _rows.kind_of(path) == "parquet":
        field = next(f for f in STEP_FIELDS if f in _rows.parquet_names(path))
        yield from _rows.steps_in_parquet(path, field)
    else:
        yield from _rows.steps_in_jsonl(path)


def samples(path: str, locators, *, weights=None):
    rows = _rows.parquet_rows(path, locators) if _rows.kind_of(path) == "parquet" else _rows.jsonl_rows(path, locators)
    for row, where in rows:
        sample = sample_from_row(row, where=where, weights=weights)
        if sample is not None:
            yield sample
