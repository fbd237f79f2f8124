"""One line of a training loop's console read from scratch: its step counter and its `key: value`,
`key=value` and `key value` pairs (the rules are in loop's docstring).  The reader reads a template's
first lines this way and the lines no template plan reads (_loop_templates)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .. import _common
from . import _console

_N = r"\[?\s*(\d{1,12})(?:\s*/\s*(\d{1,12}))?\s*\]?(?![\d.])"
_GLOBAL = re.compile(r"(?<![\w/])global[ _]?step\s*[:=#]?\s*" + _N, re.IGNORECASE)
_STEP = re.compile(r"(?<![\w/])step\s*[:=#]?\s*" + _N, re.IGNORECASE)
_ITER = re.compile(r"(?<![\w/])(?:iteration|iter|it)\s*[:=#]?\s*" + _N, re.IGNORECASE)
_EPOCH = re.compile(r"(?<![\w/])epoch\s*[:=#]?\s*" + _N, re.IGNORECASE)
_IN_EPOCH = re.compile(r"^[\s\]|,:]*[\[(]?\s*(\d{1,12})\s*/\s*(\d{1,12})\s*[\])]?(?![\d.])")
_LEADING = re.compile(r"^\s*(\d{1,12})\s*[|:]\s")
_FIELDS = re.compile(r"\s*\|\s*|,\s+|;\s*|\s+-\s+|(?<![:=\s])\s{2,}|\t")
_EQ_PAIR = re.compile(r"([A-Za-z_][\w/.%@\-]*)(\s*)=(\s*)([^\s,;|=]+)")
_VALUE = re.compile(r"^([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity))"
                    r"([A-Za-z%/]+)?$", re.IGNORECASE)
_KEY = re.compile(r"^[A-Za-z][\w /.%@()\-]*$")
_UNITS = {"%", "ms", "s", "sec", "secs", "seconds", "min", "h", "gb", "gib", "mb", "mib", "kb", "tok/s",
          "tokens/s", "it/s", "s/it", "samples/s", "tflops", "x"}
_COUNTER_KEYS = {"epoch", "step", "global_step", "iter", "iteration", "it"}
# words that name what a training loop reports; four letters or more match inside a key ('closs')
_METRIC_PARTS = ("loss", "reward", "return", "entropy", "accura", "correct", "perplex", "score", "grad",
                 "norm", "advantage", "clip", "learning")
_METRIC_WORDS = {"kl", "lr", "acc", "ppl", "mfu"}


@dataclass(slots=True)
class StepCounter:
    """What a line says about its step: the counter used, its total, and an outer (epoch) counter."""

    step: int | None = None
    total: int | None = None
    outer: int | None = None
    outer_kind: str = ""           # "epoch", or "iteration" for an `iter N` beside `step M` (lit-gpt)
    epoch_only: int | None = None
    kind: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)


@dataclass(slots=True)
class Line:
    number: int
    counter: StepCounter
    pairs: dict[str, float]
    printed: dict[str, str]
    explicit: bool = True          # the line is nothing but `key: value` / `key=value` pairs


@functools.lru_cache(maxsize=4096)       # a log has a few key names, asked about once per line
def is_metric_key(key: str) -> bool:
    """The key names something a training loop reports (what sets a record apart from program output)."""
    low = key.lower()
    return any(p in low for p in _METRIC_PARTS) or any(w in _METRIC_WORDS for w in re.split(r"[^a-z0-9]+", low))


def _counter(text: str) -> StepCounter:
    """The step counter of a line; a global step wins, then `step`, then `it`/`iter`/`iteration`, then
    an epoch's per-epoch `[i/N]`, then a bare leading `N |`.  Another counter beside it is the outer one."""
    found = StepCounter()
    glob, step, it, epoch = (p.search(text) for p in (_GLOBAL, _STEP, _ITER, _EPOCH))
    if glob:
        step = None                     # a bare `step N` beside a global step is the per-epoch one
    inner = glob or step or it
    if inner is None and epoch:
        per_epoch = _IN_EPOCH.match(text[epoch.end():])
        if per_epoch:
            found.step, found.total, found.kind = int(per_epoch.group(1)), int(per_epoch.group(2)), "epoch [i/N]"
            found.outer = int(epoch.group(1))
            found.spans += [epoch.span(), (epoch.end() + per_epoch.start(), epoch.end() + per_epoch.end())]
            return found
    if inner is not None:
        found.step = int(inner.group(1))
        found.total = int(inner.group(2)) if inner.group(2) else None
        found.kind = "global step" if glob else "step" if inner is step else "iteration"
        found.spans.append(inner.span())
        outer = epoch or (it if inner is step else None)
        if outer is not None and not glob:
            found.outer = int(outer.group(1))
            found.outer_kind = "epoch" if outer is epoch else "iteration"
            found.spans.append(outer.span())
        return found
    leading = _LEADING.match(text)
    if leading:
        found.step, found.kind = int(leading.group(1)), "leading number"
        found.spans.append(leading.span(1))
    elif epoch:
        found.epoch_only = int(epoch.group(1))
        found.spans.append(epoch.span())
    return found


