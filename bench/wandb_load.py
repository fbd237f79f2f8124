"""Time stabdiag's W&B reader against a bare framing-plus-protobuf pass over the same run file.

Writes a 20,000-step x 100-key offline run with the wandb library itself (in a child process, offline,
no network), then reads its `run-<id>.wandb` transaction log in a fresh process per try:

  stabdiag  stabdiag.read.assemble.load(RUN_DIR): the user's path, every point as float64 series, plus
            config, summary and run facts
  bare      the floor any reader of this file pays: the 7-byte header, the 32 KiB blocks, records
            reassembled from their fragments (full/first/middle/last), each CRC-32 checked as the
            loader does it (zlib.crc32 of the type byte and payload), and each payload parsed with
            wandb's own `wandb_internal_pb2.Record.FromString`; nothing else (no values read out)

Times are of the read alone (imports done first: stabdiag's loaders, wandb's protobuf module and
pyarrow, which both sides would import anyway); CPU time is the process's user+system time over the
same span; peak RSS is the whole process's (VmHWM), imports included.  The tools take turns, one
fresh process per try, and each figure is the median of the tries.  stabdiag must return all
steps x keys points with the sum of what was logged.  `--nested` logs each row as nested dicts
({"group_0": {"metric_000": v, ...}, ...}) instead of flat '/'-joined keys; the series are the same;
`--both` measures the flat run and then the nested one.

    python bench/wandb_load.py [--nested | --both] [--keys 100] [--steps 20000] [--repeat 3]
                               [--dir DIR]   # DIR keeps the generated runs between runs

Target: stabdiag <= 3x the bare pass, in CPU time (the median tries), on both layouts; the wall-time
ratio is printed beside it.  Needs wandb (a core dependency).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from _measure import peak_rss_mb  # bench/ is on sys.path when run as a script

TOOLS = ("stabdiag", "bare")
TARGET = 3.0
SEED = 0

GENERATOR = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import wandb

    out, keys, steps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
    nested = sys.argv[4] == "1"
    settings = wandb.Settings(console="off", x_disable_stats=True, x_disable_meta=True,
                              x_disable_machine_info=True, silent=True, save_code=False,
                              disable_git=True)
    groups = [f"group_{i // 10}" for i in range(keys)]
    names = [f"metric_{i:03d}" for i in range(keys)]
    flat = [f"{g}/{n}" for g, n in zip(groups, names)]
    values = np.random.default_rng(seed).standard_normal((steps, keys))
    start = time.perf_counter()
    run = wandb.init(project="stabdiag-bench", id="bench01", dir=out, mode="offline",
                     settings=settings, config={"keys": keys, "steps": steps, "nested": nested})
    for s in range(steps):
        row_values = values[s].tolist()
        if nested:
            row = {}
            for g, n, v in zip(groups, names, row_values):
                row.setdefault(g, {})[n] = v
        else:
            row = dict(zip(flat, row_values))
        run.log(row, step=s)
    files_dir = run.dir
    run.finish()
    print(json.dumps({"files_dir": files_dir, "seconds": time.perf_counter() - start,
                      "sum": float(values.sum())}))
''')


def generate(base: str, keys: int, steps: int, nested: bool) -> dict | None:
    """Write the run with wandb in offline mode in a child process; None when it was already there."""
    found = glob.glob(os.path.join(base, "wandb", "*run-*", "run-*.wandb"))
    if found:
        return None
    os.makedirs(base, exist_ok=True)
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CONSOLE="off",
               WANDB_DISABLE_GIT="true", WANDB_DISABLE_CODE="true", WANDB_DIR=base,
               WANDB_CONFIG_DIR=os.path.join(base, "cfg"), WANDB_CACHE_DIR=os.path.join(base, "cache"),
               WANDB_DATA_DIR=os.path.join(base, "data"))
    env.pop("WANDB_API_KEY", None)
    done = subprocess.run([sys.executable, "-c", GENERATOR, base, str(keys), str(steps),
                           "1" if nested else "0", str(SEED)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"generating the run with wandb failed:\n{done.stderr[-3000:]}")
    made = json.loads(done.stdout.strip().splitlines()[-1])
    with open(os.path.join(base, "bench.json"), "w") as fh:
        json.dump({"keys": keys, "steps": steps, "nested": nested, "sum": made["sum"]}, fh)
    return made


def find_run(base: str) -> tuple[str, str]:
    """(run directory, its .wandb file) under base."""
    found = sorted(glob.glob(os.path.join(base, "wandb", "*run-*", "run-*.wandb")))
    if len(found) != 1:
        raise SystemExit(f"expected one run-*.wandb under {base}/wandb, found {len(found)}")
    return os.path.dirname(found[0]), found[0]


def bare_pass(path: str) -> int:
    """Framing plus protobuf, nothing else: the number of records parsed."""
    import struct
    import zlib

    from wandb.proto.wandb_internal_pb2 import Record

    parse = Record.FromString
    crc32 = zlib.crc32
    block = 32 * 1024
    unpack = struct.Struct("<IHB").unpack_from
    with open(path, "rb") as fh:
        data = fh.read()
    ident, magic, version = struct.unpack_from("<4sHB", data, 0)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise SystemExit(f"{path}: not a version-0 W&B transaction log")
    view = memoryview(data)
    size, pos, records = len(data), 7, 0
    parts: list = []
    while pos < size:
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        if pos + 7 > size:
            break
        checksum, length, kind = unpack(data, pos)
        if kind == 0 and length == 0 and checksum == 0:
            pos += room
            continue
        end = pos + 7 + length
        if end > size:
            break
        if crc32(view[pos + 6:end]) != checksum:
            raise SystemExit(f"{path}: checksum mismatch at byte offset {pos}")
        payload = view[pos + 7:end]
        if kind == 1:
            parse(payload)
            records += 1
        elif kind == 2:
            parts = [payload]
        elif kind == 3:
            parts.append(payload)
        elif kind == 4:
            parts.append(payload)
            parse(b"".join(parts))
            records += 1
            parts = []
        else:
            raise SystemExit(f"{path}: unknown record type {kind} at byte offset {pos}")
        pos = end
    return records


def measure(tool: str, run_dir: str, log_path: str) -> dict:
    """Run in a child process: import, then time one read; points, sum of values, RSS."""
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    from wandb.proto import wandb_internal_pb2  # noqa: F401

    from stabdiag.read.assemble import load

    rss_after_imports = peak_rss_mb()
    cpu0, start = _cpu(), time.perf_counter()
    points, total, records = 0, 0.0, 0
    if tool == "stabdiag":
        (run,) = load(run_dir)
        points = sum(len(s) for s in run.series.values())
        total = sum(float(s.values.astype("float64").sum()) for s in run.series.values())
        notes = list(run.notes)
    else:
        records = bare_pass(log_path)
        notes = []
    seconds, cpu = time.perf_counter() - start, _cpu() - cpu0
    return {"tool": tool, "seconds": seconds, "cpu": cpu, "peak_rss_mb": peak_rss_mb(),
            "rss_after_imports_mb": rss_after_imports, "points": points, "sum": total,
            "records": records, "notes": notes}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(tool: str, run_dir: str, log_path: str) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", tool, run_dir, log_path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tool} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(results: dict[str, list[dict]], size_mb: float, args, nested: bool,
           expected: dict | None) -> tuple[bool, float]:
    """Print one layout's table; (stabdiag read back what was logged, CPU ratio of the medians)."""
    layout = "nested dicts" if nested else "flat keys"
    print(f"file: {size_mb:.1f} MB, {args.keys} keys x {args.steps} steps, {layout}; median of {args.repeat}; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs (possibly shared)")
    print(f"{'tool':<10}{'CPU s':>9}{'wall s':>9}{'peak RSS MB':>13}{'RSS after imports':>19}"
          f"{'points':>14}   all tries (CPU s)")
    med = {tool: {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu", "peak_rss_mb",
                                                                     "rss_after_imports_mb")}
           for tool, runs in results.items()}
    for tool, runs in results.items():
        last = runs[-1]
        shown = f"{last['points']:,}" if tool == "stabdiag" else f"({last['records']:,} rec)"
        m = med[tool]
        print(f"{tool:<10}{m['cpu']:>9.2f}{m['seconds']:>9.2f}{m['peak_rss_mb']:>13.0f}"
              f"{m['rss_after_imports_mb']:>19.0f}{shown:>14}   " + " ".join(f"{r['cpu']:.2f}" for r in runs))
    ours, bare = med["stabdiag"], med["bare"]
    cpu_ratio, ratio = ours["cpu"] / bare["cpu"], ours["seconds"] / bare["seconds"]
    print(f"stabdiag / bare: {cpu_ratio:.2f}x the CPU time, {ratio:.2f}x the wall time, "
          f"{ours['peak_rss_mb'] / bare['peak_rss_mb']:.2f}x the peak RSS")
    want = args.keys * args.steps
    ok_points = True
    for run in results["stabdiag"]:
        ok = run["points"] == want
        if expected is not None:
            logged = expected["sum"]
            ok = ok and abs(run["sum"] - logged) <= 1e-9 * max(1.0, abs(logged))
        ok_points = ok_points and ok
    first = results["stabdiag"][0]
    line = f"stabdiag read {first['points']:,} of {want:,} points"
    if expected is not None:
        line += f"; sum of values {first['sum']:.6f} vs logged {expected['sum']:.6f}"
    print(line + (": ok" if ok_points else ": NOT ok"))
    if first["notes"]:
        print("stabdiag notes: " + "; ".join(first["notes"]))
    print(f"target (stabdiag <= {TARGET:g}x the bare pass, CPU time): {'met' if cpu_ratio <= TARGET else 'NOT met'}")
    return ok_points, cpu_ratio


