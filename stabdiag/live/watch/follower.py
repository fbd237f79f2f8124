"""What every follower does, and which follower takes a source.

A follower follows one source of a run, as `assemble` groups them (a TensorBoard writer's folder, a W&B
run folder, a CSV, a console log): `poll()` reads what the files gained and says whether new points
arrived; `run()` is the source's Run so far, keyed by the file's own names, as its reader would have
returned it (None while nothing is readable yet); `problem` is why the last read failed, if it did.
Each kind reads only the appended bytes where its format allows (TensorBoard, W&B, CSV/TSV, JSONL); a
console log is read incrementally but parsed whole (its steps and its ending come from all of it);
other files (trainer_state.json, Parquet, notebooks, gzip) are read again whole when they change.
"""

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


def follower_for(loader: ModuleType, folder: str, paths: tuple[str, ...], options: dict) -> Follower:
    """The follower of one source: incremental where the format allows, else a whole re-read."""
    from . import _console, _tabular, _tensorboard, _wandb

    kind = loader.__name__.rsplit(".", 1)[-1]
    if kind == "tensorboard":
        return _tensorboard.EventsFollower(loader, folder, paths, options)
    if kind == "wandb" and any(p.endswith(".wandb") for p in paths):
        return _wandb.LogFollower(loader, folder, paths, options)
    if kind == "tabular" and _tabular.TableFollower.takes(paths[0]):
        return _tabular.TableFollower(loader, folder, paths, options)
    if kind == "text":
        return _console.ConsoleFollower(loader, folder, paths, options)
    return WholeFollower(loader, folder, paths, options)
