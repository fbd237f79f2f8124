"""Mutations of the checksummed record files: TensorBoard event files (TFRecord) and W&B transaction logs.

Records are cut out of their framing, changed (bytes; or decoded, edited and encoded again with the real
protobuf classes; or a string made invalid UTF-8 without changing its length), dropped, doubled or
swapped, and framed again with both checksums recomputed, so the change gets past the checksum and into
the decoder.  Event edits set steps to the int64 extremes, wall times and values to NaN/Inf, odd tags and
tensors; W&B edits set history values, `_step`, the record's step, nested keys, typed values, summary
and config values, define_metric axes, exit codes and run fields.
"""

from __future__ import annotations

import random
import re
import struct
import zlib

from fuzz_mutate import JSON_RAW, byte_mutation

# --- TFRecord (TensorBoard event files) ------------------------------------------------------------

def _masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_split(data: bytes) -> list[bytes] | None:
    out, pos = [], 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > len(data):
            return None
        out.append(data[pos + 12:pos + 12 + length])
        pos += 16 + length
    return out if pos == len(data) else None


def tfrecord_frame(payloads: list[bytes]) -> bytes:
    out = bytearray()
    for payload in payloads:
        head = struct.pack("<Q", len(payload))
        out += head + struct.pack("<I", _masked_crc(head)) + payload + struct.pack("<I", _masked_crc(payload))
    return bytes(out)


def _event_edit(payload: bytes, rng: random.Random) -> tuple[bytes, str]:
    from tensorboard.compat.proto.event_pb2 import Event

    event = Event()
    try:
        event.ParseFromString(payload)
    except Exception:
        return payload, "event:undecodable"
    op = rng.choice(("step", "wall", "value", "tag", "tensor", "empty-summary"))
    if op == "step":
        event.step = rng.choice((2 ** 63 - 1, -2 ** 63, -1, 0, 2 ** 53 + 1))
    elif op == "wall":
        event.wall_time = rng.choice((float("nan"), float("inf"), -1.0, 1e300))
    elif event.summary.value:
        value = rng.choice(event.summary.value)
        if op == "value":
            value.simple_value = rng.choice((float("nan"), float("inf"), -float("inf"), 3.4e38))
        elif op == "tag":
            value.tag = rng.choice(("", "x" * 2000, "train/loss", "🙂", "a\nb"))
        elif op == "tensor":
            value.tensor.dtype = rng.choice((1, 2, 3, 7, 9, 14, 19, 23, 99))
            value.tensor.tensor_content = bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 2, 4, 8, 12))))
            if rng.random() < 0.5:
                value.tensor.tensor_shape.dim.add(size=rng.choice((0, 1, 2, -1, 2 ** 40)))
        else:
            event.summary.ClearField("value")
    return event.SerializeToString(), f"event:{op}"


def _not_utf8(payload: bytes, rng: random.Random, needles: tuple[bytes, ...]) -> tuple[bytes, str]:
    """The payload with one byte of a string it holds made invalid UTF-8 (lengths unchanged)."""
    spots = [m.start() for needle in needles for m in re.finditer(re.escape(needle), payload)]
    if not spots:
        return payload, "not-utf8:none"
    at = rng.choice(spots) + 1
    return payload[:at] + rng.choice((b"\xff", b"\xc3", b"\x80")) + payload[at + 1:], "not-utf8"


def records_mutation(payloads: list[bytes], rng: random.Random, edit, needles) -> tuple[list[bytes], str]:
    payloads = list(payloads)
    if not payloads:
        return [b"\x08\x01"], "records:added"
    op = rng.choice(("edit", "edit", "edit", "bytes", "not-utf8", "not-utf8", "drop", "dup", "swap", "big"))
    i = rng.randrange(len(payloads))
    if op == "edit":
        payloads[i], what = edit(payloads[i], rng)
        return payloads, what
    if op == "bytes":
        payloads[i], what = byte_mutation(payloads[i], rng)
    elif op == "not-utf8":
        payloads[i], what = _not_utf8(payloads[i], rng, needles)
    elif op == "drop":
        del payloads[i]
    elif op == "dup":
        payloads[i:i] = [payloads[i]] * rng.randint(1, 3)
    elif op == "swap":
        j = rng.randrange(len(payloads))
        payloads[i], payloads[j] = payloads[j], payloads[i]
    else:                                    # a record that spans blocks (W&B) or is large (TFRecord)
        payloads[i] = payloads[i] + b"\x00" * rng.choice((40000, 70000))
    return payloads, f"records:{op}"


