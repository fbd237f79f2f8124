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

from types import ModuleType

from ._follower_base import Follower, WholeFollower


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
