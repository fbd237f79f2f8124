"""Decode the records of a W&B transaction log into history columns, config, summary and run facts.

wandb-core writes one `history` record per committed `wandb.log` row, a `summary` record with the
row's latest values, and a few small records: the run (config, ids, start time), `define_metric`
x-axes, config changes and the exit.  A record's kind is read off its first bytes, so console
output and system stats are skipped undecoded; history rows go through the lite view
(`_lite`, `_history`).  Summary records are kept undecoded and folded newest first at
the end, so only the latest value of each key is ever decoded.
"""

from __future__ import annotations

import json
import mmap
import os
import threading

import numpy as np

from ....errors import InputError, MissingExtraError
from .._progress import ByteProgress
from ._batch import SUMMARY, as_text, int64s, item_keys, read_batch, slices
from ._history import History, NotText, join_key
from ._lite import aligned_keys, lite_record_class
from ._records import HEADER_LEN, check_header, iter_records

# Record fields of wandb_internal.proto: the kinds read here, and all kinds (the oneof)
_HISTORY, _SUMMARY, _CONFIG, _METRIC, _RUN, _EXIT = 2, 3, 5, 12, 17, 18
_DECODED = frozenset((_CONFIG, _METRIC, _RUN, _EXIT))
_KINDS = frozenset((2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 20, 21, 22, 23, 24, 25, 26, 27,
                    100))


def load_pb():
    """wandb's own protobuf classes for the transaction log (the `wandb` extra)."""
    try:
        from google.protobuf.message import DecodeError
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise MissingExtraError("reading W&B run files needs the wandb package", "wandb") from None
    return wandb_internal_pb2, DecodeError


def record_kind(payload) -> int | None:
    """The field number of a Record's kind, read off the wire without decoding the record."""
    # the usual layout: `num` (field 1, a varint) first, then the kind's one-byte tag
    if not payload:
        return None
    pos = 0
    if payload[0] == 0x08:
        pos = 1
        while pos < len(payload) and payload[pos] & 0x80:
            pos += 1
        pos += 1
    if pos < len(payload):
        tag = payload[pos]
        if tag < 0x80 and tag & 7 == 2 and (tag >> 3) in _KINDS:
            return tag >> 3
    return _scan_kind(payload)


def _scan_kind(payload) -> int | None:
    pos, size = 0, len(payload)
    while pos < size:
        tag, pos = _varint(payload, pos)
        if pos < 0:
            return None
        field, wire = tag >> 3, tag & 7
        if field in _KINDS:
            return field
        if wire == 0:
            _, pos = _varint(payload, pos)
        elif wire == 2:
            length, pos = _varint(payload, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            return None
        if pos < 0:
            return None
    return None


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf) and shift < 64:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    return 0, -1


_SMALL = 256           # summary records this short are compared whole, to skip exact repeats


def _body_start(payload) -> int:
    """Where a record starts after its leading `num` field (which differs between repeats)."""
    if not payload or payload[0] != 0x08:
        return 0
    pos = 1
    while pos < len(payload) and payload[pos] & 0x80:
        pos += 1
    return pos + 1