def tfrecord_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    payloads = tfrecord_split(data)
    if payloads is None or rng.random() < 0.15:
        return byte_mutation(data, rng)
    payloads, what = records_mutation(payloads, rng, _event_edit, (b"train/", b"scalars"))
    return tfrecord_frame(payloads), "tfrecord:" + what


# --- W&B transaction logs --------------------------------------------------------------------------

def wandb_split(data: bytes) -> list[bytes] | None:
    from stabdiag.read.formats.wandb._records import iter_records

    if len(data) < 7:
        return None
    notes: list[str] = []
    payloads = [bytes(p) for _, p in iter_records(data, notes)]
    return None if notes else payloads


def wandb_frame(payloads: list[bytes], version: int = 0) -> bytes:
    """A transaction log framed as wandb frames it: 32 KiB blocks, CRC-32 of the type byte + payload."""
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, version))
    for payload in payloads:
        first = True
        while True:
            room = 32768 - len(out) % 32768
            if room < 7:
                out += b"\0" * room
                continue
            chunk, payload = payload[:room - 7], payload[room - 7:]
            kind = (1 if not payload else 2) if first else (4 if not payload else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes([kind]) + chunk), len(chunk), kind) + chunk
            first = False
            if not payload:
                break
    return bytes(out)


def _wandb_edit(payload: bytes, rng: random.Random) -> tuple[bytes, str]:
    from wandb.proto import wandb_internal_pb2 as pb

    record = pb.Record()
    try:
        record.ParseFromString(payload)
    except Exception:
        return payload, "record:undecodable"
    kind = record.WhichOneof("record_type")
    raw = rng.choice(JSON_RAW[:-2])
    if kind == "history" and record.history.item:
        item = rng.choice(record.history.item)
        op = rng.choice(("value", "value", "step-item", "step-num", "nested", "key-and-nested", "typed"))
        if op == "value":
            item.value_json = raw
        elif op == "step-item":
            step = next((it for it in record.history.item if it.key == "_step" or list(it.nested_key) == ["_step"]),
                        item)
            step.value_json = rng.choice(("9223372036854775808", "1e400", "-1", "1.5", "NaN", "9" * 400, '"7"'))
        elif op == "step-num":
            record.history.step.num = rng.choice((2 ** 63 - 1, -2 ** 63, -1))
        elif op == "nested":
            item.ClearField("key")
            item.nested_key[:] = rng.choice((["a", "b", "c"], ["_step"], ["x"] * 30, ["", ""]))
        elif op == "key-and-nested":
            item.key, item.nested_key[:] = "k", ["a", "b"]
        else:
            item.ClearField("value_json")
            item.number = rng.choice((float("nan"), float("inf"), 1e308))
        what = f"history:{op}"
    elif kind == "summary" and record.summary.update:
        rng.choice(record.summary.update).value_json = raw
        what = "summary:value"
    elif kind == "config" and record.config.update:
        rng.choice(record.config.update).value_json = raw
        what = "config:value"
    elif kind == "metric":
        record.metric.step_metric = rng.choice(("_step", "nope", record.metric.name or "x", "train/reward"))
        what = "metric:step_metric"
    elif kind == "exit":
        record.exit.exit_code = rng.choice((2 ** 31 - 1, -2 ** 31, 137))
        what = "exit:code"
    elif kind == "run":
        record.run.starting_step = rng.choice((2 ** 63 - 1, -1))
        record.run.start_time.seconds = rng.choice((2 ** 62, -2 ** 62, 0))
        what = "run:fields"
    else:
        return byte_mutation(payload, rng)
    return record.SerializeToString(), f"record:{what}"


def wandb_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    payloads = wandb_split(data)
    if payloads is None or rng.random() < 0.15:
        return byte_mutation(data, rng)
    payloads, what = records_mutation(payloads, rng, _wandb_edit, (b"train/", b"eval", b"_step", b"best",
                                                                   b"fuzz"))
    return wandb_frame(payloads), "wandb:" + what
