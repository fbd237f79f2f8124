"""Measurement helpers shared by the bench scripts (run as `python bench/<script>.py`)."""

from __future__ import annotations

import resource
import sys


def peak_rss_mb() -> float:
    """This process's peak RSS.  On Linux VmHWM, because ru_maxrss keeps the peak of the parent that
    forked the child (here the parent that generated the file), which would hide a lower peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
