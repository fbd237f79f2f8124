"""The stability-methods map (checklist/methods.toml): which layer each method acts on, and which of them
a run has on, read from its configuration and its metric keys.

Seed 000's lesson beyond "which layer failed": every stability method acts on one layer, and piling
methods that act below the failing layer (clipping, an optimizer trick) onto a reward loophole only
makes the model exploit it more steadily.  So the report says, for the root layer, which active
methods act on it, which act below it, and what from the map would act on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import _toml
from ..errors import RuleError
from ..judge.rules import LAYER_NAMES

_CONDITION = re.compile(r"^(>=|<=|==|!=|>|<|in)\s*(.+)$")


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    component: str
    layer: int
    changes: str
    config: tuple[tuple[str, str, tuple[str, str] | None], ...]   # (key, condition, (key, condition) also needed)
    metrics: tuple[str, ...]
    source: str
    kinds: tuple[str, ...] = ("rl", "sft")    # the kinds of run it exists for (RL, SFT / pretraining)

    def explain(self, questions: tuple[str, ...], note: str) -> str:
        keys = "; ".join(f"{k} {c}" + (f" and {r[0]} {r[1]}" if r else "") for k, c, r in self.config) or "none"
        lines = [f"{self.name}: {self.component}",
                 f"layer {self.layer} ({LAYER_NAMES[self.layer]})",
                 f"Changes          {self.changes}",
                 f"On when          {keys}" + (f"; or logs {', '.join(self.metrics)}" if self.metrics else ""),
                 f"For              {_kinds_text(self.kinds)}",
                 f"Source           {self.source}",
                 "Placing a method: ask three questions"]
        lines += [f"  {i}. {q}" for i, q in enumerate(questions, 1)]
        lines.append(f"  {note}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ActiveMethod:
    """A method a run has on, and the config key (or metric) that shows it."""

    name: str
    layer: int
    component: str
    source_key: str
    value: object

    def to_dict(self) -> dict:
        value = self.value if isinstance(self.value, (int, float, str, bool)) or self.value is None else str(self.value)
        return {"name": self.name, "layer": self.layer, "source_key": self.source_key, "value": value}

    def label(self) -> str:
        if self.value is True or self.value is None:
            return f"{self.name} (layer {self.layer})"
        key = self.source_key.rsplit(".", 1)[-1]
        return f"{self.name} {key}={self.value} (layer {self.layer})"


@dataclass(frozen=True, slots=True)
class MethodsMap:
    methods: tuple[Method, ...]
    questions: tuple[str, ...]
    note: str

    def get(self, name: str) -> Method:
        for method in self.methods:
            if method.name == name:
                return method
        import difflib

        close = difflib.get_close_matches(name, [m.name for m in self.methods], n=1)
        raise RuleError("checklist/methods.toml", f"no method '{name}'" + (f" (did you mean '{close[0]}'?)" if close
                                                                          else ""))


@lru_cache(maxsize=1)
def methods_map() -> MethodsMap:
    ref = Path(__file__).with_name("methods.toml")
    data = _toml.loads(ref.read_text(encoding="utf-8"), str(ref))
    methods = tuple(Method(m["name"], m["component"], int(m["layer"]), m["changes"],
                           tuple((c["key"], c["when"], (c["requires"]["key"], c["requires"]["when"])
                                  if "requires" in c else None) for c in m.get("config", [])),
                           tuple(m.get("metrics", [])),
                           m["source"], tuple(m.get("kinds", ("rl", "sft")))) for m in data["method"])
    placement = data.get("placement", {})
    return MethodsMap(methods, tuple(placement.get("questions", ())), placement.get("note", ""))


def flatten(config: dict, prefix: str = "") -> dict[str, object]:
    """A nested config as dotted keys (W&B's {"value": ...} wrappers unwrapped)."""
    out: dict[str, object] = {}
    for key, value in (config or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _lookup(flat: dict[str, object], key: str) -> tuple[str, object] | None:
    if key in flat:
        return key, flat[key]
    hits = [k for k in flat if k.endswith("." + key)]
    return (hits[0], flat[hits[0]]) if hits else None


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _holds(value, condition: str, flat: dict[str, object]) -> bool:
    if value is None:
        return False
    if condition == "true":
        return value is True or str(value).lower() in ("true", "1", "yes")
    match = _CONDITION.match(condition)
    if match is None:
        return False
    op, rhs = match.group(1), match.group(2).strip()
    if op == "in":
        options = [o.strip().strip("'\"") for o in rhs.strip("[]").split(",")]
        return str(value) in options
    if op in ("==", "!="):
        same = str(value).lower() == rhs.strip("'\"").lower()
        return same if op == "==" else not same
    left = _number(value)
    right = _number(rhs)
    if right is None:                       # "> epsilon": compare with another key of the config
        other = _lookup(flat, rhs)
        right = _number(other[1]) if other is not None else None
    if left is None or right is None:
        return False
    return {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[op]


def active_methods(config: dict | None, keys: list[str], table: MethodsMap | None = None) -> list[ActiveMethod]:
    """The methods the run has on, from its configuration and its logged keys."""
    table = table or methods_map()
    flat = flatten(config or {})
    found = []
    for method in table.methods:
        hit = None
        for key, condition, also in method.config:
            entry = _lookup(flat, key)
            if entry is None or not _holds(entry[1], condition, flat):
                continue
            extra = _lookup(flat, also[0]) if also else None
            if also is None or (extra is not None and _holds(extra[1], also[1], flat)):
                hit = entry
                break
        if hit is None:
            logged = next((k for k in keys for m in method.metrics if k == m or k.endswith("/" + m)), None)
            hit = (logged, None) if logged else None
        if hit is not None:
            found.append(ActiveMethod(method.name, method.layer, method.component, hit[0], hit[1]))
    return found


def advice(root_layer: int | None, active: list[ActiveMethod], table: MethodsMap | None = None, *,
           has_config: bool = True, kind: str = "rl") -> str | None:
    """For the root layer: the active methods that act on it, those that act below it, and what from the
    map would act on it for a run of this `kind` ("rl", or "sft" for SFT / pretraining: no dynamic
    sampling or KL penalty for a run without rollouts)."""
    if root_layer is None:
        return None
    table = table or methods_map()
    on_root = [m for m in active if m.layer == root_layer]
    below = [m for m in active if m.layer > root_layer]
    would = [m.name for m in table.methods if m.layer == root_layer and kind in m.kinds
             and m.name not in {a.name for a in active}]
    parts = [f"root layer {root_layer}"]
    if active:
        parts.append("active: " + ", ".join(m.label() for m in active))
    elif has_config:
        parts.append("no stability method recognised in the run's config")
    else:
        parts.append("the logs carry no run configuration (W&B config, config.yaml, args.json)")
    if on_root:
        parts.append(f"{', '.join(m.name for m in on_root)} act(s) on layer {root_layer}")
    elif below:
        parts.append(f"none acts on layer {root_layer} - they make the run more stable on a broken "
                     f"{'objective' if root_layer == 1 else 'layer above them'}")
    if would:
        parts.append(f"acting on layer {root_layer}: {', '.join(would)}")
    return "; ".join(parts)


def _kinds_text(kinds: tuple[str, ...]) -> str:
    names = {"rl": "RL runs", "sft": "SFT and pretraining runs"}
    return " and ".join(names.get(k, k) for k in kinds) + (" only" if len(kinds) == 1 else "")
