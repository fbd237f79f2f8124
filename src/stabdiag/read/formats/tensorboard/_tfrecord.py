"""TFRecord framing, the container of TensorBoard event files, read with both checksums verified.

A record is: uint64 length, masked CRC32C of those 8 bytes, the payload, masked CRC32C of the payload
(all little-endian).  A record whose payload checksum fails is skipped and reported by byte offset.
A length whose checksum fails cannot be trusted to find the next record, so the reader searches
forward for the next offset where a whole record checks out.  A last record cut short is what a
file still being written looks like: everything before it is read, and the cut is reported.

CRC32C comes from google-crc32c, which is native code; tensorboard's pure-Python fallback reads
about 9 MB/s and is never used.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....errors import MissingExtraError

_HEADER = struct.Struct("<QI")
_LENGTH = struct.Struct("<Q")
_MASK_DELTA = 0xA282EAD8
_SEGMENT_BYTES = 8 << 20          # the walk reports progress after this many bytes
_RESYNC_WINDOW = 1 << 20          # offsets examined per numpy pass while searching for a record
_CRC_BATCH = 1 << 16               # payload checksums computed per batch
_PROBE_RECORDS = 256              # records read one by one before guessing that the pattern repeats


@dataclass(frozen=True, slots=True)
class Records:
    """The good records of one file: payload offsets and lengths into `data`, plus what was skipped."""

    data: np.ndarray                       # the file's bytes, uint8 (a read-only view)
    starts: np.ndarray                     # int64 offset of each payload
    lengths: np.ndarray                    # int64 length of each payload
    corrupt: tuple[tuple[int, int], ...]   # (byte offset, bytes skipped) of each corrupt stretch
    truncated_at: int | None               # offset of a last record that was cut short
    native_crc: bool                       # False when google-crc32c runs its pure-Python fallback


def crc32c_module():
    """google_crc32c, imported on first use (it is an optional dependency)."""
    try:
        import google_crc32c
    except ImportError:
        raise MissingExtraError("reading TensorBoard event files needs google-crc32c",
                                "tensorboard") from None
    return google_crc32c


def masked_crc(crc32c_value, payload: bytes) -> int:
    """The masked CRC32C that TFRecord stores for `payload`."""
    crc = crc32c_value(payload)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _masked_array(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return (rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)


def looks_like_record(head: bytes, size: int) -> bool:
    """True when the first 12 bytes of a file are a TFRecord length with its checksum."""
    if len(head) < 12:
        return False
    length, stored = _HEADER.unpack_from(head)
    if length > size - 16:
        return False
    return masked_crc(crc32c_module().value, head[:8]) == stored


def read_records(path: str, on_progress: Callable[[int], None] | None = None,
                 max_bytes: int = -1) -> Records:
    """Read a whole file (or its first `max_bytes`) and split it into records, verifying both
    checksums of each one."""
    crc = crc32c_module()
    with open(path, "rb") as fh:
        buf = fh.read(max_bytes)
    data = np.frombuffer(buf, dtype=np.uint8)
    walker = _Walker(buf, data, crc.value)
    pos, truncated = 0, None
    corrupt: list[tuple[int, int]] = []
    while pos < len(buf):
        pos, problem = walker.walk(pos, min(len(buf), pos + _SEGMENT_BYTES))
        if on_progress is not None:
            on_progress(pos)
        if problem == "truncated":
            truncated = pos
            break
        if problem == "bad-header":
            found = _resync(buf, data, pos, walker)
            corrupt.append((pos, (found if found is not None else len(buf)) - pos))
            if found is None:
                break
            pos = found
    starts, lengths = walker.records()
    good = _payload_crc_ok(buf, data, starts, lengths, crc.value)
    if not good.all():
        bad = np.flatnonzero(~good)
        corrupt.extend(zip((starts[bad] - 12).tolist(), (lengths[bad] + 16).tolist()))
        corrupt.sort()
        starts, lengths = starts[good], lengths[good]
    return Records(data, starts, lengths, tuple(corrupt), truncated, crc.implementation == "c")


class _Walker:
    """Follows the chain of length fields, checking each length's checksum as it goes.

    Record lengths in an event file repeat: the same tags are logged step after step.  So after a
    short stretch read one record at a time, the walker guesses that the recent pattern of lengths
    goes on, and checks the guess for thousands of records at once with numpy: a guessed record is
    accepted only where the file holds exactly the guessed length with a matching checksum, and
    since each record's position follows from the one before, the accepted chain is exactly the one
    a record-by-record walk would have found.  Where the guess fails, the walk goes on one by one.
    """

    def __init__(self, buf: bytes, data: np.ndarray, crc32c_value) -> None:
        self.buf, self.data = buf, data
        self.crc32c_value = crc32c_value
        self.expected: dict[int, int] = {}     # masked CRC of a length, by length
        self.done: list[tuple[np.ndarray, np.ndarray]] = []   # (record offsets, lengths) found
        self.stretch = _PROBE_RECORDS

    def header_crc(self, length: int) -> int:
        expected = self.expected.get(length)
        if expected is None:
            expected = masked_crc(self.crc32c_value, _LENGTH.pack(length))
            if len(self.expected) < 4096:
                self.expected[length] = expected
        return expected

    def records(self) -> tuple[np.ndarray, np.ndarray]:
        """(payload offsets, payload lengths) of every record found so far, in file order."""
        if not self.done:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        offsets = np.concatenate([d[0] for d in self.done])
        return offsets + 12, np.concatenate([d[1] for d in self.done])

    def walk(self, pos: int, stop: int) -> tuple[int, str | None]:
        """Walk from `pos` until `stop`; return where it stopped and why, if not at `stop`."""
        while pos < stop:
            pos, problem = self.walk_one_by_one(pos, stop, self.stretch)
            if problem is not None:
                return pos, problem
            before = pos
            pos = self.extend_by_pattern(pos, stop)
            gained = pos - before
            self.stretch = _PROBE_RECORDS if gained else min(self.stretch * 2, 1 << 16)
        return pos, None

    def walk_one_by_one(self, pos: int, stop: int, most: int) -> tuple[int, str | None]:
        buf, size, unpack = self.buf, len(self.buf), _HEADER.unpack_from
        expected, header_crc = self.expected, self.header_crc
        offsets, lengths = array("q"), array("q")
        add_offset, add_length = offsets.append, lengths.append
        problem = None
        while pos < stop and most:
            if pos + 12 > size:
                problem = "truncated"
                break
            length, stored = unpack(buf, pos)
            if stored != (expected.get(length) or header_crc(length)):
                problem = "bad-header"
                break
            end = pos + 16 + length
            if end > size:
                problem = "truncated"
                break
            add_offset(pos)
            add_length(length)
            pos = end
            most -= 1
        if offsets:
            self.done.append((np.frombuffer(offsets, np.int64), np.frombuffer(lengths, np.int64)))
        return pos, problem

    def extend_by_pattern(self, pos: int, stop: int) -> int:
        """Accept the records from `pos` that follow the recent pattern of lengths; the new `pos`."""
        pattern = _repeating_tail(self.done[-1][1] if self.done else np.empty(0, np.int64))
        if pattern is None:
            return pos
        crcs = np.array([self.header_crc(n) for n in pattern.tolist()], dtype=np.uint32)
        headers = np.lib.stride_tricks.sliding_window_view(self.data, 12)
        size, block = len(self.buf), 4096
        while pos < stop:
            reps = -(-block // len(pattern))
            length = np.tile(pattern, reps)
            offset = pos + np.concatenate(([0], np.cumsum(length[:-1] + 16)))
            fits = np.flatnonzero((offset >= stop) | (offset + 16 + length > size))
            cut = int(fits[0]) if fits.size else len(offset)
            rows = np.ascontiguousarray(headers[offset[:cut]])
            same = (rows[:, :8].copy().view("<u8").ravel() == length[:cut]) & \
                   (rows[:, 8:].copy().view("<u4").ravel() == np.tile(crcs, reps)[:cut])
            miss = np.flatnonzero(~same)
            good = int(miss[0]) if miss.size else cut
            if good:
                self.done.append((offset[:good], length[:good]))
                pos = int(offset[good - 1] + 16 + length[good - 1])
            if good < len(offset):
                return pos
            block = min(block * 2, 1 << 18)
        return pos


def _repeating_tail(lengths: np.ndarray) -> np.ndarray | None:
    """The lengths of one period when the last records repeat a pattern (over at least two periods
    and the last 64 records), else None."""
    recent = lengths[-1024:]
    candidates = np.flatnonzero(recent[:-1] == recent[-1])[::-1][:16]
    for j in candidates.tolist():
        period = len(recent) - 1 - j
        span = max(2 * period, min(len(recent), 64))
        if span <= len(recent) and np.array_equal(recent[len(recent) - span + period:],
                                                  recent[len(recent) - span:len(recent) - period]):
            return recent[-period:].copy()
    return None


def _payload_crc_ok(buf: bytes, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                    crc32c_value) -> np.ndarray:
    """Whether each payload matches the masked CRC32C stored after it."""
    computed = np.empty(len(starts), dtype=np.uint64)
    for lo in range(0, len(starts), _CRC_BATCH):      # batches keep the Python ints few
        first = starts[lo:lo + _CRC_BATCH]
        computed[lo:lo + len(first)] = np.fromiter(
            (crc32c_value(buf[s:e]) for s, e in zip(first.tolist(), (first + lengths[lo:lo + _CRC_BATCH]).tolist())),
            dtype=np.uint64, count=len(first))
    stored = read_u32(data, starts + lengths)
    return _masked_array(computed) == stored


def read_u32(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    if len(offsets) == 0:
        return np.empty(0, dtype="<u4")
    rows = np.lib.stride_tricks.sliding_window_view(data, 4)[offsets]
    return np.ascontiguousarray(rows).view("<u4").ravel()


def _past_zeros(data: np.ndarray, lo: int) -> int:
    """`lo`, or where a run of zero bytes from it leaves 11: twelve zero bytes are never a record's
    header (the checksum of length 0 is not 0), so a zero-filled file or block is crossed at memory
    speed instead of window by window."""
    run = 0
    while lo + run < len(data):
        block = data[lo + run:lo + run + (1 << 20)]
        nonzero = np.flatnonzero(block)
        if len(nonzero):
            run += int(nonzero[0])
            break
        run += len(block)
    return lo + run - 11 if run >= 12 else lo


def _resync(buf: bytes, data: np.ndarray, bad: int, walker: _Walker) -> int | None:
    """The first offset after `bad` where a whole record (both checksums) checks out, or None."""
    size = len(buf)
    windows = np.lib.stride_tricks.sliding_window_view(data, 12)
    lo = bad + 1
    while lo + 16 <= size:
        lo = _past_zeros(data, lo)
        hi = min(size - 16, lo + _RESYNC_WINDOW)
        cand = np.arange(lo, hi + 1, dtype=np.int64)
        rows = np.ascontiguousarray(windows[cand])
        length = rows[:, :8].copy().view("<u8").ravel()
        stored = rows[:, 8:].copy().view("<u4").ravel()
        fits = length <= (size - 16 - cand).astype(np.uint64)
        cand, length, stored = cand[fits], length[fits], stored[fits]
        lengths, inverse = np.unique(length, return_inverse=True)
        expected = np.array([walker.header_crc(n) for n in lengths.tolist()], dtype=np.uint64)
        hit = np.flatnonzero(expected[inverse.reshape(-1)] == stored)
        for q, n in zip(cand[hit].tolist(), length[hit].tolist()):
            stored_payload = struct.unpack_from("<I", buf, q + 12 + n)[0]
            if masked_crc(walker.crc32c_value, buf[q + 12:q + 12 + n]) == stored_payload:
                return q
        lo = hi + 1
    return None
