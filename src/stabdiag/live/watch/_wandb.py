"""Following a W&B run's transaction log (`run-<id>.wandb`): the records past the last one read are
framed by the W&B reader's framing and taken by its own record handling, into one LogContents kept
from poll to poll."""

from __future__ import annotations

import mmap
import os

from ...errors import InputError
from ...read.formats.wandb import _run_from_log, run_root
from ...read.formats.wandb._lite import lite_record_class
from ...read.formats.wandb._log import LogContents, add_payload, load_pb
from ...read.formats.wandb._records import HEADER_LEN, check_header, framed_records
from ...read.run import Run, merge_runs, run_name_for
from ._follower_base import Follower


class _Log:
    def __init__(self, path: str) -> None:
        self.path = path
        self.pos = 0                  # 0: the header is not checked yet
        self.size = 0
        self.contents: LogContents | None = None
        self.rows = 0


class LogFollower(Follower):
    kind = "wandb"

    def __init__(self, *args) -> None:
        self._logs: dict[str, _Log] = {}
        super().__init__(*args)

    def started(self, path: str) -> None:
        if path.endswith(".wandb"):
            self._logs[path] = _Log(path)

    def poll(self) -> bool:
        pb, decode_error = load_pb()
        new = False
        for log in self._logs.values():
            try:
                size = os.path.getsize(log.path)
            except OSError:
                continue
            if size < log.size:               # replaced: read again
                log.pos, log.contents = 0, None
            if size == log.size or size < HEADER_LEN:
                continue
            log.size = size
            with open(log.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if log.pos == 0:
                    try:
                        check_header(data, log.path)
                    except InputError as exc:
                        self.problem = str(exc)
                        continue
                    log.pos = HEADER_LEN
                    log.contents = _contents(pb)
                _take_new(log, data, pb, decode_error)
            log.contents.history.flush()
            rows = len(log.contents.history.row_steps)
            new = new or rows > log.rows
            log.rows = rows
        return new

    def run(self) -> Run | None:
        name = run_name_for(run_root(self.paths[0]) or ".")
        runs = [_run_from_log(log.path, log.contents, name, self.options.get("step_col"))
                for log in sorted(self._logs.values(), key=lambda g: g.path) if log.contents is not None]
        runs = [r for r in runs if r.series]
        return merge_runs(name, runs) if runs else None


def _take_new(log: _Log, data, pb, decode_error) -> None:
    """The records after `log.pos` into its contents.  In a function of its own so that no view into the
    mapping outlives it (the mapping is closed after)."""
    for offset, payload, end in framed_records(data, [], log.pos):
        # a copy: the buffered rows outlive the mapping; only the new records are copied
        add_payload(log.contents, bytes(payload), offset, pb, decode_error)
        log.pos = end


def _contents(pb) -> LogContents:
    lite = lite_record_class()

    def decode_row(payload):
        lite.FromString(payload)
        return pb.Record.FromString(payload).history

    return LogContents(decode_row)
