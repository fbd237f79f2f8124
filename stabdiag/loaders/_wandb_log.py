"""Decode the records of a W&B transaction log into metric points, config, summary and run facts.

wandb-core writes one `history` record per committed `wandb.log` row: items keyed by `key` or by a
`nested_key` path (a logged dict), each value as JSON text, plus `_step`, `_timestamp` and
`_runtime`.  Media are written as several items under one prefix, one of which is `<prefix>/_type`
(an image's width and size are numbers too), so a whole prefix with a `_type` is dropped, not just
its text items.  Everything else this module needs (summary, config, define_metric, the run record,
the exit record) is small; console output and system stats are never decoded.
"""

from __future__ import annotations

import json
import math
from fnmatch import fnmatchcase

import numpy as np

from ..errors import InputError, MissingExtraError
from ._wandb_records import check_header, iter_records

# Record fields (wandb_internal.proto) this reader decodes; other record kinds are skipped unparsed
_HISTORY, _SUMMARY, _CONFIG, _METRIC, _RUN, _EXIT = 2, 3, 5, 12, 17, 18
_WANTED = frozenset((_HISTORY, _SUMMARY, _CONFIG, _METRIC, _RUN, _EXIT))
_RECORD_KINDS = frozenset((2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 20, 21, 22, 23, 24, 25, 26,
                           27, 100))
_INTERNAL = frozenset(("_step", "_timestamp", "_runtime"))
_BOOLS = {"true": 1.0, "false": 0.0}


def load_pb():
    """wandb's own protobuf classes for the transaction log (the `wandb` extra)."""
    try:
        from google.protobuf.message import DecodeError
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise MissingExtraError("reading W&B run files needs the wandb package", "wandb") from None
    return wandb_internal_pb2, DecodeError


def _peek_kind(payload: bytes) -> int | None:
    """The field number of the record's kind, read from the wire without parsing the record."""
    pos, size = 0, len(payload)
    while pos < size:
        tag, pos = _varint(payload, pos)
        if tag < 0:
            return None
        field, wire = tag >> 3, tag & 7
        if field in _RECORD_KINDS:
            return field
        if wire == 0:
            _, pos = _varint(payload, pos)
        elif wire == 2:
            length, pos = _varint(payload, pos)
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            return None
        if pos < 0:
            return None
    return None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf) and shift < 64:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    return -1, -1


def _join(item) -> str:
    path = item.nested_key
    if path:
        return path[0] if len(path) == 1 else "/".join(path)
    return item.key


def _typed_value(item) -> float | None:
    """A history value written in the typed fields rather than as JSON text (newer writers)."""
    which = item.WhichOneof("value")
    if which in ("number", "integer", "boolean"):
        return float(getattr(item, which))
    if which == "json":
        try:
            value = json.loads(item.json)
        except ValueError:
            return None
        return float(value) if isinstance(value, (int, float)) else None
    return None


class History:
    """Metric points by key: for each key the history rows it appears in and its values."""

    def __init__(self) -> None:
        self.columns: dict[str, tuple[list[int], list[float]]] = {}
        self.row_steps: list[int] = []
        self.row_walls: list[float] = []

    def add(self, record) -> None:
        row = len(self.row_steps)
        step = None
        wall = math.nan
        media: list[str] = []
        columns = self.columns
        for item in record.item:
            key = _join(item)
            text = item.value_json
            if text:
                try:
                    value = float(text)
                except ValueError:
                    value = _BOOLS.get(text)
                    if value is None:              # text, lists, media fields: not a scalar
                        if key.endswith("/_type"):
                            media.append(key[:-5])
                        continue
            else:
                value = _typed_value(item)
                if value is None:
                    if key.endswith("/_type"):
                        media.append(key[:-5])
                    continue
            if key[:1] == "_" and (key in _INTERNAL or key.startswith("_wandb")):
                if key == "_step" and math.isfinite(value):
                    step = int(value)
                elif key == "_timestamp":
                    wall = value
                continue
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            column[0].append(row)
            column[1].append(value)
        if media:
            self._drop_media(row, tuple(media))
        self.row_steps.append(record.step.num if step is None else step)
        self.row_walls.append(wall)

    def _drop_media(self, row: int, prefixes: tuple[str, ...]) -> None:
        for key, (rows, values) in self.columns.items():
            if key.startswith(prefixes) and rows and rows[-1] == row:
                rows.pop()
                values.pop()
        for key in [k for k, (rows, _) in self.columns.items() if not rows]:
            del self.columns[key]


