"""`key:value` pairs of many console lines, read without a Python loop over the pairs where it can.

A console reader finds its record lines with one regex over the whole text that starts with a
literal (`\\nstep:`, `step:`: Python's regex engine then jumps from candidate to candidate instead of
trying every position, as it does for `^` in MULTILINE mode); `findall` gives the rows as (step, body)
strings.  `series_by_shape` turns each key sequence the rows share into one regex whose `findall`
gives the values column by column; `series_of_rows` (the general case) splits each body with str
methods and collects each key's raw values.  Either way a whole column is converted at once
(`map(float, ...)`).  bench/text_readers.py times the readers against `for line in f: line.split()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import chain

import numpy as np

from ...run import Series, steps_go_back
from .._common import number

_VALUE_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf))(ms|s|%)?\s*$", re.IGNORECASE)


def lines_text(text: str) -> str:
    """The text with a newline in front and at the end, so that a record pattern starting with `\\n`
    finds the first line too and one ending before `\\n` the last."""
    return "\n" + text + ("" if text.endswith("\n") else "\n")


def series_by_shape(text: str, rows: list[tuple[str, str]], head: str, sep: str | None, *,
                    keep_unit: bool = False) -> dict[str, Series]:
    """`series_of_rows(rows, sep, keep_unit=...)`, computed without a Python loop over the pairs when the
    rows share a few shapes (see shaped_series); else the pairs are read one by one."""
    found = shaped_series(text, rows[:32] + rows[-32:], len(rows), head, sep, keep_unit=keep_unit)
    return found if found is not None else series_of_rows(rows, sep, keep_unit=keep_unit)


def shaped_series(text: str, sample: list[tuple[str, str]], total: int, head: str, sep: str | None, *,
                  keep_unit: bool = False) -> dict[str, Series] | None:
    """The series of `total` rows (their first and last 32 are `sample`) when their few shapes (the same
    keys in the same order, as a logger prints them) account for every one of them exactly once: each
    shape becomes one regex, `head` (the row pattern up to its body, with the step as its one group)
    then the shape's `key:value` pairs, and `findall` over `text` (which must end with a newline, see
    lines_text) gives its values column by column.  None when they do not (then the rows are read
    one by one, series_of_rows), or when one key of two shapes is written twice at a step."""
    shapes = _shapes(sample, sep)
    if shapes is None:
        return None
    joint = r"[ \t]+" if sep is None else r"[ \t]*" + re.escape(sep.strip()) + r"[ \t]*"
    columns: dict[str, list[tuple[np.ndarray, tuple[str, ...]]]] = {}
    matched = 0
    for index, shape in enumerate(shapes):
        # greedy values: a lazy group would be tried one character at a time
        pattern = re.compile(head + joint.join(re.escape(k) + r":(\S*)" for k in shape) + r"[ \t]*(?=\n)")
        framed = text.startswith("\n") and text.endswith("\n")     # as lines_text gives it: see _lines_holding
        literal = _distinct_literal(shape, shapes) if index and framed else None
        found = pattern.findall(text if literal is None else _lines_holding(text, literal))
        if not found:
            continue
        matched += len(found)
        cols = list(zip(*found))
        steps = np.fromiter(map(int, cols[0]), np.int64, len(found))
        for key, raws in zip(shape, cols[1:]):
            columns.setdefault(key, []).append((steps, raws))
    if matched != total:
        return None
    out = {}
    joined: dict[tuple[int, ...], np.ndarray | None] = {}   # keys of the same shapes share their steps
    for key, parts in columns.items():
        in_order, back = True, False
        if len(parts) == 1:
            steps, raws = parts[0]
        else:
            shared = tuple(id(p[0]) for p in parts)
            if shared not in joined:
                steps = np.concatenate([p[0] for p in parts])
                unique = np.all(steps[1:] > steps[:-1]) or len(np.unique(steps)) == len(steps)
                joined[shared] = steps if unique else None
            steps = joined[shared]
            if steps is None:
                return None              # one key in two shapes at one step: write order decides, read in order
            raws = tuple(chain.from_iterable(p[1] for p in parts))
            # joined shape by shape, not in write order: no step is repeated, so only a step going back
            # inside one shape's rows is one in the log
            in_order, back = False, any(steps_go_back(p[0]) for p in parts)
        out.update(column_series(key, steps, raws, keep_unit, write_order=in_order, stepped_back=back))
    return dict(sorted(out.items()))


def _distinct_literal(shape: tuple[str, ...], shapes: list[tuple[str, ...]]) -> str | None:
    """`key:` of the key of `shape` that the most other shapes lack (None when each of its keys is in all of
    them): a line the shape's pattern matches holds it, and most lines of the other shapes do not."""
    others = [set(other) for other in shapes if other != shape]
    lacking = max(shape, key=lambda key: sum(key not in other for other in others))
    return lacking + ":" if any(lacking not in other for other in others) else None


