"""Checking runs, on one core or a tree of them on many: each run loaded and diagnosed on its own (in a
worker process when `jobs` allows), what it said (warnings, errors, Python warnings) brought back as data,
then said in the order a serial check says it, so that stdout, stderr and the result do not depend on
the number of jobs.  `stabdiag check` is a thin layer over `check_runs`.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import replace
from typing import NamedTuple

from .errors import ConfigError, StabdiagError


def check_file_map(settings, run) -> None:
    """A --map entry from a config file names a key the run lacks: say which file and key."""
    for signal, key in settings.map.items():
        where = settings.map_origin.get(signal, "--map")
        if where != "--map" and key not in run.series:
            raise ConfigError(f"{where}: run '{run.name}' has no key '{key}'")


def diagnose_run(run, rules, settings, cost: dict | None = None):
    """One run diagnosed under the settings; `cost` carries --gpus / --gpu-hour-cost for the cost estimate."""
    from .selection import diagnose_selected

    check_file_map(settings, run)
    return diagnose_selected(run, rules, select=settings.select, ignore=settings.ignore, mapping=settings.map,
                             params=settings.params, guess=not settings.no_guess, **(cost or {}))


def diagnose_all(runs, rules, settings):
    return [diagnose_run(run, rules, settings) for run in runs]


class Job(NamedTuple):       # NamedTuples, not dataclasses: a third of the cost at every start
    """What checking one run needs besides its files; the same for every run, so sent once per worker."""

    rules: tuple
    settings: object
    load_options: dict
    trends: bool = False                  # attach the sparkline trends (terminal and Markdown reports)
    cost: dict | None = None              # --gpus and --gpu-hour-cost
    extra: object = None                  # the --with series, merged into one Run
    extra_note: str = ""
    skip_diagnosis: bool = False          # --with could not be read: the check stops before diagnosing
    debug: bool = False
    drawing: dict | None = None           # width and colour of the terminal report on stdout: draw the run's part


class Outcome(NamedTuple):
    """What checking one run gave, as data: a worker's result, said by the parent in the serial order."""

    name: str
    warnings: tuple[str, ...] = ()        # the run's `warning:` lines
    notes_at: int = 0                     # where notes about unreadable sibling runs go in its notes
    diagnosis: object = None
    drawn: str | None = None              # the run's part of the terminal report
    load_error: Exception | None = None
    error: Exception | None = None        # raised while diagnosing
    load_said: tuple = ()                 # Python warnings while loading, then while diagnosing:
    diagnose_said: tuple = ()             # (message, category, filename, line)


def _caught(fn, debug: bool):
    """(value, None, warnings) or (None, the exception, warnings): fn's Python warnings are kept to be
    shown in run order, numpy's about NaN and Inf dropped as `_guarded` drops them."""
    with warnings.catch_warnings(record=True) as said:
        if not debug:
            warnings.simplefilter("ignore", RuntimeWarning)
        try:
            value, error = fn(), None
        except Exception as exc:      # noqa: BLE001 - said in order by `replay`, as a serial check would
            value, error = None, exc
    return value, error, tuple((str(w.message), w.category, w.filename, w.lineno) for w in said)


def _diagnose_one(job: Job, run) -> tuple:
    """(the diagnosis, its part of the terminal report or None)."""
    if job.extra is not None:
        run = run.with_series(job.extra.series, note=job.extra_note)
    diag = diagnose_run(run, job.rules, job.settings, job.cost)
    if job.trends:
        from .report.sparkline import with_trends

        diag = with_trends(diag, run, mapping=job.settings.map)
    if job.drawing is None:
        return diag, None
    from .report.terminal import render_run

    return diag, render_run(diag, **job.drawing)


def _check_one(job: Job, run_files) -> Outcome:
    """Load and diagnose one run; nothing is printed or raised, everything comes back in the outcome."""
    from .assemble import load_run

    run, error, said = _caught(lambda: load_run(run_files, **job.load_options), job.debug)
    if run is None:
        return Outcome(run_files.name, load_error=error, load_said=said)
    loaded = Outcome(run.name, warnings=run.warnings, notes_at=len(run.notes), load_said=said)
    if job.skip_diagnosis:
        return loaded
    done, error, said = _caught(lambda: _diagnose_one(job, run), job.debug)
    diag, drawn = done or (None, None)
    return loaded._replace(diagnosis=diag, drawn=drawn, error=error, diagnose_said=said)


_worker_job: Job | None = None       # in a worker process only: its job, set once by `_start_worker`


def _start_worker(job: Job) -> None:
    import signal

    global _worker_job
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's: it stops the pool
    _worker_job = job


def _work(run_files) -> Outcome:
    return _check_one(_worker_job, run_files)


