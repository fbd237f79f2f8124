"""Following an online W&B run (`wandb://ENTITY/PROJECT/RUN_ID`): fetched again through the W&B reader
(full history, `refresh`), with backoff: the wait doubles, up to `max_wait_s`, while a fetch brings no new
point or fails (a rate limit, the network gone), and goes back to the interval when one does."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...errors import StabdiagError
from ...read.run import Run
from .runs import LiveRun

MAX_WAIT_S = 300.0


class OnlineFollower:
    kind = "wandb"

    def __init__(self, uri: str, interval_s: float, *, fetch: Callable[[str], Run] | None = None,
                 clock: Callable[[], float] = time.monotonic, max_wait_s: float = MAX_WAIT_S) -> None:
        self.uri, self.folder, self.paths = uri, "", [uri]
        self.interval_s, self.max_wait_s = interval_s, max_wait_s
        self.wait_s = interval_s
        self._fetch = fetch or _fetch
        self._clock = clock
        self._next = clock()
        self._run: Run | None = None
        self._points = 0
        self.problem: str | None = None

    def poll(self) -> bool:
        now = self._clock()
        if now < self._next:
            return False
        try:
            run = self._fetch(self.uri)
            self.problem = None
        except StabdiagError as exc:
            self.problem = str(exc)
            run = None
        points = sum(map(len, run.series.values())) if run is not None else self._points
        new = run is not None and points > self._points
        if new:
            self._run, self._points, self.wait_s = run, points, self.interval_s
        else:
            self.wait_s = min(self.wait_s * 2, self.max_wait_s)
        self._next = now + self.wait_s
        return new

    def run(self) -> Run | None:
        return self._run


def _fetch(uri: str) -> Run:
    from ...read.formats import uri_loader

    return uri_loader(uri).load_uri(uri, refresh=True)


class OnlineFinder:
    """The one run of a wandb:// URI, in the shape of runs.Finder."""

    def __init__(self, uri: str, interval_s: float, **follower_options) -> None:
        self.follower = OnlineFollower(uri, interval_s, **follower_options)
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        self.runs = {name: LiveRun(name, "", [self.follower])}

    def poll(self) -> list[LiveRun]:
        live = next(iter(self.runs.values()))
        if self.follower.poll():
            live.dirty = True
            return [live]
        return []
