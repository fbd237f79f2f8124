"""Files -> training runs: which files belong to one run, and merging them into one Run.

A run is a training run, not a file.  The rule, applied to every file a loader reads:

1. The file belongs first to its loader's folder for it: a TensorBoard event file to its writer's
   folder, a W&B file to its `run-*` folder, any other log to the folder it sits in.
2. That folder joins an *owner* above it when the path from the owner down to it starts with a folder
   that frameworks attach to a run's output directory: `runs/` (the HF Trainer's TensorBoard folder,
   `runs/<Mon DD_HH-MM-SS>_<host>/`), `checkpoint-N/`, `wandb/`, `tensorboard/`, `tb/`, `logs/`, ...
   An owner is a folder that holds a log itself (a tee'd console log, a FileLogger JSONL) or is an
   HF/TRL output directory (`trainer_state.json`, `training_args.bin`, `checkpoint-N/` or such a
   `runs/` folder in it).  Joining repeats upward (a checkpoint of an output dir joins the output dir).
3. Everything else stays apart: sibling experiment folders, and the `run-*` folders of a `wandb/`
   folder that no owner claims are separate runs.  Inside a `wandb/` folder only the W&B reader reads
   (its debug logs, requirements.txt and metadata are never metric logs).
4. A store that holds several runs (an MLflow SQLite store, an MLflow file-store run folder) is read
   run by run: one run per MLflow run, named by its run name; `PATH#experiment=NAME` picks some.

The run is named after its owner folder (relative to the path given), the folder a user would name.

Inside a run, files are read source by source (one per reader and folder) and merged key by key (see
`merge_sources`).  `split_sources=True` keeps the old view: every source its own run.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, replace
from types import ModuleType

from ..errors import ConfigError, InputError
from ._beside import join_consoles
from ._paths import cannot_open, inside, special_kind, why_not_readable
from ._peers import split_peers
from .ending import settled_meta
from .formats import loader_for, uri_loader
from .formats.tabular import is_rollout_dump
from .run import Run, run_name_for
from .runconfig import read_run_config
from .sources import Source, merge_sources

_SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints", "node_modules"}
_ATTACHED_NAMES = {"runs", "wandb", "tensorboard", "tensorboard_log", "tensorboard_logs", "tb", "tb_logs",
                   "logs", "log"}
_ATTACHED_PATTERN = re.compile(r"^(checkpoint|global_step|step|iter)[-_]?\d+$")
_HF_LOGDIR = re.compile(r"^[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_")    # runs/Nov30_18-44-57_host
_CHECKPOINT = re.compile(r"^checkpoint-\d+$")
# files that look like logs by their extension; named in the error when nothing at all could be read
_LOGLIKE = {".log", ".txt", ".out", ".err", ".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".gz"}
_TAIL_BYTES = 64 << 10                        # how much of an unread log's end is searched for its death
_NOT_LOGS = {"requirements.txt", "debug.log", "debug-internal.log", "debug-core.log", "README.txt"}


@dataclass(frozen=True, slots=True)
class RunFiles:
    """The files (or the URI) of one training run, its display name and its owner folder."""

    name: str
    files: tuple[str, ...] = ()
    uri: str | None = None
    root: str = ""
    refused: tuple[tuple[str, str], ...] = ()     # (file, why) log-like files no reader took
    skipped: tuple[tuple[str, str], ...] = ()     # (path, why) unreadable files and folders: warnings
    member: str | None = None                     # the run's id inside a store that holds several (MLflow)
    notes: tuple[str, ...] = ()                   # how the files were told apart (stabdiag.read._peers)
    samples: tuple[str, ...] = ()                 # files of logged samples (completions), read lazily


def discover(source: str | os.PathLike[str], *, split_sources: bool = False, one_run: bool = False,
             split_files: bool = False) -> list[RunFiles]:
    """The training runs at a path: a file is one run; in a directory, files are grouped by the rule
    in this module's docstring.  An unreadable sub-folder is reported, not skipped silently."""
    return discover_tree(source, split_sources=split_sources, one_run=one_run, split_files=split_files)[0]


