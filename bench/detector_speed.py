"""Where `check`'s time goes after load: CPU seconds per detector and per robust-statistics helper on the
in-memory run of bench/check_speed.py (default 1M steps x 30 metrics), the median of --repeats runs of
diagnose().  A helper's time is also inside the detectors that call it.

    python bench/detector_speed.py              # 1,000,000 steps
    python bench/detector_speed.py --steps 50000
    python bench/detector_speed.py --tree /path/to/other/checkout     # the same run on another tree
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HELPERS = ("rolling_median", "trailing_median_mad", "recent_median_floor", "recent_median_mad", "ema_before",
           "cusum_change", "noise_sd", "robust_sd", "logged_quantum", "persistent_nonfinite_index")


def _timed(fn, totals: dict, name: str):
    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] += time.process_time() - t0
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent),
                    help="checkout whose stabdiag is measured (default: this one)")
    args = ap.parse_args()
    sys.path.insert(1, str(Path(args.tree).resolve()))

    from check_speed import make_run

    from stabdiag import _stats
    from stabdiag.judge import detectors as det
    from stabdiag.judge.engine import diagnose
    from stabdiag.judge.rules import load_rules

    run, rules = make_run(args.steps), load_rules()
    runs: list[dict] = []
    for attempt in range(args.repeats + 1):           # the first run warms imports and caches
        totals: dict = defaultdict(float)
        saved_specs = dict(det.DETECTORS)
        saved_helpers = {name: getattr(_stats, name) for name in HELPERS if hasattr(_stats, name)}
        for name, spec in saved_specs.items():
            det.DETECTORS[name] = replace(spec, fn=_timed(spec.fn, totals, f"detector {name}"))
        for name, fn in saved_helpers.items():
            setattr(_stats, name, _timed(fn, totals, f"_stats.{name}"))
        try:
            t0 = time.process_time()
            diagnose(run, rules=rules)
            totals["diagnose (all)"] = time.process_time() - t0
        finally:
            det.DETECTORS.update(saved_specs)
            for name, fn in saved_helpers.items():
                setattr(_stats, name, fn)
        if attempt:
            runs.append(totals)
    names = sorted({k for r in runs for k in r}, key=lambda k: -statistics.median(r.get(k, 0.0) for r in runs))
    print(f"diagnose() of a {args.steps:,}-step run with 30 metrics, CPU s (median of {args.repeats}); "
          f"{Path(_stats.__file__).parent.parent}:")
    for name in names:
        value = statistics.median(r.get(name, 0.0) for r in runs)
        if value >= 0.001:
            print(f"  {value:8.3f}  {name}")


if __name__ == "__main__":
    main()
