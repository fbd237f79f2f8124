"""How a run ended (from the tail of its console log, stabdiag/console_ending.py, or W&B's exit record), and
whether it reached its planned length.

A metric log says what happened while the run trained; its last lines say whether it stopped on its
own.  The ending is one of:

    finished     the trainer printed its summary (HF `train_runtime`), or W&B recorded exit code 0
    nonfinite    it died on a NaN/Inf: "probability tensor contains either inf, nan or element < 0",
                 "loss is nan", "Found Inf in gradients", a FloatingPointError
    oom          CUDA / host out of memory
    collective   an NCCL / collective timeout or a lost worker (the distributed system failed)
    hardware     a GPU fault: uncorrectable ECC error, Xid, a GPU fallen off the bus
    killed       killed by a signal (OOM killer, a scheduler's time limit)
    exception    any other Python exception (the last line of the last traceback)
    unfinished   W&B has no exit record and the console shows no ending: still running, or cut off; or
                 the run stopped short of its planned length with no known reason (`planned` is set)

Only the tail counts: a traceback that metric lines follow was survived, not the end.

The planned length (the trainer's progress-bar total, a `step N/M` counter, trainer_state.json's
`max_steps`, a config's total_training_steps / train_iters / max_steps) is what "stopped short" is judged
against (`settle`): a run whose last logged step falls short of it by more than its logging interval,
with no final summary and no cause, is unfinished at step S of N (killed by SIGKILL or preempted: no last
words); a death whose progress had reached its total, or that came after the final summary, is shutdown
noise (Ray's "A worker died" as the cluster stops), not a death.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Ending:
    """How the run ended; `step` is the last logged step, `source` the file that says so."""

    kind: str
    message: str
    source: str
    step: int | None = None
    planned: int | None = None     # the planned length, where a source says it (see `settle`)

    @property
    def failed(self) -> bool:
        return self.kind not in ("finished", "unfinished")

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "step": self.step, "message": self.message, "source": self.source}
        if self.planned is not None:             # the planned length, where a source says it
            out["planned"] = self.planned
        return out

    @property
    def stopped_short(self) -> bool:
        """Unfinished with a planned length the last logged step fell short of."""
        return self.kind == "unfinished" and self.planned is not None and self.step is not None


def ending_of_wandb(meta: dict, source: str) -> Ending | None:
    """The ending a W&B run recorded: its exit code, or none at all (still running, or killed)."""
    if "exit_code" in meta:
        code = meta["exit_code"]
        if code == 0:
            return Ending("finished", "W&B recorded exit code 0", source)
        return Ending("exception", f"W&B recorded exit code {code}", source)
    if meta.get("format") == "wandb" and meta.get("finished") is False:
        return Ending("unfinished", "W&B has no exit record: still running, or stopped before wandb.finish()",
                      source)
    return None


def pick(endings: list[Ending]) -> Ending | None:
    """The most telling of several sources' endings: a failure with a cause over a bare exit code, any
    ending over 'unfinished'."""
    rank = {"nonfinite": 0, "hardware": 0, "oom": 0, "collective": 0, "killed": 1, "exception": 2,
            "finished": 3, "unfinished": 4}
    return min(endings, key=lambda e: rank[e.kind]) if endings else None


# --- the planned length, and whether the run reached it ---------------------------------------------------

_PLANNED_CONFIG_KEYS = ("total_training_steps", "train_iters", "max_steps", "num_training_steps", "total_steps",
                        "max_iters", "num_iterations", "train_steps")


@dataclass(frozen=True, slots=True)
class Planned:
    """A run's planned length in steps, and what says so."""

    steps: int
    source: str                  # what says so, in words
    file: str = ""               # the file that says so


def planned_of_config(config: dict | None) -> Planned | None:
    """The planned length a run's configuration states (a positive total_training_steps, train_iters,
    max_steps, ... at any depth; HF's max_steps = -1 means "by epochs" and says nothing)."""
    if not isinstance(config, dict):
        return None
    stack = [config]
    while stack:
        node = stack.pop()
        for key in _PLANNED_CONFIG_KEYS:
            # nested ({"trainer": {"total_training_steps": ...}}) or flat as MLflow params are
            value = node.get(key, next((v for k, v in node.items() if str(k).endswith("." + key)), None))
            if isinstance(value, str) and value.strip().isdigit():
                value = int(value.strip())
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value == int(value) and value > 0:
                return Planned(int(value), f"the config's {key}", "the run's config")
        stack.extend(v for v in node.values() if isinstance(v, dict))
    return None


def _completed(meta: dict) -> bool:
    """The run printed or stored its final summary (HF's train_runtime record, W&B's summary of it)."""
    summary = meta.get("summary")
    return isinstance(summary, dict) and any(str(k).endswith("train_runtime") for k in summary)


