"""Checking many runs at once: `check_many` reads every run under some paths and judges each as
`stabdiag check` does, one at a time or in a pool of worker processes.

    batch = stabdiag.check_many(["runs/"], jobs=8)
    batch.raise_for_error()
    for run in batch.runs:
        print(run.name, run.diagnosis.verdict)

Each run is loaded and diagnosed on its own (in a worker process when `jobs` allows), and what it said
(its warnings, an error, Python warnings) comes back as data; the runs, what was not read and what a
serial check says come back in the order a serial check says them, so that nothing in the result depends
on `jobs`.  Nothing is printed: `Batch.messages` holds what a check says on stderr, in order, and
`Batch.error` the error that ends it, for the caller (the CLI) to say.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from .errors import ConfigError, StabdiagError
from .judge.config import POOL_MAX_SERIAL_CORES, POOL_MIN_BYTES

if TYPE_CHECKING:
    from .judge.diagnosis import Diagnosis


class Message(NamedTuple):
    """One thing a serial check says on stderr, in its turn.

    kind "error": a path nothing could be read from, beside paths that could (`text` is the error);
    "warning": a run's warning (`text` is "RUN: what"); "python": a Python warning raised while reading
    or judging a run (`text` its message, with its category, file and line, to re-issue with
    `warnings.warn_explicit`)."""

    kind: str
    text: str
    category: type[Warning] | None = None
    filename: str = ""
    lineno: int = 0


class CheckedRun(NamedTuple):
    """One run read and judged: its name, its diagnosis, its warnings, and, where `draw` asked for it,
    its part of the terminal report drawn where it was judged."""

    name: str
    diagnosis: Diagnosis | None
    warnings: tuple[str, ...] = ()
    drawn: str | None = None


class Batch(NamedTuple):
    """What `check_many` found: the runs read, in discovery order; what was not read, each with why;
    what a serial check says on stderr, in order; and the error that ends the check after those
    messages (None when every run was judged)."""

    runs: tuple[CheckedRun, ...]
    not_read: tuple[tuple[str, str], ...] = ()
    messages: tuple[Message, ...] = ()
    error: Exception | None = None

    @property
    def diagnoses(self) -> list[Diagnosis]:
        return [run.diagnosis for run in self.runs]

    def raise_for_error(self) -> None:
        """Raise `error`, if the check ended with one (as httpx's `Response.raise_for_status`)."""
        if self.error is not None:
            raise self.error


def check_many(paths: Sequence[str | os.PathLike[str]], *, jobs: int | None = None,
               mapping: dict[str, str] | None = None, select: Sequence[str] | None = None,
               ignore: Sequence[str] | None = None, params: dict[str, dict[str, float]] | None = None,
               rules_dirs: Sequence[str] | None = None, guess: bool = True,
               with_files: Sequence[str] = (), split_sources: bool = False, one_run: bool | None = None,
               split_files: bool | None = None, step_col: str | None = None,
               refresh: bool = False, gpus: int | None = None, gpu_hour_cost: float | None = None,
               settings=None, rules: tuple | None = None, trends: bool = False, draw: dict | None = None,
               progress: bool = False, debug: bool = False) -> Batch:
    """Every run under `paths` (files, run directories, trees of runs, wandb:// URIs) read and judged as
    `stabdiag check` judges it, with up to `jobs` worker processes (default: the usable cores; 1 checks
    one run at a time, here).  The result does not depend on `jobs`.

    The rules: `mapping`, `select`, `ignore`, `params` (per rule id), `rules_dirs` and `guess` as for
    `diagnose`, and `one_run` / `split_files` (the logs side by side in one folder kept one run, or each
    read as its own: see `stabdiag.read.assemble.discover_tree`); or `settings` and `rules` as
    `stabdiag.judge.config.resolve_settings` returns them (the CLI's, config file included), not both.
    `with_files` are series merged into every run (`--with`),
    `gpus` and `gpu_hour_cost` feed the cost estimate.  `trends` attaches the runs' sparkline trends (the
    terminal, Markdown and HTML reports draw them); `draw` (options of `report.terminal.render_run`) has
    each run's part of the terminal report drawn where it was judged.  `progress` shows the readers' bars
    and, with a pool, the runs checked, on a terminal's stderr once a second has passed (as `load`).
    `debug` checks one run at a time, so that a traceback comes from the code that raised.

    A run that cannot be read is named in `not_read` (and, in a tree, on the first run that could be);
    the check ends with `Batch.error` where a serial check stops: no run under the paths could be read,
    a `with_files` file could not, or judging a run raised."""
    from .judge.config import parse_jobs

    if settings is None:
        settings, rules = _settings(mapping, select, ignore, params, rules_dirs, guess, one_run, split_files)
    elif rules is None or any(v is not None for v in (mapping, select, ignore, params, rules_dirs, one_run,
                                                      split_files)):
        raise ConfigError("check_many: give settings and rules together, without mapping, select, ignore, "
                          "params, rules_dirs, one_run or split_files")
    workers = parse_jobs(jobs, "jobs") if jobs is not None else settings.jobs
    chosen = jobs is not None or "jobs" in settings.origin     # else a pool only where it pays
    job = _Job(tuple(rules), settings, {"step_col": step_col, "progress": progress, "refresh": refresh},
               trends=trends, cost={"gpus": gpus, "gpu_hour_cost": gpu_hour_cost}, debug=debug, drawing=draw)
    grouping = {"split_sources": split_sources, "one_run": settings.one_run, "split_files": settings.split_files}
    return _check_runs([os.fspath(p) for p in paths], [os.fspath(w) for w in with_files], job,
                       jobs=workers if chosen else None, cores=workers, grouping=grouping)


def _settings(mapping, select, ignore, params, rules_dirs, guess, one_run, split_files):
    """Settings and rules from the library's arguments, checked as the CLI checks its flags."""
    from .judge.config import check_param, resolve_settings

    settings, rules = resolve_settings(None, {"select": list(select or ()), "ignore": list(ignore or ()),
                                              "rules": list(rules_dirs or ()), "no-guess": not guess,
                                              "map": dict(mapping or {}), "one-run": bool(one_run),
                                              "split-files": bool(split_files)})
    checked: dict[str, dict[str, float]] = {}
    for rule_id, values in (params or {}).items():
        for name, value in values.items():
            rid, number = check_param(rule_id, name, value, rules, f"params[{rule_id!r}][{name!r}]")
            checked.setdefault(rid, {})[name] = number
    return replace(settings, params=checked), rules


def diagnose_run(run, rules, settings, cost: dict | None = None) -> Diagnosis:
    """One run diagnosed under the settings, as `check` does; `cost` carries gpus / gpu_hour_cost."""
    from .advise import advisor
    from .judge.selection import diagnose_selected

    _check_file_map(settings, run)
    return diagnose_selected(run, rules, select=settings.select, ignore=settings.ignore, mapping=settings.map,
                             params=settings.params, guess=not settings.no_guess, advise=advisor(**(cost or {})))


def _check_file_map(settings, run) -> None:
    """A --map entry from a config file names a key the run lacks: say which file and key."""
    for signal, key in settings.map.items():
        where = settings.map_origin.get(signal, "--map")
        if where != "--map" and key not in run.series:
            raise ConfigError(f"{where}: run '{run.name}' has no key '{key}'")


def load_extra(with_files: Sequence[str], options: dict):
    """The `--with` series, merged into one Run."""
    from .read.assemble import load
    from .read.run import merge_runs

    return merge_runs("with", load(list(with_files), **options))


def with_note(with_files: Sequence[str]) -> str:
    return "merged series from " + ", ".join(with_files)


# --- one run: loaded and judged, everything it says kept as data -----------------------------------------

class _Job(NamedTuple):       # NamedTuples, not dataclasses: a third of the cost at every start
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


class _Outcome(NamedTuple):
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
    shown in run order, numpy's about NaN and Inf dropped as the CLI drops them."""
    with warnings.catch_warnings(record=True) as said:
        if not debug:
            warnings.simplefilter("ignore", RuntimeWarning)
        try:
            value, error = fn(), None
        except Exception as exc:      # noqa: BLE001 - said in order by `_replay`, as a serial check would
            value, error = None, exc
    return value, error, tuple((str(w.message), w.category, w.filename, w.lineno) for w in said)


def _diagnose_one(job: _Job, run) -> tuple:
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


def _check_one(job: _Job, run_files) -> _Outcome:
    """Load and diagnose one run; nothing is printed or raised, everything comes back in the outcome."""
    from .read.assemble import load_run

    run, error, said = _caught(lambda: load_run(run_files, **job.load_options), job.debug)
    if run is None:
        return _Outcome(run_files.name, load_error=error, load_said=said)
    loaded = _Outcome(run.name, warnings=run.warnings, notes_at=len(run.notes), load_said=said)
    if job.skip_diagnosis:
        return loaded
    done, error, said = _caught(lambda: _diagnose_one(job, run), job.debug)
    diag, drawn = done or (None, None)
    return loaded._replace(diagnosis=diag, drawn=drawn, error=error, diagnose_said=said)


# --- many runs: a pool of worker processes ------------------------------------------------------------------

_worker_job: _Job | None = None       # in a worker process only: its job, set once by `_start_worker`


def _start_worker(job: _Job) -> None:
    import signal

    global _worker_job
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's: it stops the pool
    _worker_job = job


def _work(run_files) -> _Outcome:
    return _check_one(_worker_job, run_files)


def _pool_context():
    """forkserver where there is one (each worker a fork of a process that imported stabdiag once), else
    spawn; never a fork of this process, which may hold threads and open files."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["stabdiag.batch", "stabdiag.read.assemble", "stabdiag.judge.engine",
                                    "stabdiag.report.sparkline"])
    return context


def _runs_progress(enabled: bool, total: int):
    """'checked 12/500 runs' on stderr while a pool works; like the loaders' bars it appears only after a
    second, so that small trees stay quiet."""
    import sys

    from .read.formats._progress import ByteProgress

    class RunsProgress(ByteProgress):
        def columns(self) -> tuple:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

            return TextColumn("checked"), BarColumn(), MofNCompleteColumn(), TextColumn("runs"), TimeRemainingColumn()

    return RunsProgress(enabled and sys.stderr.isatty(), total, "runs")


def default_workers(cores: int, tasks: list) -> int:
    """The worker processes a check uses when nobody chose: 1 on 2 cores or fewer, or for a tree whose
    files are small (under POOL_MIN_BYTES, measured in stabdiag.judge.config); else the usable cores.
    Online runs and folders (an MLflow store) count as large."""
    if cores <= POOL_MAX_SERIAL_CORES:
        return 1
    total = 0
    for task in tasks:
        if getattr(task, "uri", None):
            return cores
        for path in getattr(task, "files", ()):
            try:
                total += os.path.getsize(path) if os.path.isfile(path) else POOL_MIN_BYTES
            except OSError:
                continue
        if total >= POOL_MIN_BYTES:
            return cores
    return 1


def _outcomes(job: _Job, tasks: list, jobs: int, progress: bool) -> list[_Outcome]:
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
    out: list[_Outcome] = []
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


# --- the serial order ----------------------------------------------------------------------------------------

class _Ended(Exception):
    """Ends `_replay` with the error a serial check stops on, once what comes before it is recorded."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _replay(paths: list[str], found: list, outcomes: list[_Outcome], extra: tuple,
            unread: list | None = None) -> Batch:
    """The runs read and what was not read (path, why), with what a serial check says in its order:
    per path, the Python warnings of loading and an `error:` line when nothing under it could be read
    (the error that ends the check instead when nothing at all could be); the runs' `warning:` lines;
    a --with error; then run by run, the Python warnings of diagnosing and the first error."""
    messages: list[Message] = []
    loaded: list[_Outcome] = []
    not_read: list[tuple[str, str]] = []
    try:
        _replay_into(messages, loaded, not_read, paths, found, outcomes, extra, unread)
    except _Ended as ended:
        return Batch(_checked(loaded), tuple(not_read), tuple(messages), ended.error)
    return Batch(_checked(loaded), tuple(not_read), tuple(messages))