def step_counter(text: str) -> int | None:
    """The step printed in a piece of text (the HF console reads the text before a dict with it)."""
    return _counter(text).step


def _number(token: str) -> float | None:
    match = _VALUE.match(token.strip().rstrip(",;"))
    if not match or (match.group(2) and match.group(2).lower() not in _UNITS):
        return None
    return _common.number(match.group(1))


def _key(words: list[str]) -> str | None:
    name = " ".join(words).strip(" :=-")
    if not name or len(name) > 48 or len(words) > 5 or not _KEY.match(name):
        return None
    return name


def _stream_pairs(field_text: str) -> dict[str, tuple[float, bool]] | None:
    """`name[:] value [unit] [(avg)]` repeated -> {name: (value, written with a colon)}; None when
    anything in the field is not such a pair."""
    out: dict[str, tuple[float, bool]] = {}
    words: list[str] = []
    tokens = field_text.split()
    i = 0
    while i < len(tokens):
        value = _number(tokens[i]) if words else None
        if value is None:
            words.append(tokens[i])
            i += 1
            continue
        key = _key(words)
        if key is None:
            return None
        out[key] = (value, words[-1].endswith(":"))
        words = []
        i += 1
        if i < len(tokens) and tokens[i].lower() in _UNITS:
            i += 1
        while i < len(tokens) and tokens[i].startswith("(") and (tokens[i].endswith(")") or ")" not in tokens[i]):
            closing = tokens[i].endswith(")")
            i += 1
            if closing:
                break
    return out if out and not words else None


def _pairs(text: str) -> tuple[dict[str, tuple[float, bool]], bool]:
    """{name: (value, explicit)} for the `key: value`, `key=value` and `key value` pairs of a line, and
    whether the pairs are all the line holds.  explicit is False for `key value` and `key = value`,
    which code and prose also produce."""
    out: dict[str, tuple[float, bool]] = {}
    whole = True
    for field_text in _FIELDS.split(text):
        field_text = field_text.strip().strip("[](){}").strip(" :")
        if not field_text:
            continue
        eq = _EQ_PAIR.findall(field_text) if "=" in field_text else []
        if eq:
            for key, before, after, raw in eq:
                value = _number(raw)
                if value is not None:
                    out[key] = (value, not before and not after)
                whole &= value is not None
            whole &= not _EQ_PAIR.sub("", field_text).strip()
            continue
        stream = _stream_pairs(field_text)
        if stream:
            out.update(stream)
        else:
            whole = False
    return out, whole


def _names_a_metric(text: str) -> bool:
    return any(map(is_metric_key, re.findall(r"[A-Za-z][A-Za-z_/]*", text)))


def _snake(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def parse_line(number: int, segment: str) -> tuple[Line | None, bool]:
    """One line read from scratch: its pairs (None when it has none) and whether it had a step counter
    and named a metric but gave no readable metric value."""
    body = _console.strip_prefix(segment)
    counter = _counter(body)
    rest = body
    for start, end in sorted(set(counter.spans), reverse=True):
        rest = rest[:start] + " | " + rest[end:]
    try:
        printed, explicit = _pairs(rest)
    except (ValueError, OverflowError):
        printed, explicit = {}, False
    pairs, names = {}, {}
    for name, (value, written) in printed.items():
        key = _snake(name)
        if key not in _COUNTER_KEYS:
            pairs[key], names[key] = value, name
            explicit &= written
    line = Line(number, counter, pairs, names, explicit) if pairs else None
    # `step 10 ... lr=[0.0003]`, `loss: tensor(2.5, ...)`
    unreadable = counter.step is not None and not any(map(is_metric_key, pairs)) and _names_a_metric(rest)
    return line, unreadable