def settle(ending: Ending | None, meta: dict, last_step: int | None, interval: int,
           lr_ended: str | None = None) -> Ending | None:
    """The ending weighed against the planned length (see the module docstring): `last_step` is the run's
    last logged step and `interval` its logging interval in steps, the gap a finished run may leave;
    `lr_ended` says how the learning rate reached the end of its schedule (`lr_at_end`), evidence that the
    training completed: a lost worker or a kill after it is shutdown noise, and the run did not stop short."""
    if lr_ended is not None and ending is not None and ending.kind in ("collective", "killed"):
        return replace(ending, kind="finished", message=f"{lr_ended}; then {ending.message} (shutdown noise "
                                                        "after the training completed, not a death)")
    planned = meta.get("planned")
    if not isinstance(planned, Planned):
        planned = planned_of_config(meta.get("config"))
    if planned is None or last_step is None:
        return ending
    reached = planned.steps - last_step <= max(interval, 1)
    if not reached and lr_ended is not None and (ending is None or ending.kind == "unfinished"):
        return Ending("finished", f"{lr_ended}, at step {last_step} ({planned.steps} is {planned.source})",
                      ending.source if ending is not None else "", last_step, planned.steps)
    # a lost worker or a kill once the progress reached its total is the cluster shutting down; an
    # exception or a bare non-zero exit after the last step is left to speak for itself
    if ending is not None and ending.kind in ("collective", "killed") and reached:
        return replace(ending, kind="finished", planned=planned.steps,
                       message=f"reached step {last_step} of {planned.steps} ({planned.source}); then "
                               f"{ending.message} (shutdown noise after the training completed, not a death)")
    if (ending is None or ending.kind == "unfinished") and not reached and not _completed(meta):
        also = f"; {ending.message}" if ending is not None else ""
        where = f" in {planned.file}" if planned.file and planned.file != "the run's config" else ""
        return Ending("unfinished", f"unfinished at step {last_step} of {planned.steps} (no final summary; "
                                    f"{planned.steps} is {planned.source}{where}{also})",
                      planned.file or (ending.source if ending is not None else ""), last_step, planned.steps)
    if ending is None or ending.kind == "unfinished":      # it reached its plan: not stopped short
        return ending
    return replace(ending, planned=planned.steps)


def settled_meta(meta: dict, series: dict, root: str = "") -> dict:
    """A run's meta with its ending settled against the planned length (`settle`), dated at the last
    logged step of its metrics; the working `planned` entry is dropped, the file that holds it named
    below `root`."""
    import os

    from ..run import is_bookkeeping

    meta = dict(meta)
    planned = meta.get("planned")
    if isinstance(planned, Planned) and root and os.path.isabs(planned.file) == os.path.isabs(root):
        rel = os.path.relpath(planned.file, root)
        meta["planned"] = replace(planned, file=planned.file if rel.startswith("..") else rel)
    metrics = [s for k, s in series.items() if len(s) and not is_bookkeeping(k)]
    last = max((int(s.steps[-1]) for s in metrics), default=None)
    longest = max(metrics, key=len, default=None)
    interval = 1
    if longest is not None and len(longest) > 1:
        import numpy as np

        gaps = np.diff(longest.steps).astype(np.int64)     # the upper median gap, in O(n)
        interval = int(np.partition(gaps, len(gaps) // 2)[len(gaps) // 2])
    ending = settle(meta.get("ending"), meta, last, interval, lr_at_end(series))
    meta.pop("planned", None)
    if ending is not None:
        meta["ending"] = ending
    return meta


# a learning rate's key: lr, learning_rate, ... as the last part of the name (`train/lr(1e-3)`: verl's SFT)
_LR_KEY = re.compile(r"(?:^|/)(?:lr|learning[_ -]rate)(?:\([^)]*\))?$", re.IGNORECASE)
_LR_FLOOR = 0.11           # a schedule's end: at most this share of the peak (cosine to min_lr = peak / 10)


def lr_at_end(series: dict) -> str | None:
    """How the learning rate reached the end of its schedule (its last value at most a tenth of its peak,
    after the peak), in words; None when no lr series says so."""
    import numpy as np

    for key, s in series.items():
        if not _LR_KEY.search(key) or len(s) < 3:
            continue
        values = s.values[np.isfinite(s.values)]
        if len(values) < 3:
            continue
        peak, last = float(values.max()), float(values[-1])
        if peak > 0 and 0 <= last <= _LR_FLOOR * peak and int(np.argmax(values)) < len(values) - 1:
            return (f"the learning rate reached the end of its schedule ({key} {last:.3g} at the last step, "
                    f"{100 * last / peak:.1f}% of its peak {peak:.3g})")
    return None
