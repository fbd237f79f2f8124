"""How a run ended, read from the tail of its console log (and W&B's exit record where it has one).

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
    unfinished   W&B has no exit record and the console shows no ending: still running, or cut off

Only the tail counts: a traceback that metric lines follow was survived, not the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAIL_LINES = 400
_NONFINITE = re.compile(r"probability tensor contains either .?inf.?, .?nan.? or element < 0|loss is nan|"
                        r"found (?:nan|inf)|nan or inf|non-?finite (?:loss|values?|gradients?)|"
                        r"FloatingPointError|nan detected|inf detected", re.IGNORECASE)
_OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.IGNORECASE)
_COLLECTIVE = re.compile(r"NCCL|collective operation timeout|Watchdog caught|DistBackendError|"
                         r"ProcessGroup\w* (?:timeout|error)|connection (?:reset|closed) by peer|"
                         r"ChildFailedError|worker .* (?:lost|died)", re.IGNORECASE)
_HARDWARE = re.compile(r"ECC error|ECCUncorrectable|\bXid\b|fallen off the bus|NVLink error|"
                       r"hardware error", re.IGNORECASE)
_KILLED = re.compile(r"^Killed$|SIGKILL|SIGTERM|signal 9\b|signal 15\b|exitcode\s*:\s*-9|"
                     r"DUE TO TIME LIMIT|received signal", re.IGNORECASE)
_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt|Exit)\b)(?::\s*(.*))?$")
_FINISHED = re.compile(r"'train_runtime'|\"train_runtime\"|Training completed|training finished", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CAUSES = (("hardware", _HARDWARE), ("oom", _OOM), ("collective", _COLLECTIVE), ("killed", _KILLED))
_METRIC_RECORD = re.compile(r"\{'(?:loss|train_loss|reward|eval_\w+)'|\bstep[:= ]\s*\d+\s*[-|,]|iteration\s+\d+\s*/")


@dataclass(frozen=True, slots=True)
class Ending:
    """How the run ended; `step` is the last logged step, `source` the file that says so."""

    kind: str
    message: str
    source: str
    step: int | None = None

    @property
    def failed(self) -> bool:
        return self.kind not in ("finished", "unfinished")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "step": self.step, "message": self.message, "source": self.source}


def ending_of_console(text: str, source: str) -> Ending | None:
    """The ending a console log's tail shows, or None when it shows none.  A traceback that metric
    records follow was survived (a caught error, a retried step), so it is not the ending."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()[-_TAIL_LINES:]]
    tail = lines
    # what comes after the last metric record: anything before it, the run went past
    last_record = max((i for i, line in enumerate(tail) if _METRIC_RECORD.search(line)), default=-1)
    tail = tail[last_record + 1:]
    trace = max((i for i, line in enumerate(tail) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if trace is not None:
        error = next((m for line in tail[trace + 1:] if (m := _ERROR_LINE.match(line.strip()))), None)
        message = (f"{error.group(1)}: {error.group(2) or ''}".rstrip(": ") if error
                   else "a Python traceback with no error line")
        return Ending(_classify(message, tail[trace:]), message, source)
    for kind, pattern in _CAUSES:
        hit = next((line.strip() for line in reversed(tail) if pattern.search(line)), None)
        if hit is not None:
            return Ending(kind, hit[:200], source)
    if any(_FINISHED.search(line) for line in lines):    # the summary is itself a record
        return Ending("finished", "the trainer printed its final summary", source)
    return None


def _classify(message: str, block: list[str]) -> str:
    text = "\n".join([message, *block[-20:]])
    for kind, pattern in (("nonfinite", _NONFINITE), *_CAUSES):
        if pattern.search(message) or (kind != "nonfinite" and pattern.search(text)):
            return kind
    return "exception"


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
