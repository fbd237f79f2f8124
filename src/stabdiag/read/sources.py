"""The sources of one training run, and how they merge into one Run.

A source is what one reader read from one place: a TensorBoard writer's folder, a W&B run folder, a
trainer_state.json, a console log, a CSV.  An HF/TRL output directory holds the same history several
times over (events, W&B, trainer_state.json and every checkpoint's copy of it, the tee'd console), so
merging is mostly deduplication, done key by key:

- Ranks.  W&B and TensorBoard hold every logged value at full precision with its wall time (rank 0);
  trainer_state.json and tables hold them at full precision (rank 1); console logs and notebook
  tables print them rounded (rank 2).
- Sources of one rank are successive writes of one history (a checkpoint's copy of trainer_state.json
  and the final one; the second TensorBoard folder or W&B run of a resumed run): they are joined in
  write order, the last write of a step wins, and an earlier write with another value is kept as
  superseded (the run was restarted; see Run.resumed).
- Across ranks the best source of a key is primary.  A lower one adds only the steps the primary lacks
  (a console that outlived the last checkpoint); where both hold a step and disagree beyond rounding, a
  note says so and the primary's value is kept.
- HF names.  trainer_state.json and the console name keys as the Trainer logs them (`loss`,
  `eval_loss`); its TensorBoard and W&B callbacks write `train/loss`, `eval/loss` (transformers'
  `rewrite_logs`).  When both kinds are present the bare names are rewritten the callbacks' way.
- Console steps that were inferred (from the epoch, or by counting records) are mapped onto the exact
  steps of the other sources by matching the printed values in order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from .._stats import median
from .ending import Ending, ending_of_wandb, pick
from .run import Run, Series, is_bookkeeping

_RANK = {"wandb": 0, "tensorboard": 0, "trainer_state": 1, "tabular": 1, "notebook": 2, "text": 2}
_REL_TOL = {0: 1e-5, 1: 1e-5, 2: 2e-3}      # printed values carry about four significant digits
_INFERRED_AXES = ("epoch", "logging_steps", "counted")
_MATCH_LOOKAHEAD = 8                          # records a console may lack between two it printed


@dataclass(frozen=True, slots=True)
class Source:
    """What one reader read from one place, keyed by the file's own metric names."""

    kind: str                    # the reader: wandb, tensorboard, trainer_state, tabular, notebook, text
    folder: str
    files: tuple[str, ...]
    run: Run

    @property
    def rank(self) -> int:
        return _RANK.get(self.kind, 1)

    def label(self, root: str) -> str:
        """The source as a user finds it below the run's folder."""
        if self.kind in ("tensorboard", "wandb") and len(self.files) > 1:
            place = self.folder
        else:
            place = self.files[0]
        rel = os.path.relpath(place, root) if root else place
        return place if rel.startswith("..") else rel


def merge_sources(name: str, sources: list[Source], root: str) -> Run:
    """One Run from the sources of one training run (see the module docstring)."""
    notes: list[str] = []
    sources = _with_callback_names(sources)
    sources = _aligned(sources, root, notes)
    by_rank: dict[int, list[Source]] = {}
    for src in sorted(sources, key=_write_order):
        by_rank.setdefault(src.rank, []).append(src)
    series: dict[str, Series] = {}
    disagreements: dict[tuple[str, str], list[str]] = {}
    fills: dict[str, list[str]] = {}
    keys = dict.fromkeys(k for src in sources for k in src.run.series)
    for key in keys:
        layers = [(rank, group) for rank, group in sorted(by_rank.items())
                  if any(key in s.run.series for s in group)]
        rank, group = layers[0]
        primary = _joined(key, [s for s in group if key in s.run.series], root)
        for low_rank, low_group in layers[1:]:
            lower = _joined(key, [s for s in low_group if key in s.run.series], root)
            primary, differ, added = _fill(primary, lower, _REL_TOL[max(rank, low_rank)])
            if differ and not is_bookkeeping(key):
                disagreements.setdefault((lower.source, primary.source.split(" (+")[0]), []).append(
                    f"{key} at step {differ[0][0]}: {differ[0][1]:.6g} vs {differ[0][2]:.6g}"
                    + (f" (+{len(differ) - 1} more)" if len(differ) > 1 else ""))
            if added:
                fills.setdefault(lower.source, []).append(key)
        series[key] = primary
    for (lower, kept), where in disagreements.items():
        notes.append(f"{lower} and {kept} disagree beyond rounding: {'; '.join(where[:3])}"
                     + (f"; {len(where) - 3} more key(s)" if len(where) > 3 else "") + f"; kept {kept}")
    for lower, added in fills.items():
        notes.append(f"{lower} adds steps the other files lack to {len(added)} key(s) "
                     f"({', '.join(added[:4])}{', ...' if len(added) > 4 else ''})")
    restart_notes, restarts = _restarts(sources, root)
    return _run(name, sources, series, notes + restart_notes, root, restarts)


