"""TensorBoard event files: every point of every scalar, checksums verified, restarts merged.

The event files in one directory are one run.  A restarted trainer adds a file that writes some
steps again: the last write of a step wins, and the earlier writes stay in the Series as superseded
evidence (TensorBoard's reader purges them, and they are often the spike that caused the restart).
The per-tag sub-folders that `add_scalars` writes (runs/x/loss_train/events… holding tag `loss`)
belong to the run above them and become keys like `loss/train`.  Nothing is downsampled.

Reading is vectorized (see _tfrecord, loaders/_protowire, _events) because the usual readers take tens of
seconds on a file of a few million scalars; tensorboard and google-crc32c are imported only when a
file is read.
"""

from __future__ import annotations

import math
import os
import struct

import numpy as np

from ....errors import InputError, MissingExtraError
from ...run import STEP_RANGE, Run, Series, in_step_range, run_name_for
from .._progress import ByteProgress

_FIRST_TAG_BYTES = 1 << 20        # how far into a file run_root looks for the first scalar tag
_MAX_LISTED = 5                   # corrupt offsets named in one note


def is_event_file_name(name: str) -> bool:
    """TensorBoard's own test: an event file has `tfevents` in its name."""
    return "tfevents" in os.path.basename(name)


def can_load(path: str) -> bool:
    """An event file by name, or a file that starts with a checksummed TFRecord holding an Event."""
    if not os.path.isfile(path):
        return False
    if is_event_file_name(path):
        return True
    try:
        return _starts_like_event_file(path)
    except (OSError, MissingExtraError):
        return False


def _starts_like_event_file(path: str) -> bool:
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(12)
        if len(head) < 12:
            return False
        payload = fh.read(min(struct.unpack_from("<Q", head)[0], 256))   # looks_like_record checks the length
    # every TensorBoard writer starts with an Event holding wall_time and file_version "brain.Event:N";
    # that is checked before the checksum, so that sniffing other files never loads google-crc32c
    if payload[:1] != b"\x09" or b"brain.Event:" not in payload:
        return False
    from ._tfrecord import looks_like_record

    return looks_like_record(head, size)


def run_root(path: str) -> str:
    """The run directory of an event file: its folder, or the folder above a per-tag sub-folder.

    `add_scalars("loss", {"train": …})` writes tag `loss` into a sub-folder named `loss_train` of the
    writer's own folder, which holds the writer's event file.  So a folder whose name is its first
    tag (with `/` as `_`) plus `_` and a suffix, next to an event file, is such a sub-folder.
    """
    folder = os.path.dirname(path)
    parent = os.path.dirname(folder)
    if not folder or parent == folder or not _holds_event_file(parent):
        return folder
    tag = _first_tag(path)
    if tag is not None and _per_tag_suffix(os.path.basename(folder), tag) is not None:
        return parent
    return folder