def discover_tree(source: str | os.PathLike[str], *, split_sources: bool = False, one_run: bool = False,
                  split_files: bool = False) -> tuple[list[RunFiles], tuple[tuple[str, str], ...]]:
    """`discover`'s runs, and what in the tree was not read, each with why: every folder beside the
    runs that holds no readable log (an empty run dir, one whose console holds only a traceback), and
    every log-like file outside the runs that no reader took.  Console logs and tables side by side in
    one folder are one run or several as stabdiag.read._peers decides; `one_run` keeps them one run,
    `split_files` makes each its own."""
    if one_run and split_files:
        raise ConfigError("--one-run and --split-files: give one of them, not both")
    seen: dict = {"peers": {"one_run": one_run, "split_files": split_files}}
    runs = _discover(source, split_sources, seen)
    seen.pop("peers")
    return runs, _not_read(runs, **seen) if seen else ()


def _discover(source: str | os.PathLike[str], split_sources: bool, seen: dict) -> list[RunFiles]:
    """`discover`; `seen` gets what `_not_read` needs: the folders walked, the files refused, the unreadable."""
    source = os.fspath(source)
    online = uri_loader(source)
    if online is not None:
        if hasattr(online, "run_uris"):          # a URI naming several runs (an MLflow experiment)
            return [RunFiles(name=name, uri=uri) for uri, name in online.run_uris(source)]
        return [RunFiles(name=source.rstrip("/").rsplit("/", 1)[-1], uri=source)]
    source, selector = _selector(source)
    problem = why_not_readable(source)
    if problem is not None:
        raise InputError(source, problem)
    if os.path.isfile(source):
        single = _single_file(source)
        return _members([single], source, selector, {source: loader_for(source)})
    folders: dict[str, int] = {}
    sample_files: list[str] = []
    claimed, refused, unreadable = _walk(source, folders, sample_files)
    seen.update(source=source, folders=folders, refused=refused, unreadable=unreadable, samples=sample_files)
    if not claimed:
        own = next((why for path, why in unreadable if os.path.normpath(path) == os.path.normpath(source)), None)
        if own is not None:
            raise InputError(source, own)
        raise InputError(source, "no metric logs found in this directory" + _refusals(source, refused + unreadable))
    groups: dict[str, list[str]] = {}
    roots = {_loader_root(path, loader) for path, loader in claimed}
    owners = _Owners(source, roots)
    for path, loader in claimed:
        base = _loader_root(path, loader)
        key = base if split_sources else owners.owner_of(base)
        groups.setdefault(key, []).append(path)
    runs = []
    for root in sorted(groups):
        refused_here = tuple((f, why) for f, why in refused if inside(f, root))
        runs.append(RunFiles(name=_display_name(root, source), files=tuple(groups[root]), root=root,
                             refused=refused_here))
    if not split_sources:
        runs = join_consoles(split_peers(runs, dict(claimed), **seen["peers"]), dict(claimed))
    return _with_samples(_with_skipped(_members(runs, source, selector, dict(claimed)), unreadable), sample_files)