def _restarts(sources: list[Source], root: str) -> tuple[list[str], int]:
    """Several writers of one kind in one run (two TensorBoard folders, two W&B runs) mean the training
    was started again in the same output dir, whether or not it wrote a step twice: a note per kind, and
    how many times it was started again."""
    notes, restarts = [], 0
    for kind, label in (("tensorboard", "TensorBoard folders"), ("wandb", "W&B runs")):
        parts = sorted((s for s in sources if s.kind == kind), key=_write_order)
        if len(parts) > 1:
            notes.append(f"restarted: {len(parts)} {label} in this run ({', '.join(p.label(root) for p in parts)}), "
                         "joined in the order they were written")
        restarts = max(restarts, len(parts) - 1)
    return notes, restarts


def _run(name: str, sources: list[Source], series: dict[str, Series], notes: list[str], root: str,
         restarts: int) -> Run:
    meta: dict = {}
    for src in sorted(sources, key=lambda s: -s.rank):          # the best source's meta wins
        meta.update(src.run.meta)
    if len(sources) > 1:
        meta["format"] = " + ".join(dict.fromkeys(str(s.run.meta.get("format", s.kind)) for s in sources))
    ending = _ending(sources, series, root)
    meta.pop("ending", None)
    if ending is not None:
        meta["ending"] = ending
    if restarts > 0:
        meta["restarts"] = restarts
    files = tuple(f for src in sources for r in (src.run,) for f in (r.sources or src.files))
    own_notes = tuple(n for src in sources for n in src.run.notes)
    warnings = tuple(w for src in sources for w in src.run.warnings)
    return Run(name, series, files, meta, own_notes + tuple(notes), warnings)


def _ending(sources: list[Source], series: dict[str, Series], root: str) -> Ending | None:
    """How the run ended, from the console tail and W&B's exit record, dated at the last logged step."""
    found = []
    for src in sources:
        ending = src.run.meta.get("ending")
        if isinstance(ending, Ending):
            found.append(replace(ending, source=src.label(root)))
        elif src.kind == "wandb":
            found.extend(e for e in [ending_of_wandb(src.run.meta, src.label(root))] if e is not None)
    ending = pick(found)
    if ending is None:
        return None
    steps = [int(s.steps[-1]) for k, s in series.items() if len(s) and not is_bookkeeping(k)]
    return replace(ending, step=max(steps) if steps else None)


# --- HF names ---------------------------------------------------------------------------------------

def _is_hf_bare(src: Source) -> bool:
    return src.kind == "trainer_state" or (src.kind == "text" and src.run.meta.get("framework") == "HF Trainer")


def _with_callback_names(sources: list[Source]) -> list[Source]:
    callbacks = any(src.rank == 0 and any(k.startswith(("train/", "eval/")) for k in src.run.series)
                    for src in sources)
    if not callbacks:
        return sources
    return [replace(src, run=_renamed(src.run)) if _is_hf_bare(src) else src for src in sources]


def callback_name(key: str) -> str:
    """A key as the HF Trainer's TensorBoard and W&B callbacks write it (transformers' rewrite_logs)."""
    for prefix in ("eval", "test"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1:]}"
    return "train/" + key


def _renamed(run: Run) -> Run:
    series = {callback_name(k): replace(s, key=callback_name(k)) for k, s in run.series.items()}
    return Run(run.name, series, run.sources, run.meta, run.notes, run.warnings)


# --- console steps ----------------------------------------------------------------------------------

def _aligned(sources: list[Source], root: str, notes: list[str]) -> list[Source]:
    """Console sources whose steps were inferred, moved onto the exact sources' steps."""
    exact: dict[str, Series] = {}
    for src in sorted(sources, key=_write_order):
        if src.rank < 2:
            exact.update(src.run.series)
    out = []
    for src in sources:
        if src.rank == 2 and src.run.meta.get("step_axis") in _INFERRED_AXES and exact:
            src, note = _align(src, exact, root)
            notes.append(note)
        out.append(src)
    return out


