"""Hostile mutations of bench/fuzz.py (issue 29): names that want the report to lie, and small files that
want all the memory or minutes of a CI job.

- names: a folder or file of the case, or a metric key inside a CSV header or a JSONL line, renamed to
  hold a newline with a forged workflow command (`::error::`, `::stop-commands::`), terminal control
  sequences (CSI, OSC), C1 controls, a bidi override, Markdown that breaks out of code spans and cells
  (a backtick, `|`, an image), or XML-illegal characters;
- sizes: a gzip bomb (text that compresses 1000:1), a JSONL with more distinct keys than the budget, a
  line longer than the budget, a YAML alias bomb as the run's config, a zero-filled event file.

`unescaped(fmt, stdout, stderr)` says what in the output shows such a name raw: a control character, a
line that starts with `::` outside the GitHub format's own commands, or JUnit XML that does not parse.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re

HOSTILE_NAMES = (
    "x\n::error file=a.py::forged", "x\n::stop-commands::tok", "::warning::start", "\x1b[2J\x1b[31mred",
    "\x1b]8;;http://evil\x07link\x1b]8;;\x07", "\x1b]0;title\x07", "a\x9bb\x85c", "rtl\u202etxt", "a\rb",
    "tick`|![i](http://e/x.png)<img src=x onerror=alert(1)>", "pipe|cell", "``code``", "a\x00b\x01c\x7f",
    "[red]markup[/red]", ":thumbs_up:", "\ufeffbom", "tab\there",
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_OUR_COMMANDS = re.compile(r"^::(error|warning|notice) ")


def hostile_name(rng: random.Random) -> str:
    return rng.choice(HOSTILE_NAMES)


def rename_path(files: dict[str, bytes], target: str, rng: random.Random) -> tuple[str, str]:
    """A folder or file below the case's target renamed to a hostile name (the extension kept); the new
    target (a renamed target folder moves with it) and what was done."""
    if not files:
        return target, "names:nothing to rename"
    name = rng.choice(sorted(files))
    parts = name.split("/")
    at = rng.randrange(len(parts))
    bad = hostile_name(rng).replace("/", "_").replace("\x00", "0")
    if at == len(parts) - 1:                       # before the first dot: `.jsonl.gz` stays whole
        stem, dot, ext = parts[at].partition(".")
        parts[at] = (stem + bad + dot + ext) if dot and stem else parts[at] + bad
    else:
        parts[at] = parts[at] + bad
    old_prefix = "/".join(name.split("/")[:at + 1])
    new_prefix = "/".join(parts[:at + 1])
    moved = {}
    for rel, data in files.items():
        if rel == old_prefix or rel.startswith(old_prefix + "/"):
            moved[new_prefix + rel[len(old_prefix):]] = data
        else:
            moved[rel] = data
    files.clear()
    files.update(moved)
    if target == old_prefix or target.startswith(old_prefix + "/"):
        target = new_prefix + target[len(old_prefix):]
    return target, f"names:renamed {old_prefix!r} -> {new_prefix!r}"


def rename_key(name: str, data: bytes, rng: random.Random) -> tuple[bytes, str] | None:
    """A metric key of a CSV header or of every JSONL line renamed to a hostile name; None for others."""
    bad = hostile_name(rng)
    low = name.lower()
    if low.endswith((".csv", ".tsv")):
        sep = b"," if low.endswith(".csv") else b"\t"
        head, newline, rest = data.partition(b"\n")
        cells = head.split(sep)
        if len(cells) < 2:
            return None
        i = rng.randrange(1, len(cells))
        cells[i] = bad.replace("\n", "\\n").encode().replace(sep, b"_") if b'"' not in cells[i] else cells[i]
        if rng.random() < 0.5:       # a quoted header cell may hold the newline itself
            cells[i] = b'"' + bad.replace('"', "'").encode() + b'"'
        return sep.join(cells) + newline + rest, f"names:csv key -> {bad!r}"
    if low.endswith(".jsonl"):
        out = []
        key = None
        for line in data.splitlines(keepends=True):
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):            # a line an earlier mutation broke
                out.append(line)
                continue
            if isinstance(obj, dict) and obj:
                candidates = [k for k in obj if k not in ("step", "_step", "global_step")]
                key = key or (rng.choice(candidates) if candidates else None)
                if key in obj:
                    obj[bad] = obj.pop(key)
                out.append(json.dumps(obj).encode() + b"\n")
            else:
                out.append(line)
        return b"".join(out), f"names:jsonl key {key!r} -> {bad!r}"
    return None


def size_mutation(files: dict[str, bytes], target: str, rng: random.Random) -> str:
    """A small file that would cost too much: each one its reader refuses within a budget."""
    folder = target if "." not in os.path.basename(target) else os.path.dirname(target)
    prefix = f"{folder}/" if folder else ""
    op = rng.choice(("gzip-bomb-jsonl", "gzip-bomb-csv", "many-keys", "long-line", "yaml-bomb", "zero-events"))
    if op == "gzip-bomb-jsonl":
        line = b'{"step": 1, "loss": 2.0}\n'
        files[prefix + "bomb.jsonl.gz"] = gzip.compress(line * ((rng.choice((70, 100)) << 20) // len(line)), 6)
    elif op == "gzip-bomb-csv":
        files[prefix + "bomb.csv.gz"] = gzip.compress(b"step,loss\n" + b"1,2\n" * (rng.choice((20, 40)) << 20), 6)
    elif op == "many-keys":
        width = 1200
        files[prefix + "keys.jsonl"] = b"".join(
            json.dumps({"step": s, **{f"k{s}_{i}": 1.0 for i in range(width)}}).encode() + b"\n" for s in range(100))
    elif op == "long-line":
        files[prefix + "long.jsonl"] = b'{"step": 1, "loss": 2}\n' + b"1" * (65 << 20)
    elif op == "yaml-bomb":
        lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
        for i in range(8):
            prev, cur = chr(97 + i), chr(98 + i)
            lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
        files[prefix + "config.yaml"] = ("\n".join(lines) + "\n").encode()
    else:
        files[prefix + "events.out.tfevents.1.zero"] = b"\0" * (rng.choice((1, 8)) << 20)
    return f"sizes:{op}"


def unescaped(fmt: str, stdout: str, stderr: str, *, to_file: bool = False) -> str | None:
    """What in the output shows data raw, or None; `to_file`: a report also went to --output (stdout
    still holds the --format one: the GitHub format's own commands stay allowed there; JUnit is not
    parsed)."""
    for stream, text in (("stdout", stdout), ("stderr", stderr)):
        hit = _CONTROL.search(text.replace("\t", " "))
        if hit:
            return f"{stream}: control character {hit.group()!r}"
        for line in text.splitlines():
            if line.lstrip().startswith("::") and not (fmt == "github" and stream == "stdout"
                                                         and _OUR_COMMANDS.match(line)):
                return f"{stream}: a line starting with '::': {line[:80]!r}"
    if fmt == "junit" and stdout.strip() and not to_file:
        import xml.etree.ElementTree as ET

        try:
            ET.fromstring(stdout)
        except ET.ParseError as exc:
            return f"stdout: JUnit XML does not parse ({exc})"
    return None
