"""Samples a training loop wrote itself: JSON Lines (plain or gzip) or Parquet with one row per sample, several
rows a step, each with at least a step and a completion (`completion`, `response`, `output` or
`generation`), and usually the prompt, the reward (`reward`, `score`) with its components
(`rewards: {fn: value}` or `reward/<fn>` columns), the advantage and the length in tokens.  A file with one
such row a step is a metric log that carries an example answer, and is read as one.  One file may hold a
whole run: it is indexed by a scan that keeps, per step, a bounded random choice of row locators (never the
rows), and only the chosen rows are parsed."""

from __future__ import annotations

from itertools import islice

from ..run import exact_step
from . import _rows
from .record import COMPLETION_FIELDS, STEP_FIELDS, first_field, sample_from_row

KIND = "jsonl"


def _fields_ok(names) -> bool:
    names = set(names)
    return bool(names & set(COMPLETION_FIELDS)) and bool(names & set(STEP_FIELDS))


def _several_per_step(steps) -> bool:
    """Samples come several to a step (a group per prompt, a batch per step); a metric log that carries one
    example answer per step is a metric log, and read as one."""
    seen = set()
    for step in steps:
        if step is not None and step in seen:
            return True
        seen.add(step)
    return False


def _has_text(row: dict) -> bool:
    return any(isinstance(row.get(f), (str, list)) for f in COMPLETION_FIELDS)


def claims(path: str) -> bool:
    kind = _rows.kind_of(path)
    if kind == "jsonl":
        head = _rows.head_objects(path)
        return bool(head) and _fields_ok(head[0]) and _several_per_step(
            exact_step(first_field(row, STEP_FIELDS)) for row in head if _has_text(row))
    if kind == "parquet":
        names = _rows.parquet_names(path)
        if not _fields_ok(names):
            return False
        field = next(f for f in STEP_FIELDS if f in names)
        return _several_per_step(step for step, _ in islice(_rows.steps_in_parquet(path, field), 4096))
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
