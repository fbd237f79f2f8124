"""A progress bar for loaders that read a file's bytes: on stderr, only once a load has taken a second,
so that small checks stay silent and large ones show how far they are."""

from __future__ import annotations

import time


class ByteProgress:
    """A rich progress bar on stderr that appears only once a load has taken more than a second."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = bool(enabled), max(total, 1), label
        self.started = time.perf_counter()
        self.done = 0
        self.bar = None
        self.task = None

    def __enter__(self) -> ByteProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, done: int) -> None:
        self.done = done
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.started < 1.0:
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(*self.columns(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total)
        self.bar.update(self.task, completed=min(done, self.total))

    def columns(self) -> tuple:
        """What the bar shows: `reading FILE`, the bar, bytes read of the total, time left."""
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn

        return TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn()
