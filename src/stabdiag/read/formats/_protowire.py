"""Protobuf wire format read in bulk with numpy: one field of every message per pass.

Decoding millions of tiny messages one by one costs about a microsecond each even with the compiled
upb protos, so a TensorBoard log of 2M scalars would take seconds.  The messages of an event file all
have a handful of fields, so they are walked in lockstep instead: pass k reads the k-th field of every
message that still has one, with a few numpy operations over all of those messages at once.  A
message whose bytes do not follow the wire format is marked malformed and not decoded further.  The
TensorBoard reader walks events with it; the W&B reader (wandb/_wire) reads its varints here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MAX_VARINT_BYTES = 10


@dataclass(frozen=True, slots=True)
class FieldHits:
    """Every occurrence of one field number, by message and, within a message, in write order."""

    msg: np.ndarray    # int64 index of the message (into the starts given to scan_fields)
    wire: np.ndarray   # uint8 wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
    pos: np.ndarray    # int64 offset of the data (for wire type 2: of the bytes after the length)
    value: np.ndarray  # uint64: the varint for wire type 0, the length for wire type 2, else 0


@dataclass(frozen=True, slots=True)
class Scan:
    """What scan_fields found: the fields asked for, which messages are broken, what else was there."""

    fields: dict[int, FieldHits]
    malformed: np.ndarray          # bool per message
    other_fields: dict[int, int]   # occurrences of field numbers that were not asked for


def read_varints(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The varints starting at `pos`: (values as uint64, offset after each, ok).

    Reads never leave `data`; a varint that runs past the end or over ten bytes is not ok.
    """
    last = len(data) - 1
    byte = data[np.minimum(pos, last)]
    values = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    ok = np.ones(len(pos), dtype=bool)
    more = np.flatnonzero(byte & 0x80)
    shift = 7
    while more.size:
        if shift >= 7 * _MAX_VARINT_BYTES:
            ok[more] = False
            break
        at = after[more]
        byte = data[np.minimum(at, last)]
        values[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] = at + 1
        more = more[(byte & 0x80) != 0]
        shift += 7
    ok &= after <= len(data)
    return values, after, ok


def read_fixed(data: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian numbers of `dtype` ('<f4', '<f8', '<u4', …) stored at byte offsets `pos`."""
    size = np.dtype(dtype).itemsize
    if len(pos) == 0:
        return np.empty(0, dtype=dtype)
    rows = np.lib.stride_tricks.sliding_window_view(data, size)[pos]
    return np.ascontiguousarray(rows).view(dtype).ravel()


def _next_field(data: np.ndarray, pos: np.ndarray, end: np.ndarray):
    """Read one field of each message: (number, wire, data offset, value, offset after, ok)."""
    key, pos, ok = read_varints(data, pos)
    number = (key >> np.uint64(3)).astype(np.int64)
    wire = (key & np.uint64(7)).astype(np.uint8)
    value = np.zeros(len(pos), dtype=np.uint64)
    after = pos.copy()
    varint = np.flatnonzero(wire == 0)
    if varint.size:
        value[varint], after[varint], good = read_varints(data, pos[varint])
        ok[varint] &= good
    delimited = np.flatnonzero(wire == 2)
    if delimited.size:
        value[delimited], pos[delimited], after[delimited], good = _delimited(data, pos[delimited],
                                                                              end[delimited])
        ok[delimited] &= good
    after[wire == 1] += 8
    after[wire == 5] += 4
    ok &= (number > 0) & ((wire <= 2) | (wire == 5)) & (after <= end)
    return number, wire, pos, value, after, ok


def _delimited(data: np.ndarray, pos: np.ndarray, end: np.ndarray):
    """The length-delimited fields whose length varint starts at `pos`: (length, data, after, ok)."""
    length, start, ok = read_varints(data, pos)
    room = np.maximum(end - start, 0).astype(np.uint64)
    ok &= (start <= end) & (length <= room)
    length = np.where(ok, length, np.uint64(0))
    return length, start, start + length.astype(np.int64), ok


def _next_same_field(data: np.ndarray, pos: np.ndarray, end: np.ndarray, key: int):
    """_next_field for the common pass where every message's next field has the same one-byte key:
    the key, the wire type and most of the bookkeeping are then the same for all of them."""
    number, wire, at = key >> 3, key & 7, pos + 1
    if wire == 2:
        value, at, after, ok = _delimited(data, at, end)
    elif wire == 0:
        value, after, ok = read_varints(data, at)
    elif wire in (1, 5):
        value, after, ok = np.zeros(len(at), dtype=np.uint64), at + (8 if wire == 1 else 4), True
    else:
        value, after, ok = np.zeros(len(at), dtype=np.uint64), at, False
    ok = np.asarray(ok & (after <= end) & (number > 0), dtype=bool)
    if ok.ndim == 0:
        ok = np.full(len(at), bool(ok))
    return number, np.full(len(at), wire, dtype=np.uint8), at, value, after, ok


def scan_fields(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, wanted) -> Scan:
    """Walk the messages data[starts[i]:ends[i]] and collect every occurrence of the `wanted` fields."""
    wanted = sorted(set(wanted))
    count = len(starts)
    malformed = np.zeros(count, dtype=bool)
    parts: dict[int, list[tuple[np.ndarray, ...]]] = {f: [] for f in wanted}
    seen = {f: np.zeros(count, dtype=np.int64) for f in wanted}   # hits so far, per message
    other: dict[int, int] = {}
    msg = np.flatnonzero(ends > starts)
    pos, end = starts[msg].astype(np.int64), ends[msg].astype(np.int64)
    while msg.size:
        first = data[pos]
        key = int(first[0])
        if key < 0x80 and (first == key).all():
            number, wire, at, value, after, ok = _next_same_field(data, pos, end, key)
            number = np.where(ok, number, 0) if not ok.all() else np.full(len(pos), number)
        else:
            number, wire, at, value, after, ok = _next_field(data, pos, end)
            number = np.where(ok, number, 0)
        malformed[msg[~ok]] = True
        _collect(number, wanted, msg, wire, at, value, parts, seen, other)
        live = np.flatnonzero(ok & (after < end))
        if live.size < len(msg):
            msg, pos, end = msg[live], after[live], end[live]
        else:
            pos = after
    return Scan({f: _join(parts[f], seen[f], malformed) for f in wanted}, malformed, other)


def _collect(number, wanted, msg, wire, at, value, parts, seen, other) -> None:
    """File one pass's fields: hits of wanted fields into `parts`, counts of the rest into `other`."""
    low, high = int(number.min()), int(number.max())
    for field in wanted:
        if field < low or field > high:
            continue
        hit = slice(None) if low == high else np.flatnonzero(number == field)
        who = msg[hit]
        rank = seen[field][who]
        seen[field][who] = rank + 1
        parts[field].append((who, rank, wire[hit], at[hit], value[hit]))
    if low != high or low not in wanted:
        extra, extra_counts = np.unique(number[~np.isin(number, [0, *wanted])], return_counts=True)
        for field, n in zip(extra.tolist(), extra_counts.tolist()):
            other[field] = other.get(field, 0) + n


def _join(parts: list[tuple[np.ndarray, ...]], seen: np.ndarray, malformed: np.ndarray) -> FieldHits:
    """One field's hits from all passes, reordered from pass-major to message-major without a sort."""
    if not parts:
        return FieldHits(np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.int64),
                         np.empty(0, np.uint64))
    if len(parts) == 1:
        msg, _, wire, pos, value = parts[0]
    else:
        first = np.cumsum(seen) - seen           # where each message's hits begin
        total = int(seen.sum())
        msg = np.empty(total, np.int64)
        wire = np.empty(total, np.uint8)
        pos = np.empty(total, np.int64)
        value = np.empty(total, np.uint64)
        for who, rank, w, p, v in parts:
            dest = first[who] + rank
            msg[dest], wire[dest], pos[dest], value[dest] = who, w, p, v
    if malformed.any():
        keep = ~malformed[msg]
        msg, wire, pos, value = msg[keep], wire[keep], pos[keep], value[keep]
    return FieldHits(msg, wire, pos, value)