def _align(src: Source, exact: dict[str, Series], root: str) -> tuple[Source, str]:
    label = src.label(root)
    shared = [k for k, s in src.run.series.items() if k in exact and len(s) >= 3]
    if not shared:
        return src, f"{label}: its steps were inferred and no other file shares a key to check them against"
    # the key with the most distinct values: a constant (a clip ratio of 0) matches anything
    key = max(shared, key=lambda k: (len(np.unique(src.run.series[k].values)), len(src.run.series[k])))
    printed, truth = src.run.series[key], exact[key]
    pairs = _match_in_order(printed.values, truth.values)
    if len(pairs) < max(3, len(printed) // 2):
        return src, (f"{label}: its inferred steps could not be matched to the other files' {key}; its "
                     "points are used only where no other file has the key")
    have = np.array([printed.steps[i] for i, _ in pairs], dtype=np.float64)
    want = np.array([truth.steps[j] for _, j in pairs], dtype=np.float64)

    def move(steps: np.ndarray) -> np.ndarray:
        return np.rint(_extrapolating_interp(steps.astype(np.float64), have, want)).astype(np.int64)

    series = {}
    for k, s in src.run.series.items():
        moved = Series.from_points(k, np.concatenate([move(s.superseded_steps), move(s.steps)]),
                                   np.concatenate([s.superseded_values, s.values]), write_order=False,
                                   stepped_back=s.stepped_back)
        series[k] = moved
    # the reader's note on how it guessed the steps no longer holds: the note returned here replaces it
    guessed = src.run.meta.get("step_axis_note")
    run = Run(src.run.name, series, src.run.sources, {**src.run.meta, "step_axis": "matched"},
              tuple(n for n in src.run.notes if n != guessed), tuple(w for w in src.run.warnings if w != guessed))
    return replace(src, run=run), (f"{label}: steps taken from the other files by matching {len(pairs)} "
                                   f"printed {key} values in order")


def _match_in_order(printed: np.ndarray, exact: np.ndarray) -> list[tuple[int, int]]:
    """(i, j) pairs of printed values that equal exact values up to printing, both in order."""
    pairs: list[tuple[int, int]] = []
    j = 0
    for i, value in enumerate(printed):
        if not np.isfinite(value):
            continue
        window = exact[j:j + _MATCH_LOOKAHEAD]
        close = np.flatnonzero(np.abs(window - value) <= _REL_TOL[2] * np.maximum(np.abs(window), abs(value))
                               + 1e-12)
        if len(close):
            pairs.append((i, j + int(close[0])))
            j += int(close[0]) + 1
    return pairs


def _extrapolating_interp(x: np.ndarray, have: np.ndarray, want: np.ndarray) -> np.ndarray:
    """np.interp inside the matched range, and the matched spacing continued beyond it."""
    out = np.interp(x, have, want)
    if len(have) > 1:
        scale = float(median(np.diff(want) / np.maximum(np.diff(have), 1e-12)))
        out = np.where(x > have[-1], want[-1] + (x - have[-1]) * scale, out)
        out = np.where(x < have[0], want[0] - (have[0] - x) * scale, out)
    return out


# --- joining and filling ----------------------------------------------------------------------------

def _write_order(src: Source) -> tuple:
    """Older writes first: by wall time where the source has it, a trainer_state.json by its global
    step (the top-level one last), anything else in file order."""
    walls = [float(np.nanmax(s.wall_time)) for s in src.run.series.values()
             if s.wall_time is not None and len(s.wall_time) and np.isfinite(s.wall_time).any()]
    step = src.run.meta.get("global_step")
    depth = -src.files[0].count(os.sep)
    return (src.rank, max(walls) if walls else 0.0, step if isinstance(step, (int, float)) else 0, depth,
            src.files[0])


def _joined(key: str, group: list[Source], root: str) -> Series:
    """One key's series from sources of one rank, in write order: the last write of a step wins."""
    parts = [src.run.series[key] for src in group]
    label = " + ".join(src.label(root) for src in group)
    if len(parts) == 1:
        return replace(parts[0], source=label)
    steps = np.concatenate([np.concatenate([p.superseded_steps, p.steps]) for p in parts])
    values = np.concatenate([np.concatenate([p.superseded_values, p.values]) for p in parts])
    walls = None
    if all(p.wall_time is not None for p in parts):
        walls = np.concatenate([np.concatenate([np.full(len(p.superseded_steps), np.nan), p.wall_time])
                                for p in parts])
    joined = Series.from_points(key, steps, values, walls, write_order=False,
                                stepped_back=any(p.stepped_back for p in parts))
    return _without_copies(replace(joined, source=label))


def _without_copies(series: Series) -> Series:
    """Drop superseded points that only repeat the kept value: copies, not rewrites."""
    if not len(series.superseded_steps):
        return series
    rewritten = np.isin(series.superseded_steps, series.rewritten_steps())
    return replace(series, superseded_steps=series.superseded_steps[rewritten],
                   superseded_values=series.superseded_values[rewritten])


def _fill(primary: Series, lower: Series, rel_tol: float) -> tuple[Series, list[tuple], bool]:
    """The primary series with the lower source's steps it lacks added, the shared steps where the two
    disagree beyond `rel_tol`, and whether anything was added."""
    shared, ip, il = np.intersect1d(primary.steps, lower.steps, return_indices=True)
    a, b = primary.values[ip], lower.values[il]
    both_nan = np.isnan(a) & np.isnan(b)
    bad = ~both_nan & ~(np.abs(a - b) <= rel_tol * np.maximum(np.abs(a), np.abs(b)) + 1e-12) & ~(a == b)
    differ = [(int(shared[i]), float(a[i]), float(b[i])) for i in np.flatnonzero(bad)]
    extra = ~np.isin(lower.steps, primary.steps)
    if not extra.any():
        return primary, differ, False
    steps = np.concatenate([primary.steps, lower.steps[extra]])
    values = np.concatenate([primary.values, lower.values[extra]])
    order = np.argsort(steps, kind="stable")
    walls = None
    if primary.wall_time is not None:
        walls = np.concatenate([primary.wall_time, np.full(int(extra.sum()), np.nan)])[order]
    merged = Series(primary.key, steps[order], values[order], walls, primary.superseded_steps,
                    primary.superseded_values, f"{primary.source} (+{lower.source})", primary.stepped_back)
    return merged, differ, True
