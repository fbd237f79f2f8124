"""A console log beside one run is that run's console, never a run of its own.

A training script often writes its metrics through a logger (an MLflow file store under `mlruns/`, a JSONL
under `metrics/`) and its stdout to a log one folder up.  The assembly rule (stabdiag.read.assemble) joins a
folder to an owner only through the folders frameworks attach to a run, so that log would be a run of its
own: a second run beside the real one, with none of its signals, or a copy of them.  Here a folder whose
only logs are consoles, and below which exactly one run sits, gives those consoles to that run, which takes
the folder's name (the folder a user would name); a note says so.  A store that holds one run and logs in
its own folder are joined by the MLflow members step (stabdiag.read.assemble._members).
"""

from __future__ import annotations

import os
from dataclasses import replace
from types import ModuleType

from ._paths import inside


def join_consoles(runs: list, loaders: dict[str, ModuleType]) -> list:
    """`runs` (RunFiles) with each console-only run that has exactly one run below its folder joined to it."""
    consoles = [r for r in runs if r.root and r.files and all(_is_console(loaders.get(p)) for p in r.files)]
    if not consoles:
        return runs
    joined: dict[int, object] = {}
    dropped: set[int] = set()
    for console in consoles:
        top = os.path.abspath(console.root)        # a reader may give its folder as an absolute path
        below = [i for i, r in enumerate(runs) if r is not console and r.root
                 and os.path.abspath(r.root) != top and inside(os.path.abspath(r.root), top)]
        if len(below) != 1 or below[0] in dropped:
            continue
        target = joined.get(below[0], runs[below[0]])
        names = ", ".join(os.path.basename(p) for p in console.files)
        where = os.path.relpath(os.path.abspath(target.root), top)
        note = (f"{names}: the console beside the run's logs ({where}), read with them (a console log beside one "
                "run is never a run of its own)")
        joined[below[0]] = replace(target, name=console.name, root=console.root, files=target.files + console.files,
                                   refused=target.refused + console.refused, notes=target.notes + (note,))
        dropped.add(runs.index(console))
    return [joined.get(i, run) for i, run in enumerate(runs) if i not in dropped]


def _is_console(loader: ModuleType | None) -> bool:
    return loader is not None and loader.__name__.rsplit(".", 1)[-1] == "text"
