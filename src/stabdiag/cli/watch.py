"""`stabdiag watch`: runs followed while they train (stabdiag.live.watch), a line or a JSON object per
event, exit 1 once --exit-on is reached."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
from typing import Optional

import typer

from . import _options as opt
from ._guard import Exit, guarded
from ._settings import settings_for


def watch(
    paths: list[str] = opt.PATHS,
    interval: float = typer.Option(1.0, "--interval", help="Judge each run at most every this many seconds."),
    format: str = typer.Option("text", "--format", "-f", help="text or jsonl (one JSON object per event)."),
    exit_on: Optional[str] = typer.Option(None, "--exit-on", help="Exit 1 once a finding at warn or fail appears."),
    on_alert: Optional[str] = typer.Option(None, "--on-alert", help="Command (argv, no shell) run per new finding, "
                                                                   "the event's JSON on stdin."),
    mapping: list[str] = opt.MAP,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter, as in check."),
    rules_dir: list[str] = opt.RULES_DIR,
    config: Optional[str] = opt.CONFIG,
    isolated: bool = opt.ISOLATED,
    no_guess: bool = opt.NO_GUESS,
    clear_after: int = typer.Option(3, "--clear-after", metavar="N", min=1,
                                    help="Say a finding cleared only after N judgements in a row without it, over "
                                         "as many steps again as the run had when it was last seen (no flapping)."),
    step_col: Optional[str] = opt.STEP_COL,
    one_run: bool = opt.ONE_RUN,
    split_files: bool = opt.SPLIT_FILES,
    polling: bool = typer.Option(False, "--polling", help="Poll the files instead of using watchfiles."),
    debug: bool = opt.DEBUG,
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