def load_run(run_files: RunFiles, **options) -> Run:
    """Read every file of one run and merge them; a file that cannot be read is a warning on the run,
    and only a run with nothing readable is an error (naming every file tried and why)."""
    if run_files.uri is not None:
        run = uri_loader(run_files.uri).load_uri(run_files.uri, **options)
        samples = _online_samples(run_files.uri) if run_files.uri.startswith("wandb://") else None
        return Run(run.name, run.series, run.sources, settled_meta(run.meta, run.series), run.notes, run.warnings,
                   samples)
    sources: list[Source] = []
    errors: list[InputError] = []
    for loader, folder, paths in _source_groups(run_files.files):
        try:
            group = getattr(loader, "load_group", None)
            if run_files.member is not None and hasattr(loader, "load_member"):
                part = loader.load_member(paths[0], run_files.member, **options)
            else:
                part = group(list(paths), **options) if group is not None else loader.load(paths[0], **options)
        except InputError as exc:
            errors.append(exc if exc.path else InputError(paths[0], exc.problem, line=exc.line, key=exc.key))
            continue
        except MemoryError:     # past every budget (stabdiag.read._budget): this file is lost, not the check
            errors.append(InputError(paths[0], "ran out of memory reading it; not read"))
            continue
        sources.append(Source(loader.__name__.rsplit(".", 1)[-1], folder, paths, part))
    root = run_files.root or os.path.dirname(run_files.files[0])
    failed = [(exc.path, _problem(exc)) for exc in errors]
    if not sources:
        if len(errors) == 1 and not run_files.refused and not run_files.skipped:
            raise errors[0]
        tried = failed + list(run_files.refused) + list(run_files.skipped)
        raise InputError(root, "no readable metric log" + _refusals(root, tried, every=True))
    run = merge_sources(run_files.name, sources, root)
    warnings = tuple(f"{_rel(path, root)}: not read: {why}" for path, why in failed + list(run_files.skipped))
    meta, config_notes = _with_run_config(run.meta, root if run_files.root else None)
    meta = settled_meta(meta, run.series, root)     # how it ended, against its planned length
    samples = _sample_source(run_files.samples, meta.get("config")) if run_files.samples else None
    return Run(run.name, run.series, run.sources, meta, run_files.notes + run.notes + tuple(config_notes) + warnings,
               run.warnings + warnings, samples)


def _with_run_config(meta: dict, folder: str | None) -> tuple[dict, list[str]]:
    """The run's configuration files beside its logs, under W&B's config where the run has one."""
    if folder is None:
        return meta, []
    config, used, notes = read_run_config(folder)
    if not config:
        return meta, notes
    merged = {**config, **(meta.get("config") or {})}
    return {**meta, "config": merged, "config_files": used}, notes