class Summary:
    """The run's final summary: every key's latest JSON text, folded from the newest record back."""

    def __init__(self) -> None:
        self._entries: list = []           # summary records (payloads) or decoded SummaryRecords
        self.raw: dict[str, str] = {}
        self._settled: set[str] = set()
        self._removed: tuple[str, ...] = ()
        self.skipped = 0                   # records that could not be decoded (or hold non-UTF-8 text)

    def add(self, entry) -> None:
        self._entries.append(entry)

    def fold(self, lite, pb, decode_error) -> None:
        """Settle each key at its newest update or removal; older records only fill in the rest.

        Most records are read in bulk (`_newest_items`), which settles each key from the newest
        record holding it.  The others (removals, typed values, text that is not UTF-8, decoded
        records) are folded one by one in their place: a record is skipped when it cannot settle
        anything: its bytes (less the record number) repeat a record already folded, or each of its
        items has one key part and every part is settled already.  A record with one key part per
        item is settled from the lite view when its parts come from one field (`aligned_keys`), else
        decoded.  A record whose items cannot be read from the lite view (a logged nested dict) is
        decoded once per layout: the same key parts (in any order, as wandb-core writes a row's
        items in map order) with the same number of values are taken to be the same keys, which are
        settled already when met again.
        """
        entries, self._entries = self._entries, []
        folded: dict[tuple[int, int, int], list[tuple[list, list]]] = {}
        repeats: set[bytes] = set()
        for segment in reversed(_segments(entries)):
            payloads = [e for e in segment if isinstance(e, (bytes, memoryview))]
            in_bulk, settles = _newest_items(payloads, self._settled)
            index = len(payloads)
            for entry in reversed(segment):
                if not isinstance(entry, (bytes, memoryview)):
                    self._fold_record(entry)
                    continue
                index -= 1
                if in_bulk[index]:
                    for key, text in settles.get(index, ()):
                        self._settle(key, text)
                    continue
                if len(entry) <= _SMALL:                   # e.g. `_wandb.runtime` and `_runtime`
                    body = bytes(entry[_body_start(entry):])
                    if body in repeats:
                        continue
                    repeats.add(body)
                try:
                    self._fold_payload(entry, lite, pb, folded)
                except (decode_error, NotText):            # skipped, as a record with a bad checksum is
                    self.skipped += 1

    def _fold_payload(self, entry, lite, pb, folded: dict) -> None:
        settled = self._settled
        view = lite.FromString(entry).summary
        update = view.update
        if view.remove.key or view.remove.nested_key:
            self._fold_record(pb.Record.FromString(entry).summary)
            return
        parts, names, count = update.nested_key, update.key, len(update.value_json)
        if len(parts) + len(names) == count:           # one key part per item: parts are keys
            if settled.issuperset(parts) and settled.issuperset(names):
                return
            keys = aligned_keys(update)
            if keys is None:
                self._fold_record(pb.Record.FromString(entry).summary)
                return
            texts = list(update.value_json)
            if not all(isinstance(t, str) for t in (*keys, *texts)):
                raise NotText("a summary record holds text that is not UTF-8")   # the lite view's bytes
            for key, text in zip(keys, texts):
                self._settle(key, text)
            return
        shape = (len(parts), len(names), count)
        layout = (sorted(parts, key=repr), sorted(names, key=repr) if names else [])
        seen = folded.setdefault(shape, [])
        if layout not in seen:
            seen.append(layout)
            self._fold_record(pb.Record.FromString(entry).summary)

    def _fold_record(self, record) -> None:
        for item in record.remove:
            key = join_key(item)
            self._settle(key, None)
            self._removed += (key + "/",)
        for item in record.update:
            self._settle(join_key(item), item.value_json)

    def _settle(self, key: str, text: str | None) -> None:
        if key in self._settled:
            return
        self._settled.add(key)                         # a key under a removed prefix too: it stays out
        if text is not None and not (self._removed and key.startswith(self._removed)):
            self.raw[key] = text

    def flat(self) -> dict:
        """Decoded values by '/'-joined key; logged dicts flattened, media reduced to their type."""
        out: dict = {}
        for key, text in self.raw.items():
            if not key.startswith("_wandb"):
                _flatten_into(out, key, _decode(text))
        media = {k[:-6] for k in out if k.endswith("/_type")}
        if media:
            prefixes = tuple(m + "/" for m in media)
            kinds = {m: out[m + "/_type"] for m in media}
            out = {k: v for k, v in out.items() if not k.startswith(prefixes)}
            out.update({m: f"<{kinds[m]}>" for m in media})
        return out


_SEGMENT_BYTES = 16 << 20          # summary payloads read in bulk at a time, newest segment first


def _segments(entries: list) -> list[list]:
    """The entries cut into runs of about _SEGMENT_BYTES of payload each, in order."""
    out: list[list] = []
    current: list = []
    size = 0
    for entry in entries:
        current.append(entry)
        if isinstance(entry, (bytes, memoryview)):
            size += len(entry)
            if size >= _SEGMENT_BYTES:
                out.append(current)
                current, size = [], 0
    if current:
        out.append(current)
    return out


