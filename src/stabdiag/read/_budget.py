"""Budgets on input: a small hostile file (a gzip bomb, a line with no end, a million keys, a YAML alias
bomb) must cost a clear note naming the file, never all the memory or minutes of a CI job.  Each breach
is an InputError of the file, so the run is judged from its other files and the other runs of a tree
from theirs (README, "Budgets on input").  The figures sit far above what training logs hold.
"""

from __future__ import annotations

import gzip
import io
import os

from ..errors import InputError

MIB = 1 << 20
GZIP_RATIO = 100                 # decompressed bytes per compressed byte a log may reach (text logs: 3-20)
GZIP_FLOOR = 64 * MIB            # ...but a small file may always decompress to this much
GZIP_MAX = 16 << 30              # and no file to more than this
LINE_MAX = 64 * MIB              # one line of a text log
KEYS_MAX = 100_000               # distinct metric keys in one file
YAML_MAX = 16 * MIB              # a run's config file
YAML_NODES = 1_000_000           # values a YAML document stands for with its aliases expanded


def _size(n: int) -> str:
    return f"{n / MIB:.0f} MiB" if n < (1 << 30) else f"{n / (1 << 30):.0f} GiB"


def gzip_allowance(path: str) -> int:
    """How many bytes `path` may decompress to."""
    return min(GZIP_MAX, max(GZIP_FLOOR, GZIP_RATIO * os.path.getsize(path)))


def gzip_size(path: str) -> int:
    """The decompressed size a gzip file declares (its trailer holds it modulo 4 GiB), at least the
    compressed size; for choosing a reader, never for trusting: the reading itself is counted."""
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, size - 4))
            declared = int.from_bytes(fh.read(4), "little")
    except OSError:
        return size
    return max(size, declared)


def _bomb(path: str, allowed: int) -> InputError:
    return InputError(path, f"decompresses to more than {_size(allowed)} ({GZIP_RATIO}x its size, at least "
                            f"{_size(GZIP_FLOOR)}): a gzip bomb? not read")


def check_gzip(path: str) -> None:
    """Refuse, before parsing it, a gzip file that decompresses past its allowance.  Only a file whose
    trailer declares more is decompressed to see (a cut file's trailer is noise; zlib alone crosses the
    allowance in a fraction of what parsing it would cost); a forged trailer is caught by the counted
    reading instead, at the allowance."""
    allowed = gzip_allowance(path)
    if gzip_size(path) <= allowed:
        return
    given = 0
    try:
        with gzip.open(path, "rb") as fh:
            while given <= allowed:
                chunk = fh.read(1 << 22)
                if not chunk:
                    return
                given += len(chunk)
    except Exception:           # noqa: BLE001 - a damaged stream: its reader says what is wrong with it
        return
    raise _bomb(path, allowed)


class _Counted(io.RawIOBase):
    """A gzip stream that stops with an InputError once it has given more than its allowance."""

    def __init__(self, path: str) -> None:
        self.path, self.allowed, self.given = path, gzip_allowance(path), 0
        self.inner = gzip.open(path, "rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.inner.readinto(buffer)
        self.given += n
        if self.given > self.allowed:
            raise _bomb(self.path, self.allowed)
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


class BudgetedGzip(io.BufferedReader):
    """What open_bytes gives for a `.gz` file: its decompressed bytes, counted; `fileobj` is the
    compressed file (for progress bars), as on gzip.GzipFile."""

    def __init__(self, path: str) -> None:
        counted = _Counted(path)
        super().__init__(counted, 1 << 16)
        self.fileobj = counted.inner.fileobj


def line_too_long(path: str, line: int) -> InputError:
    return InputError(path, f"a line longer than {_size(LINE_MAX)}: not a metric log line; not read", line=line)


def too_many_keys(path: str, count: int) -> InputError:
    return InputError(path, f"more than {KEYS_MAX:,} distinct metric keys ({count:,} so far); not read")


def _expanded(node, memo: dict) -> int:
    """How many nodes `node` stands for once every alias is expanded (memoised: an alias bomb's graph
    is small, its expansion is not)."""
    import yaml

    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = 1                    # a node that holds itself counts once
    if isinstance(node, yaml.SequenceNode):
        count = 1 + sum(_expanded(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        count = 1 + sum(_expanded(k, memo) + _expanded(v, memo) for k, v in node.value)
    else:
        count = 1
    memo[id(node)] = count
    return count


def yaml_load(text: str, path: str):
    """yaml.safe_load with budgets: a document longer than YAML_MAX, or one that stands for more than
    YAML_NODES values once its aliases are expanded (a few hundred bytes can stand for billions), is an
    InputError; its aliases are never expanded."""
    import yaml

    if len(text) > YAML_MAX:
        raise InputError(path, f"a YAML file larger than {_size(YAML_MAX)}; not read")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        count = _expanded(node, {})
        if count > YAML_NODES:
            raise InputError(path, f"its YAML aliases expand to {count:,} values, more than {YAML_NODES:,} "
                                   "(an alias bomb?); not read")
        return loader.construct_document(node)
    finally:
        loader.dispose()
