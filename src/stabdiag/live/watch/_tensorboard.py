"""Following TensorBoard event files: the new bytes of each file cut into TFRecord frames (both
checksums verified), decoded by the TensorBoard reader's own Event decoder."""

from __future__ import annotations

import os
import struct

import numpy as np

from ...read.formats.tensorboard import _common_root, _sub_key, _write_order_key
from ...read.formats.tensorboard._events import decode_file
from ...read.formats.tensorboard._tfrecord import crc32c_module, masked_crc
from ...read.run import Run, Series, in_step_range, run_name_for
from ._follower_base import Follower
from ._store import PointStore
from ._tail import Tail

_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_READ_BYTES = 64 << 20          # bytes framed per poll: a huge backlog is taken in pieces


def frames(buf: bytes, crc_value) -> tuple[list[int], list[int], int, int]:
    """(payload starts, payload lengths, bytes consumed, corrupt records) of the whole records in `buf`.
    A record cut short by the end of `buf` (being written, or its writer was killed) is not consumed;
    a header whose checksum fails is searched past byte by byte, a payload whose checksum fails is
    skipped."""
    starts: list[int] = []
    lengths: list[int] = []
    pos, bad, size = 0, 0, len(buf)
    while pos + 12 <= size:
        length, stored = _HEADER.unpack_from(buf, pos)
        if masked_crc(crc_value, buf[pos:pos + 8]) != stored:
            pos += 1
            bad += 1
            continue
        end = pos + 12 + length + 4
        if end > size:
            break
        if masked_crc(crc_value, buf[pos + 12:end - 4]) == _CRC.unpack_from(buf, end - 4)[0]:
            starts.append(pos + 12)
            lengths.append(length)
        else:
            bad += 1
        pos = end
    return starts, lengths, pos, bad


class _File:
    def __init__(self, path: str) -> None:
        self.tail = Tail(path)
        self.store = PointStore()
        self.plugins: dict[str, str] = {}
        self.corrupt = 0


class EventsFollower(Follower):
    kind = "tensorboard"

    def __init__(self, *args) -> None:
        self._files: dict[str, _File] = {}
        super().__init__(*args)

    def started(self, path: str) -> None:
        self._files[path] = _File(path)
        self._root = _common_root(self.paths)         # the folder the tag keys are relative to

    def poll(self) -> bool:
        crc = crc32c_module().value
        root = self._root
        new = False
        for path, f in self._files.items():
            if not f.tail.grew():
                continue
            if f.tail.take_reset():
                f.store, f.plugins = PointStore(), {}
            buf = f.tail.new_bytes(_READ_BYTES)
            starts, lengths, used, bad = frames(buf, crc)
            f.tail.consume(used)
            f.corrupt += bad
            if not starts:
                continue
            scalars = decode_file(np.frombuffer(buf, np.uint8), np.asarray(starts, np.int64),
                                  np.asarray(lengths, np.int64), f.plugins)
            for tag, plugin in scalars.plugins.items():
                f.plugins.setdefault(tag, plugin)
            sub = "" if os.path.dirname(path) == root else os.path.basename(os.path.dirname(path))
            for tag, (steps, values, walls) in scalars.points.items():
                ok = in_step_range(steps)
                f.store.extend(tag if not sub else _sub_key(sub, tag), steps[ok], values[ok], walls[ok])
                new = new or bool(ok.any())
        return new

    def run(self) -> Run | None:
        ordered = sorted(self._files, key=_write_order_key)
        parts: dict[str, list[tuple]] = {}
        for path in ordered:                     # files in write order: a resumed writer's file comes after
            for key, columns in self._files[path].store.raw().items():
                parts.setdefault(key, []).append(columns)
        if not parts:
            return None
        series = {}
        for key, cols in parts.items():
            # one file (no resume): its arrays as they are, no copy
            steps, values, walls = cols[0] if len(cols) == 1 else (np.concatenate(c) for c in zip(*cols))
            series[key] = Series.from_points(key, steps, values, walls if np.isfinite(walls).any() else None)
        notes = tuple(f"{p}: skipped {f.corrupt} corrupt record(s)" for p, f in self._files.items() if f.corrupt)
        root = self._root
        return Run(run_name_for(root or ordered[0]), series, tuple(ordered),
                   {"format": "tensorboard", "files": len(ordered)}, notes)
