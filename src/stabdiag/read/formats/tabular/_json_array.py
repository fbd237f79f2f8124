"""A JSON file that holds an array of metric records ([{"step": 1, "loss": ...}, ...], or typed records
with a payload: {"kind": "frame", "step": 3, "payload": {...}}), read as JSON Lines are (_jsonl.read_blocks).

Only an array of objects one of whose first few has a step-like key (at its level or in its payload) is
taken: a JSON file of something else (a dataset sample, a config) is no metric log.  A record's place in
an error is its position in the array (record 1 is the first).
"""

from __future__ import annotations

import json
import os

from ....errors import InputError
from ..._textio import decoded
from ._columns import STEP_COLUMNS, Table
from ._records import PAYLOADS

_HEAD_BYTES = 1 << 16
_STEP_NAMES = {name.lower() for name in STEP_COLUMNS}
_BLOCK = 8192
_SNIFF_RECORDS = 4
_ARRAY_MAX = 512 << 20            # read whole (json.loads): a larger log is JSON Lines' business


def sniff(path: str) -> bool:
    """The file is a JSON array of objects, one of the first few a record with a step-like key."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return False
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text.startswith("["):
        return False
    decoder, pos = json.JSONDecoder(), 1
    for _ in range(_SNIFF_RECORDS):     # a header record (a config) may come before the first step
        pos = len(text) - len(text[pos:].lstrip(" \t\r\n,"))
        try:
            record, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return False               # not JSON, an element longer than the head, or nested past Python's
                                       # recursion limit ([[[[...): no record log
        if type(record) is not dict:
            return False
        if _has_step(record):
            return True
    return False


def _has_step(record: dict) -> bool:
    if any(str(k).lower() in _STEP_NAMES for k in record):
        return True
    return any(type(record.get(w)) is dict and any(str(k).lower() in _STEP_NAMES for k in record[w])
               for w in PAYLOADS)


def read(path: str, *, step_col: str | None = None) -> Table:
    from ._jsonl import read_blocks

    if os.path.getsize(path) > _ARRAY_MAX:
        raise InputError(path, "a JSON array this large is not read whole; write the records as JSON Lines")
    with open(path, "rb") as fh:
        text = decoded(path, fh.read())
    try:
        records = json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"not valid JSON: {exc}") from None
    if type(records) is not list:
        raise InputError(path, "expected a JSON array of records")
    blocks = ((list(range(i + 1, i + 1 + len(records[i:i + _BLOCK]))), records[i:i + _BLOCK])
              for i in range(0, len(records), _BLOCK))
    return read_blocks(path, blocks, [], rows_guess=len(records) + 1, step_col=step_col, what="record")
