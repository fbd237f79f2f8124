"""The runs under the paths being watched: found again on every pass with the same rule as `check`
(stabdiag.read.assemble), so that a file that appears later (a new event file after a resume, a console
log, a W&B run) joins its run; each source is followed by one follower, kept across passes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...errors import InputError
from ...read.assemble import _SKIP_DIRS, RunFiles, _source_groups, discover
from ...read.run import Run
from ...read.sources import Source, merge_sources
from ._follower_base import Follower
from .follower import follower_for


@dataclass
class LiveRun:
    """One training run being watched: its followers, and whether it gained points since judged."""

    name: str
    root: str
    followers: list[Follower] = field(default_factory=list)
    dirty: bool = False

    def run(self) -> Run | None:
        sources = []
        for f in self.followers:
            part = f.run()
            if part is not None and part.series:
                sources.append(Source(f.kind or f.loader.__name__.rsplit(".", 1)[-1], f.folder,
                                      tuple(f.paths), part))
        if not sources:
            return None
        return merge_sources(self.name, sources, self.root)

    def problems(self) -> list[str]:
        return [f.problem for f in self.followers if f.problem]


class Finder:
    """The runs under one watched path (a file, a run dir, a tree of runs)."""

    def __init__(self, path: str, options: dict, grouping: dict | None = None) -> None:
        self.path = os.fspath(path)
        self.options = options
        self.grouping = grouping or {}          # one_run / split_files, as `discover` takes them
        self.runs: dict[str, LiveRun] = {}
        self._followers: dict[tuple[str, str], Follower] = {}
        self._signature: frozenset | None = None

    def poll(self) -> list[LiveRun]:
        """Look for new files, read what every source gained; the runs that gained points."""
        for run_files in self._discover():
            self._place(run_files)
        changed = []
        for live in self.runs.values():
            gained = False
            for f in live.followers:
                gained = f.poll() or gained
            if gained:
                live.dirty = True
                changed.append(live)
        return changed

    def _discover(self) -> list[RunFiles]:
        """The runs, found again only when the files changed in a way that can change what they are:
        a file appeared or went, or one still inside the readers' sniffing window (its first 64 KiB)
        grew; a pass over a quiet tree is one walk of its names, not a sniff of every file."""
        if not os.path.exists(self.path):
            return []                               # not there yet: the run has not started writing
        signature = _signature(self.path)
        if signature == self._signature:
            return []
        self._signature = signature
        try:
            return discover(self.path, **self.grouping)
        except InputError:
            return []                               # no log in it yet

    def _place(self, run_files: RunFiles) -> None:
        live = self.runs.get(run_files.name)
        if live is None:
            root = run_files.root or os.path.dirname(run_files.files[0])
            live = self.runs[run_files.name] = LiveRun(run_files.name, root)
        for loader, folder, paths in _source_groups(run_files.files):
            together = hasattr(loader, "load_group")
            key = (loader.__name__, folder if together else paths[0])
            follower = self._followers.get(key)
            if follower is None:
                follower = self._followers[key] = follower_for(loader, folder, paths, self.options)
            else:
                follower.add_files(paths)
            if follower not in live.followers:
                for other in self.runs.values():        # a source that moved to another run
                    if follower in other.followers:
                        other.followers.remove(follower)
                live.followers.append(follower)


_SNIFF_BYTES = 1 << 16          # the readers decide what a file is from at most its first 64 KiB


def _signature(path: str) -> frozenset:
    """(file, its size up to the sniffing window) for every file under `path`."""
    if os.path.isfile(path):
        return frozenset({(path, min(os.path.getsize(path), _SNIFF_BYTES))})
    out = set()
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]         # as discover walks
        for name in files:
            full = os.path.join(folder, name)
            try:
                out.add((full, min(os.path.getsize(full), _SNIFF_BYTES)))
            except OSError:
                continue
    return frozenset(out)