def measure_layout(args, nested: bool, tmp: str) -> tuple[bool, float]:
    layout = "nested" if nested else "flat"
    base = os.path.join(args.dir or tmp, f"{layout}-{args.keys}x{args.steps}")
    start = time.perf_counter()
    made = generate(base, args.keys, args.steps, nested)
    run_dir, log_path = find_run(base)
    size_mb = os.path.getsize(log_path) / 1e6
    if made is not None:
        print(f"generated with wandb {_wandb_version()} (offline) in {time.perf_counter() - start:.1f} s "
              f"({made['seconds']:.1f} s of wandb.init/log/finish): {log_path}, {size_mb:.1f} MB")
    else:
        print(f"reusing {log_path}, {size_mb:.1f} MB")
    expected = None
    try:
        with open(os.path.join(base, "bench.json")) as fh:
            expected = json.load(fh)
    except OSError:
        pass
    results: dict[str, list[dict]] = {tool: [] for tool in TOOLS}
    for _ in range(args.repeat):                   # the tools take turns, so both see the same load
        for tool in TOOLS:
            results[tool].append(run_child(tool, run_dir, log_path))
    return report(results, size_mb, args, nested, expected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--nested", action="store_true", help="log each row as nested dicts")
    shape.add_argument("--both", action="store_true", help="measure flat keys, then nested dicts")
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="keep the generated runs here and reuse them")
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "RUN_DIR", "LOG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    layouts = [False, True] if args.both else [args.nested]
    ok, ratios = True, {}
    with tempfile.TemporaryDirectory() as tmp:
        for nested in layouts:
            if len(ratios):
                print()
            read_back, ratios["nested" if nested else "flat"] = measure_layout(args, nested, tmp)
            ok = ok and read_back
    if len(ratios) > 1:
        met = all(r <= TARGET for r in ratios.values())
        print("\nstabdiag / bare pass, CPU time: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
              + f" (target <= {TARGET:g}x on both): {'met' if met else 'NOT met'}")
    sys.exit(0 if ok else 1)          # 1: stabdiag did not read back what was logged


def _wandb_version() -> str:
    try:
        from importlib.metadata import version

        return version("wandb")
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
