"""Time stabdiag's TensorBoard loader against tbparse and TensorBoard's EventAccumulator.

Writes a 100-tag x 20,000-step event file with tensorboard's own EventFileWriter, then reads it with
each tool in a fresh process, so that each peak RSS is that tool's alone:

  stabdiag          stabdiag.read.assemble.load(DIR): every point, both CRCs of every record verified
  bare              the floor of any reader: TFRecord framing, both masked CRC32Cs of each record
                    (google-crc32c), and Event.FromString of each payload; no values read out
  tbparse           SummaryReader(DIR).scalars
  EventAccumulator  EventAccumulator(DIR, size_guidance={"scalars": 0}).Reload()  (0 = keep everything)

Times are of the load alone (imports done first), wall and CPU (the process's user+system time); peak
RSS is the whole process's, imports included (the RSS after imports is printed too).  Every tool but
the bare pass must return all 2,000,000 points with the same sum.  `--tools stabdiag,bare` leaves the
slow readers out (to check stabdiag against its floor quickly).
The default layout is one event per step holding all 100 values (TF1-style merged summaries): that
is the issue's 50 MB file.  `--layout per-scalar` writes one event per value, as torch's
SummaryWriter.add_scalar does (110 MB, 2M records; writing it takes about a minute).

    python bench/tb_load.py [--layout per-step|per-scalar] [--tags 100] [--steps 20000]
                            [--repeat 1] [--tools stabdiag,bare,tbparse,EventAccumulator]
                            [--dir DIR]   # DIR keeps the generated file between runs

Needs the bench extra: tbparse (and tensorboard, google-crc32c from the tensorboard extra).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

from _measure import peak_rss_mb  # bench/ is on sys.path when run as a script

TOOLS = ("stabdiag", "bare", "tbparse", "EventAccumulator")


def generate(logdir: str, layout: str, tags: int, steps: int) -> bool:
    """Write the benchmark file with tensorboard's writer; False when it was already there."""
    import numpy as np
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    if os.path.isdir(logdir) and any("tfevents" in n for n in os.listdir(logdir)):
        return False
    names = [f"train/metric_{i:03d}" for i in range(tags)]
    values = np.random.default_rng(0).standard_normal((steps, tags)).astype(np.float32)
    writer = EventFileWriter(logdir, max_queue_size=1000)
    wall = 1.7e9
    for step in range(steps):
        row = values[step].tolist()
        wall += 0.5
        if layout == "per-step":
            summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in zip(names, row)])
            writer.add_event(Event(wall_time=wall, step=step, summary=summary))
        else:
            for t, v in zip(names, row):
                summary = Summary(value=[Summary.Value(tag=t, simple_value=v)])
                writer.add_event(Event(wall_time=wall, step=step, summary=summary))
    writer.close()
    return True