class KeyedJson:
    """Summary or config state: the last JSON text of each key path, after updates and removals.

    Keys are kept as written: a `nested_key` path joined with '/' for the summary (the names the
    series get), or as a tuple for the config, whose own keys may hold a '/'.
    """

    def __init__(self, *, tuple_keys: bool = False) -> None:
        self.raw: dict = {}
        self._key = _path if tuple_keys else _join

    def apply(self, record) -> None:
        raw, key_of = self.raw, self._key
        for item in record.update:
            raw[key_of(item)] = item.value_json
        for item in record.remove:
            key = key_of(item)
            raw.pop(key, None)
            for other in [k for k in raw if _under(k, key)]:
                del raw[other]

    def flat(self) -> dict:
        """Decoded values by '/'-joined key; logged dicts flattened, media reduced to their type."""
        out: dict = {}
        for key, text in self.raw.items():
            name = key if isinstance(key, str) else "/".join(key)
            if not name.startswith("_wandb"):
                _flatten_into(out, name, _decode(text))
        media = {k[:-6] for k in out if k.endswith("/_type")}
        if media:
            prefixes = tuple(m + "/" for m in media)
            kinds = {m: out[m + "/_type"] for m in media}
            out = {k: v for k, v in out.items() if not k.startswith(prefixes)}
            out.update({m: f"<{kinds[m]}>" for m in media})
        return out

    def nested(self) -> dict:
        """Decoded values as a nested dict (the shape of `wandb.config`), without `_wandb`."""
        out: dict = {}
        for key, text in self.raw.items():
            parts = (key,) if isinstance(key, str) else key
            if parts[0] == "_wandb":
                continue
            node = out
            for part in parts[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[parts[-1]] = _decode(text)
        return out


def _path(item) -> tuple[str, ...]:
    return tuple(item.nested_key) or (item.key,)


def _under(key, prefix) -> bool:
    if isinstance(key, str):
        return key.startswith(prefix + "/")
    return len(key) > len(prefix) and key[:len(prefix)] == prefix


def _decode(text: str):
    try:
        return json.loads(text)
    except ValueError:
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

    def __init__(self) -> None:
        self.history = History()
        self.summary = KeyedJson()
        self.config = KeyedJson(tuple_keys=True)
        self.step_metrics: list[tuple[str, bool, str]] = []   # (name or glob, is_glob, step key)
        self.run: dict = {}
        self.exit_code: int | None = None
        self.notes: list[str] = []


def read_log(path: str) -> LogContents:
    """Read a `run-<id>.wandb` file: verified records decoded into a LogContents."""
    pb, decode_error = load_pb()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read the file ({exc.strerror or exc})") from None
    check_header(data, path)
    out = LogContents()
    make_record = pb.Record
    for offset, payload in iter_records(data, out.notes):
        kind = _peek_kind(payload)
        if kind is not None and kind not in _WANTED:
            continue
        record = make_record()
        try:
            record.ParseFromString(payload)
        except decode_error:
            out.notes.append(f"skipped an undecodable record at byte offset {offset}")
            continue
        which = record.WhichOneof("record_type")
        if which == "history":
            out.history.add(record.history)
        elif which == "summary":
            out.summary.apply(record.summary)
        elif which == "config":
            out.config.apply(record.config)
        elif which == "metric":
            _add_metric(out, record.metric)
        elif which == "run":
            _add_run(out, record.run)
        elif which == "exit":
            out.exit_code = int(record.exit.exit_code)
    return out


def _add_metric(out: LogContents, metric) -> None:
    if metric.step_metric and (metric.name or metric.glob_name):
        is_glob = not metric.name
        out.step_metrics.append((metric.glob_name if is_glob else metric.name, is_glob,
                                 metric.step_metric))


def _add_run(out: LogContents, run) -> None:
    out.config.apply(run.config)
    out.summary.apply(run.summary)
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


def step_metric_for(key: str, rules: list[tuple[str, bool, str]]) -> str | None:
    """The x-axis key `define_metric(..., step_metric=...)` gave this key, if any (exact name first,
    then the latest matching glob)."""
    for name, is_glob, step_key in reversed(rules):
        if not is_glob and name == key:
            return step_key
    for name, is_glob, step_key in reversed(rules):
        if is_glob and fnmatchcase(key, name):
            return step_key
    return None


def axis_lookup(rows: np.ndarray, axis_rows: np.ndarray, axis_values: np.ndarray) -> np.ndarray:
    """The axis value in force at each row: the last one written at or before it (NaN before any)."""
    at = np.searchsorted(axis_rows, rows, side="right") - 1
    out = np.full(len(rows), np.nan)
    ok = at >= 0
    out[ok] = axis_values[at[ok]]
    return out
