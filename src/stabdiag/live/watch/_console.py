"""Following a console log: only the appended bytes are read, but the text so far is parsed whole by
the console reader (loaders/text), because a console's step axis (an HF banner, the epoch) and how the
run ended are read from all of it."""

from __future__ import annotations

from ...errors import InputError
from ...read.formats.text import load_text
from ...read.run import Run
from ._follower_base import Follower
from ._tail import Tail, complete_lines


class ConsoleFollower(Follower):
    kind = "text"

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.tail = Tail(self.paths[0])
        self.parts: list[str] = []
        self._run: Run | None = None

    def poll(self) -> bool:
        if not self.tail.grew():
            return False
        if self.tail.take_reset():
            self.parts = []
        text = complete_lines(self.tail).decode("utf-8", errors="replace")
        if not text:
            return False
        self.parts.append(text)
        try:
            run = load_text(self.paths[0], "".join(self.parts))
        except InputError as exc:
            self.problem = str(exc)
            return False
        self.problem = None
        new = self._run is None or sum(map(len, run.series.values())) > sum(map(len, self._run.series.values()))
        self._run = run
        return new or run.meta.get("ending") is not None

    def run(self) -> Run | None:
        return self._run
