"""Records whose metrics sit in a payload, lifted to one row per record with the payload's own names.

Loggers wrap a step's metrics: verl's FileLogger writes {"step": N, "data": {...}}, hand-written loops
write typed records, one kind per line: {"kind": "frame", "step": 3, "payload": {"train_reward": ...}}
beside {"kind": "oracle", "step": 3, "payload": {"reward": ...}}.  Flattened as nested objects these
would read `payload/train_reward`, a name no signal has.  So a record's payload (a dict under one of
PAYLOADS) is lifted: its keys become the record's keys, a nested dict inside it `outer/inner`.

A typed record (a string under one of KIND_FIELDS) names its kind.  The kind most records have is the
run's main record (its keys bare); another kind's keys are prefixed with the kind (`oracle/reward`),
unless the key names the kind already (`oracle_reward`): an oracle's or an eval's reward is not the
training reward.  Names stay unique: a key that another kind already holds gets the kind in front.
Records of every kind merge at their step (the table is sparse: each key where it was written).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from itertools import chain, repeat

from ._columns import STEP_COLUMNS

PAYLOADS = ("data", "payload", "metrics", "values", "fields", "scalars")
KIND_FIELDS = ("kind", "type", "event", "record_type", "event_type", "_type")
_KEEP_BARE = {name.lower() for name in STEP_COLUMNS} | {"wall_time", "timestamp", "_timestamp", "time"}
_WORDS = re.compile(r"[a-z0-9]+")


class Lifter:
    """Lifts payloads record by record, naming each (kind, key) once, the same way in every block."""

    def __init__(self) -> None:
        self.main_kind: str | None = None
        self._decided = False
        self._names: dict[tuple[str | None, str], str] = {}
        self._owner: dict[str, tuple[str | None, str]] = {}
        self._payloads: Counter = Counter()
        self._kinds: Counter = Counter()

    def lift(self, obj: dict, wrappers: list[str]) -> dict:
        """`obj` with its payload's keys at its own level (the kind field left out: it is no metric)."""
        payload = next((w for w in wrappers if type(obj.get(w)) is dict), None)
        if payload is None:
            return obj
        field = next((f for f in KIND_FIELDS if type(obj.get(f)) is str), None)
        kind = obj[field] if field is not None else None
        self._payloads[payload] += 1
        if kind is not None:
            self._kinds[kind] += 1
        out = {k: v for k, v in obj.items() if k != payload and k != field}
        for key, value in _leaves(obj[payload], ""):
            out.setdefault(self._name(kind, key), value)
        return out

    def plain(self, values: list, wrappers: list[str]) -> list[dict] | None:
        """The records lifted at C speed when they are untyped, wrap their metrics in one payload and nest
        nothing in it (verl's FileLogger); None for any other block (then record by record, `lift`).  The
        record's own keys come first and win over the payload's, as `lift` keeps them."""
        if len(wrappers) != 1 or self._kinds or any(
                str in set(map(type, map(dict.get, values, repeat(f, len(values))))) for f in KIND_FIELDS):
            return None
        wrapper = wrappers[0]
        payloads = list(map(dict.get, values, repeat(wrapper, len(values))))
        if set(map(type, payloads)) != {dict}:
            return None
        if dict in set(map(type, chain.from_iterable(map(dict.values, payloads)))):
            return None
        self._payloads[wrapper] += len(values)
        rows = []
        for obj, payload in zip(values, payloads):
            top = {k: v for k, v in obj.items() if k != wrapper}
            rows.append({**top, **payload, **top})
        return rows

    def decide_main(self, values: list) -> None:
        """The main kind: the one most records of the first block with kinds have."""
        if self._decided:
            return
        kinds = Counter(kind for v in values if any(type(v.get(w)) is dict for w in PAYLOADS)
                        for kind in [next((v[f] for f in KIND_FIELDS if type(v.get(f)) is str), None)]
                        if kind is not None)
        if kinds:
            self.main_kind = kinds.most_common(1)[0][0]
            self._decided = True

    def _name(self, kind: str | None, key: str) -> str:
        name = self._names.get((kind, key))
        if name is not None:
            return name
        name = key
        if kind is not None and kind != self.main_kind and key.lower() not in _KEEP_BARE \
                and kind.lower() not in _WORDS.findall(key.lower()):
            name = f"{kind}/{key}"
        holder = self._owner.get(name)
        if holder is not None and holder != (kind, key):
            name = f"{kind}/{key}" if kind is not None else f"{key}.{len(self._owner)}"
        self._names[(kind, key)] = name
        self._owner.setdefault(name, (kind, key))
        return name

    def notes(self, path: str) -> list[str]:
        """How the payloads were read, for the run's notes (nothing for verl's plain `data` records)."""
        if not self._kinds and set(self._payloads) <= {"data"}:
            return []
        wrapper = self._payloads.most_common(1)[0][0]
        renamed = [(f"{wrapper}/{key}", name) for (kind, key), name in
                   sorted(self._names.items(), key=lambda item: item[0][0] != self.main_kind)]
        shown = ", ".join(f"{a} -> {b}" for a, b in renamed[:4]) + (" ..." if len(renamed) > 4 else "")
        note = f"{os.path.basename(path)}: metrics read from each record's '{wrapper}' ({shown})"
        if self._kinds:
            others = [k for k in self._kinds if k != self.main_kind]
            note += (f"; {sum(self._kinds.values())} typed record(s), kinds " + ", ".join(
                f"{k} ({n})" for k, n in self._kinds.most_common(6)))
            if others:
                note += f"; keys of the kinds other than '{self.main_kind}' carry their kind unless they name it"
        return [note]


def _leaves(obj: dict, prefix: str):
    """(key, value) of a payload, a nested dict's keys joined with `/`."""
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if type(value) is dict:
            yield from _leaves(value, name + "/")
        else:
            yield name, value
