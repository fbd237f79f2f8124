"""`stabdiag plot`: each run's timeline drawn to an image (stabdiag.report.plot), one per run."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
from typing import Optional

import typer

from ..errors import ConfigError
from . import _options as opt
from ._files import diagnose_all, load_runs, refuse_to_overwrite
from ._guard import choice, guarded
from ._settings import settings_for


def plot(
    paths: list[str] = opt.PATHS,
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Image file, or a folder for one "
                                                                      "image per run (default: RUN.timeline.png)."),
    format: Optional[str] = typer.Option(None, "--format", "-f", help="png, svg or pdf (default: from -o, else png)."),
    mapping: list[str] = opt.MAP,
    select: list[str] = opt.SELECT,
    ignore: list[str] = opt.IGNORE,
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter."),
    with_files: list[str] = typer.Option([], "--with", help="Extra series to merge into each run."),
    rules_dir: list[str] = opt.RULES_DIR,
    config: Optional[str] = typer.Option(None, "--config", help="Config file instead of the one found."),
    isolated: bool = opt.ISOLATED,
    step_col: Optional[str] = opt.STEP_COL,
    split_sources: bool = opt.SPLIT_SOURCES,
    one_run: bool = opt.ONE_RUN,
    split_files: bool = opt.SPLIT_FILES,
    no_guess: bool = opt.NO_GUESS,
    debug: bool = opt.DEBUG,
) -> None:
    """Draw each run's timeline: four layer panels, findings shaded, the first NaN/Inf marked."""
    def body() -> None:
        from pathlib import Path

        from ..report._escape import visible
        from ..report.plot import FORMATS, default_name
        from ..report.plot import plot as draw

        suffix = Path(output).suffix.lstrip(".").lower() if output else ""
        if suffix and suffix not in FORMATS and not Path(output).is_dir():
            raise ConfigError(f"-o {output}: stabdiag plot writes {' or '.join(FORMATS)}; name the file "
                              f"{' or '.join('.' + f for f in FORMATS)}, or give a folder")
        fmt = choice("--format", format, FORMATS) if format else (suffix if suffix in FORMATS else "png")
        refuse_to_overwrite("--output", output, [*paths, *with_files])
        settings, rules = settings_for(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                       "no-guess": no_guess, "map": mapping, "param": params,
                                                       "one-run": one_run, "split-files": split_files}, isolated)
        runs = load_runs(paths, with_files, step_col, progress=False, refresh=False, split_sources=split_sources,
                         settings=settings)
        folder = output is not None and (Path(output).is_dir() or not suffix)
        if len(runs) > 1 and output is not None and not folder:
            raise ConfigError(f"-o {output}: the input holds {len(runs)} runs; give a folder to write one "
                              "image per run")
        if folder:
            Path(output).mkdir(parents=True, exist_ok=True)
        for run, diag in zip(runs, diagnose_all(runs, rules, settings)):
            target = (str(Path(output) / default_name(run.name, fmt)) if folder
                      else output or default_name(run.name, fmt))
            refuse_to_overwrite("--output", target, [*paths, *with_files])
            draw(run, diag, target, fmt, mapping=settings.map)
            root = "no layer failed" if diag.root_layer is None else f"root layer {diag.root_layer}"
            print(visible(f"wrote {target} ({diag.run}: {diag.verdict}, {root})"))

    guarded(body, debug)
