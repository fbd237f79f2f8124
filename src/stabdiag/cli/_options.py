"""The options several commands declare alike (same name, default, help), each declared once: a command
takes one as its parameter's default, `mapping: list[str] = opt.MAP`, and typer copies it per command.
An option whose help or default differs between commands (check's --select, signals' --map) stays in
its command."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

NO_GUESS_HELP = ("Read only --map and the known framework names: guess no signal from a metric's name "
                 "(config key no-guess).")
ISOLATED_HELP = "Read no config file (the project's or any other), as ruff's --isolated."
SPLIT_SOURCES_HELP = ("Read every source (event folder, W&B run, trainer_state.json, console log) as a run of "
                      "its own.")
ONE_RUN_HELP = ("Read the console logs and tables side by side in one folder as one run, never several "
                "(config key one-run).")
SPLIT_FILES_HELP = ("Read each console log and table of a folder as a run of its own (config key split-files); "
                    "without either, their names, configs and steps decide, said in a note.")
STEP_COL_HELP = "Name of the step column; @row numbers the rows 0, 1, 2, ... instead."

# check, plot, watch
PATHS = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs.")
MAP = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY.")
IGNORE = typer.Option([], "--ignore", help="Skip these rule ids or prefixes.")
RULES_DIR = typer.Option([], "--rules", help="Extra directory of rule files.")
# plot, watch
SELECT = typer.Option([], "--select", help="Only these rule ids or prefixes.")
# check, watch
CONFIG = typer.Option(None, "--config", help="Config file (stabdiag.toml or pyproject.toml) instead of the one found.")
# check, plot, signals, watch
ISOLATED = typer.Option(False, "--isolated", help=ISOLATED_HELP)
STEP_COL = typer.Option(None, "--step-col", help=STEP_COL_HELP)
ONE_RUN = typer.Option(False, "--one-run", help=ONE_RUN_HELP)
SPLIT_FILES = typer.Option(False, "--split-files", help=SPLIT_FILES_HELP)
NO_GUESS = typer.Option(False, "--no-guess", help=NO_GUESS_HELP)
# check, plot, signals
SPLIT_SOURCES = typer.Option(False, "--split-sources", help=SPLIT_SOURCES_HELP)
# plot, signals, watch
DEBUG = typer.Option(False, "--debug", help="Show tracebacks.")
