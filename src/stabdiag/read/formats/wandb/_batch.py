"""History and summary records of a W&B log read a batch at a time, without wandb's classes.

The records' payloads are laid end to end in one buffer and read by `_wire` down to their items:
Record -> HistoryRecord (items and the step) or SummaryRecord (updates) -> item (key fields, JSON
value).  What comes out is where each item's key fields and value text lie in the buffer, and Arrow
arrays cut from those places, so that no Python object is made per item.  A record this reader does
not take whole (a field of unexpected type, a typed value, a summary removal, a damaged field) is
marked, and the caller reads it with wandb's own classes as before.

Field numbers are those of wandb_internal.proto (Record, HistoryRecord, SummaryRecord, HistoryItem,
SummaryItem, HistoryStep), which wandb keeps stable because old run files must stay readable.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._arrow import fixed
from ._wire import LEN, PAD, VARINT, items, walk

HISTORY, SUMMARY = 2, 3                  # Record fields
_ITEMS, _SECOND = 1, 2                   # item / update; step (history) or remove (summary)
_STEP_NUM = 1                            # HistoryStep.num


class Batch(NamedTuple):
    """A batch of history or summary records read down to their items."""

    data: bytes              # the payloads end to end, then PAD zero bytes
    ok: np.ndarray           # per record: read whole (else the caller decodes it with wandb's classes)
    step: np.ndarray         # per record: HistoryRecord.step.num (0 when it has none)
    item_record: np.ndarray  # per item of the ok records, in order: its record
    key_start: np.ndarray    # its key fields as written (the key's identity; `key_names` reads them)
    key_end: np.ndarray
    value_start: np.ndarray  # its value_json text
    value_end: np.ndarray


def read_batch(payloads: list, kind: int) -> Batch:
    """Read history (kind HISTORY) or summary (SUMMARY) records down to their items."""
    count = len(payloads)
    sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=count)
    ends = np.cumsum(sizes)
    data = b"".join([*payloads, bytes(PAD)])
    buf = np.frombuffer(data, dtype=np.uint8)
    top, _, bad = walk(buf, ends - sizes, ends)
    ok = ~bad
    mine = top.number == kind
    ok &= np.bincount(top.lane[mine], minlength=count) == 1       # merged copies: leave them to protobuf
    ok[top.lane[mine & (top.wire != LEN)]] = False
    body_start, body_end = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
    body_start[top.lane[mine]] = top.start[mine]
    body_end[top.lane[mine]] = top.end[mine]
    records = np.flatnonzero(ok)
    body, listed, bad = walk(buf, body_start[records], body_end[records], listed=_ITEMS)
    ok[records[bad]] = False
    owner = records[body.lane]
    second = body.number == _SECOND
    ok[owner[second & (body.wire != LEN)]] = False
    step = np.zeros(count, dtype=np.int64)
    if kind == HISTORY:
        _read_steps(buf, owner[second], body.start[second], body.end[second], ok, step)
    else:
        ok[owner[second]] = False                                 # a removal: read by the caller, in order
    item_record = records[listed.lane]
    found = items(buf, listed.start, listed.end)
    ok[item_record[~found.ok]] = False
    keep = ok[item_record]
    if keep.all():
        return Batch(data, ok, step, item_record, *found[1:])
    return Batch(data, ok, step, item_record[keep], *(a[keep] for a in found[1:]))


def _read_steps(buf, owner, starts, ends, ok, step) -> None:
    """Each history record's step.num; a record with several step fields is left to protobuf."""
    ok[owner[np.bincount(owner, minlength=len(ok))[owner] > 1]] = False
    fields, _, bad = walk(buf, starts, ends)
    ok[owner[bad]] = False
    lane_owner = owner[fields.lane]
    num = fields.number == _STEP_NUM
    ok[lane_owner[num & (fields.wire != VARINT)]] = False
    step[lane_owner[num]] = fields.value[num]                  # the last num wins, as in protobuf


def slices(data: bytes, starts: np.ndarray, ends: np.ndarray):
    """data[starts[i]:ends[i]] for each i as an Arrow large_binary array; the slices must come in
    order and must not overlap.  Arrow cuts them from one array over all of `data` whose offsets
    alternate between the gaps and the slices, so the bytes are copied once, by Arrow."""
    import pyarrow as pa

    count = len(starts)
    offsets = np.empty(2 * count + 2, dtype=np.int64)
    offsets[0], offsets[-1] = 0, len(data)
    offsets[1:-1:2], offsets[2:-1:2] = starts, ends
    tiled = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * count + 1,
                                             [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    picks = np.arange(1, 2 * count + 1, 2, dtype=np.int64)
    return tiled.take(pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(picks)]))


def key_names(regions: list[bytes]) -> list[str | None] | None:
    """The key of each item's key fields as written: a `key`, or `nested_key` parts joined with '/'.
    None in the list for fields whose text is not UTF-8; None for all when a region is not key fields."""
    names: list[str | None] = []
    for region in regions:
        parts, pos = [], 0
        while pos < len(region):
            tag, size = region[pos], region[pos + 1] if pos + 1 < len(region) else 0x80
            head = 2
            if size & 0x80 and pos + 2 < len(region):
                size, head = (size & 0x7F) | (region[pos + 2] << 7), 3
            if tag not in (0x0A, 0x12) or pos + head + size > len(region):
                return None
            parts.append(region[pos + head:pos + head + size])
            pos += head + size
        try:
            names.append("/".join(p.decode("utf-8") for p in parts))
        except UnicodeDecodeError:
            names.append(None)
    return names


def item_keys(batch: Batch) -> tuple[list[str | None] | None, np.ndarray, np.ndarray]:
    """Each item's key: the distinct names (None: some region is not key fields, and the chunk must be read
    with wandb's classes; a None entry: a key whose text is not UTF-8), each item's code into them, and
    which items carry a key that has no name."""
    regions = slices(batch.data, batch.key_start, batch.key_end).dictionary_encode()
    names = key_names(regions.dictionary.to_pylist())
    codes = numpy_of(regions.indices)
    unnamed = [i for i, name in enumerate(names or ()) if name is None]
    return names, codes, np.isin(codes, unnamed)


def int64s(numbers: np.ndarray):
    """An Arrow int64 array over a numpy array's buffer.  `pa.array(ndarray)` would first ask
    whether the object is a pandas Series, which imports pandas (about 0.1 s, once per process)."""
    import pyarrow as pa

    numbers = np.ascontiguousarray(numbers, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(numbers), [None, pa.py_buffer(numbers)])


def numpy_of(array) -> np.ndarray:
    """An Arrow integer or float64 array as numpy, zero-copy where it has no nulls: its
    `to_numpy` would import pandas for that, like `pa.array` above."""
    if str(array.type) not in _ZERO_COPY_TYPES or array.null_count:
        return array.to_numpy(zero_copy_only=False)
    return fixed(array)


_ZERO_COPY_TYPES = ("int32", "int64", "double")


def as_text(values):
    """Arrow binary values as strings, and which were not UTF-8 (None: all were)."""
    import pyarrow as pa

    try:
        return values.cast(pa.large_string()), None
    except pa.ArrowInvalid:
        pass
    bad = np.zeros(len(values), dtype=bool)
    for i, raw in enumerate(values.to_pylist()):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            bad[i] = True
    return values.take(int64s(np.flatnonzero(~bad))).cast(pa.large_string()), bad