def _pool_context():
    """forkserver where there is one (each worker a fork of a process that imported stabdiag once), else
    spawn; never a fork of this process, which may hold threads and open files."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["stabdiag.jobs", "stabdiag.assemble", "stabdiag.engine",
                                    "stabdiag.report.sparkline"])
    return context


def _runs_progress(enabled: bool, total: int):
    """'checked 12/500 runs' on stderr while a pool works; like the loaders' bars it appears only after a
    second, so that small trees stay quiet."""
    from .loaders._progress import ByteProgress

    class RunsProgress(ByteProgress):
        def columns(self) -> tuple:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

            return TextColumn("checked"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"), TimeRemainingColumn()

    return RunsProgress(enabled and sys.stderr.isatty(), total, "runs")


def _outcomes(job: Job, tasks: list, jobs: int, progress: bool) -> list[Outcome]:
    """Every run checked, in order: in a pool of worker processes, or here for one run, one job, --debug
    (a traceback from the code that raised) or where no pool can start (inside a daemon process)."""
    workers = min(jobs, len(tasks))
    if workers <= 1 or job.debug:
        return [_check_one(job, t) for t in tasks]
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return [_check_one(job, t) for t in tasks]
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    quiet = job._replace(load_options={**job.load_options, "progress": False})    # no bars from workers
    try:
        pool = ProcessPoolExecutor(workers, mp_context=_pool_context(), initializer=_start_worker, initargs=(quiet,))
        checked = pool.map(_work, tasks, chunksize=max(1, min(8, len(tasks) // (workers * 16))))
    except OSError:                 # no semaphores or process limit reached: one at a time still works
        return [_check_one(job, t) for t in tasks]
    out: list[Outcome] = []
    try:
        with _runs_progress(progress, len(tasks)) as bar:
            for outcome in checked:
                out.append(outcome)
                bar.update(len(out))
    except BrokenProcessPool:
        raise StabdiagError(f"--jobs {jobs}: a worker process died while checking runs (out of memory?); "
                            "rerun with fewer --jobs") from None
    finally:
        _stop(pool, finished=len(out) == len(tasks))
    return out


def _stop(pool, *, finished: bool) -> None:
    """Close the pool; after Ctrl-C or an error, drop the queued runs and end the ones still running."""
    pool.shutdown(wait=finished, cancel_futures=True)
    if not finished:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()


def replay(paths: list[str], found: list, outcomes: list[Outcome], extra: tuple) -> list[Outcome]:
    """The runs read, after saying what a serial check says in its order: per path, the Python warnings
    of loading and the error when no run could be read; the runs' `warning:` lines; a --with error; then
    run by run, the Python warnings of diagnosing and the first error."""
    from .assemble import lost_runs
    from .errors import InputError

    registry: dict = {}            # one registry: a warning repeated by several runs is shown once

    def say(said: tuple) -> None:
        for message, category, filename, line in said:
            warnings.warn_explicit(message, category, filename, line, registry=registry)

    results = iter(outcomes)
    loaded: list[Outcome] = []
    for source, group in zip(paths, found):
        if isinstance(group, Exception):
            raise group
        mine, failed = [], []
        for outcome in (next(results) for _ in group):
            say(outcome.load_said)
            error = outcome.load_error
            if error is not None and (len(group) == 1 or not isinstance(error, InputError)):
                raise error
            (mine.append(outcome) if error is None else failed.append((outcome.name, error)))
        lost = lost_runs(source, failed, loaded=len(mine))
        if lost:
            mine[0] = _with_lost(mine[0], lost)
        loaded.extend(mine)
    for outcome in loaded:
        for warning in outcome.warnings:
            print(f"warning: {outcome.name}: {warning}", file=sys.stderr)
    extra_error, extra_said = extra
    say(extra_said)
    if extra_error is not None:
        raise extra_error
    for outcome in loaded:
        say(outcome.diagnose_said)
        if outcome.error is not None:
            raise outcome.error
    return loaded


def _with_lost(outcome: Outcome, lost: tuple[str, ...]) -> Outcome:
    """The first readable run of a tree carries the notes on the runs that could not be read."""
    diag = outcome.diagnosis
    if diag is not None:
        at = outcome.notes_at
        diag = replace(diag, notes=diag.notes[:at] + lost + diag.notes[at:])
    return outcome._replace(warnings=outcome.warnings + lost, diagnosis=diag, drawn=None)   # drawn again


def load_extra(with_files: list[str], options: dict):
    from .assemble import load
    from .run import merge_runs

    return merge_runs("with", load(with_files, **options))


def with_note(with_files: list[str]) -> str:
    return "merged series from " + ", ".join(with_files)


def check_runs(paths: list[str], with_files: list[str], job: Job, *, jobs: int,
                split_sources: bool) -> list[Outcome]:
    """Every run under `paths` checked with up to `jobs` worker processes, in order; what is said on
    stderr, and which error ends the check, are the same for any number of jobs."""
    from .assemble import discover

    found: list = []
    for source in paths:            # a path that cannot be read ends the check there, as serially
        try:
            found.append(discover(source, split_sources=split_sources))
        except Exception as exc:    # noqa: BLE001 - raised in its turn by `replay`
            found.append(exc)
            break
    extra: tuple = (None, ())
    if with_files:
        merged, error, said = _caught(lambda: load_extra(with_files, job.load_options), job.debug)
        job = job._replace(extra=merged, extra_note=with_note(with_files),
                           skip_diagnosis=error is not None)
        extra = (error, said)
    tasks = [run_files for group in found if not isinstance(group, Exception) for run_files in group]
    progress = bool(job.load_options.get("progress"))
    return replay(paths, found, _outcomes(job, tasks, jobs, progress), extra)