def _holds_event_file(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(is_event_file_name(n) and os.path.isfile(os.path.join(folder, n)) for n in names)


def _per_tag_suffix(folder_name: str, tag: str) -> str | None:
    prefix = tag.replace("/", "_") + "_"
    if folder_name.startswith(prefix) and len(folder_name) > len(prefix):
        return folder_name[len(prefix):]
    return None


def _first_tag(path: str) -> str | None:
    """The tag of the first scalar in the first MB of an event file, or None."""
    from ._events import decode_file
    from ._tfrecord import read_records

    try:
        records = read_records(path, max_bytes=_FIRST_TAG_BYTES)
        scalars = decode_file(records.data, records.starts, records.lengths, {})
    except (OSError, InputError, MissingExtraError):
        return None
    return next(iter(scalars.points), None)


def load(path: str, **options) -> Run:
    """Read one event file."""
    return load_group([path], **options)


def load_group(paths: list[str], **options) -> Run:
    """Read the event files of one run together, oldest first, and merge them into one Run."""
    from ._events import decode_file
    from ._tfrecord import read_records

    root = _common_root(paths)
    ordered = sorted(paths, key=_write_order_key)
    total = sum(_size(p) for p in ordered)
    known: dict[str, dict[str, str]] = {}        # plugin of each tag, per sub-folder, as first seen
    merged = _Merge()
    notes: list[str] = []
    failures: list[InputError] = []
    with ByteProgress(options.get("progress", False), total, run_name_for(root or ".")) as bar:
        for path in ordered:
            sub = "" if os.path.dirname(path) == root else os.path.basename(os.path.dirname(path))
            size, done = _size(path), bar.done
            try:
                records = read_records(path, on_progress=lambda pos, base=done: bar.update(base + pos // 2))
            except OSError as exc:
                failures.append(InputError(path, f"cannot read: {exc.strerror or exc}"))
                continue
            problem = _file_problem(path, records)
            if problem is not None:
                failures.append(problem)
                continue
            notes.extend(_record_notes(path, records))
            plugins = known.setdefault(sub, {})
            scalars = decode_file(records.data, records.starts, records.lengths, plugins,
                                  on_progress=lambda pos, base=done + size // 2: bar.update(base + pos // 2))
            for tag, plugin in scalars.plugins.items():
                plugins.setdefault(tag, plugin)
            if scalars.malformed_events:
                notes.append(f"{path}: skipped {scalars.malformed_events} record(s) that are not "
                             "valid Event protos")
            merged.add(path, sub, scalars)
            bar.update(done + size)
    return _to_run(root, ordered, merged, notes, failures)


def _to_run(root: str, ordered: list[str], merged: _Merge, notes: list[str],
            failures: list[InputError]) -> Run:
    if failures and not merged.files:
        raise failures[0]
    notes = [f"skipped {err}" for err in failures] + notes + merged.resume_notes()
    notes += [f"two series are both named {key} (add_scalar in one folder, add_scalars in another); the "
              f"second is read as '{apart}'" for key, apart in merged.collisions.items()]
    for path, count in merged.out_of_range:
        notes.append(f"{path}: {count} point(s) left out: their step is not {STEP_RANGE}")
    if not merged.points:
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(merged.skipped.items()))
        where = root or ordered[0]
        raise InputError(where, f"no scalar summaries in {len(merged.files)} event file(s)"
                                + (f" (found {found} values)" if found else ""))
    series = {key: Series.from_points(key, *(np.concatenate(col) for col in zip(*parts)))
              for key, parts in merged.points.items()}
    meta = {"format": "tensorboard", "files": len(merged.files), "skipped_values": dict(merged.skipped)}
    return Run(run_name_for(root or ordered[0]), series, tuple(merged.files), meta, tuple(notes))


class _Merge:
    """The points of a run's files by key, in write order, with the file each part came from."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.points: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.origin: dict[str, list[int]] = {}
        self.skipped: dict[str, int] = {}
        self.out_of_range: list[tuple[str, int]] = []     # (file, points) whose step is out of range
        self.folder_of: dict[str, str] = {}                 # the sub-folder ("" the run's) each key is from
        self.collisions: dict[str, str] = {}                # key -> the key the second folder's series got

    def add(self, path: str, sub: str, scalars) -> None:
        index = len(self.files)
        self.files.append(path)
        for kind, n in scalars.skipped.items():
            self.skipped[kind] = self.skipped.get(kind, 0) + n
        for tag, columns in scalars.points.items():
            key = tag if not sub else _sub_key(sub, tag)
            if self.folder_of.setdefault(key, sub) != sub:
                # add_scalar("loss/train") beside add_scalars("loss", {"train": ...}): two series, one
                # key; kept apart (one replacing the other would also read as a false resume)
                apart = f"{key} [{sub or '.'}/]"
                self.collisions.setdefault(key, apart)
                key = apart
            ok = in_step_range(columns[0])
            if not ok.all():                     # an Event's int64 step of 2**63-1: see run.STEP_MAX
                self.out_of_range.append((path, int(np.count_nonzero(~ok))))
                columns = tuple(col[ok] for col in columns)
                if not len(columns[0]):
                    continue
            self.points.setdefault(key, []).append(columns)
            self.origin.setdefault(key, []).append(index)

    def resume_notes(self) -> list[str]:
        """One note per file that goes back to steps already written: the run was resumed there."""
        back: dict[int, list[int]] = {}      # file -> [lowest step written again, highest step before]
        inside: dict[int, list[int]] = {}
        for key, parts in self.points.items():
            before: int | None = None
            for index, (steps, _, _) in zip(self.origin[key], parts):
                # a later file that writes the last step again (a final evaluate() at the end step) has
                # not gone back; one that starts below it has
                if before is not None and steps.min() < before:
                    _widen(back, index, int(steps[steps <= before].min()), before)
                peak = np.maximum.accumulate(steps)
                went_back = np.flatnonzero(steps[1:] < peak[:-1])
                if went_back.size:
                    _widen(inside, index, int(steps[1:][went_back].min()), int(peak[:-1][went_back].max()))
                before = int(steps.max()) if before is None else max(before, int(steps.max()))
        notes = [f"resumed at step {low}: {self.files[i]} writes steps {_span(low, high)} again; the earlier "
                 "values are kept as superseded evidence" for i, (low, high) in sorted(back.items())]
        notes += [f"resumed at step {low}: steps go back from {high} inside {self.files[i]}; the earlier "
                  "values are kept as superseded evidence" for i, (low, high) in sorted(inside.items())]
        return notes


def _span(low: int, high: int) -> str:
    """`5-4906`, but `-5 to 4906` where a step is negative (`-5-4906` reads as a subtraction)."""
    return f"{low}-{high}" if low >= 0 else f"{low} to {high}"


def _widen(spans: dict[int, list[int]], index: int, low: int, high: int) -> None:
    span = spans.setdefault(index, [low, high])
    span[0], span[1] = min(span[0], low), max(span[1], high)


def _sub_key(sub: str, tag: str) -> str:
    """The key of a tag read from a per-tag sub-folder: `loss` in `loss_train` -> `loss/train`."""
    suffix = _per_tag_suffix(sub, tag)
    return f"{tag}/{suffix}" if suffix is not None else f"{sub}/{tag}"


def _common_root(paths: list[str]) -> str:
    roots = {run_root(p) for p in paths}
    if len(roots) == 1:
        return roots.pop()
    return os.path.commonpath([os.path.dirname(p) or "." for p in paths])


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _write_order_key(path: str) -> tuple[float, str]:
    """Files sort by the wall time of their first event (every writer starts with one), then name."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(12 + 9)
    except OSError:
        return (math.inf, path)
    wall = struct.unpack_from("<d", head, 13)[0] if len(head) == 21 and head[12] == 0x09 else math.inf
    return (wall if math.isfinite(wall) else math.inf, path)


def _file_problem(path: str, records) -> InputError | None:
    """An error for a file that holds no event data at all; None for a readable one."""
    if len(records.starts):
        return None
    if len(records.data) == 0:
        return InputError(path, "empty event file (nothing written yet)")
    if records.corrupt and records.corrupt[0][0] == 0:
        return InputError(path, "not a TensorBoard event file (no record with a valid checksum)")
    return InputError(path, "no complete record yet (file still being written?)")


def _record_notes(path: str, records) -> list[str]:
    notes = []
    if records.corrupt:
        listed = ", ".join(f"{offset} ({size} bytes)" for offset, size in records.corrupt[:_MAX_LISTED])
        more = len(records.corrupt) - _MAX_LISTED
        notes.append(f"{path}: skipped {len(records.corrupt)} corrupt record(s) (checksum mismatch) at "
                     f"byte offset {listed}" + (f" and {more} more" if more > 0 else ""))
    if records.truncated_at is not None:
        notes.append(f"{path}: last record cut short at byte offset {records.truncated_at} "
                     "(file still being written?); read everything before it")
    if not records.native_crc:
        notes.append("google-crc32c has no native build here: checksums were verified in slow pure Python")
    return notes
