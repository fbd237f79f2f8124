"""Find the runs under a path and read each with the loader that knows its files.

Each loader module exposes:
    can_load(path: str) -> bool         this file is one this loader reads (sniffed by content where cheap)
    load(path: str, **options) -> Run   read one file
and may expose:
    run_root(path: str) -> str          the directory that is this file's run (default: its directory)
    load_group(paths: list[str], **options) -> Run   read a run's files together (default: load + merge)
    handles_uri(uri: str) -> bool / load_uri(uri, **options) -> Run   for scheme://… sources

LOADERS is ordered most specific first; the first whose can_load answers yes reads the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

from ..errors import InputError
from ..run import Run, merge_runs, run_name_for
from . import tabular, tensorboard, text, trainer_state, wandb
from .text import notebook

LOADERS: tuple[ModuleType, ...] = (wandb, tensorboard, tabular, trainer_state, notebook, text)

_SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints", "node_modules"}


@dataclass(frozen=True, slots=True)
class RunSource:
    """The files (or the URI) that make up one run, and the run's display name."""

    name: str
    files: tuple[str, ...] = ()
    uri: str | None = None


def loader_for(path: str) -> ModuleType | None:
    for loader in LOADERS:
        if loader.can_load(path):
            return loader
    return None


def _uri_loader(source: str) -> ModuleType | None:
    if "://" not in source:
        return None
    for loader in LOADERS:
        handles = getattr(loader, "handles_uri", None)
        if handles is not None and handles(source):
            return loader
    return None


def _root_of(path: str, loader: ModuleType) -> str:
    root = getattr(loader, "run_root", None)
    return root(path) if root is not None else os.path.dirname(path)


def discover(source: str | os.PathLike[str]) -> list[RunSource]:
    """The runs at a path: a file is one run; a directory holding log files directly is one run;
    otherwise every directory below it that holds log files is a run of its own."""
    source = os.fspath(source)
    if _uri_loader(source) is not None:
        return [RunSource(name=source.rstrip("/").rsplit("/", 1)[-1], uri=source)]
    if not os.path.exists(source):
        raise InputError(source, "no such file or directory")
    if os.path.isfile(source):
        loader = loader_for(source)
        if loader is None and tabular.is_rollout_dump(source):
            raise InputError(source, "a rollout dump, not a metric log; measure its drift with "
                                     "stabdiag probe FILE --model DIR, then check the run --with the series")
        if loader is None:
            raise InputError(source, "not a metric log stabdiag can read (expected CSV, TSV, JSONL, "
                                     "Parquet, a TensorBoard event file, a W&B run, trainer_state.json, "
                                     "a notebook or a framework console log)")
        # a file that belongs to a run directory (an event file, a .wandb log) is named after it
        named = run_name_for(_root_of(source, loader)) if hasattr(loader, "run_root") else run_name_for(source)
        return [RunSource(name=named, files=(source,))]
    groups: dict[str, list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for fname in sorted(filenames):
            path = os.path.join(dirpath, fname)
            loader = loader_for(path)
            if loader is not None:
                groups.setdefault(_root_of(path, loader), []).append(path)
    if not groups:
        raise InputError(source, "no metric logs found in this directory")
    # a run directory nested inside another run directory (e.g. a checkpoint's trainer_state.json
    # under a run that logs at its top) stays a run of its own; names are relative to the source
    runs = []
    for root in sorted(groups):
        rel = os.path.relpath(root, source)
        if rel == "." or rel.startswith(".."):      # the source itself, or a folder inside its run
            name = run_name_for(root if rel.startswith("..") else source)
        else:
            name = rel.replace(os.sep, "/")
        runs.append(RunSource(name=name, files=tuple(groups[root])))
    return runs


def load_source(src: RunSource, **options) -> Run:
    """Read every file of one run and merge them (a later file wins a step both wrote)."""
    if src.uri is not None:
        return _uri_loader(src.uri).load_uri(src.uri, **options)
    by_loader: dict[ModuleType, list[str]] = {}
    for path in src.files:
        loader = loader_for(path)
        if loader is None:
            raise InputError(path, "not a metric log stabdiag can read")
        by_loader.setdefault(loader, []).append(path)
    parts: list[Run] = []
    for loader, paths in by_loader.items():
        group = getattr(loader, "load_group", None)
        if group is not None:
            parts.append(group(paths, **options))
        else:
            parts.extend(loader.load(p, **options) for p in paths)
    return merge_runs(src.name, parts)


def load(sources, **options) -> list[Run]:
    """Load every run found under one or more paths or URIs."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    runs: list[Run] = []
    for source in sources:
        runs.extend(load_source(src, **options) for src in discover(source))
    return runs
