"""When an in-process check may run, so that judging keeps to a share of training time by construction.

A check is looked at every `check_every` steps after the last one.  With `max_overhead` set, a check that
cost c seconds is followed by at least c / max_overhead seconds of training (wall time between the end of
one check and the start of the next); a check that cannot run yet is postponed to the next look, never
dropped.  Every check is followed by the wait its own cost earns, so over a run the judging is at most
max_overhead of the time (plus the last check, whose wait has not passed yet).  So on a history whose
checks cost c, at s seconds a step, checks come every K = check_every * ceil(c / (max_overhead * s *
check_every)) steps (at least check_every), and the share spent judging is c / (c + K * s) <= max_overhead.

Two things are never postponed: a look after a non-finite value was logged (a NaN or Inf loss is a failure
waiting to be named, and its stop should not wait on the history's length), and the final judgement
(`Monitor.to_dict` runs it whatever the budget).  `agree` lets several processes take one decision at each
look (their clocks differ; one process stopping alone would hang the others)."""

from __future__ import annotations

import math
from collections.abc import Callable


class CheckGovernor:
    def __init__(self, check_every: int, max_overhead: float | None, clock: Callable[[], float],
                 agree: Callable[[bool], bool] | None = None) -> None:
        self.check_every, self.max_overhead, self.clock, self.agree = check_every, max_overhead, clock, agree
        self.urgent = False               # a non-finite value was logged since the last check
        self.postponed = 0                # looks at which the budget postponed the check
        self._look_from: int | None = None
        self._ended_at = clock()
        self._cost_s = 0.0

    def started(self, step: int) -> None:
        """The first logged step starts the count of steps to the first look and the wait for it."""
        if self._look_from is None:
            self._look_from = step
            self._ended_at = self.clock()

    def due(self, step: int) -> bool:
        """Whether to check at this logged step; a look that the budget refuses moves the next look
        `check_every` steps on (so that every process looks at the same steps)."""
        self.started(step)
        if step - self._look_from < self.check_every:
            return False
        go = self.urgent or self.affordable()
        if self.agree is not None:
            go = self.agree(go)
        if not go:
            self.postponed += 1
            self._look_from = step
        return go

    def affordable(self) -> bool:
        if self.max_overhead is None:
            return True
        return self._cost_s <= self.max_overhead * (self.clock() - self._ended_at)

    def checked(self, step: int, started_at: float) -> None:
        """A check that began at `started_at` (the clock's reading) has just ended at `step`."""
        self._ended_at = self.clock()
        self._cost_s = max(self._ended_at - started_at, 0.0)
        self._look_from = step
        self.urgent = False

    @property
    def last_cost_s(self) -> float:
        return self._cost_s

    def cadence(self, step_time_s: float) -> int:
        """The steps between checks that the last check's cost implies at `step_time_s` a step."""
        if self.max_overhead is None or step_time_s <= 0:
            return self.check_every
        looks = math.ceil(self._cost_s / (self.max_overhead * step_time_s * self.check_every))
        return self.check_every * max(looks, 1)
