"""The files a command reads and writes: runs loaded one path at a time with their warnings said (plot,
signals, a --baseline run), and outputs that must never replace an input."""

from typing import Optional

from ..errors import ConfigError
from ._guard import say


def load_runs(paths: list[str], with_files: list[str], step_col: Optional[str], progress: bool,
              refresh: bool, split_sources: bool = False, settings=None):
    """The runs under `paths`, grouped as `settings` say (one-run / split-files), each warning said."""
    from ..read.assemble import load

    options = {"step_col": step_col, "progress": progress, "refresh": refresh}
    grouping = {"one_run": settings.one_run, "split_files": settings.split_files} if settings is not None else {}
    runs = load(paths, split_sources=split_sources, **grouping, **options)
    for run in runs:
        for warning in run.warnings:
            say(f"warning: {run.name}: {warning}")
    if with_files:
        from ..batch import load_extra, with_note

        merged = load_extra(with_files, options)
        runs = [r.with_series(merged.series, note=with_note(with_files)) for r in runs]
    return runs


def diagnose_all(runs, rules, settings):
    """Each run judged as `check` judges it, here and in order."""
    from ..batch import diagnose_run

    return [diagnose_run(run, rules, settings) for run in runs]


def refuse_to_overwrite(flag: str, output: Optional[str], inputs: list[str]) -> None:
    """The report or image must never replace an input: the logs being judged are read-only."""
    from ..read._paths import overwritten_input

    victim = overwritten_input(output, [i for i in inputs if i]) if output else None
    if victim is not None:
        raise ConfigError(f"{flag} {output}: would overwrite the input {victim}; write it elsewhere")


def write(path: str, text: str) -> None:
    """A report written to -o FILE; a file that cannot be written is one error line."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write the report ({exc.strerror or exc})") from None
