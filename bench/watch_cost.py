"""What watching costs: one re-judgement of a 1M-point run after 1,000 new points, split into reading
(the follower's poll: the new bytes read and parsed), putting the run together (the store's arrays into
Series, the sources merged) and the detectors (the engine's diagnose); and the in-process callback's
overhead per check against a step time.

    python bench/watch_cost.py                     # 1M points (250k steps x 4 metrics), CSV and TensorBoard
    python bench/watch_cost.py --points 200000 --skip-tensorboard

Targets (issue 28): reading <= 50 ms; callback overhead <= 1% of step time at one check per 10 steps of
0.5 s each (so <= 50 ms per 10 steps, logging included).  Wall-clock medians of --repeats; the detectors'
share depends on the rules' statistics (issue 24 rewrites them), so it is measured on this branch as is.
The callback table runs the Monitor with its defaults (check_every=10, max_overhead=0.01) on a simulated
clock (real checks, simulated 0.5 s steps) and prints the overhead and the cadence the governor settles on,
which is the stop latency:

    python bench/watch_cost.py --skip-rejudge                     # the callback table only (seconds)
    python bench/watch_cost.py --skip-rejudge --max-overhead 0    # without the governor
    python bench/watch_cost.py --skip-rejudge --histories 1000000 # a 1M-step history
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEYS = ("loss", "grad_norm", "reward", "entropy")


def _values(steps: np.ndarray, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = len(steps)
    return {"loss": 2.0 * np.exp(-steps / 1e5) + 0.5 + 0.03 * rng.standard_normal(n),
            "grad_norm": 1.0 + 0.1 * rng.standard_normal(n),
            "reward": 0.3 + 0.3 * (1 - np.exp(-steps / 5e4)) + 0.03 * rng.standard_normal(n),
            "entropy": 1.2 + 0.03 * rng.standard_normal(n)}


def _csv_rows(steps: np.ndarray) -> str:
    v = _values(steps, int(steps[0]))
    table = np.column_stack([steps, *(v[k] for k in KEYS)])
    lines = [f"{int(r[0])},{r[1]:.6g},{r[2]:.6g},{r[3]:.6g},{r[4]:.6g}" for r in table]
    return "\n".join(lines) + "\n"


class _Tb:
    """TensorBoard events written with tensorboard's own RecordWriter (TFRecord framing, CRCs)."""

    def __init__(self, path: str) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        self.pb, self.spb = event_pb2, summary_pb2
        self.fh = open(path, "ab")
        self.writer = RecordWriter(self.fh)
        self.writer.write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())

    def add(self, steps: np.ndarray) -> None:
        v = _values(steps, int(steps[0]))
        wall = time.time()
        for i, step in enumerate(steps.tolist()):
            summary = self.spb.Summary(value=[self.spb.Summary.Value(tag=k, simple_value=float(v[k][i])) for k in KEYS])
            self.writer.write(self.pb.Event(wall_time=wall, step=step, summary=summary).SerializeToString())
        self.fh.flush()


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def rejudge_cost(kind: str, points: int, new_points: int, repeats: int) -> dict:
    """Build a `points`-point run, follow it, then `repeats` times: append `new_points`, time poll, the
    run's assembly and diagnose."""
    from stabdiag.judge.engine import diagnose
    from stabdiag.judge.rules import load_rules
    from stabdiag.live.watch.runs import Finder

    rules = load_rules()
    steps_total, steps_new = points // len(KEYS), new_points // len(KEYS)
    folder = tempfile.mkdtemp(prefix=f"watch_cost_{kind}_")
    if kind == "csv":
        path = os.path.join(folder, "metrics.csv")
        with open(path, "w") as fh:
            fh.write("step," + ",".join(KEYS) + "\n" + _csv_rows(np.arange(1, steps_total + 1)))

        def append(start: int) -> None:
            with open(path, "a") as fh:
                fh.write(_csv_rows(np.arange(start, start + steps_new)))
    else:
        path = os.path.join(folder, "events.out.tfevents.1.bench")
        tb = _Tb(path)
        tb.add(np.arange(1, steps_total + 1))

        def append(start: int) -> None:
            tb.add(np.arange(start, start + steps_new))
    finder = Finder(folder, {})
    t0 = time.perf_counter()
    finder.poll()
    first_read = time.perf_counter() - t0
    (live,) = finder.runs.values()
    reads, assembly, judge, read_bytes = [], [], [], []
    start = steps_total + 1
    for _ in range(repeats):
        before = os.path.getsize(path)
        append(start)
        start += steps_new
        read_bytes.append(os.path.getsize(path) - before)
        t0 = time.perf_counter()
        finder.poll()
        t1 = time.perf_counter()
        run = live.run()
        t2 = time.perf_counter()
        diag = diagnose(run, rules=rules)
        t3 = time.perf_counter()
        reads.append(t1 - t0)
        assembly.append(t2 - t1)
        judge.append(t3 - t2)
    total_points = sum(len(s) for s in run.series.values())
    return {"kind": kind, "points": total_points, "new_points": new_points, "new_bytes": int(np.median(read_bytes)),
            "first_read_s": first_read, "read_ms": _median_ms(reads), "assembly_ms": _median_ms(assembly),
            "detectors_ms": _median_ms(judge), "verdict": diag.verdict}