def load(sources, *, split_sources: bool = False, one_run: bool = False, split_files: bool = False,
         **options) -> list[Run]:
    """Every training run found under one or more paths or URIs.  In a tree of runs, a run that cannot
    be read at all is a warning on the others (naming it and why); only a path where nothing at all
    could be read is an error.  `one_run` / `split_files`: see `discover_tree`."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    runs: list[Run] = []
    for source in sources:
        found = discover(source, split_sources=split_sources, one_run=one_run, split_files=split_files)
        loaded, failed = [], []
        for run_files in found:
            try:
                loaded.append(load_run(run_files, **options))
            except InputError as exc:
                if len(found) == 1:
                    raise
                failed.append((run_files.name, exc))
        lost = lost_runs(source, failed, loaded=len(loaded))
        if lost:
            first = loaded[0]
            loaded[0] = Run(first.name, first.series, first.sources, first.meta, first.notes + lost,
                            first.warnings + lost, first.samples)
        runs.extend(loaded)
    return runs


def lost_runs(source: str | os.PathLike[str], failed: list[tuple[str, InputError]], *, loaded: int) -> tuple[str, ...]:
    """The notes, for the first run of a tree that could be read, naming each run that could not and why;
    an InputError when no run under `source` could be read."""
    if not loaded:
        raise failed[0][1] if len(failed) == 1 else InputError(
            os.fspath(source), "no run could be read (" + "; ".join(f"{name}: {exc}" for name, exc in failed) + ")")
    return tuple(f"run {name} not read: {exc}" for name, exc in failed)


# --- what a tree holds that was not read --------------------------------------------------------------

def _not_read(runs: list[RunFiles], *, source: str, folders: dict[str, int], refused: list[tuple[str, str]],
              unreadable: list[tuple[str, str]], samples: tuple[str, ...] | list[str] = ()
              ) -> tuple[tuple[str, str], ...]:
    """(path, why) for each folder beside the runs that holds no readable log, and each log-like file
    outside every run that no reader took (see `discover_tree`)."""
    top = os.path.normpath(source)
    roots = {os.path.normpath(r.root) for r in runs if r.root}
    roots |= {os.path.normpath(os.path.dirname(r.files[0])) for r in runs if not r.root and r.files}
    holding: set[str] = set()                  # folders with a run in or below them
    for root in roots:
        while inside(root, top) and root not in holding:
            holding.add(root)
            root = os.path.dirname(root)
    total: dict[str, int] = dict.fromkeys(folders, 0)
    for folder, count in folders.items():       # files at or below each folder
        while folder in total:
            total[folder] += count
            if folder == top:
                break
            folder = os.path.dirname(folder)
    parents_of_runs = {os.path.dirname(r) for r in roots} | {top}
    out: list[tuple[str, str]] = []
    named: list[str] = []
    for folder in sorted(folders):
        if folder == top or folder in holding or any(inside(folder, r) for r in roots):
            continue
        if os.path.dirname(folder) not in parents_of_runs or any(inside(folder, n) for n in named):
            continue
        within = [(p, why) for p, why in refused + unreadable if inside(p, folder)]
        if within and all(is_rollout_dump(p) for p, _ in within):
            continue                    # stabdiag probe's inputs (rollouts and a model), not a run
        if not within and any(inside(p, folder) for p in samples):
            continue                    # logged samples, attached to a run or beside several
        if not within and total.get(folder, 0) == 1 and os.path.isfile(os.path.join(folder, "meta.yaml")):
            continue                    # an MLflow experiment with no runs (every store has "Default")
        named.append(folder)
        if within:
            why = "; ".join(f"{_rel(p, folder)}: {w}" for p, w in within[:3]) + (
                f"; and {len(within) - 3} more" if len(within) > 3 else "")
        elif total.get(folder, 0) == 0:
            why = "an empty folder"
        else:
            why = f"no metric log ({total[folder]} file(s), none in a format stabdiag reads)"
        out.append((folder, why))
    for path, why in refused:
        if not any(inside(path, r) for r in roots) and not any(inside(path, n) for n in named) \
                and not is_rollout_dump(path):
            out.append((path, why))
    return tuple(out)


# --- stores that hold several runs (MLflow) -----------------------------------------------------------

def _selector(source: str):
    """`mlflow.db#experiment=nightly` -> (the path, the selector); a path that exists as given, or whose
    part before the `#` does not exist either, has none."""
    path, _, fragment = source.partition("#")
    if "#" not in source or os.path.lexists(source) or not os.path.lexists(path):
        return source, None
    from .formats.mlflow._common import parse_selector

    return path, parse_selector(fragment, source)


def _members(runs: list[RunFiles], source: str, selector, loaders: dict[str, ModuleType]) -> list[RunFiles]:
    """Each run of a store file (an MLflow SQLite store, a file-store run folder) as a run of its own,
    named by its run name (then its experiment, then its id, where names repeat); the store's other
    files are read with the run they belong to."""
    out: list[RunFiles] = []
    stored: list[tuple[RunFiles, str, str, str, str]] = []     # (run files, path, id, name, experiment)
    store_label: dict[str, str] = {}
    beside: dict[int, tuple[str, ...]] = {}     # a store's one run: the loose logs beside it (see below)
    stores = 0
    for run in runs:
        rest = []
        first = len(stored)
        for path in run.files:
            listing = getattr(loaders.get(path), "members", None)
            if listing is None:
                rest.append(path)
                continue
            stores += 1
            stored.extend((run, path, run_id, name, group) for run_id, name, group in listing(path, selector))
            store = loaders[path].store_of(path) if hasattr(loaders[path], "store_of") else path
            store_label[path] = os.path.relpath(store, source) if inside(store, source) and \
                os.path.normpath(store) != os.path.normpath(source) else os.path.basename(store)
        if rest and len(stored) - first == 1 and selector is None:
            # a store that holds one run and logs beside it (the loop's console): one training run, read
            # together; a console there is never a run of its own
            beside[first] = tuple(rest)
        elif rest:
            out.append(run if len(rest) == len(run.files) else replace(run, files=tuple(rest)))
    if selector is not None and not stored:
        what = "an MLflow store" if not stores else f"a run that matches {selector.describe()}"
        raise InputError(source, f"#{selector.describe()} selects runs of an MLflow store; found no {what} here")
    if stores and not stored and not out:
        raise InputError(source, "a file of an MLflow run; check its run folder or the whole store (mlruns/)")
    if selector is not None:
        out = []                         # a selector reads the store's runs only
    labels = [[name, f"{group}/{name}", f"{store_label[path]}:{group}/{name}", f"{store_label[path]}:{group}/{name} "
               f"({run_id[:8]})"] for _, path, run_id, name, group in stored]
    for i, (run, path, run_id, _, _) in enumerate(stored):
        # the run name, with its experiment, then its store, then its id where names repeat
        name = next(label for level, label in enumerate(labels[i])
                    if level == 3 or sum(1 for other in labels if other[level] == label) == 1)
        logs = beside.get(i, ())
        said = ", ".join(os.path.basename(p) for p in logs) + ":"
        notes = (f"{said} read with the MLflow run beside it, the store's only run (a log beside a store is never "
                 "a run of its own)",) if logs and not any(n.startswith(said) for n in run.notes) else ()
        out.append(RunFiles(name=name, files=(path, *logs), root="", refused=run.refused, member=run_id,
                            notes=run.notes + notes))
    return out


# --- finding files ------------------------------------------------------------------------------------

def _single_file(path: str) -> RunFiles:
    """A file given by name (`discover` has checked that it opens)."""
    if _is_samples(os.path.basename(path)) and _sample_kind(path) not in (None, "rollouts"):
        raise InputError(path, "logged samples (completions), not a metric log; check the run's folder, or print "
                               "a step's samples with stabdiag samples FILE --step S")
    loader = loader_for(path)
    if loader is None and is_rollout_dump(path):
        raise InputError(path, "a rollout dump, not a metric log; measure its drift with "
                               "stabdiag probe FILE --model DIR, then check the run --with the series")
    died = _died_before_first_step(path) if loader is None else None
    if died is not None:
        raise InputError(path, died)
    if loader is None:
        raise InputError(path, "not a metric log stabdiag can read (expected CSV, TSV, JSONL, Parquet, a "
                               "TensorBoard event file, a W&B run, trainer_state.json, a notebook or a "
                               "framework console log)")
    # a file that belongs to a run directory (an event file, a .wandb log) is named after it
    named = run_name_for(loader.run_root(path)) if hasattr(loader, "run_root") else run_name_for(path)
    return RunFiles(name=named, files=(path,), root=os.path.dirname(path))


def _walk(source: str, folders: dict[str, int] | None = None, samples: list[str] | None = None
          ) -> tuple[list[tuple[str, ModuleType]], list[tuple[str, str]], list[tuple[str, str]]]:
    """(file, reader) for every metric log under `source`, the log-like files no reader takes, and
    what could not be read at all (folders that could not be listed, files that cannot be opened, named
    pipes and devices where a log was expected), each with why; `folders` gets each folder walked and
    how many files it holds, `samples` every file of logged samples (never read as metrics)."""
    claimed: list[tuple[str, ModuleType]] = []
    refused: list[tuple[str, str]] = []
    unreadable: list[tuple[str, str]] = []

    def on_error(exc: OSError) -> None:
        where = exc.filename or source
        unreadable.append((where, f"cannot list this folder ({exc.strerror or exc})"))

    top = os.path.realpath(source)
    for dirpath, dirnames, filenames in os.walk(source, onerror=on_error):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        in_wandb = "wandb" in os.path.relpath(dirpath, source).split(os.sep)
        for d in list(dirnames):            # os.walk lists a linked folder but never enters it
            link = os.path.join(dirpath, d)
            if os.path.islink(link):
                dirnames.remove(d)
                problem = _link_problem(link, top, in_wandb)
                if problem != "skip":
                    unreadable.append((link, problem))
        if folders is not None:
            folders[os.path.normpath(dirpath)] = len(filenames)
        for fname in sorted(filenames):
            path = os.path.join(dirpath, fname)
            if fname in _NOT_LOGS:
                continue
            problem = _not_a_file(path, fname, in_wandb, top)
            if problem == "skip":
                continue
            if problem is not None:
                unreadable.append((path, problem))
                continue
            kind = _sample_kind(path) if samples is not None and _is_samples(fname) else None
            if kind is not None:
                samples.append(path)
                if kind != "rollouts":      # a rollout dump is also refused as a metric log, as it always was
                    continue
            loader = loader_for(path)
            if loader is not None and (not in_wandb or loader.__name__.endswith(".wandb")):
                claimed.append((path, loader))
            elif not in_wandb and os.path.splitext(fname.lower())[1] in _LOGLIKE:
                refused.append((path, _why_refused(path)))
    return claimed, refused, unreadable


# The readers of logged samples load only where a file's name allows it to be one, or a run has some:
# a check of a metrics CSV never imports them.
def _sample_kind(path: str):
    from .samples import sample_kind

    return sample_kind(path)


def _sample_source(paths, config):
    from .samples import SampleSource

    return SampleSource.of(paths, config=config)


def _online_samples(uri: str):
    from .samples import online_source

    return online_source(uri)


def _is_samples(fname: str) -> bool:
    """A file whose name allows it to be a log of samples (the content decides: read.samples.sample_kind)."""
    low = fname.lower()
    return low.endswith((".jsonl", ".jsonl.gz", ".ndjson", ".parquet", ".pq", ".table.json"))


def _with_samples(runs: list[RunFiles], samples: list[str]) -> list[RunFiles]:
    """Each file of samples on the run whose folder holds it (the deepest), else on the only run; samples
    beside several runs and in none of them are left alone."""
    if not samples or not runs:
        return runs
    found: dict[int, list[str]] = {}
    for path in samples:
        owners = [i for i, run in enumerate(runs) if run.root and inside(path, run.root)]
        if owners:
            owner = max(owners, key=lambda i: len(runs[i].root))
        elif len(runs) == 1:
            owner = 0
        else:
            continue
        found.setdefault(owner, []).append(path)
    return [replace(run, samples=tuple(found[i])) if i in found else run for i, run in enumerate(runs)]


def _died_before_first_step(path: str) -> str | None:
    """For a log no reader took: "died before its first logged step: <the exception>" when its tail is a
    traceback (or another death) and it holds no metric line, else None."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _TAIL_BYTES))
            raw = fh.read()
    except OSError:
        return None
    if b"\x00" in raw:
        return None
    from .ending.console import died_before_first_step  # only for a file no reader took

    return died_before_first_step(raw.decode("utf-8", errors="replace"))


