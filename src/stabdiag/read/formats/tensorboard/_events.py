"""Scalar points out of the Event records of one TensorBoard file.

Two encodings carry scalars.  The legacy one (tensorboardX, TF1, torch's default writer) puts a float
in `Summary.Value.simple_value`.  TF2 and torch's `new_style=True` put a rank-0 tensor in
`Summary.Value.tensor`, and say that it is a scalar only through plugin metadata (`scalars`) that the
writer sends with a tag's first value and then never again, so the plugin is remembered per tag.
Images, histograms, audio, text and hparams are counted and skipped without decoding their payloads.

The hot path reads the wire format in bulk (see loaders/_protowire); tensorboard's compiled protos decode the
rare parts: the plugin metadata (a few distinct byte strings per file) and tensor shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ....errors import MissingExtraError
from .._protowire import FieldHits, intern_bytes, last_per_message, read_fixed, read_varints, scan_fields

# Field numbers of tensorboard.compat.proto's Event, Summary, Summary.Value and TensorProto; protobuf
# never renumbers a field, and a test checks these against the compiled protos.
EVENT_WALL_TIME, EVENT_STEP, EVENT_SUMMARY = 1, 2, 5
SUMMARY_VALUE = 1
VALUE_TAG, VALUE_SIMPLE, VALUE_TENSOR, VALUE_METADATA = 1, 2, 8, 9
VALUE_OTHER_KINDS = {3: "histograms", 4: "images", 5: "histograms", 6: "audio"}   # as TB's plugins
TENSOR_DTYPE, TENSOR_SHAPE, TENSOR_CONTENT = 1, 2, 4
TENSOR_FLOAT, TENSOR_DOUBLE = 5, 6
TENSOR_VARINT_FIELDS = (7, 10, 11, 13, 16, 17)   # int_val, int64_val, bool_val, half_val, uint32, uint64
SCALARS_PLUGIN = "scalars"

# TensorFlow DataType -> numpy dtype of its tensor_content bytes (bfloat16 is read via float32)
_CONTENT_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 9: "<i8", 10: "u1",
                   14: "<u2", 17: "<u2", 19: "<f2", 22: "<u4", 23: "<u8"}
_DT_BFLOAT16, _DT_HALF = 14, 19
_SIGNED_VARINT_FIELDS = (7, 10)


_CHUNK_BYTES = 4 << 20   # payload bytes decoded per batch: bounds the memory of the temporaries


@dataclass(frozen=True, slots=True)
class FileScalars:
    """The scalar points of one file by tag, each in write order, and what else the file held."""

    points: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]   # tag -> (step, value, wall_time)
    plugins: dict[str, str]      # plugin named by each tag's first metadata in this file
    skipped: dict[str, int]      # values not read as scalars, by kind or plugin
    malformed_events: int        # records that passed their checksum but are not Event protos


@dataclass(frozen=True, slots=True)
class _Chunk:
    tags: list[str]
    code: np.ndarray
    step: np.ndarray
    value: np.ndarray
    wall_time: np.ndarray


def decode_file(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, known_plugins: dict[str, str],
                on_progress=None) -> FileScalars:
    """Every scalar in the Event records data[starts[i]:starts[i]+lengths[i]], by tag in write order.

    `known_plugins` holds what earlier files of the run said about each tag's plugin: a restarted
    writer may not send a tag's metadata again.  Records are decoded in batches of a few MB so that
    the temporaries stay small next to the file.
    """
    plugins: dict[str, str] = {}
    skipped: dict[str, int] = {}
    malformed = 0
    pieces: dict[str, list[tuple[np.ndarray, ...]]] = {}
    bounds = np.searchsorted(np.cumsum(lengths), np.arange(_CHUNK_BYTES, int(lengths.sum()), _CHUNK_BYTES))
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(starts)]):
        if hi <= lo:
            continue
        chunk, bad = _decode_chunk(data, starts[lo:hi], lengths[lo:hi], known_plugins, plugins, skipped)
        malformed += bad
        order = np.argsort(chunk.code.astype(np.uint16 if len(chunk.tags) < 65536 else np.int64),
                           kind="stable")
        edges = np.cumsum(np.bincount(chunk.code, minlength=len(chunk.tags)))
        for code, (a, b) in enumerate(zip([0, *edges[:-1].tolist()], edges.tolist())):
            if b > a:
                take = order[a:b]
                pieces.setdefault(chunk.tags[code], []).append(
                    (chunk.step[take], chunk.value[take], chunk.wall_time[take]))
        if on_progress is not None:
            on_progress(int(starts[hi - 1] + lengths[hi - 1]))
    points = {tag: tuple(np.concatenate(col) for col in zip(*parts)) for tag, parts in pieces.items()}
    return FileScalars(points, plugins, skipped, malformed)


def _decode_chunk(data, starts, lengths, known_plugins: dict[str, str], plugins: dict[str, str],
                  skipped: dict[str, int]) -> tuple[_Chunk, int]:
    """Decode one batch of records; adds to `plugins` and `skipped`; returns (points, malformed)."""
    events = scan_fields(data, starts, starts + lengths, (EVENT_WALL_TIME, EVENT_STEP, EVENT_SUMMARY))
    wall = _singular_fixed(data, events.fields[EVENT_WALL_TIME], len(starts), wire=1, dtype="<f8")
    step = _singular_varint(events.fields[EVENT_STEP], len(starts))
    summaries = _of_wire(events.fields[EVENT_SUMMARY], 2)
    listing = scan_fields(data, summaries.pos, summaries.pos + summaries.value.astype(np.int64),
                          (SUMMARY_VALUE,))
    entries = _of_wire(listing.fields[SUMMARY_VALUE], 2)
    values = scan_fields(data, entries.pos, entries.pos + entries.value.astype(np.int64),
                         (VALUE_TAG, VALUE_SIMPLE, VALUE_TENSOR, VALUE_METADATA))
    for field, n in values.other_fields.items():
        kind = VALUE_OTHER_KINDS.get(field)
        if kind is not None:
            skipped[kind] = skipped.get(kind, 0) + n
    count = len(entries.pos)
    tag_hits = _of_wire(values.fields[VALUE_TAG], 2)
    tag_at = last_per_message(tag_hits, count)
    tag_pos = np.where(tag_at >= 0, tag_hits.pos[tag_at], 0)
    tag_len = np.where(tag_at >= 0, tag_hits.value[tag_at].astype(np.int64), 0)
    codes, raw_tags = intern_bytes(data, tag_pos, tag_len)
    tags = [t.decode("utf-8", errors="replace") for t in raw_tags]
    for tag, plugin in _first_plugins(data, values.fields[VALUE_METADATA], codes, tags).items():
        plugins.setdefault(tag, plugin)
    plugin_of = [known_plugins.get(t) or plugins.get(t) for t in tags]
    point, scalar = _scalar_values(data, values, codes, plugin_of, skipped)
    keep = np.flatnonzero(point)
    event = summaries.msg[entries.msg[keep]]
    bad = int(events.malformed.sum() + listing.malformed.sum() + values.malformed.sum())
    return _Chunk(tags, codes[keep], step[event], scalar[keep], wall[event]), bad


def _scalar_values(data, values, codes: np.ndarray, plugin_of: list, skipped: dict[str, int]):
    """(is a scalar, its value) for each Summary.Value: simple_value, or a one-number tensor whose
    tag's plugin is `scalars` (or unknown: no metadata was ever seen for it)."""
    count = len(values.malformed)
    point = np.zeros(count, dtype=bool)
    scalar = np.empty(count, dtype=np.float64)
    simple = _of_wire(values.fields[VALUE_SIMPLE], 5)
    simple_at = last_per_message(simple, count)
    has_simple = simple_at >= 0
    scalar[has_simple] = read_fixed(data, simple.pos[simple_at[has_simple]], "<f4")
    point |= has_simple
    tensors = _of_wire(values.fields[VALUE_TENSOR], 2)
    scalar_tag = np.array([p in (None, SCALARS_PLUGIN) for p in plugin_of], dtype=bool)
    hit = np.flatnonzero(~has_simple[tensors.msg] & scalar_tag[codes[tensors.msg]])
    ok, numbers = tensor_scalars(data, tensors.pos[hit], tensors.value[hit].astype(np.int64))
    scalar[tensors.msg[hit[ok]]] = numbers[ok]
    point[tensors.msg[hit[ok]]] = True
    _count_unread(skipped, ~point & ~values.malformed, codes, plugin_of, tensors)
    return point, scalar


