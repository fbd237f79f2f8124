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

import functools
import re
from dataclasses import dataclass, replace

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
_FINISHED = re.compile(r"'train_runtime'|\"train_runtime\"|Training completed|training finished|"
                       r"Final validation metrics", re.IGNORECASE)
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


def ending_of_console(text: str, source: str) -> Ending | None:
    """The ending a console log's tail shows, or None when it shows none.  A traceback that metric
    records follow was survived (a caught error, a retried step), so it is not the ending."""
    lines = [_ANSI.sub("", line).rstrip() for line in _last_lines(text, _TAIL_LINES)]
    # what comes after the last metric record: anything before it, the run went past
    tail = lines[_last_index(lines, _METRIC_RECORD, -1) + 1:]
    death = _death(tail, source)
    summary = _last_index(tail, _FINISHED)
    if death is not None and summary is not None and summary < death[0]:
        return Ending("finished", f"the trainer printed its final summary; then {death[1].message} (shutdown "
                                  "noise after the training completed, not a death)", source)
    if death is not None:
        return death[1]
    if summary is not None or _last_index(lines, _FINISHED) is not None:   # the summary is itself a record
        return Ending("finished", "the trainer printed its final summary", source)
    return None


def _last_index(lines: list[str], pattern: re.Pattern, default: int | None = None) -> int | None:
    """The index of the last line `pattern` matches, or `default`.  One search over the joined lines first
    (the same pattern, ^ and $ at line ends): most tails hold no such line, and 400 searches per pattern
    cost more than reading the log."""
    if not lines or _by_lines(pattern).search("\n".join(lines)) is None:
        return default
    return next((i for i in range(len(lines) - 1, -1, -1) if pattern.search(lines[i])), default)


@functools.lru_cache(maxsize=None)
def _by_lines(pattern: re.Pattern) -> re.Pattern:
    return re.compile(pattern.pattern, pattern.flags | re.MULTILINE)


def _last_lines(text: str, count: int) -> list[str]:
    """text.splitlines()[-count:], splitting only a tail of the text that holds more than `count` lines
    (its cut first line is dropped): a long console is not split whole to read its last lines."""
    size = 64 << 10
    while size < len(text):
        lines = text[-size:].splitlines()
        if len(lines) > count:
            return lines[-count:]
        size *= 4
    return text.splitlines()[-count:]


