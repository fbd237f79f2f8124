"""Mutations of bench/fuzz.py: byte-level ones for every file, and ones that know the structure.

- text (console logs, CSV, TSV, JSONL, HTML): numbers swapped for hostile ones (`inf`, 2**63, a 400-digit
  integer, `1e400`), lines dropped, doubled or swapped, bytes that are not UTF-8, a last line cut off
  without its newline (a file still being written), CR/CRLF line ends, a BOM, a very long line;
- CSV cells and JSON values replaced one at a time (JSON by raw text, so values json.dumps cannot write,
  such as 1e400 or a 400-digit integer, get in; also deep nesting and type confusion);
- gzip: either the compressed bytes are damaged, or the text is mutated and compressed again;
- Parquet: a column rewritten with another Arrow type or hostile values, or the bytes damaged;
- TensorBoard event files and W&B transaction logs: see bench/fuzz_records (records changed and framed
  again with their checksums recomputed).

Every mutation is a function of a `random.Random`, so a case is reproduced from its number alone.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
import zlib

INTERESTING_NUMBERS = (
    "inf", "-inf", "nan", "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e308", "5e-324", "0", "-0", "-1",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "9007199254740993", "1.5", "0.5", "2.5e18", "9" * 400, "-" + "9" * 400, "1" + "0" * 30,
    "1e-400", "0x10", "1_000", "+7", ".5", "5.", "1e", "--1", "１２", "٣", "",
)
INTERESTING_TOKENS = (
    "\x00", "\xff", "\ufeff", "\r", "\r\n", "\n\n", "\t", "|", ",", ";", ":", "{", "}", "[", "]", "'", '"', "\\",
    "{'loss'", "'epoch': inf", "step: ", "iteration 99999999999999999999/ 1 |", "step:", "Step 1/2 | loss: 1",
    "| Step | Training Loss |", "<table>", "<tr><td>", "nan", "Traceback (most recent call last):",
    "RuntimeError: CUDA out of memory", "Killed", "%", "\x1b[A", "^M", "🙂", "\ud7ff",
)
JSON_RAW = ("1e400", "-1e400", "9" * 400, "-" + "9" * 400, "NaN", "Infinity", "-Infinity", "9223372036854775808",
            "-9223372036854775809", "18446744073709551616", "1.5", "0", "-1", "true", "false", "null", '""', '"inf"',
            '"nan"', '"9223372036854775808"', '"\\ud800"', '"\\u0000"', "[]", "{}", "[1, 2]", '{"_type": "image-file"}',
            "[" * 50 + "]" * 50, "[" * 3000 + "]" * 3000, '"' + "a" * 5000 + '"')
_MAX_BYTES = 8 << 20          # a mutation that grows a file stops near this size (inputs stay realistic)
_NUMBER = re.compile(rb"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


# --- bytes -----------------------------------------------------------------------------------------

def byte_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    buf = bytearray(data)
    op = rng.choice(("flip", "set", "insert", "delete", "duplicate", "truncate", "token", "zero-run"))
    if not buf:
        return bytes([rng.randrange(256)]) * rng.randint(1, 8), "filled an empty file"
    at = rng.randrange(len(buf))
    if op == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
    elif op == "set":
        buf[at] = rng.choice((0, 0xFF, 0x7F, 0x80, 0x0A, 0x0D, 0x22, 0x2C))
    elif op == "insert":
        buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif op == "delete":
        del buf[at:at + rng.randint(1, 64)]
    elif op == "duplicate":
        size = rng.randint(1, 256)
        buf[at:at] = buf[at:at + size]
    elif op == "truncate":
        del buf[at:]
    elif op == "token":
        buf[at:at] = rng.choice(INTERESTING_TOKENS + INTERESTING_NUMBERS).encode("utf-8", "surrogatepass")
    else:
        buf[at:at + rng.randint(1, 32)] = b"\x00" * rng.randint(1, 32)
    return bytes(buf), f"bytes:{op}@{at}"


# --- text ------------------------------------------------------------------------------------------

def text_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    op = rng.choice(("number", "number", "number", "token", "drop-line", "dup-line", "swap-lines", "not-utf8",
                     "cut-last-line", "crlf", "cr-only", "bom", "long-line", "blank-lines", "empty", "many-lines"))
    if op == "number":
        spans = [m.span() for m in _NUMBER.finditer(data)]
        if spans:
            for _ in range(rng.randint(1, 3)):
                start, end = rng.choice(spans)
                new = rng.choice(INTERESTING_NUMBERS).encode()
                data = data[:start] + new + data[end:]
                spans = [m.span() for m in _NUMBER.finditer(data)] or [(0, 0)]
            return data, "text:number"
        op = "token"
    if op == "token":
        at = rng.randrange(len(data) + 1)
        return data[:at] + rng.choice(INTERESTING_TOKENS).encode("utf-8", "surrogatepass") + data[at:], "text:token"
    i = rng.randrange(len(lines))
    if op == "drop-line":
        del lines[i]
    elif op == "dup-line":
        lines[i:i] = [lines[i]] * rng.randint(1, 3)
    elif op == "swap-lines":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "not-utf8":
        line = lines[i]
        at = rng.randrange(len(line) + 1)
        lines[i] = line[:at] + rng.choice((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80")) + line[at:]
    elif op == "cut-last-line":               # a writer caught in the middle of a line
        body = data.rstrip(b"\n")
        cut = body.rfind(b"\n") + 1
        keep = rng.randint(0, max(len(body) - cut - 1, 0))
        return body[:cut + keep], "text:cut-last-line"
    elif op == "crlf":
        return data.replace(b"\n", b"\r\n"), "text:crlf"
    elif op == "cr-only":
        return data.replace(b"\n", b"\r"), "text:cr-only"
    elif op == "bom":
        return b"\xef\xbb\xbf" + data, "text:bom"
    elif op == "long-line":
        lines[i] = lines[i] * min(rng.randint(50, 400), _MAX_BYTES // max(len(lines[i]), 1))
    elif op == "blank-lines":
        lines[i:i] = [b""] * rng.randint(1, 5)
    elif op == "many-lines":                  # size: a few thousand copies of one line
        lines[i:i] = [lines[i]] * min(rng.randint(500, 5000), _MAX_BYTES // max(len(lines[i]), 1))
    else:
        return b"", "text:empty"
    return b"\n".join(lines), f"text:{op}"


def csv_mutation(data: bytes, rng: random.Random, sep: str) -> tuple[bytes, str]:
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8")), delimiter=sep))
    except (UnicodeDecodeError, csv.Error):
        return text_mutation(data, rng)
    if len(rows) < 2:
        return text_mutation(data, rng)
    op = rng.choice(("cell", "cell", "header", "ragged", "add-column", "dup-header"))
    r = rng.randrange(1, len(rows))
    if op == "cell" and rows[r]:
        rows[r][rng.randrange(len(rows[r]))] = rng.choice(INTERESTING_NUMBERS + INTERESTING_TOKENS)
    elif op == "header" and rows[0]:
        rows[0][rng.randrange(len(rows[0]))] = rng.choice(("step", "Step", "key", "value", "", "_step", "x" * 300,
                                                            "global_step", "exp - reward__MIN"))
    elif op == "ragged" and rows[r]:
        rows[r] = rows[r][:rng.randrange(len(rows[r]))] if rng.random() < 0.5 else rows[r] + ["1", "2"]
    elif op == "add-column":
        for row in rows:
            row.append(rng.choice(INTERESTING_NUMBERS))
    elif op == "dup-header" and len(rows[0]) > 1:
        rows[0][1] = rows[0][0]
    out = io.StringIO()
    csv.writer(out, delimiter=sep, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass"), f"csv:{op}"


def _json_paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _json_paths(v, path + (i,))


def json_value_mutation(text: str, rng: random.Random) -> tuple[str, str] | None:
    """One value of a JSON document replaced by raw JSON text (so 1e400 and 400-digit integers get in)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    paths = list(_json_paths(doc))
    path = rng.choice(paths)
    raw = rng.choice(JSON_RAW)
    if not path:
        return raw, "json:root"
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if isinstance(parent, dict) and rng.random() < 0.15:
        del parent[path[-1]]
        return json.dumps(doc), "json:delete-key"
    parent[path[-1]] = "\x00FUZZ\x00"
    return json.dumps(doc).replace('"\\u0000FUZZ\\u0000"', raw, 1), f"json:value={raw[:20]}"


