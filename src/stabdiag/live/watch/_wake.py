"""Waiting for the watched files to change: through watchfiles when it is installed (`pip install
'stabdiag[watch]'`; imported only here), else by sleeping the interval (the followers poll the files'
sizes either way, so a missed notification costs one interval, never a point)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def waiter(paths: list[str], interval_s: float, *, polling: bool = False) -> tuple[Callable[[], None], str]:
    """A function that returns when a watched file changed or `interval_s` passed, and its method's name."""
    local = [p for p in paths if "://" not in p and os.path.exists(p)]
    if not polling and local and len(local) == len(paths):
        try:
            import watchfiles
        except ImportError:
            pass
        else:
            changes = watchfiles.watch(*local, rust_timeout=max(int(interval_s * 1000), 1), yield_on_timeout=True,
                                       debounce=50, step=20, raise_interrupt=True)
            return (lambda: next(changes, None)), "watchfiles"
    return (lambda: time.sleep(interval_s)), "polling"
