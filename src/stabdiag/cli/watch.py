"""`stabdiag watch`: runs followed while they train (stabdiag.live.watch), a line or a JSON object per
event, exit 1 once --exit-on is reached."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
from typing import Optional

import typer

from ._guard import Exit, guarded
from ._settings import ISOLATED_HELP, NO_GUESS_HELP, ONE_RUN_HELP, SPLIT_FILES_HELP, STEP_COL_HELP, settings_for


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
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter, as in check."),
    rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files."),
    config: Optional[str] = typer.Option(None, "--config", help="Config file (stabdiag.toml or pyproject.toml) "
                                                                "instead of the one found."),
    isolated: bool = typer.Option(False, "--isolated", help=ISOLATED_HELP),
    no_guess: bool = typer.Option(False, "--no-guess", help=NO_GUESS_HELP),
    clear_after: int = typer.Option(3, "--clear-after", metavar="N", min=1,
                                    help="Say a finding cleared only after N judgements in a row without it, over "
                                         "as many steps again as the run had when it was last seen (no flapping)."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help=STEP_COL_HELP),
    one_run: bool = typer.Option(False, "--one-run", help=ONE_RUN_HELP),
    split_files: bool = typer.Option(False, "--split-files", help=SPLIT_FILES_HELP),
    polling: bool = typer.Option(False, "--polling", help="Poll the files instead of using watchfiles."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Follow runs while they train: judge them again as their logs grow, and say when a finding appears."""
    def body() -> None:
        from ..live.watch.watcher import Watcher, settings_from_flags

        settings, rules = settings_for(paths, config, {"select": select, "ignore": ignore, "map": mapping,
                                                       "param": params, "rules": rules_dir, "no-guess": no_guess,
                                                       "one-run": one_run, "split-files": split_files}, isolated)
        raise Exit(Watcher(paths, settings_from_flags(settings, rules, interval=interval, format=format,
                                                      exit_on=exit_on, on_alert=on_alert, step_col=step_col,
                                                      polling=polling, clear_after=clear_after)).run())

    guarded(body, debug)
