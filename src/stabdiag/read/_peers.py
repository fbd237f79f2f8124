"""Files of one kind in one folder: one training run, or several kept side by side.

A folder may hold the logs of one run (a run resumed into `train_resumed.log`, pasted blocks of one log,
a train and an eval table) or several runs kept together (`bf16.log` and `fp16.log`; thirty
`*_seed<N>.jsonl`).  Console logs and tables of one folder ("peers": files the same reader reads one by
one) are split into runs by, in this order:

1. their names: files whose names differ by a seed, dtype or variant token (`seed3`, `bf16`, `lr3e-4`, `v2`,
   `run2`) are separate runs; files whose names differ by a resume or rank token (`resumed`, `part2`,
   `rank1`) are one run;
2. their configs: a config file named like each log (`a.yaml` beside `a.log`) that differs between them
   makes them separate runs;
3. what they hold (each file read once): files that share their metric keys, both start at the first
   step and overlap are separate runs, unless they hold the same numbers at the same steps (a table and
   the console that printed them); a file that starts later (a resume) or holds other keys (an eval
   table beside the train table) belongs to the run of the others.

Anything left undecided stays one run, as before.  The decision is said in a note on each run it
touches, with the option that overrides it (`one_run`, `split_files`).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from types import ModuleType

import numpy as np

from .run import is_bookkeeping, run_name_for

_PEER_KINDS = ("text", "tabular")          # readers of one file at a time, whose files may be peers
_DTYPES = {"bf16", "fp16", "fp32", "fp8", "tf32", "bfloat16", "float16", "float32", "int8", "int4", "amp",
           "fp64", "half", "mixed"}
_SEPARATE_WORDS = ("seed", "s", "rs", "run", "trial", "rep", "replica", "exp", "v", "version", "variant", "lr",
                   "bs", "wd", "ablation")
_SEPARATE = re.compile(rf"^(?:{'|'.join(_SEPARATE_WORDS)})[-_]?\d[\d.e+-]*$|^(?:baseline|ablation|control|treatment)$")
_SAME = re.compile(r"^(?:resume[ds]?|resumed|restart(?:ed)?|cont(?:inued)?|continue|part|chunk|segment|rank|"
                   r"node|gpu|worker|proc|local)[-_]?\d*$")
_TOKENS = re.compile(r"[A-Za-z]+[-+]?\d[\w.+-]*|[A-Za-z]+|\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
_CONFIG_EXTS = (".yaml", ".yml", ".json", ".toml", ".cfg", ".args")


def split_peers(runs: list, loaders: dict[str, ModuleType], *, one_run: bool = False,
                split_files: bool = False) -> list:
    """`runs` (RunFiles) with every run whose folder holds several peers split as the module docstring
    says; `loaders` gives each file's reader."""
    if one_run:
        return runs
    out = []
    for run in runs:
        out.extend(_split_run(run, loaders, split_files))
    return out


def _split_run(run, loaders: dict[str, ModuleType], split_files: bool) -> list:
    by_folder: dict[str, list[str]] = {}
    for path in run.files:
        loader = loaders.get(path)
        if loader is not None and loader.__name__.rsplit(".", 1)[-1] in _PEER_KINDS:
            by_folder.setdefault(os.path.dirname(path), []).append(path)
    folders = {folder: paths for folder, paths in by_folder.items() if len(paths) > 1}
    if not folders:
        return [run]
    rest = [p for p in run.files if not any(p in paths for paths in folders.values())]
    runs, notes = [], []
    for folder, paths in folders.items():
        groups, why = (([[p] for p in paths], "--split-files") if split_files else _groups(paths, loaders))
        if len(groups) == 1:
            notes.append(f"{_names(paths)} read as one run ({why}; split_files / --split-files reads them apart)")
            rest.extend(paths)
            continue
        for group in groups:
            name = f"{run.name}/{_group_name(group)}"
            note = (f"{len(paths)} files in {os.path.basename(folder) or folder} read as {len(groups)} runs ({why}); "
                    f"this one: {_names(group)} (one_run / --one-run reads them as one)")
            runs.append(replace(run, name=name, files=tuple(group), notes=run.notes + (note,)))
    if rest:
        kept = [p for p in run.files if p in rest]
        runs.insert(0, replace(run, files=tuple(kept), notes=run.notes + tuple(notes)))
    elif notes:
        runs = [replace(r, notes=r.notes + tuple(notes)) for r in runs]
    return runs


# --- deciding ----------------------------------------------------------------------------------------

class _Files:
    """What the files hold (read once, when the names and configs leave a pair undecided)."""

    def __init__(self, loaders: dict[str, ModuleType]) -> None:
        self.loaders, self.read, self.series = loaders, {}, {}

    def span(self, path: str):
        """(first step, last step, logging interval, metric keys) of the file, or None (not readable)."""
        if path not in self.read:
            self.read[path] = self._span(path)
        return self.read[path]

    def _span(self, path: str):
        try:
            run = self.loaders[path].load(path)
        except Exception:                 # noqa: BLE001 - any file that cannot be read here is read later, and said
            return None
        metrics = {k: s for k, s in run.series.items() if len(s) and not is_bookkeeping(k)}
        if not metrics:
            return None
        self.series[path] = metrics
        series = metrics.values()
        gaps = np.diff(max(series, key=len).steps)
        interval = int(np.median(gaps)) if len(gaps) else 1
        return (min(int(s.steps[0]) for s in series), max(int(s.steps[-1]) for s in series), max(interval, 1),
                set(metrics))