def _death(tail: list[str], source: str) -> tuple[int, Ending] | None:
    """(where in the tail, the death) of the last traceback, else of the last line naming a cause."""
    trace = max((i for i, line in enumerate(tail) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if trace is not None:
        error = next((m for line in tail[trace + 1:] if (m := _ERROR_LINE.match(line.strip()))), None)
        message = (f"{error.group(1)}: {error.group(2) or ''}".rstrip(": ") if error
                   else "a Python traceback with no error line")
        return trace, Ending(_classify(message, tail[trace:]), message, source)
    for kind, pattern in _CAUSES:
        hit = _last_index(tail, pattern)
        if hit is not None:
            return hit, Ending(kind, tail[hit].strip()[:200], source)
    return None


def died_before_first_step(text: str) -> str | None:
    """For a console log no reader took (no metric line at all): the death it shows, as the reason it
    holds no metrics ("died before its first logged step: RuntimeError: ..."), or None."""
    lines = [_ANSI.sub("", line).rstrip() for line in _last_lines(text, _TAIL_LINES)]
    if _last_index(lines, _METRIC_RECORD) is not None:
        return None
    found = _death(lines, "")
    if found is None:
        return None
    return f"died before its first logged step: {found[1].message}"


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


# --- the planned length, and whether the run reached it ---------------------------------------------------

# a tqdm bar: its description (if any), n and total; a training bar is named for training or not at all
_BAR_COUNTS = re.compile(r"\s*(\d+)/(\d+)\b")      # after a bar's closing `|`: n/total
_TRAINING_BAR = re.compile(r"train|progress|step|iter|epoch|optimi", re.IGNORECASE)
_OTHER_BAR = re.compile(r"eval|valid|test|map|load|filter|download|token|generat|shard|example|sampl|"
                        r"batch(?:es)? of|upload|sav|merg|prepar|process", re.IGNORECASE)
# `iteration 100/ 1000` (Megatron), `step:500/1750` (modded-nanogpt), `Step 12/500` (hand-written loops)
_COUNTER = re.compile(r"(?<![A-Za-z])(?:[Ss]tep|STEP|[Ii]ter(?:ation)?|ITER(?:ATION)?)[:\s]\s*(\d+)\s*/\s*(\d+)\b")
_EPOCH_COUNTER = re.compile(r"\bepoch[:\s]\s*\d+\s*/\s*\d+", re.IGNORECASE)
_PLAN_BYTES = 128 << 10          # of the head and of the tail of a long console, for its planned length
_PLANNED_CONFIG_KEYS = ("total_training_steps", "train_iters", "max_steps", "num_training_steps", "total_steps",
                        "max_iters", "num_iterations", "train_steps")


@dataclass(frozen=True, slots=True)
class Planned:
    """A run's planned length in steps, and what says so."""

    steps: int
    source: str                  # what says so, in words
    file: str = ""               # the file that says so


def _bars(text: str):
    """(description, n, total) of every progress bar, found from the `%|` each one holds and read
    outward from there (a pattern tried at every position of a long log costs too much)."""
    pos = text.find("%|")
    while pos != -1:
        close = text.find("|", pos + 2, pos + 300)
        counts = _BAR_COUNTS.match(text, close + 1) if close != -1 else None
        if counts is not None:
            low = max(0, pos - 90)                  # bounded: a log without \r must not be searched to its start
            start = max(text.rfind("\n", low, pos), text.rfind("\r", low, pos), low - 1) + 1
            left = text[start:pos].rstrip("0123456789").rstrip()
            desc = left[:-1].replace("\x1b", "").strip() if left.endswith(":") else ""
            yield desc, int(counts.group(1)), int(counts.group(2))
        pos = text.find("%|", pos + 2)


def planned_of_console(text: str) -> Planned | None:
    """The planned length a console shows: a `step N/M` counter's total (not a per-epoch one), else the
    total of the training progress bar (named for training, else the first unnamed bar).  Only the
    head and the tail of a long log are read: every bar and counter line repeats the total."""
    if len(text) > 2 * _PLAN_BYTES:
        text = text[:_PLAN_BYTES] + "\n" + text[-_PLAN_BYTES:]
    totals: dict[int, int] = {}
    per_epoch = _EPOCH_COUNTER.search(text) is not None      # else no counter's line needs the check
    for match in _COUNTER.finditer(text):
        total = int(match.group(2))
        if total > 1:
            totals[total] = totals.get(total, 0) + 1
        if not per_epoch:
            continue
        low, high = max(0, match.start() - 300), min(len(text), match.end() + 300)
        line_start = max(text.rfind("\n", low, match.start()), low - 1) + 1
        line_end = text.find("\n", match.end(), high)
        if _EPOCH_COUNTER.search(text[line_start:line_end if line_end >= 0 else high]):
            return None                     # a per-epoch counter: its total is not the run's
    if totals:
        total = max(totals, key=totals.__getitem__)
        return Planned(total, "the step counter's total")
    named: dict[int, int] = {}
    first_unnamed = None
    for desc, _, total in _bars(text):
        if total <= 1 or (desc and (_OTHER_BAR.search(desc) or not _TRAINING_BAR.search(desc))):
            continue
        if desc:
            named[total] = named.get(total, 0) + 1
        elif first_unnamed is None:       # the HF Trainer draws its training bar before any eval bar
            first_unnamed = total
    if named:
        return Planned(max(named, key=named.__getitem__), "the training progress bar's total")
    if first_unnamed is not None:
        return Planned(first_unnamed, "the progress bar's total")
    return None


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


def settle(ending: Ending | None, meta: dict, last_step: int | None, interval: int) -> Ending | None:
    """The ending weighed against the planned length (see the module docstring): `last_step` is the run's
    last logged step and `interval` its logging interval in steps, the gap a finished run may leave."""
    planned = meta.get("planned")
    if not isinstance(planned, Planned):
        planned = planned_of_config(meta.get("config"))
    if planned is None or last_step is None:
        return ending
    reached = planned.steps - last_step <= max(interval, 1)
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

    from .run import is_bookkeeping

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
        gaps = sorted(int(g) for g in longest.steps[1:] - longest.steps[:-1])
        interval = gaps[len(gaps) // 2]
    ending = settle(meta.get("ending"), meta, last, interval)
    meta.pop("planned", None)
    if ending is not None:
        meta["ending"] = ending
    return meta
