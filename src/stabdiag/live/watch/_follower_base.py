"""What every follower does: `poll()` reads what the files of one source gained and says whether new
points arrived; `run()` is the source's Run so far, keyed by the file's own names, as its reader would have
returned it (None while nothing is readable yet); `problem` is why the last read failed, if it did.  Every
kind of follower (one module each) builds on this module; follower.py picks one for a source."""

from __future__ import annotations

import os
from types import ModuleType

from ...errors import InputError
from ...read.run import Run


class Follower:
    kind = ""

    def __init__(self, loader: ModuleType, folder: str, paths: tuple[str, ...], options: dict) -> None:
        self.loader, self.folder, self.options = loader, folder, options
        self.paths: list[str] = []
        self.problem: str | None = None
        self.add_files(paths)

    def add_files(self, paths) -> None:
        for path in paths:
            if path not in self.paths:
                self.paths.append(path)
                self.started(path)

    def started(self, path: str) -> None:
        """A file joined this source (a new event file after a resume)."""

    def poll(self) -> bool:
        raise NotImplementedError

    def run(self) -> Run | None:
        raise NotImplementedError


class WholeFollower(Follower):
    """Files whose format cannot be read piecemeal, read again whole when one of them changes."""

    def __init__(self, *args) -> None:
        self._stamps: dict[str, tuple[int, int]] = {}
        self._run: Run | None = None
        super().__init__(*args)

    def poll(self) -> bool:
        stamps = {}
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            stamps[path] = (st.st_size, st.st_mtime_ns)
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        group = getattr(self.loader, "load_group", None)
        try:
            self._run = (group(list(self.paths), **self.options) if group
                         else self.loader.load(self.paths[0], **self.options))
            self.problem = None
        except InputError as exc:
            self.problem = str(exc)        # half-written (a JSON document mid-write): next time
            return False
        return True

    def run(self) -> Run | None:
        return self._run