def _why_refused(path: str) -> str:
    return _died_before_first_step(path) or "no metric lines of a format stabdiag reads"


def _not_a_file(path: str, fname: str, in_wandb: bool, top: str) -> str | None:
    """"skip" for what is never read and loses nothing (a link into the tree, a socket with no log's
    name, anything special inside W&B's folders), why a file is not read (a link out of the tree, a
    pipe or device whatever its name, a log that cannot be opened), or None for a regular, readable file.
    Nothing here opens a pipe or a device: the reader would block, or never end."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot look it up ({exc.strerror or exc})"
    looks_like_log = os.path.splitext(fname.lower())[1] in _LOGLIKE or fname.endswith((".json", ".wandb")) \
        or "tfevents" in fname
    if stat.S_ISLNK(mode):                 # quiet for a file whose extension says it is no log (code)
        return _link_problem(path, top, in_wandb or (not looks_like_log and "." in fname.lstrip(".")))
    kind = special_kind(mode)
    if kind is not None:          # a pipe or a device never belongs in a run dir, whatever its name: said
        blocks = stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        return f"{kind}, not a regular file" if (looks_like_log or blocks) and not in_wandb else "skip"
    return cannot_open(path)


def _link_problem(link: str, top: str, quiet: bool) -> str:
    """Why a symbolic link in the tree is not followed, or "skip" when not following it loses nothing: a
    link into the tree points at what is read where it lies; `quiet` ones are W&B's own (`latest-run`,
    files saved live) and links to files whose extension says they are no log (code, a checkpoint; an
    MLflow metric file has no extension).  A link out of the tree
    is never followed (a downloaded tree could point the reader anywhere on the machine: a pipe, a
    device, someone's files) and is said, with where it points."""
    target = os.path.realpath(link)
    if quiet or inside(target, top):
        return "skip"
    return f"a symbolic link to {target}, outside the checked folder; not followed (check that path itself)"


def _loader_root(path: str, loader: ModuleType) -> str:
    root = getattr(loader, "run_root", None)
    return root(path) if root is not None else os.path.dirname(path)


class _Owners:
    """Which folder a loader's folder belongs to (rule 2 of the module docstring), with the folder
    listings it needs read once."""

    def __init__(self, source: str, roots: set[str]) -> None:
        self.source = os.path.normpath(source)
        self.roots = {os.path.normpath(r) for r in roots}
        self._hf: dict[str, bool] = {}

    def owner_of(self, folder: str) -> str:
        folder = os.path.normpath(folder)
        while True:
            above = self._owner_above(folder)
            if above is None:
                return folder
            folder = above

    def _owner_above(self, folder: str) -> str | None:
        child, parent = folder, os.path.dirname(folder)
        while parent != child and inside(parent, self.source):
            if _attached(os.path.basename(child)) and (parent in self.roots or self._is_output_dir(parent)):
                return parent
            child, parent = parent, os.path.dirname(parent)
        return None

    def _is_output_dir(self, folder: str) -> bool:
        if folder not in self._hf:
            self._hf[folder] = _is_hf_output_dir(folder)
        return self._hf[folder]


def _attached(name: str) -> bool:
    return name in _ATTACHED_NAMES or _ATTACHED_PATTERN.match(name) is not None


def _is_hf_output_dir(folder: str) -> bool:
    """An HF Trainer / TRL output directory, recognised by what the Trainer writes into it."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if "trainer_state.json" in names or "training_args.bin" in names:
        return True
    if any(_CHECKPOINT.match(n) and os.path.isdir(os.path.join(folder, n)) for n in names):
        return True
    if "runs" in names:
        try:
            return any(_HF_LOGDIR.match(n) for n in os.listdir(os.path.join(folder, "runs")))
        except OSError:
            return False
    return False


def _display_name(root: str, source: str) -> str:
    rel = os.path.relpath(root, source)
    if rel == "." or rel.startswith(".."):
        return run_name_for(root if rel.startswith("..") else source)
    return rel.replace(os.sep, "/")


def _source_groups(files: tuple[str, ...]) -> list[tuple[ModuleType, str, tuple[str, ...]]]:
    """The run's files as sources: the files one reader reads together (a TensorBoard writer's folder,
    a W&B run folder, a folder of notebooks), every other file on its own; in file order."""
    groups: dict[tuple[str, str], list[str]] = {}
    loaders: dict[str, ModuleType] = {}
    for path in files:
        loader = loader_for(path)
        if loader is None:
            continue
        together = hasattr(loader, "load_group")
        key = (loader.__name__, _loader_root(path, loader) if together else path)
        loaders[loader.__name__] = loader
        groups.setdefault(key, []).append(path)
    return [(loaders[name], folder if os.path.isdir(folder) else os.path.dirname(folder), tuple(paths))
            for (name, folder), paths in groups.items()]


def _problem(exc: InputError) -> str:
    where = f"line {exc.line}: " if exc.line is not None else ""
    return where + (f"[{exc.key}] " if exc.key else "") + exc.problem


def _rel(path: str, root: str) -> str:
    rel = os.path.relpath(path, root) if root else path
    return path if rel.startswith("..") else rel


def _refusals(root: str, refused: list[tuple[str, str]] | tuple[tuple[str, str], ...], *,
              every: bool = False) -> str:
    if not refused:
        return ""
    shown = refused if every else refused[:8]
    text = "; ".join(f"{_rel(f, root)}: {why}" for f, why in shown)
    more = f"; and {len(refused) - len(shown)} more" if len(refused) > len(shown) else ""
    return f" (tried {text}{more})"


def _with_skipped(runs: list[RunFiles], unreadable: list[tuple[str, str]]) -> list[RunFiles]:
    """Each unreadable file or folder as a warning on the run whose folder holds it (else the first run)."""
    if not unreadable:
        return runs
    by_run: dict[int, list[tuple[str, str]]] = {}
    for path, why in unreadable:
        owner = next((i for i, run in enumerate(runs) if run.root and inside(path, run.root)), 0)
        by_run.setdefault(owner, []).append((path, why))
    return [replace(run, skipped=run.skipped + tuple(by_run.get(i, ()))) for i, run in enumerate(runs)]