def _replay_into(messages: list[Message], loaded: list[_Outcome], not_read: list[tuple[str, str]],
                 paths: list[str], found: list, outcomes: list[_Outcome], extra: tuple, unread: list | None) -> None:
    from .errors import InputError
    from .read.assemble import lost_runs

    def say(said: tuple) -> None:
        messages.extend(Message("python", message, category, filename, line)
                        for message, category, filename, line in said)

    results = iter(outcomes)
    errors: list[InputError] = []           # a path nothing could be read from, beside others that could
    for index, (source, group) in enumerate(zip(paths, found)):
        if isinstance(group, Exception):
            if not isinstance(group, InputError):
                raise _Ended(group)
            errors.append(group)
            not_read.append((source, group.problem))
            continue
        mine, failed = [], []
        for outcome in (next(results) for _ in group):
            say(outcome.load_said)
            error = outcome.load_error
            if error is not None and not isinstance(error, InputError):
                raise _Ended(error)
            (mine.append(outcome) if error is None else failed.append((outcome.name, error)))
        if not mine:
            try:
                lost_runs(source, failed, loaded=0)
            except InputError as exc:
                errors.append(exc)
                not_read.append((source, exc.problem))
            continue
        lost = lost_runs(source, failed, loaded=len(mine))
        if lost:
            mine[0] = _with_lost(mine[0], lost)
        not_read.extend((name, str(exc)) for name, exc in failed)
        not_read.extend(unread[index] if unread else ())
        loaded.extend(mine)
    if not loaded and errors:
        raise _Ended(errors[0])
    messages.extend(Message("error", str(error)) for error in errors)
    messages.extend(Message("warning", f"{outcome.name}: {warning}") for outcome in loaded
                    for warning in outcome.warnings)
    extra_error, extra_said = extra
    say(extra_said)
    if extra_error is not None:
        raise _Ended(extra_error)
    for outcome in loaded:
        say(outcome.diagnose_said)
        if outcome.error is not None:
            raise _Ended(outcome.error)


