"""`stabdiag signals`: which metric key feeds each canonical signal (stabdiag.signals.resolve)."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import sys
from typing import Optional

import typer

from . import _options as opt
from ._files import load_runs
from ._guard import choice, guarded
from ._settings import settings_for


def signals(
    paths: list[str] = typer.Argument(..., help="Run files, directories or URIs."),
    format: str = typer.Option("text", "--format", "-f", help="text or json."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY overrides."),
    step_col: Optional[str] = opt.STEP_COL,
    split_sources: bool = opt.SPLIT_SOURCES,
    one_run: bool = opt.ONE_RUN,
    split_files: bool = opt.SPLIT_FILES,
    no_guess: bool = opt.NO_GUESS,
    isolated: bool = opt.ISOLATED,
    debug: bool = opt.DEBUG,
) -> None:
    """Show which of your metric keys feeds each canonical signal, what was guessed, and what stayed unmapped."""
    def body() -> None:
        from ..report.signals import render_signals
        from ..signals.resolve import parse_mapping
        from ..signals.resolve import resolve as resolve_signals

        fmt = choice("--format", format, ("text", "json"))
        user_map = parse_mapping(mapping)
        # the config file's no-guess, one-run and split-files too
        settings, _ = settings_for(paths, None, {"no-guess": no_guess, "one-run": one_run,
                                                 "split-files": split_files}, isolated)
        runs = load_runs(paths, [], step_col, progress=fmt == "text", refresh=False, split_sources=split_sources,
                         settings=settings)
        resolved = [resolve_signals(r, user_map, guess=not settings.no_guess) for r in runs]
        sys.stdout.write(render_signals(resolved, fmt))

    guarded(body, debug)