def bare_pass(logdir: str) -> int:
    """TFRecord framing, both checksums and protobuf, nothing else: the number of records parsed."""
    import google_crc32c
    from tensorboard.compat.proto.event_pb2 import Event

    crc = google_crc32c.value
    parse = Event.FromString
    records = 0
    for name in sorted(os.listdir(logdir)):
        with open(os.path.join(logdir, name), "rb") as fh:
            data = fh.read()
        pos = 0
        while pos + 12 <= len(data):
            length, length_crc = struct.unpack_from("<QI", data, pos)
            if _masked(crc(data[pos:pos + 8])) != length_crc:      # google-crc32c takes bytes only
                raise SystemExit(f"{name}: bad length checksum at {pos}")
            payload = data[pos + 12:pos + 12 + length]
            (payload_crc,) = struct.unpack_from("<I", data, pos + 12 + length)
            if _masked(crc(payload)) != payload_crc:
                raise SystemExit(f"{name}: bad payload checksum at {pos}")
            parse(payload)
            records += 1
            pos += 16 + length
    return records


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def measure(tool: str, logdir: str) -> dict:
    """Run in a child process: import, then time one load; points, sum of values, RSS."""
    if tool == "stabdiag":
        from stabdiag.read.assemble import load
    elif tool == "bare":
        import google_crc32c  # noqa: F401
        from tensorboard.compat.proto import event_pb2  # noqa: F401
    elif tool == "tbparse":
        from tbparse import SummaryReader
    else:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    rss_after_imports = peak_rss_mb()
    start, cpu0 = time.perf_counter(), _cpu()
    points, total = 0, 0.0
    if tool == "stabdiag":
        (run,) = load(logdir)
        points = sum(len(s) for s in run.series.values())
        total = sum(float(s.values.astype("float64").sum()) for s in run.series.values())
    elif tool == "bare":
        bare_pass(logdir)
    elif tool == "tbparse":
        frame = SummaryReader(logdir).scalars
        points, total = len(frame), float(frame["value"].astype("float64").sum())
    else:
        acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
        acc.Reload()
        events = [e for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag)]
        points, total = len(events), float(sum(e.value for e in events))
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu0
    return {"tool": tool, "seconds": seconds, "cpu": cpu, "peak_rss_mb": peak_rss_mb(),
            "rss_after_imports_mb": rss_after_imports, "points": points, "sum": total}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(tool: str, logdir: str) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tool, logdir],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(results: dict[str, dict], size_mb: float, args) -> None:
    print(f"file: {size_mb:.1f} MB, {args.tags} tags x {args.steps} steps, layout {args.layout}; "
          f"best of {args.repeat}; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"{'tool':<18}{'load s':>9}{'CPU s':>9}{'peak RSS MB':>13}{'RSS after imports':>19}{'points':>11}")
    for r in results.values():
        points = f"{r['points']:,}" if r["tool"] != "bare" else "-"
        print(f"{r['tool']:<18}{r['seconds']:>9.2f}{r['cpu']:>9.2f}{r['peak_rss_mb']:>13.0f}"
              f"{r['rss_after_imports_mb']:>19.0f}{points:>11}")
    ours = results["stabdiag"]
    if "bare" in results:
        bare = results["bare"]
        print(f"stabdiag / bare pass: {ours['cpu'] / bare['cpu']:.2f}x the CPU time, "
              f"{ours['seconds'] / bare['seconds']:.2f}x the wall time")
    for other in ("tbparse", "EventAccumulator"):
        if other in results:
            r = results[other]
            print(f"stabdiag vs {other}: {r['seconds'] / ours['seconds']:.1f}x faster, "
                  f"{ours['peak_rss_mb'] / r['peak_rss_mb']:.2f}x the peak RSS")
    readers = [r for r in results.values() if r["tool"] != "bare"]
    sums = {r["tool"]: r["sum"] for r in readers}
    agree = len({r["points"] for r in readers}) == 1 and \
        max(sums.values()) - min(sums.values()) <= 1e-6 * max(1.0, max(abs(v) for v in sums.values()))
    print(f"same points and sum of values in all readers: {'yes' if agree else 'NO ' + str(sums)}")
    if "tbparse" in results:
        speed = results["tbparse"]["seconds"] / ours["seconds"]
        memory = ours["peak_rss_mb"] / results["tbparse"]["peak_rss_mb"]
        met = speed >= 15 and memory <= 0.5
        print(f"target (>= 15x faster than tbparse, <= 0.5x its peak RSS): {'met' if met else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=("per-step", "per-scalar"), default="per-step")
    parser.add_argument("--tags", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated, from " + ", ".join(TOOLS))
    parser.add_argument("--dir", help="keep the generated file here and reuse it")
    parser.add_argument("--child", nargs=2, metavar=("TOOL", "LOGDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = args.dir or tmp
        logdir = os.path.join(base, f"{args.layout}-{args.tags}x{args.steps}")
        start = time.perf_counter()
        made = generate(logdir, args.layout, args.tags, args.steps)
        size_mb = sum(os.path.getsize(os.path.join(logdir, n)) for n in os.listdir(logdir)) / 1e6
        print(f"generated with tensorboard's EventFileWriter in {time.perf_counter() - start:.1f} s"
              if made else f"reusing the file in {logdir}")
        tools = [t for t in args.tools.split(",") if t]
        if "stabdiag" not in tools or any(t not in TOOLS for t in tools):
            raise SystemExit(f"--tools must name stabdiag and only these: {', '.join(TOOLS)}")
        results = {}
        for tool in tools:
            runs = [run_child(tool, logdir) for _ in range(args.repeat)]
            results[tool] = min(runs, key=lambda r: r["seconds"])
        report(results, size_mb, args)


if __name__ == "__main__":
    main()
