"""`stabdiag watch`: runs followed while they train (stabdiag.live.watch), a line or a JSON object per
event, exit 1 once --exit-on is reached."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
from typing import Optional

import typer

from ._guard import Exit, guarded
from ._settings import settings_for


def watch(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    interval: float = typer.Option(1.0, "--interval", help="Judge each run at most every this many seconds."),
    format: str = typer.Option("text", "--format", "-f", help="text or jsonl (one JSON object per event)."),
    exit_on: Optional[str] = typer.Option(None, "--exit-on", help="Exit 1 once a finding at warn or fail appears."),
    on_alert: Optional[str] = typer.Option(None, "--on-alert", help="Command (argv, no shell) run per new finding, "
                                                                   "the event's JSON on stdin."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY."),
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes."),
    ignore: list[str] = typer.Option([], "--ignore", help="Skip these rule ids or prefixes."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    polling: bool = typer.Option(False, "--polling", help="Poll the files instead of using watchfiles."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Follow runs while they train: judge them again as their logs grow, and say when a finding appears."""
    def body() -> None:
        from ..live.watch.watcher import Watcher, settings_from_flags

        settings, rules = settings_for(paths, None, {"select": select, "ignore": ignore, "map": mapping})
        raise Exit(Watcher(paths, settings_from_flags(settings, rules, interval=interval, format=format,
                                                      exit_on=exit_on, on_alert=on_alert, step_col=step_col,
                                                      polling=polling)).run())

    guarded(body, debug)