def _newest_items(payloads: list, settled: set[str]) -> tuple[np.ndarray, dict[int, list[tuple[str, str]]]]:
    """Summary records read in bulk: which were (the others are left to `Summary._fold_payload`),
    and for each that holds the newest update of some key not in `settled`, those keys and their
    JSON texts in item order (the first of a key written twice in one record).

    A record that would settle a key is taken only when all its text is UTF-8; else it is left to
    `_fold_payload` (which skips it with a note), and the key's next newest record is looked for.
    """
    batch = read_batch(payloads, SUMMARY)
    in_bulk = batch.ok.copy()
    if not len(batch.item_record):
        return in_bulk, {}
    names, codes, unnamed = item_keys(batch)
    if names is None:
        return np.zeros(len(payloads), dtype=bool), {}
    in_bulk[batch.item_record[unnamed]] = False
    wanted = np.array([name is not None and name not in settled for name in names], dtype=bool)
    while True:
        taken = np.flatnonzero(in_bulk[batch.item_record] & wanted[codes])
        records = batch.item_record[taken]
        newest = np.full(len(names), -1, dtype=np.int64)
        np.maximum.at(newest, codes[taken], records)
        latest = taken[records == newest[codes[taken]]]
        _, first = np.unique(codes[latest], return_index=True)  # a key twice in one record: its first item
        chosen = np.sort(latest[first])
        settling = np.isin(batch.item_record, batch.item_record[chosen])
        texts, bad = as_text(slices(batch.data, batch.value_start[settling], batch.value_end[settling]))
        if bad is None:
            break
        in_bulk[batch.item_record[settling][bad]] = False
    at = np.cumsum(settling) - 1                         # an item's place among the settling records' items
    chosen_texts = texts.take(int64s(at[chosen])).to_pylist()
    settles: dict[int, list[tuple[str, str]]] = {}
    for record, code, text in zip(batch.item_record[chosen].tolist(), codes[chosen].tolist(), chosen_texts):
        settles.setdefault(record, []).append((names[code], text))
    return in_bulk, settles


