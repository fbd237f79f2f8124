"""The bytes a growing file gained since last time: a follower reads only those."""

from __future__ import annotations

import os


class Tail:
    """Where a follower got to in one file.  A file that got shorter, or was replaced by another (a new
    inode), is read again from its start: `reset` says so once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self._inode: int | None = None
        self.reset = False

    def size(self) -> int | None:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return None

    def grew(self) -> bool:
        """The file holds bytes past what was consumed (or was replaced; then `reset` is set)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if (self._inode is not None and st.st_ino != self._inode) or st.st_size < self.offset:
            self.offset, self.reset = 0, True
        self._inode = st.st_ino
        return st.st_size > self.offset

    def new_bytes(self, limit: int = -1) -> bytes:
        """The bytes after the consumed ones (not consumed yet: see `consume`)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                return fh.read(limit)
        except OSError:
            return b""

    def consume(self, count: int) -> None:
        self.offset += count

    def take_reset(self) -> bool:
        was, self.reset = self.reset, False
        return was


def complete_lines(tail: Tail) -> bytes:
    """The new bytes up to the last newline, consumed; a line still being written waits for its end."""
    data = tail.new_bytes()
    cut = data.rfind(b"\n")
    if cut < 0:
        return b""
    tail.consume(cut + 1)
    return data[:cut + 1]
