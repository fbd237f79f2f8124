"""Protobuf's wire format read with numpy, many messages at a time.

A big W&B run holds millions of history items; decoding them with protobuf's classes makes a Python
string for every key and value, which costs more than reading the file.  Here the messages of a chunk
lie in one byte buffer and numpy steps through one field of every message at once: a message of n
fields takes n steps, each a few vectorised operations over the messages still open.  Only the wire
format is read (tag, wire type, length or value); what the fields mean is the caller's business.  A
message this reader cannot follow (a group, a length past its end, a tag over two bytes, a varint over
ten) is marked bad, for the caller to hand to protobuf instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._protowire import read_varints

PAD = 16                     # zero bytes after the data: reading a few bytes past a message stays in the buffer
VARINT, I64, LEN, I32 = 0, 1, 2, 5
_FAR = np.iinfo(np.int64).max // 2


class Fields(NamedTuple):
    """Fields of a batch of messages."""

    lane: np.ndarray         # the message each field belongs to (index into the starts given)
    number: np.ndarray       # field number
    wire: np.ndarray         # wire type
    start: np.ndarray        # where the content starts (after the tag, and the length of a LEN field)
    end: np.ndarray          # where it ends
    value: np.ndarray        # a VARINT field's value (uint64 bits in an int64); 0 for the others


class Listed(NamedTuple):
    """The occurrences of one repeated LEN field of a batch of messages, message by message in wire order."""

    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray


def varints(buf: np.ndarray, pos: np.ndarray, longest: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """The varint at each position: (value as uint64 bits in int64, its length in bytes; 0 when it
    cannot be read or is longer than `longest`)."""
    value, after, ok = read_varints(buf, pos)
    size = after - pos
    return value.view(np.int64), np.where(ok & (size <= longest), size, 0)


def walk(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
         listed: int | None = None) -> tuple[Fields, Listed, np.ndarray]:
    """The fields of the messages buf[starts[i]:ends[i]], and a mask of the messages that are bad.

    The occurrences of field number `listed` (a repeated message or string: a message whose one is
    not LEN is bad) come apart, in message order; the other fields come step by step (the first
    field of every message, then the second...), for callers that index them by message.  `buf`
    must hold PAD zero bytes after the last message.  The fields of a bad message up to the point
    where it went wrong are in the result too; callers drop them by the mask.
    """
    count = len(starts)
    bad = np.zeros(count, dtype=bool)
    lanes = np.arange(count)
    pos = np.asarray(starts, dtype=np.int64)
    end = np.asarray(ends, dtype=np.int64)
    open_ = pos < end
    lanes, pos, end = lanes[open_], pos[open_], end[open_]
    steps, rows = [], []
    listed_tag = -1 if listed is None else listed << 3 | LEN
    seen = None                  # per message: occurrences of the listed field so far; None: the step count
    k = 0
    while len(lanes):
        tag, start, stop, value = _step(buf, pos)
        broken = stop > end
        if value is None:        # usual fields only: all LEN with one-byte tags
            is_listed = tag == listed_tag
        else:
            number = tag >> 3
            is_listed = number == listed
            broken |= is_listed & (tag & 7 != LEN)
        if broken.any():
            bad[lanes[broken]] = True
            keep = ~broken
            lanes, tag, is_listed, start, stop, end = (a[keep] for a in (lanes, tag, is_listed, start, stop, end))
            value = None if value is None else value[keep]
        if is_listed.all():
            rows.append((lanes, start, stop, k if seen is None else seen[lanes]))
            if seen is not None:
                seen[lanes] += 1
        else:
            if seen is None:
                seen = np.zeros(count, dtype=np.int64)
                seen[lanes] = k
            if value is None:
                value = np.zeros(len(lanes), dtype=np.int64)
            if is_listed.any():
                mine = lanes[is_listed]
                rows.append((mine, start[is_listed], stop[is_listed], seen[mine]))
                seen[mine] += 1
                other = ~is_listed
                steps.append((lanes[other], tag[other], start[other], stop[other], value[other]))
            else:
                steps.append((lanes, tag, start, stop, value))
        open_ = stop < end
        if open_.all():
            pos = stop
        else:
            lanes, pos, end = lanes[open_], stop[open_], end[open_]
        k += 1
    if steps:
        lane, tag, start, stop, value = (np.concatenate([s[i] for s in steps]) for i in range(5))
        tag = tag.astype(np.int64)
        fields = Fields(lane, tag >> 3, tag & 7, start, stop, value)
    else:
        fields = Fields(*(np.zeros(0, dtype=np.int64) for _ in range(6)))
    return fields, _in_message_order(rows, count), bad


def _step(buf: np.ndarray, pos: np.ndarray):
    """One field at each position: (tag, content start, content end, VARINT values or None when all
    fields are usual).  The usual field (a one-byte tag of a LEN field, a length under 128) takes a
    few operations, the others `varints`; a field that cannot be read gets tag 0."""
    tag, size = buf[pos], buf[pos + 1]
    start = pos + 2
    stop = start + size
    unusual = ((tag & 0x87) != LEN) | (size >= 0x80) | (tag < 8)
    if not unusual.any():
        return tag, start, stop, None
    tag = tag.astype(np.int64)
    value = np.zeros(len(pos), dtype=np.int64)
    i = np.flatnonzero(unusual)
    t, t_size = varints(buf, pos[i], 2)
    wire = t & 7
    at = pos[i] + t_size
    v, v_size = varints(buf, at)
    size = np.select([wire == LEN, wire == VARINT, wire == I64, wire == I32], [v_size + v, v_size, 8, 4], -1)
    ok = (t_size > 0) & ((v_size > 0) | (wire == I64) | (wire == I32)) & (size >= 0) & (t >= 8)
    tag[i] = np.where(ok, t, 0)
    start[i] = np.where(wire == LEN, at + v_size, at)
    stop[i] = np.where(ok, at + size, _FAR)
    value[i] = np.where(wire == VARINT, v, 0)
    return tag, start, stop, value


def _in_message_order(steps: list, count: int) -> Listed:
    """Occurrences gathered step by step (lane, start, end, rank in its message) put message by
    message, without a sort: an occurrence's place is its message's first place plus its rank."""
    if not steps:
        empty = np.zeros(0, dtype=np.int64)
        return Listed(empty, empty, empty)
    per_lane = np.zeros(count, dtype=np.int64)
    for lanes, _, _, rank in steps:                       # ranks only grow, step by step
        per_lane[lanes] = rank + 1
    first = np.cumsum(per_lane) - per_lane
    total = int(per_lane.sum())
    start, end = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    for lanes, begins, stops, rank in steps:
        place = first[lanes] + rank
        start[place] = begins
        end[place] = stops
    return Listed(np.repeat(np.arange(count), per_lane), start, end)


class Items(NamedTuple):
    """History or summary items (HistoryItem, SummaryItem): where each one's key fields and JSON value lie."""

    ok: np.ndarray           # the item is key fields then a value_json, as wandb writes it
    key_start: np.ndarray    # its key fields as written (tags and lengths included): the key's identity
    key_end: np.ndarray
    value_start: np.ndarray  # its value_json text
    value_end: np.ndarray