def _of_wire(hits: FieldHits, wire: int) -> FieldHits:
    """The hits with the wire type the schema gives the field (anything else is not that field)."""
    ok = hits.wire == wire
    if ok.all():
        return hits
    return FieldHits(hits.msg[ok], hits.wire[ok], hits.pos[ok], hits.value[ok])


def _singular_fixed(data, hits: FieldHits, count: int, *, wire: int, dtype: str) -> np.ndarray:
    hits = _of_wire(hits, wire)
    at = last_per_message(hits, count)
    out = np.full(count, np.nan)
    present = at >= 0
    out[present] = read_fixed(data, hits.pos[at[present]], dtype)
    return out


def _singular_varint(hits: FieldHits, count: int) -> np.ndarray:
    hits = _of_wire(hits, 0)
    at = last_per_message(hits, count)
    out = np.zeros(count, dtype=np.int64)
    present = at >= 0
    out[present] = hits.value[at[present]].view(np.int64)
    return out


def _first_plugins(data, meta: FieldHits, codes: np.ndarray, tags: list[str]) -> dict[str, str]:
    """The plugin named by the first metadata each tag carried."""
    meta = _of_wire(meta, 2)
    if len(meta.msg) == 0:
        return {}
    tag_codes, first = np.unique(codes[meta.msg], return_index=True)
    blob_codes, blobs = intern_bytes(data, meta.pos[first], meta.value[first].astype(np.int64))
    names = [_plugin_name(blob) for blob in blobs]
    return {tags[c]: names[b] for c, b in zip(tag_codes.tolist(), blob_codes.tolist())}


