"""A run's logged samples as a source read lazily, a window of steps at a time, within a memory budget.

Nothing is read when a run is loaded: the files are only named.  The first window indexes them (per-step
files by their names; a single file of a whole run by one scan that keeps, per step, at most
`INDEX_PER_STEP` row locators), and a window reads at most `max_samples` samples spread over its steps,
whole prompt groups at a time.  Memory: the index (a few dozen bytes per kept locator) plus at most
`max_samples` samples of at most TEXT_CAP characters of answer and PROMPT_CAP of prompt each: at the
defaults about 75 MB of ASCII text at worst, whatever the size of the dump (Python keeps a character outside
Latin-1 in 2 or 4 bytes: up to 2-4x that for such text).  bench/samples_memory.py measures a 2 GB dump:
32 MB of peak growth to read a window, 75 MB with the forensics on it, against a budget of 100 MB.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping

import numpy as np

from ...errors import InputError
from . import generic, tinker, trl, verl, wandb_tables
from .record import Sample, SampleWindow

READERS = (trl, verl, tinker, wandb_tables, generic)     # most specific first; also the order of preference
ROLLOUTS = "rollouts"            # stabdiag probe's rollout dumps: found here, parsed by stabdiag.probe.records
MAX_SAMPLES = 4096               # samples in one window
MIN_PER_STEP = 8                 # samples of each step read at least (fewer steps are read when it would not fit)
INDEX_PER_STEP = 64              # row locators kept per step of a single-file dump


def sample_kind(path: str) -> str | None:
    """Which kind of sample log `path` is (a reader's KIND, or "rollouts"), or None when it is none."""
    for reader in READERS:
        try:
            if reader.claims(path):
                return reader.KIND
        except (OSError, ValueError):
            continue
    from ..formats.tabular import is_rollout_dump

    return ROLLOUTS if is_rollout_dump(path) else None


def _reader(kind: str):
    return next(r for r in READERS if r.KIND == kind)


class SampleSource:
    """The sample files of one run, of one kind (the most specific kind the run has); read on demand.

    `resolve` (online runs) lists the files when they are first needed, not before."""

    def __init__(self, kind: str, files: tuple[str, ...] = (), *, weights: Mapping[str, float] | None = None,
                 notes: tuple[str, ...] = (), resolve: Callable[[], list[str]] | None = None) -> None:
        self.kind = kind
        self._files = tuple(files)
        self._resolve = resolve
        self.weights = dict(weights) if weights else None
        self.notes = notes
        self._index: dict[int, list] | None = None
        self._rows: dict[int, int] = {}         # rows of each step in a single-file dump (the index keeps fewer)

    def __repr__(self) -> str:
        return f"SampleSource({self.kind!r}, {len(self._files)} file(s))"

    @classmethod
    def of(cls, paths, *, config: dict | None = None) -> "SampleSource | None":
        """The source for a run's sample files: the first kind in READERS' order the run has (TRL's parquet
        before the W&B tables TRL logs the same samples to); other kinds are named in a note."""
        by_kind: dict[str, list[str]] = {}
        for path in paths:
            kind = sample_kind(path)
            if kind is not None:
                by_kind.setdefault(kind, []).append(path)
        if not by_kind:
            return None
        order = [r.KIND for r in READERS] + [ROLLOUTS]
        kind = min(by_kind, key=order.index)
        others = sorted(set(by_kind) - {kind})
        notes = (f"samples read from the {kind} files; the {', '.join(others)} files hold the same run's samples "
                 "and are not read",) if others else ()
        files = by_kind[kind]
        if kind == wandb_tables.KIND:
            files = wandb_tables.distinct(files)
        files = tuple(sorted(files))
        weights = None
        if kind == trl.KIND and config:
            weights = trl.weights_from(config, trl.reward_columns(files[0]))
        return cls(kind, files, weights=weights, notes=notes)

    @property
    def files(self) -> tuple[str, ...]:
        if self._resolve is not None:
            self._files, self._resolve = tuple(sorted(self._resolve())), None
        return self._files

    def index(self) -> dict[int, list]:
        """step -> [(file, locator)], built once; a locator of None reads the whole (per-step) file."""
        if self._index is None:
            if self.kind == ROLLOUTS:
                raise InputError(self.files[0], "rollout dumps are read by stabdiag probe's reader")
            reader, rng = _reader(self.kind), random.Random(0)
            index: dict[int, list] = {}
            seen: dict[int, int] = {}
            for path in self.files:
                for step, locator in reader.steps(path):
                    refs = index.setdefault(step, [])
                    if locator is None:
                        if (path, None) not in refs:
                            refs.append((path, None))
                        continue
                    count = seen[step] = seen.get(step, 0) + 1      # a reservoir of locators per step
                    if len(refs) < INDEX_PER_STEP:
                        refs.append((path, locator))
                    else:
                        j = rng.randrange(count)
                        if j < INDEX_PER_STEP:
                            refs[j] = (path, locator)
            self._index, self._rows = index, seen
        return self._index

    def steps(self) -> np.ndarray:
        return np.array(sorted(self.index()), dtype=np.int64)

    def window(self, first: int | None = None, last: int | None = None, *,
               max_samples: int = MAX_SAMPLES) -> SampleWindow:
        """The samples of steps first..last (inclusive; None: open), at most `max_samples`, spread over the
        steps: every step when MIN_PER_STEP of each fit, else steps evenly apart."""
        index = self.index()
        steps = [s for s in sorted(index) if (first is None or s >= first) and (last is None or s <= last)]
        room = max(1, max_samples // MIN_PER_STEP)
        if len(steps) > room:
            picks = np.unique(np.linspace(0, len(steps) - 1, room).round().astype(int))
            steps = [steps[i] for i in picks]
        per_step = max(MIN_PER_STEP, max_samples // max(1, len(steps)))
        reader = _reader(self.kind)
        kept: list[Sample] = []
        logged = 0
        wanted = set(steps)
        cache: dict[str, list[Sample]] = {}
        for step in steps:
            found: list[Sample] = []
            by_file: dict[str, list] = {}
            for path, locator in index[step]:
                by_file.setdefault(path, []).append(locator)
            for path, locators in by_file.items():
                if None in locators:                 # a per-step file: read it once, keep this step's rows
                    if path not in cache:
                        cache = {path: [s for s in reader.samples(path, None, weights=self.weights)
                                        if s.step in wanted]}
                    found += [s for s in cache[path] if s.step == step]
                else:
                    found += [s for s in reader.samples(path, locators, weights=self.weights) if s.step == step]
            logged += max(len(found), self._rows.get(step, 0))
            kept += _thinned(found, per_step, step)
        return SampleWindow(self.kind, self.files, tuple(kept), logged, self.notes)


def _thinned(samples: list[Sample], limit: int, seed: int) -> list[Sample]:
    """At most `limit` samples, whole prompt groups at a time (a group's samples are compared together)."""
    if len(samples) <= limit:
        return samples
    groups: dict[object, list[Sample]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.group if s.group is not None else ("row", i), []).append(s)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    out: list[Sample] = []
    for key in keys:
        if out and len(out) + len(groups[key]) > limit:
            continue
        out += groups[key][:limit]
    return out


def online_source(uri: str) -> SampleSource:
    """The W&B tables of an online run named by a wandb:// URI, listed and downloaded only when a window is
    read (the user named the URI: the network is theirs to use)."""
    def resolve() -> list[str]:
        import tempfile

        import wandb

        path = uri.split("://", 1)[1].strip("/")
        cache = os.path.join(tempfile.gettempdir(), "stabdiag-wandb-tables", path.replace("/", "_"))
        os.makedirs(cache, exist_ok=True)
        return wandb_tables.online_files(wandb.Api().run(path), cache_dir=cache)

    return SampleSource(wandb_tables.KIND, resolve=resolve)