def json_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return text_mutation(data, rng)
    changed = json_value_mutation(text, rng) if rng.random() < 0.7 else None
    if changed is None:
        return text_mutation(data, rng)
    return changed[0].encode("utf-8", "surrogatepass"), changed[1]


def jsonl_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    try:
        changed = json_value_mutation(lines[i].decode("utf-8"), rng) if rng.random() < 0.6 else None
    except UnicodeDecodeError:
        changed = None
    if changed is None:
        return text_mutation(data, rng)
    lines[i] = changed[0].encode("utf-8", "surrogatepass")
    return b"\n".join(lines), "jsonl:" + changed[1]


def gzip_mutation(data: bytes, rng: random.Random, inner) -> tuple[bytes, str]:
    if rng.random() < 0.4:
        out, what = byte_mutation(data, rng)
        return out, "gzip-bytes:" + what
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return byte_mutation(data, rng)
    out, what = inner(text, rng)
    return gzip.compress(out, mtime=0), "gzip:" + what


# --- parquet ---------------------------------------------------------------------------------------

def parquet_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rng.random() < 0.3:
        return byte_mutation(data, rng)
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception:
        return byte_mutation(data, rng)
    n = table.num_rows
    name = rng.choice(table.column_names)
    choices = {
        "uint64-big": lambda: pa.array([2 ** 64 - 1 - i for i in range(n)], pa.uint64()),
        "int64-extreme": lambda: pa.array([rng.choice((2 ** 63 - 1, -2 ** 63, 0, 2 ** 53 + 1)) for _ in range(n)],
                                          pa.int64()),
        "float-nonfinite": lambda: pa.array([rng.choice((float("inf"), float("nan"), 1e308, -0.0, 2.5))
                                             for _ in range(n)]),
        "strings": lambda: pa.array([rng.choice(INTERESTING_NUMBERS) for _ in range(n)]),
        "nulls": lambda: pa.nulls(n, pa.float64()),
        "all-null-type": lambda: pa.nulls(n),
        "lists": lambda: pa.array([[1.0, 2.0]] * n),
        "struct": lambda: pa.array([{"a": 1.0}] * n),
        "decimal": lambda: pa.array([__import__("decimal").Decimal("1.5")] * n, pa.decimal128(5, 2)),
        "timestamp": lambda: pa.array(list(range(n)), pa.timestamp("s")),
        "float16": lambda: pa.array(__import__("numpy").ones(n, dtype="float16")),
        "bool": lambda: pa.array([True] * n),
        "dictionary": lambda: pa.array(["1", "2"] * (n // 2) + ["1"] * (n % 2)).dictionary_encode(),
        "binary": lambda: pa.array([b"\xff\xfe"] * n, pa.binary()),
        "int8": lambda: pa.array([127, -128] * (n // 2) + [0] * (n % 2), pa.int8()),
    }
    op = rng.choice(sorted(choices))
    column = choices[op]()
    if rng.random() < 0.2:
        table = table.append_column(name, column)          # a duplicate column name
    else:
        table = table.set_column(table.column_names.index(name), name, column)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue(), f"parquet:{name}={op}"


# --- dispatch --------------------------------------------------------------------------------------

def file_kind(name: str) -> str:
    low = name.lower()
    if low.endswith(".wandb"):
        return "wandb"
    if "tfevents" in low:
        return "tfrecord"
    if low.endswith(".parquet"):
        return "parquet"
    if low.endswith(".gz"):
        return "gzip"
    if low.endswith((".json", ".ipynb")):
        return "json"
    if low.endswith(".jsonl"):
        return "jsonl"
    if low.endswith(".csv"):
        return "csv"
    if low.endswith(".tsv"):
        return "tsv"
    return "text"


def mutate_file(name: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One structure-aware (or, one time in five, plain byte) mutation of a file."""
    from fuzz_records import tfrecord_mutation, wandb_mutation

    kind = file_kind(name)
    if rng.random() < 0.2 and kind not in ("wandb", "tfrecord"):
        return byte_mutation(data, rng)
    if kind == "wandb":
        return wandb_mutation(data, rng)
    if kind == "tfrecord":
        return tfrecord_mutation(data, rng)
    if kind == "parquet":
        return parquet_mutation(data, rng)
    if kind == "gzip":
        inner = jsonl_mutation if ".jsonl" in name.lower() else (lambda d, r: csv_mutation(d, r, ","))
        return gzip_mutation(data, rng, inner)
    if kind == "json":
        return json_mutation(data, rng)
    if kind == "jsonl":
        return jsonl_mutation(data, rng)
    if kind in ("csv", "tsv"):
        return csv_mutation(data, rng, "," if kind == "csv" else "\t")
    return text_mutation(data, rng)