def last_per_message(hits: FieldHits, count: int) -> np.ndarray:
    """Index into `hits` of the last occurrence in each message, -1 where the field is absent
    (protobuf semantics: for a singular field the last value written wins)."""
    index = np.full(count, -1, dtype=np.int64)
    index[hits.msg] = np.arange(len(hits.msg))      # later hits overwrite earlier ones
    return index


def intern_bytes(data: np.ndarray, pos: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Number the distinct byte strings data[pos:pos+length]: (code per string, distinct strings).

    Strings are compared whole, eight bytes at a time; a hash only groups them, and each group is
    checked against its first member so that a collision can never merge two different strings.
    """
    codes = np.empty(len(pos), dtype=np.int64)
    distinct: list[bytes] = []
    for size in np.unique(length).tolist():
        sel = np.flatnonzero(length == size)
        if size == 0:
            codes[sel] = len(distinct)
            distinct.append(b"")
            continue
        words = _as_words(data, pos[sel], size)
        group_codes, firsts = _group_rows(words)
        codes[sel] = group_codes + len(distinct)
        start = pos[sel]
        distinct.extend(data[start[i]:start[i] + size].tobytes() for i in firsts.tolist())
    return codes, distinct


def _as_words(data: np.ndarray, pos: np.ndarray, size: int) -> np.ndarray:
    """The strings of one length as rows of uint64 words (zero-padded to a multiple of 8 bytes)."""
    width = -(-size // 8) * 8
    out = np.zeros((len(pos), width), dtype=np.uint8)
    step = max(1, (1 << 22) // size)
    windows = np.lib.stride_tricks.sliding_window_view(data, size)
    for lo in range(0, len(pos), step):
        out[lo:lo + step, :size] = windows[pos[lo:lo + step]]
    return out.view("<u8")


def _group_rows(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group code per row, index of each group's first row) for identical rows of words."""
    digest = words[:, 0].copy()
    for col in range(1, words.shape[1]):
        digest = digest * np.uint64(0x9E3779B97F4A7C15) + words[:, col]
    distinct = np.sort(_unique_values(digest))
    codes = np.searchsorted(distinct, digest)
    firsts = np.empty(len(distinct), dtype=np.int64)
    firsts[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)   # the lowest index is written last
    if words.shape[1] == 1 or np.array_equal(words, words[firsts[codes]]):
        return codes, firsts
    # a hash collision (never seen in practice): fall back to comparing whole rows
    rows = np.ascontiguousarray(words).view(np.dtype((np.void, words.shape[1] * 8))).ravel()
    _, firsts, codes = np.unique(rows, return_index=True, return_inverse=True)
    return codes.reshape(-1), firsts


def _unique_values(values: np.ndarray) -> np.ndarray:
    unique_values = getattr(np, "unique_values", None)     # numpy >= 2: hashing, no sort of all values
    return unique_values(values) if unique_values is not None else np.unique(values)