NAMES = ("loss", "grad_norm", "learning_rate", "reward", "entropy", "kl", "response_length", "clip_ratio",
         "reward_std", "epoch")


def callback_cost(history_steps: int, check_every: int, step_time_s: float, max_overhead: float | None,
                  min_checks: int = 8) -> dict:
    """The Monitor with `history_steps` steps x 10 metrics already logged, then trained on: each step takes
    `step_time_s` of simulated training (the Monitor's clock is the real clock plus the simulated steps,
    so that the checks' cost is real and nothing sleeps) and logs 10 metrics; run until `min_checks`
    checks and the waits after them.  Overhead: the real time spent in `log` (checks included) over the
    simulated training time plus it; cadence: the steps between checks."""
    from stabdiag.live.integrations import Monitor

    simulated = [0.0]
    monitor = Monitor(check_every=check_every, max_overhead=max_overhead, stop_on=None,
                      clock=lambda: time.perf_counter() + simulated[0])
    rng = np.random.default_rng(0)
    steps = np.arange(1, history_steps + 1)
    for k in NAMES:                                    # the history, as if logged: bulk, to build it fast
        monitor._store.extend(k, steps, 2.0 + rng.standard_normal(history_steps))
    monitor.log(history_steps, {k: 2.0 for k in NAMES})
    monitor.check()                                    # the governor's first measured cost
    step, spent, logs, check_steps = history_steps, 0.0, [], []
    before = monitor.checks
    while True:                                        # whole cycles: each check and the wait after it
        step += 1
        simulated[0] += step_time_s
        metrics = {k: 2.0 + math.sin(step + i) for i, k in enumerate(NAMES)}
        checks = monitor.checks
        t0 = time.perf_counter()
        monitor.log(step, metrics)
        took = time.perf_counter() - t0
        if monitor.checks > checks:
            check_steps.append(step)
            if monitor.checks - before > min_checks:   # the next cycle's check: left out, and done
                step -= 1
                break
        else:
            logs.append(took)
        spent += took
    trained = (step - history_steps) * step_time_s
    gaps = np.diff([history_steps] + check_steps)
    return {"history_steps": history_steps, "log_us": statistics.median(logs) * 1e6,
            "check_ms": monitor.governor.last_cost_s * 1000, "overhead_pct": 100 * spent / (trained + spent),
            "cadence": int(statistics.median(gaps)), "worst": int(gaps.max()),
            "implied": monitor.governor.cadence(step_time_s)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--new-points", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-tensorboard", action="store_true")
    ap.add_argument("--step-time", type=float, default=0.5)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--max-overhead", type=float, default=0.01, help="the callbacks' default; 0: no governor")
    ap.add_argument("--histories", default="1000,10000,100000", help="steps already logged, comma-separated")
    ap.add_argument("--skip-rejudge", action="store_true", help="only the callback overhead")
    args = ap.parse_args()
    if not args.skip_rejudge:
        rejudge_table(args)
    callback_table(args)


def rejudge_table(args) -> None:
    print(f"re-judgement after {args.new_points:,} new points (median of {args.repeats}, wall ms)")
    print(f"{'source':<12}{'points':>10}{'new bytes':>10}{'read':>9}{'assembly':>10}{'detectors':>11}"
          f"{'detectors share':>17}  first read")
    for kind in ("csv",) + (() if args.skip_tensorboard else ("tensorboard",)):
        r = rejudge_cost(kind, args.points, args.new_points, args.repeats)
        total = r["read_ms"] + r["assembly_ms"] + r["detectors_ms"]
        print(f"{r['kind']:<12}{r['points']:>10,}{r['new_bytes']:>10,}{r['read_ms']:>9.1f}{r['assembly_ms']:>10.1f}"
              f"{r['detectors_ms']:>11.1f}{100 * r['detectors_ms'] / total:>16.0f}%  {r['first_read_s']:.1f} s"
              f"  ({r['verdict']})")


def callback_table(args) -> None:
    governor = args.max_overhead or None
    print(f"\ncallback overhead: steps of {args.step_time} s, 10 metrics, check_every={args.check_every}, "
          f"max_overhead={governor}")
    print(f"{'history':>10}{'log/step':>11}{'one check':>11}{'overhead':>10}{'steps between checks':>22}"
          f"{'implied':>9}")
    for history in (int(h) for h in args.histories.split(",")):
        c = callback_cost(history, args.check_every, args.step_time, governor)
        print(f"{c['history_steps']:>10,}{c['log_us']:>9.1f}us{c['check_ms']:>9.1f}ms{c['overhead_pct']:>9.2f}%"
              f"{c['cadence']:>14} (max {c['worst']}){c['implied']:>9}")
    print("steps between checks (median, max of 8): a finding already in the logged curves stops training at most"
          " that many steps later;\na non-finite value at most check_every; implied: the cadence the last check's"
          " cost sets, check_every * ceil(c / (max_overhead * step time * check_every))")


if __name__ == "__main__":
    main()
