"""The framing of a W&B transaction log (`run-<id>.wandb`): header, 32 KiB blocks, checksummed records.

wandb writes every record of a run (history rows, summary and config updates, console output, ...) to
this one file in the LevelDB log layout, with two differences from LevelDB: a 7-byte file header comes
first (`:W&B`, magic 0xBEE1 little-endian, a version byte), and the checksum is plain CRC-32 (IEEE, as
in zlib) of the type byte followed by the payload, not CRC32C.  This module only cuts the file into
record payloads; it knows nothing about protobuf.

A reader of training logs meets files that are still being written, cut off by a killed job, or hold
a flipped bit.  So a torn tail ends the read quietly after the last whole record (with one note), and
a record whose checksum does not match is skipped and reported with its byte offset, instead of
failing the whole run.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from ....errors import InputError

HEADER_IDENT = b":W&B"
HEADER_MAGIC = 0xBEE1
HEADER_LEN = 7
SUPPORTED_VERSION = 0
BLOCK_LEN = 32 * 1024
RECORD_HEADER_LEN = 7

FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

_HEADER = struct.Struct("<4sHB")
_RECORD = struct.Struct("<IHB")


def check_header(data: bytes, path: str) -> int:
    """The format version from the file header; refuses files that are not version-0 W&B logs."""
    if len(data) < HEADER_LEN:
        raise InputError(path, f"file is {len(data)} bytes, shorter than the 7-byte W&B header "
                               "(the run wrote nothing yet, or the file was cut)")
    ident, magic, version = _HEADER.unpack_from(data, 0)
    if ident != HEADER_IDENT or magic != HEADER_MAGIC:
        raise InputError(path, f"not a W&B transaction log (header {data[:HEADER_LEN].hex()}, "
                               f"expected 3a572642e1be followed by the version)")
    if version != SUPPORTED_VERSION:
        raise InputError(path, f"unknown W&B transaction log version {version} (this stabdiag reads "
                               f"version {SUPPORTED_VERSION}); upgrade stabdiag, or sync the run and "
                               "load it as wandb://ENTITY/PROJECT/RUN_ID")
    return version


class _Corruption:
    """Merges adjacent unreadable bytes into one note: 'skipped ... at byte offset X'."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.start: int | None = None
        self.end = 0
        self.why = ""

    def add(self, start: int, end: int, why: str) -> None:
        if self.start is not None and start <= self.end:
            self.end = max(self.end, end)
            return
        self.flush()
        self.start, self.end, self.why = start, end, why

    def flush(self) -> None:
        if self.start is None:
            return
        size = self.end - self.start
        self.notes.append(f"skipped a corrupt record at byte offset {self.start} "
                          f"({size} bytes, {self.why})")
        self.start = None


def iter_records(data: bytes, notes: list[str]) -> Iterator[tuple[int, bytes | memoryview]]:
    """Yield (byte offset, payload) of each whole, checksum-verified record after the header.

    A record in one piece comes as a memoryview into `data` (no copy), a record in several as bytes.
    Problems go to `notes`: a corrupt record is skipped and named by its offset, a record torn by
    the end of the file (a run still being written, or a killed job) ends the iteration.
    """
    for offset, payload, _ in framed_records(data, notes):
        yield offset, payload


def framed_records(data: bytes, notes: list[str], start: int = HEADER_LEN
                   ) -> Iterator[tuple[int, bytes | memoryview, int]]:
    """As iter_records, from the record at byte `start` on, with the offset just past each record: a
    reader following a growing log (stabdiag watch) goes on from there next time."""
    size = len(data)
    view = memoryview(data)
    unpack = _RECORD.unpack_from
    crc32 = zlib.crc32
    bad = _Corruption(notes)
    pos = start
    parts: list[memoryview] = []
    parts_at = -1
    while pos < size:
        room = BLOCK_LEN - pos % BLOCK_LEN
        if room < RECORD_HEADER_LEN:          # a block tail too short for a header is padding
            pos += room
            continue
        if pos + RECORD_HEADER_LEN > size:
            _note_torn(notes, parts_at if parts else pos)
            break
        checksum, length, kind = unpack(data, pos)
        end = pos + RECORD_HEADER_LEN + length
        if kind == 0 and length == 0 and checksum == 0:   # zero fill (preallocated space)...
            if data[pos + room:pos + room + BLOCK_LEN].strip(b"\0"):
                # ...but data follows: a zeroed stretch in the middle lost every record it held
                bad.add(parts_at if parts else pos, min(pos + room, size), "zeroed bytes; the records in them are lost")
                parts = []
            pos += room
            continue
        if kind not in (FULL, FIRST, MIDDLE, LAST) or length > room - RECORD_HEADER_LEN:
            # the header itself is damaged: the framing of this block is lost, resume at the next
            bad.add(pos, min(pos + room, size), "unreadable record header")
            parts, pos = [], pos + room
            continue
        if end > size:
            _note_torn(notes, parts_at if parts else pos)
            break
        if crc32(view[pos + 6:end]) != checksum:
            bad.add(parts_at if parts else pos, end, "checksum mismatch")
            parts, pos = [], end
            continue
        payload = view[pos + RECORD_HEADER_LEN:end]
        if kind == FULL:
            if parts:
                bad.add(parts_at, pos, "record missing its last fragment")
                parts = []
            if bad.start is not None:
                bad.flush()
            yield pos, payload, end
        elif kind == FIRST:
            if parts:
                bad.add(parts_at, pos, "record missing its last fragment")
            parts, parts_at = [payload], pos
        elif not parts:                       # MIDDLE or LAST whose start was skipped as corrupt
            bad.add(pos, end, "fragment of a skipped record")
        elif kind == MIDDLE:
            parts.append(payload)
        else:
            parts.append(payload)
            bad.flush()
            yield parts_at, b"".join(parts), end
            parts = []
        pos = end
    if parts and pos >= size:
        _note_torn(notes, parts_at)
    bad.flush()


def _note_torn(notes: list[str], at: int) -> None:
    notes.append(f"the file ends inside a record at byte offset {at} (the run is still being written "
                 f"or was cut off); read the {at} bytes before it")