def _plugin_name(blob: bytes) -> str:
    summary_pb2 = _protos().summary_pb2
    try:
        return summary_pb2.SummaryMetadata.FromString(blob).plugin_data.plugin_name
    except Exception:          # a DecodeError from whichever protobuf backend is installed
        return ""


def _protos() -> SimpleNamespace:
    """tensorboard's compiled protos, imported on first use (tensorboard is an optional dependency)."""
    try:
        from tensorboard.compat.proto import summary_pb2, tensor_shape_pb2
    except ImportError:
        raise MissingExtraError("reading TensorBoard event files needs tensorboard",
                                "tensorboard") from None
    return SimpleNamespace(summary_pb2=summary_pb2, tensor_shape_pb2=tensor_shape_pb2)


def _count_unread(skipped: dict[str, int], unread: np.ndarray, codes, plugin_of, tensors: FieldHits) -> None:
    """Count the tensor values that were not read as scalars, by their tag's plugin."""
    has_tensor = np.zeros(len(unread), dtype=bool)
    has_tensor[tensors.msg] = True
    per_tag = np.bincount(codes[unread & has_tensor], minlength=len(plugin_of))
    for code in np.flatnonzero(per_tag).tolist():
        kind = plugin_of[code] or "tensor"
        skipped[kind] = skipped.get(kind, 0) + int(per_tag[code])


