"""A thin protobuf view of wandb's `Record` that reads a summary record in one C-level parse.

Decoding a record through wandb's own classes makes a Python object for every item, which costs
ten times the parse itself on a large run.  This view declares the record's `update` field as one
embedded message instead of a repeated one; protobuf merges repeated occurrences of an embedded
message, so the key parts and the JSON values of all items arrive as two flat lists.  (History rows
are read without protobuf, by `_batch`.)

Field numbers are those of wandb_internal.proto (Record, SummaryRecord, SummaryItem), which wandb
keeps stable because old run files must stay readable.
"""

from __future__ import annotations

from functools import lru_cache

_PACKAGE = "stabdiag_wandb_lite"


@lru_cache(maxsize=1)
def lite_record_class():
    """The `RecordLite` message class, built once in a private descriptor pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    fdp = descriptor_pb2.FileDescriptorProto(name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto2")
    F = descriptor_pb2.FieldDescriptorProto
    repeated, optional = F.LABEL_REPEATED, F.LABEL_OPTIONAL

    def message(name: str, fields: list[tuple[str, int, int, int, str | None]]) -> None:
        msg = fdp.message_type.add(name=name)
        for fname, number, label, ftype, type_name in fields:
            field = msg.field.add(name=fname, number=number, label=label, type=ftype)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"

    # SummaryItem, every occurrence of every field kept in order
    message("Items", [("key", 1, repeated, F.TYPE_STRING, None),
                      ("nested_key", 2, repeated, F.TYPE_STRING, None),
                      ("none", 3, repeated, F.TYPE_INT32, None),
                      ("boolean", 4, repeated, F.TYPE_BOOL, None),
                      ("integer", 5, repeated, F.TYPE_SINT64, None),
                      ("number", 6, repeated, F.TYPE_DOUBLE, None),
                      ("text", 7, repeated, F.TYPE_STRING, None),
                      ("json", 8, repeated, F.TYPE_STRING, None),
                      ("value_json", 16, repeated, F.TYPE_STRING, None)])
    message("Summary", [("update", 1, optional, F.TYPE_MESSAGE, "Items"),
                        ("remove", 2, optional, F.TYPE_MESSAGE, "Items")])
    # a history field, declared so that a damaged record with one is refused as wandb's classes would
    message("Step", [("num", 1, optional, F.TYPE_INT64, None)])
    message("History", [("item", 1, optional, F.TYPE_MESSAGE, "Items"),
                        ("step", 2, optional, F.TYPE_MESSAGE, "Step")])
    message("RecordLite", [("history", 2, optional, F.TYPE_MESSAGE, "History"),
                           ("summary", 3, optional, F.TYPE_MESSAGE, "Summary"),
                           ("config", 5, optional, F.TYPE_BYTES, None),
                           ("metric", 12, optional, F.TYPE_BYTES, None),
                           ("run", 17, optional, F.TYPE_BYTES, None),
                           ("exit", 18, optional, F.TYPE_BYTES, None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:                                   # protobuf < 4.21
        from google.protobuf.message_factory import MessageFactory

        GetMessageClass = MessageFactory(pool).GetPrototype  # noqa: N806
    return GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.RecordLite"))


def aligned_keys(items):
    """The items' keys when each item has exactly one key part and one JSON value, else None.

    Every item carries at least one key part (a `key` or `nested_key` entries) and at most one
    `value_json`, so equal counts prove the one-to-one case; a logged nested dict (several key
    parts) or a typed value (no `value_json`) makes the counts differ.
    """
    values = items.value_json
    nested = items.nested_key
    if len(nested) == len(values):
        return None if items.key else nested
    if not nested and len(items.key) == len(values):
        return items.key
    return None
