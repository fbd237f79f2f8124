"""The readers, one per source kind, and which one reads a file.

Each reader module exposes:
    can_load(path: str) -> bool         this file is one this reader reads (sniffed by content where cheap)
    load(path: str, **options) -> Run   read one file, keyed by the file's own metric names
and may expose:
    run_root(path: str) -> str          the folder that is this file's source (default: its folder)
    load_group(paths: list[str], **options) -> Run   read a source's files together (default: load)
    handles_uri(uri: str) -> bool / load_uri(uri, **options) -> Run   for scheme://… sources
    run_uris(uri: str) -> list[(uri, name)]   a scheme://… source that names several runs, one URI each
    members(path, selector) -> list[(id, name, group)] / load_member(path, id, **options) -> Run
                                        a file that holds several runs (an MLflow store), read run by run

Which files make one training run, and how they merge, is the assembly step's business
(stabdiag.read.assemble), not a reader's.  LOADERS is ordered most specific first; the first whose
can_load answers yes reads the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from types import ModuleType

# Most specific first.  Names, not modules: a reader is imported when a file reaches its can_load, so a
# check of one CSV reads neither the console readers nor sqlite3 nor html.parser (a tenth of its start).
LOADERS: tuple[str, ...] = ("wandb", "tensorboard", "mlflow", "megatron_golden", "tabular", "trainer_state",
                            "text.notebook", "text")


def readers() -> Iterator[ModuleType]:
    """The reader modules in LOADERS order, each imported when the iteration reaches it."""
    for name in LOADERS:
        yield import_module(f"{__name__}.{name}")


def loader_for(path: str) -> ModuleType | None:
    """The reader of a file, or None when no reader recognises it."""
    for loader in readers():
        if loader.can_load(path):
            return loader
    return None


def uri_loader(source: str) -> ModuleType | None:
    """The reader of a scheme://… source (an online W&B run), or None for a path."""
    if "://" not in source:
        return None
    for loader in readers():
        handles = getattr(loader, "handles_uri", None)
        if handles is not None and handles(source):
            return loader
    return None