def _groups(paths: list[str], loaders: dict[str, ModuleType]) -> tuple[list[list[str]], str]:
    """The files grouped into runs, and why, in words."""
    parent = {p: p for p in paths}

    def root(p: str) -> str:
        while parent[p] != p:
            p = parent[p]
        return p

    files = _Files(loaders)
    reasons: dict[str, int] = {}
    for i, a in enumerate(paths):
        for b in paths[i + 1:]:
            same, why = _pair(a, b, files)
            reasons[why] = reasons.get(why, 0) + 1
            if same:
                parent[root(b)] = root(a)
    groups: dict[str, list[str]] = {}
    for p in paths:
        groups.setdefault(root(p), []).append(p)
    why = max(reasons, key=reasons.get)
    return list(groups.values()), why


def _pair(a: str, b: str, files: _Files) -> tuple[bool, str]:
    """Whether two peers are one run, and why."""
    by_name = _by_names(a, b)
    if by_name is not None:
        return by_name
    configs = _configs_differ(a, b)
    if configs is not None:
        return False, configs
    span_a, span_b = files.span(a), files.span(b)
    if span_a is None or span_b is None:
        return True, "one of them could not be read to tell"
    (start_a, end_a, step_a, keys_a), (start_b, end_b, step_b, keys_b) = span_a, span_b
    shared = keys_a & keys_b
    if len(shared) * 2 < min(len(keys_a), len(keys_b)):
        return True, "they hold different metrics of one run"
    same_start = abs(start_a - start_b) <= max(step_a, step_b)
    overlap = min(end_a, end_b) - max(start_a, start_b)
    if same_start and overlap > 0 and _same_values(files.series[a], files.series[b], shared):
        return True, "they hold the same values at the same steps (one run's table and its console)"
    if same_start and overlap > 0:
        return False, (f"each starts at the first step and they overlap (steps {max(start_a, start_b)}-"
                       f"{min(end_a, end_b)}) with the same metrics")
    return True, "one starts where the other stopped or later (a resume)"


_PRINTED = 1e-3     # a console prints 4 significant digits or more: values that agree this closely are one run's


def _same_values(a: dict, b: dict, keys: set[str]) -> bool:
    """Whether two files log one run's numbers: at the steps both hold, every shared metric agrees to within
    what a console prints, 3 or more of them on a metric that moves (two seeds of one script share a
    learning-rate schedule, never a loss)."""
    compared = 0
    for key in keys:
        sa, sb = a[key], b[key]
        common, ia, ib = np.intersect1d(sa.steps, sb.steps, return_indices=True)
        if not len(common):
            continue
        va, vb = np.asarray(sa.values, dtype=np.float64)[ia], np.asarray(sb.values, dtype=np.float64)[ib]
        finite = np.isfinite(va) & np.isfinite(vb)
        if not np.allclose(va[finite], vb[finite], rtol=_PRINTED, atol=0.0):
            return False
        if finite.any() and np.ptp(va[finite]) > 0:
            compared += int(finite.sum())
    return compared >= 3


def _tokens(path: str) -> list[str]:
    return [t.lower() for t in _TOKENS.findall(run_name_for(path))]


def _by_names(a: str, b: str) -> tuple[bool, str] | None:
    ta, tb = _tokens(a), _tokens(b)
    differ = [x for x in ta if x not in tb] + [y for y in tb if y not in ta]
    if not differ:
        return None
    kinds = set()
    for token in differ:
        if token in _DTYPES:
            kinds.add("dtype")
        elif _SEPARATE.match(token) or (token.isdigit() and _numbered_apart(ta, tb)):
            kinds.add("seed" if token.startswith(("seed", "s", "rs")) or _after_seed(ta, tb) else "variant")
        elif _SAME.match(token):
            kinds.add("same")
        else:
            return None                    # another word, or a bare number: the contents tell
    if kinds == {"same"}:
        return True, "their names differ by a resume, part or rank token"
    if "same" in kinds:
        return None
    shown = ", ".join(dict.fromkeys(differ))
    return False, f"their names differ by a {'/'.join(sorted(kinds))} token ({shown})"


def _numbered_apart(ta: list[str], tb: list[str]) -> bool:
    """A number right after a seed, run or variant word (`seed_3`, `run-2`) separates runs."""
    return any(second.isdigit() and first in _SEPARATE_WORDS
               for tokens in (ta, tb) for first, second in zip(tokens, tokens[1:]))


def _after_seed(ta: list[str], tb: list[str]) -> bool:
    return any(second.isdigit() and first == "seed" for tokens in (ta, tb) for first, second in zip(tokens, tokens[1:]))


def _configs_differ(a: str, b: str) -> str | None:
    """Why two logs are separate runs by the configs named like them (`a.yaml` beside `a.log`), or None."""
    ca, cb = _config_of(a), _config_of(b)
    if ca is None or cb is None:
        return None
    try:
        with open(ca, "rb") as fa, open(cb, "rb") as fb:
            if fa.read(1 << 20) == fb.read(1 << 20):
                return None
    except OSError:
        return None
    return f"their configs differ ({os.path.basename(ca)}, {os.path.basename(cb)})"


def _config_of(path: str) -> str | None:
    stem = os.path.join(os.path.dirname(path), run_name_for(path))
    return next((stem + ext for ext in _CONFIG_EXTS if stem + ext != path and os.path.isfile(stem + ext)), None)


def _names(paths: list[str]) -> str:
    names = [os.path.basename(p) for p in paths]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _group_name(paths: list[str]) -> str:
    """A run's name from its files: the one file's name, or what the files' names share."""
    stems = [run_name_for(p) for p in paths]
    if len(stems) == 1:
        return stems[0]
    prefix = os.path.commonprefix(stems).rstrip("_-. ")
    return prefix or stems[0]