def _checked(loaded: list[_Outcome]) -> tuple[CheckedRun, ...]:
    return tuple(CheckedRun(o.name, o.diagnosis, o.warnings, o.drawn) for o in loaded)


def _with_lost(outcome: _Outcome, lost: tuple[str, ...]) -> _Outcome:
    """The first readable run of a tree carries the notes on the runs that could not be read."""
    diag = outcome.diagnosis
    if diag is not None:
        at = outcome.notes_at
        diag = replace(diag, notes=diag.notes[:at] + lost + diag.notes[at:])
    return outcome._replace(warnings=outcome.warnings + lost, diagnosis=diag, drawn=None)   # drawn again


def _check_runs(paths: list[str], with_files: list[str], job: _Job, *, jobs: int | None, grouping: dict,
                cores: int = 1) -> Batch:
    """Every run under `paths` checked with up to `jobs` worker processes (None: `default_workers` of the
    `cores`), in order; what is said, and which error ends the check, are the same for any number of jobs.
    `grouping`: split_sources, one_run and split_files, as `discover_tree` takes them."""
    from .errors import InputError
    from .read.assemble import discover_tree

    found: list = []
    unread: list = []
    for source in paths:            # a path that cannot be read is named; any other error ends the check
        try:
            runs, missed = discover_tree(source, **grouping)
            found.append(runs)
            unread.append(missed)
        except Exception as exc:    # noqa: BLE001 - ends the check in its turn (`_replay`)
            found.append(exc)
            unread.append(())
            if not isinstance(exc, InputError):
                break
    extra: tuple = (None, ())
    if with_files:
        merged, error, said = _caught(lambda: load_extra(with_files, job.load_options), job.debug)
        job = job._replace(extra=merged, extra_note=with_note(with_files), skip_diagnosis=error is not None)
        extra = (error, said)
    tasks = [run_files for group in found if not isinstance(group, Exception) for run_files in group]
    progress = bool(job.load_options.get("progress"))
    jobs = default_workers(cores, tasks) if jobs is None else jobs
    return _replay(paths, found, _outcomes(job, tasks, jobs, progress), extra, unread)