def tensor_scalars(data: np.ndarray, pos: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ok, value) for each TensorProto data[pos:pos+length]: ok when it holds one number."""
    count = len(pos)
    value = np.full(count, np.nan)
    if count == 0:
        return np.zeros(0, dtype=bool), value
    fields = (TENSOR_DTYPE, TENSOR_SHAPE, TENSOR_CONTENT, TENSOR_FLOAT, TENSOR_DOUBLE,
              *TENSOR_VARINT_FIELDS)
    scan = scan_fields(data, pos, pos + length, fields)
    dtype = _singular_varint(scan.fields[TENSOR_DTYPE], count)
    ok = ~scan.malformed & np.isin(dtype, list(_CONTENT_DTYPES)) & _one_element(data, scan, count)
    holders = [TENSOR_CONTENT, TENSOR_FLOAT, TENSOR_DOUBLE, *TENSOR_VARINT_FIELDS]
    held = np.zeros(count, dtype=np.int64)
    for field in holders:
        held += np.bincount(scan.fields[field].msg, minlength=count)
    ok &= held == 1
    for field in holders:
        hits = scan.fields[field]
        use = np.flatnonzero(ok[hits.msg])
        if use.size:
            msg = hits.msg[use]
            got, numbers = _field_numbers(data, field, hits, use, dtype[msg])
            value[msg] = numbers
            ok[msg] &= got
    return ok, value


def _one_element(data, scan, count: int) -> np.ndarray:
    """Whether each tensor's shape holds exactly one element (rank 0, or all dimensions 1)."""
    shapes = _of_wire(scan.fields[TENSOR_SHAPE], 2)
    ok = np.ones(count, dtype=bool)
    sized = np.flatnonzero(shapes.value > 0)
    if sized.size:
        proto = _protos().tensor_shape_pb2.TensorShapeProto
        for i in sized.tolist():
            start = int(shapes.pos[i])
            blob = data[start:start + int(shapes.value[i])].tobytes()
            try:
                shape = proto.FromString(blob)
                ok[shapes.msg[i]] &= not shape.unknown_rank and all(d.size == 1 for d in shape.dim)
            except Exception:
                ok[shapes.msg[i]] = False
    return ok


def _field_numbers(data, field: int, hits: FieldHits, use: np.ndarray, dtype: np.ndarray):
    """(ok, float64 value) for the chosen hits of one value-holding field of TensorProto."""
    wire, pos, size = hits.wire[use], hits.pos[use], hits.value[use].astype(np.int64)
    got = np.zeros(len(use), dtype=bool)
    out = np.full(len(use), np.nan)
    if field == TENSOR_CONTENT:
        for code, np_dtype in _CONTENT_DTYPES.items():
            sel = np.flatnonzero((dtype == code) & (wire == 2) & (size == np.dtype(np_dtype).itemsize))
            if sel.size:
                raw = read_fixed(data, pos[sel], np_dtype)
                out[sel] = _bfloat16(raw) if code == _DT_BFLOAT16 else raw
                got[sel] = True
        return got, out
    if field in (TENSOR_FLOAT, TENSOR_DOUBLE):
        fixed_wire, np_dtype = (5, "<f4") if field == TENSOR_FLOAT else (1, "<f8")
        sel = np.flatnonzero((wire == fixed_wire) | ((wire == 2) & (size == np.dtype(np_dtype).itemsize)))
        out[sel] = read_fixed(data, pos[sel], np_dtype)
        got[sel] = True
        return got, out
    raw = hits.value[use].copy()
    packed = np.flatnonzero(wire == 2)
    if packed.size:
        raw[packed], after, fine = read_varints(data, pos[packed])
        got[packed] = fine & (after == pos[packed] + size[packed])
    got[wire == 0] = True
    if field in _SIGNED_VARINT_FIELDS:         # int32 and int64 are both sign-extended to 64 bits
        numbers = raw.view(np.int64).astype(np.float64)
    elif field == TENSOR_VARINT_FIELDS[3]:      # half_val: the 16 bits of a half or a bfloat16
        bits = raw.astype(np.uint16)
        numbers = np.where(dtype == _DT_BFLOAT16, _bfloat16(bits), bits.view(np.float16))
    else:
        numbers = raw.astype(np.float64)
    out[:] = numbers
    return got, out


def _bfloat16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
