"""MLflow tracking data: the SQLite backend (`mlflow.db`), the file store (`mlruns/`) and a tracking
server (`mlflow://HOST/EXPERIMENT`, through the optional mlflow client).  One store holds many runs, so
this reader answers `members` (the runs a store file holds, which a `#experiment=NAME` / `#run=NAME`
selector narrows) and `load_member` (one of them) instead of one Run per file; see `_common` for how a
run's params, tags and status are read.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...run import Run
    from ._common import Selector

# The store readers (sqlite3, numpy) are imported by the functions that read a store: can_load is asked
# about every file of a check, and only a `.db` or an `mlruns/` path goes further than its name.


def can_load(path: str) -> bool:
    if os.path.basename(path) == "meta.yaml" or os.sep + "metrics" + os.sep in path or \
            os.sep + "params" + os.sep in path or os.sep + "tags" + os.sep in path:
        from . import _filestore

        if _filestore.run_folder(path) is not None:
            return True
    if not path.endswith((".db", ".sqlite", ".sqlite3")):
        return False
    from . import _sqlite

    return _sqlite.is_store(path)


def run_root(path: str) -> str:
    from . import _filestore

    return _filestore.run_folder(path) or os.path.dirname(path)


def store_of(path: str) -> str:
    """The store a file belongs to: the SQLite file, or the file store's root folder (`mlruns/`)."""
    from . import _filestore

    folder = _filestore.run_folder(path)
    return os.path.dirname(os.path.dirname(folder)) if folder is not None else path


def members(path: str, selector: Selector | None = None) -> list[tuple[str, str, str]]:
    """(run id, run name, experiment name) of the runs a store file stands for."""
    from . import _filestore, _sqlite
    from ._common import Selector

    selector = selector or Selector()
    if _filestore.run_folder(path) is not None:
        return _filestore.members(path, selector)
    return _sqlite.members(path, selector)


def load_member(path: str, run_id: str, **options) -> Run:
    from . import _filestore, _sqlite

    if _filestore.run_folder(path) is not None:
        return _filestore.load_member(path, run_id)
    return _sqlite.load_member(path, run_id)


def load(path: str, **options) -> Run:
    """A store file on its own: its only run (assembly reads stores run by run, through `members`)."""
    found = members(path)
    if len(found) != 1:
        from ....errors import InputError

        raise InputError(path, f"holds {len(found)} MLflow runs; check the store itself to read each")
    return load_member(path, found[0][0])


def handles_uri(uri: str) -> bool:
    from ._server import handles_uri as handles

    return handles(uri)


def run_uris(uri: str) -> list[tuple[str, str]]:
    from ._server import run_uris as listed

    return listed(uri)


def load_uri(uri: str, **options) -> Run:
    from ._server import load_uri as fetch

    return fetch(uri, **options)