class Config:
    """The run's config: each key path's latest JSON text, after updates and removals."""

    def __init__(self) -> None:
        self.raw: dict[tuple[str, ...], str] = {}

    def apply(self, record) -> None:
        raw = self.raw
        for item in record.update:
            raw[tuple(item.nested_key) or (item.key,)] = item.value_json
        for item in record.remove:
            path = tuple(item.nested_key) or (item.key,)
            for key in [k for k in raw if k[:len(path)] == path]:
                del raw[key]

    def nested(self) -> dict:
        """Decoded values as a nested dict (the shape of `wandb.config`), without `_wandb`."""
        out: dict = {}
        for path, text in self.raw.items():
            if path[0] == "_wandb":
                continue
            node = out
            for part in path[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[path[-1]] = _decode(text)
        return out


def _decode(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _flatten_into(out: dict, key: str, value) -> None:
    if isinstance(value, dict) and "_type" not in value:
        for sub, inner in value.items():
            _flatten_into(out, f"{key}/{sub}", inner)
    elif isinstance(value, dict):
        out[key] = f"<{value['_type']}>"
    else:
        out[key] = value


class LogContents:
    """Everything read from one transaction log."""

    def __init__(self, decode_row=None) -> None:
        self.notes: list[str] = []
        self.history = History(decode_row, self.notes)
        self.summary = Summary()
        self.config = Config()
        self.step_metrics: list[tuple[str, bool, str]] = []   # (name or glob, is_glob, step key)
        self.run: dict = {}
        self.exit_code: int | None = None


_PROGRESS_STEP = 1 << 20          # bytes of log between updates of the progress bar


def read_log(path: str, progress: bool = False, label: str = "") -> LogContents:
    """Read a `run-<id>.wandb` file: verified records decoded into a LogContents.

    With `progress`, a bar on stderr once the read has taken a second: the pass over the records
    fills three quarters of it, the summary's fold and the last history chunk the rest."""
    pb, decode_error = load_pb()
    lite = lite_record_class()
    data = _map_read_only(path)
    check_header(data, path)

    def decode_row(payload):
        lite.FromString(payload)        # a row the lite view refuses is skipped as undecodable, as before
        return pb.Record.FromString(payload).history

    out = LogContents(decode_row)
    history, summary = out.history, out.summary
    with ByteProgress(progress, len(data), label or os.path.basename(path)) as bar:
        next_update = _PROGRESS_STEP
        for offset, payload in iter_records(data, out.notes):
            if offset >= next_update:
                bar.update(offset * 3 // 4)
                next_update = offset + _PROGRESS_STEP
            add_payload(out, payload, offset, pb, decode_error)
        bar.update(len(data) * 3 // 4)
        # the last chunk of history runs beside the summary's fold: both are mostly numpy and Arrow,
        # which release the GIL, and they share nothing but the notes, which the fold leaves alone
        flushing = _Background(history.flush)
        try:
            summary.fold(lite, pb, decode_error)
        finally:
            flushing.join()
        bar.update(len(data))
    if summary.skipped:
        out.notes.append(f"skipped {summary.skipped} summary record(s) that could not be decoded")
    return out


def add_payload(out: LogContents, payload, offset: int, pb, decode_error) -> None:
    """Take one record's payload into `out` (history rows in bulk, the rest through wandb's classes)."""
    kind = record_kind(payload)
    try:
        if kind == _HISTORY:
            if out.history.add_lite(payload, offset):
                return
        elif kind == _SUMMARY:
            out.summary.add(payload)
            return
        elif kind is not None and kind not in _DECODED:
            return                                         # console output, system stats, ...
        _add_record(out, pb.Record.FromString(payload))
    except decode_error:
        out.notes.append(f"skipped an undecodable record at byte offset {offset}")


class _Background:
    """Run `task` in a thread; `join` waits for it and raises what it raised."""

    def __init__(self, task) -> None:
        self._task = task
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="stabdiag-wandb-flush", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._task()
        except BaseException as exc:                   # handed to the reading thread by join
            self._error = exc

    def join(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _map_read_only(path: str):
    """The file's bytes, mapped read-only (a long run's log can be gigabytes); read if unmappable."""
    try:
        with open(path, "rb") as fh:
            try:
                if os.fstat(fh.fileno()).st_size >= HEADER_LEN:
                    return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                pass
            return fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read the file ({exc.strerror or exc})") from None


def _add_record(out: LogContents, record) -> None:
    which = record.WhichOneof("record_type")
    if which == "history":
        out.history.add(record.history)
    elif which == "summary":
        out.summary.add(record.summary)
    elif which == "config":
        out.config.apply(record.config)
    elif which == "metric":
        _add_metric(out, record.metric)
    elif which == "run":
        _add_run(out, record.run)
    elif which == "exit":
        out.exit_code = int(record.exit.exit_code)


def _add_metric(out: LogContents, metric) -> None:
    if metric.step_metric and (metric.name or metric.glob_name):
        is_glob = not metric.name
        out.step_metrics.append((metric.glob_name if is_glob else metric.name, is_glob,
                                 metric.step_metric))


def _add_run(out: LogContents, run) -> None:
    out.config.apply(run.config)
    out.summary.add(run.summary)
    facts = {"run_id": run.run_id, "entity": run.entity, "project": run.project,
             "display_name": run.display_name, "group": run.run_group, "job_type": run.job_type,
             "tags": list(run.tags), "notes": run.notes}
    if run.HasField("start_time"):
        facts["start_time"] = run.start_time.seconds + run.start_time.nanos / 1e9
    if run.starting_step:
        facts["starting_step"] = int(run.starting_step)
    if run.resumed:
        facts["resumed"] = True
    if run.HasField("telemetry") and run.telemetry.cli_version:
        facts["wandb_version"] = run.telemetry.cli_version
    out.run.update({k: v for k, v in facts.items() if v not in ("", [], None)})