def _lines_holding(text: str, literal: str) -> str:
    """The lines of `text` (a newline first and last, see lines_text) that hold `literal`, as such a text:
    each line with the newlines it had around it.
    A shape's pattern matches within one line, up to its end, at most once per line (no two matches end
    at one newline), so findall over them finds what findall over the whole text finds, without trying
    the pattern at every row of the other shapes (whose keys it may share up to the last)."""
    lines = []
    found = text.find(literal)
    while found != -1:
        end = text.find("\n", found)
        lines.append(text[text.rfind("\n", 0, found) + 1:end])
        found = text.find(literal, end)
    return "\n" + "\n".join(lines) + "\n"


def _shapes(sample: list[tuple[str, str]], sep: str | None) -> list[tuple[str, ...]] | None:
    """The key sequences of the sample rows, most frequent first; None when a part there is no
    `key:value` or they are too many to be a logger's few record kinds."""
    counts: dict[tuple[str, ...], int] = {}
    for _, body in sample:
        parts = [p.partition(":") for p in body.split(sep)]
        if not all(found and key and not key[0].isspace() for key, found, _ in parts):
            return None
        shape = tuple(key for key, _, _ in parts)
        counts[shape] = counts.get(shape, 0) + 1
    if not counts or len(counts) > 8:
        return None
    return sorted(counts, key=counts.get, reverse=True)


def column_series(key: str, steps, raws, keep_unit: bool, *, write_order: bool = True,
                  stepped_back: bool = False) -> dict[str, Series]:
    """{name: Series} of one key's raw values at their steps (int text or int64); {} when none is a
    number.  The name is the key, stripped, with the unit joined under `keep_unit` (see _column).
    `write_order` and `stepped_back` as Series.from_points takes them."""
    name, values, keep = _column(key.strip(), raws, keep_unit)
    if keep is not None:
        steps = [s for s, k in zip(steps, keep) if k]
    if not len(steps):
        return {}
    if not isinstance(steps, np.ndarray):
        steps = np.fromiter(map(int, steps), np.int64, len(steps))
    return {name: Series.from_points(name, steps, values, write_order=write_order, stepped_back=stepped_back)}


def series_of_rows(rows: list[tuple[str, str]], sep: str | None, *, kv: str = ":", last_kv: bool = False,
                   keep_unit: bool = False, only: Callable[[str], bool] | None = None) -> dict[str, Series]:
    """Series of every pair in `rows` ((step text, body) tuples, in write order).  A body is split on
    `sep` (None: on whitespace) into `key<kv>value` parts (with `last_kv`, at the last `kv`: `train
    loss 11.0`).  A value that is no number is left out; NaN and Inf are kept.  With `keep_unit` a
    unit printed after the value joins the key (`train_time` in ms -> `train_time_ms`), else it is
    dropped.  `only` keeps the keys it accepts."""
    columns: dict[str, tuple[list[str], list[str]]] = {}
    for step, body in rows:
        for part in body.split(sep):
            key, found, raw = part.rpartition(kv) if last_kv else part.partition(kv)
            if not found:
                continue
            column = columns.get(key)
            if column is None:
                if only is not None and not only(key.strip()):
                    continue
                column = columns[key] = ([], [])
            column[0].append(step)
            column[1].append(raw)
    out: dict[str, Series] = {}
    for key, (steps, raws) in columns.items():
        out.update(column_series(key, steps, raws, keep_unit))
    return dict(sorted(out.items()))


def _column(key: str, raws: list[str], keep_unit: bool) -> tuple[str, np.ndarray, list[bool] | None]:
    """(name, values, which raws were numbers or None for all) of one key's raw values."""
    try:
        return key, np.fromiter(map(float, raws), np.float64, len(raws)), None
    except ValueError:
        pass
    for unit in ("ms", "s"):           # one unit on every value (`70.50ms`, `nanms`): cut, then one map
        if raws[0].endswith(unit):
            cut = len(unit)
            try:
                values = np.array([float(r[:-cut]) for r in raws], dtype=np.float64)
            except ValueError:
                break
            return (f"{key}_{unit}" if keep_unit else key), values, None
    unit = None
    values: list[float] = []
    keep: list[bool] = []
    for raw in raws:
        match = _VALUE_UNIT.match(raw)
        value = number(match.group(1)) if match else number(raw)
        if match and match.group(2) and match.group(2) != "%":
            unit = unit or match.group(2)
        keep.append(value is not None)
        if value is not None:
            values.append(value)
    name = f"{key}_{unit}" if keep_unit and unit else key
    return name, np.array(values, dtype=np.float64), (None if all(keep) else keep)
