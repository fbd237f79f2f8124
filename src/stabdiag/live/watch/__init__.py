"""Watching runs while they train: `stabdiag watch PATH...` follows the logs as they grow (reading only
what they gained), judges each run again with the same rules and engine as `check`, and says when a
finding appears, changes severity or clears.

    from stabdiag.live.watch import Watcher, WatchSettings
    watcher = Watcher(["runs/exp1/"], WatchSettings(exit_on="fail"))
    code = watcher.run()          # or call watcher.step() yourself: it returns the new events

Modules: `follower` (one follower per source kind: `_tensorboard`, `_wandb`, `_tabular`, `_console`,
a whole re-read for the rest), `runs` (files -> runs, as `check` groups them), `online` (wandb:// with
backoff), `events`, `_wake` (watchfiles or polling), `watcher` (the loop).
"""

from __future__ import annotations

__all__ = ["Watcher", "WatchSettings", "Event"]


def __getattr__(name: str):
    if name in ("Watcher", "WatchSettings"):
        from . import watcher

        return getattr(watcher, name)
    if name == "Event":
        from .events import Event

        return Event
    raise AttributeError(f"module 'stabdiag.live.watch' has no attribute {name!r}")