_KEY, _NESTED_KEY = 0x0A, 0x12            # tags of HistoryItem.key (field 1) and .nested_key (field 2)
_VALUE_JSON = (0x82, 0x01)                # tag of .value_json (field 16)


def items(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Items:
    """Read items written as wandb writes them: one `key`, or one or more `nested_key` parts, then one
    `value_json`, each under 16 KiB.  Any other item (a typed value, no value, fields in another
    order) is not ok, for the caller to read with protobuf.  One pass per key part: the items of a
    run with flat keys all close in the first, those of one nested dict deep in the second."""
    count = len(starts)
    ok = np.zeros(count, dtype=bool)
    key_end, value_start, value_end = (np.zeros(count, dtype=np.int64) for _ in range(3))
    lanes = None                                          # None: every item, in place
    pos = np.asarray(starts, dtype=np.int64)
    end = np.asarray(ends, dtype=np.int64)
    first = True
    while len(pos):
        tag = buf[pos]
        part_end = _len_end(buf, pos + 1, buf[pos + 1])
        inside = part_end <= end
        if not inside.all():
            part_end = np.where(inside, part_end, end)      # so that the reads below stay in the buffer
        is_part = inside & ((tag == _NESTED_KEY) | (tag == _KEY) if first else tag == _NESTED_KEY)
        next_tag = buf[part_end]
        value_at = part_end + 2
        size_byte = buf[value_at]
        stop = _len_end(buf, value_at, size_byte)
        text_at = value_at + 1 + (size_byte >= 0x80)
        closes = is_part & (next_tag == _VALUE_JSON[0]) & (buf[part_end + 1] == _VALUE_JSON[1]) & (stop == end)
        if lanes is None and closes.all():
            return Items(np.ones(count, dtype=bool), np.asarray(starts, dtype=np.int64), part_end, text_at, stop)
        more = is_part & ~closes & (tag == _NESTED_KEY) & (next_tag == _NESTED_KEY) & (part_end < end)
        first = False
        if lanes is None and more.all():                 # every item has another key part: go on in place
            pos = part_end
            continue
        done = np.flatnonzero(closes) if lanes is None else lanes[closes]
        ok[done] = True
        key_end[done] = part_end[closes]
        value_start[done] = text_at[closes]
        value_end[done] = stop[closes]
        more_at = np.flatnonzero(more)
        lanes = more_at if lanes is None else lanes[more_at]
        pos, end = part_end[more_at], end[more_at]
    return Items(ok, np.asarray(starts, dtype=np.int64), key_end, value_start, value_end)


def _len_end(buf: np.ndarray, at: np.ndarray, b0: np.ndarray) -> np.ndarray:
    """Where a LEN field whose length varint starts at `at` (first byte `b0`) ends; a length over
    two bytes ends far away."""
    two = b0 >= 0x80
    if not two.any():
        return at + 1 + b0
    b1 = buf[at + 1].astype(np.int64)
    length = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
    return np.where(two & (b1 >= 0x80), _FAR, at + 1 + two + length)
