"""Fuzz the command line with mutated logs of every format; count what must never happen.

    python bench/fuzz.py --cases 100000 --workers 2          # the full run (about 25 minutes on 2 cores)
    python bench/fuzz.py --cases 2000 --seed 7               # a quick look
    python bench/fuzz.py --case 1234                         # rebuild one case and print how to run it
    python bench/fuzz.py --cases 58000 --start 42000 --results part.jsonl   # one line per case, as it ends
    python bench/fuzz.py --summarize part.jsonl other.jsonl   # the figures of such files (a stopped run too)

Each case is a seed of bench/fuzz_corpus (a small run of one format, written by the real writer) with one
to three mutations from bench/fuzz_mutate, and sometimes a change to the tree (a file removed, a stray
file, a FIFO, a symlink loop), a hostile name (a folder, file or metric key holding a forged workflow
command, terminal control sequences or Markdown that breaks out) or a hostile size (a gzip bomb, too many
keys, a line past the budget, a YAML alias bomb, a zero-filled event file) from bench/fuzz_hostile.  It is
run through the real command line (`stabdiag check ...`, in a worker process that imports stabdiag once)
with a time limit (the worker is killed and replaced) and a memory limit (RLIMIT_AS).  What is counted,
and must stay at zero:

    internal error    `error: internal error: ...` (an exception the library did not expect)
    traceback         a Python traceback in the output
    wrong exit code   not 0/1/2/3; 2 without exactly one `error:` line; 0/1/3 with one
    unnamed error     an `error:` line that does not name the input (a path under the case's folder)
    stray stderr      a stderr line that is not `error:` / `warning:` (e.g. a numpy RuntimeWarning)
    warning leak      a Python warning that reached the warnings machinery (it would print to stderr)
    bad output        exit 0/1/3 with --format json and stdout that is not a JSON document
    unescaped output  a control character on stdout or stderr, a line starting with `::` that is not one
                      of the GitHub format's own commands, or JUnit XML that does not parse
    bad steps         a loaded series whose steps are not strictly increasing int64 values
    timeout, memory, crash   the time or memory limit hit, or the worker died

and, for information, how many error lines locate the problem (a line, byte offset, record or key).
A case is reproduced from (--seed, case number) alone.  A long run written with --results can be
stopped at any time (Ctrl-C or SIGTERM prints the figures so far) and is summed up later with --summarize.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_corpus  # noqa: E402
from fuzz_cases import FAILURES, make_case, run_case, write_case  # noqa: E402


def _worker(conn, seed: int, memory_mb: int, workdir: str) -> None:
    import resource

    from stabdiag.cli import app  # noqa: F401  (built before the limit: the limit is for the cases)

    corpus = fuzz_corpus.build(seed, Path(workdir))
    if memory_mb:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    base = Path(workdir) / "case"
    while True:
        index = conn.recv()
        if index is None:
            break
        case = make_case(corpus, seed, index)
        try:
            result = run_case(case, base)
        except MemoryError:
            result = {"index": index, "seed": case.seed, "code": "memory", "problems": ["memory"],
                      "located": None, "message": "MemoryError while writing or classifying", "what": case.what}
        conn.send(result)


# --- the pool ----------------------------------------------------------------------------------------

class _Slot:
    def __init__(self, ctx, seed: int, memory_mb: int) -> None:
        self.workdir = tempfile.mkdtemp(prefix="stabdiag-fuzz-")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, seed, memory_mb, self.workdir), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0

    def give(self, index: int) -> None:
        self.index, self.started = index, time.monotonic()
        self.conn.send(index)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_pool(indices, *, seed: int = 0, workers: int = 2, timeout_s: float = 30.0, memory_mb: int = 4096,
             on_result=None) -> list[dict]:
    """Run the cases `indices` in `workers` processes; one result per case, in completion order."""
    ctx = multiprocessing.get_context("spawn")
    todo = list(indices)[::-1]
    slots = [_Slot(ctx, seed, memory_mb) for _ in range(max(1, workers))]
    results: list[dict] = []
    warm = {id(s): False for s in slots}       # a worker's first case includes building the corpus
    try:
        for slot in slots:
            if todo:
                slot.give(todo.pop())
        while any(slot.index is not None for slot in slots):
            busy = [s for s in slots if s.index is not None]
            ready = wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout=1.0)
            now = time.monotonic()
            for i, slot in enumerate(slots):
                if slot.index is None:
                    continue
                result = None
                if slot.conn in ready:
                    try:
                        result = slot.conn.recv()
                        warm[id(slot)] = True
                    except (EOFError, OSError):
                        result = _lost(slot.index, "crash", "the worker died")
                elif slot.proc.sentinel in ready or not slot.proc.is_alive():
                    result = _lost(slot.index, "crash", f"the worker died (exit {slot.proc.exitcode})")
                elif now - slot.started > timeout_s * (1 if warm[id(slot)] else 4):
                    result = _lost(slot.index, "timeout", f"over {timeout_s:g} s")
                if result is None:
                    continue
                results.append(result)
                if on_result is not None:
                    on_result(result)
                if result["problems"] and result["problems"][0] in ("crash", "timeout"):
                    slot.stop(kill=True)
                    slots[i] = slot = _Slot(ctx, seed, memory_mb)
                    warm[id(slot)] = False
                slot.index = None
                if todo:
                    slot.give(todo.pop())
    finally:
        for slot in slots:
            slot.stop(kill=slot.index is not None)
    return results


def _lost(index: int, problem: str, message: str) -> dict:
    return {"index": index, "seed": "?", "code": problem, "problems": [problem], "located": None,
            "message": message, "what": []}


# --- figures ---------------------------------------------------------------------------------------

def figures(results: list[dict]) -> dict:
    problems = Counter(p for r in results for p in set(r["problems"]))
    codes = Counter(str(r["code"]) for r in results)
    errors = [r for r in results if r["code"] == 2 and "internal error" not in r["problems"]]
    located = sum(1 for r in errors if r["located"])
    shapes = Counter(_shape(r["message"]) for r in errors if not r["located"])
    return {"inputs": len(results), "exit_codes": dict(sorted(codes.items())),
            "failures": {name: problems.get(name, 0) for name in FAILURES},
            "errors_locating_the_place": f"{located}/{len(errors)}",
            "errors_naming_only_the_file": dict(shapes.most_common(25)),
            "by_seed": {seed: dict(sorted(Counter(str(r["code"]) for r in results if r["seed"] == seed).items()))
                        for seed in sorted({r["seed"] for r in results})}}


def _shape(message: str) -> str:
    """An error line with its path and numbers taken out, to count the kinds of error."""
    text = re.sub(r"\{base\}/\S*?:", "FILE:", message)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+", "N", text)[:120]


def print_figures(stats: dict, results: list[dict], seconds: float, show: int = 20) -> None:
    rate = f" in {seconds:.0f} s ({stats['inputs'] / seconds:.1f}/s)" if seconds else ""
    print(f"inputs: {stats['inputs']}{rate}")
    print("exit codes: " + ", ".join(f"{k}: {v}" for k, v in stats["exit_codes"].items()))
    for name, count in stats["failures"].items():
        print(f"  {name:<16} {count}")
    print(f"errors that locate the problem (line, offset, record, key): {stats['errors_locating_the_place']}; "
          "the others name the file and a problem of the whole file:")
    for shape, count in list(stats["errors_naming_only_the_file"].items())[:12]:
        print(f"  {count:>6}  {shape}")
    bad = [r for r in results if r["problems"]]
    for r in sorted(bad, key=lambda r: r["index"])[:show]:
        print(f"case {r['index']} [{r['seed']}] {','.join(r['problems'])}: {r['message']}  <- {'; '.join(r['what'])}")


def _stopped(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0, help="first case number")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per input")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address-space limit per worker")
    parser.add_argument("--json", help="write the figures and every failing case to this file")
    parser.add_argument("--case", type=int, help="write one case to a folder and print its command line")
    parser.add_argument("--results", help="append one JSON line per case to this file as the case ends")
    parser.add_argument("--summarize", nargs="+", metavar="FILE", help="print the figures of --results files")
    opts = parser.parse_args(argv)
    if opts.summarize:
        results = [json.loads(line) for name in opts.summarize for line in Path(name).read_text().splitlines()
                   if line.strip()]
        stats = figures(results)
        print_figures(stats, results, 0.0)
        return 1 if any(stats["failures"].values()) else 0
    if opts.case is not None:
        case = make_case(fuzz_corpus.build(opts.seed), opts.seed, opts.case)
        base = Path(tempfile.mkdtemp(prefix=f"stabdiag-fuzz-case{opts.case}-"))
        write_case(case, base)
        print("; ".join(case.what))
        print("stabdiag " + " ".join(a.replace("{base}", str(base)) for a in case.args))
        return 0
    fuzz_corpus.wandb_runs()                 # written once, before the workers read the cache
    started = time.monotonic()
    done = [0]
    log = open(opts.results, "a", encoding="utf-8") if opts.results else None
    seen: list[dict] = []

    def progress(result: dict) -> None:
        done[0] += 1
        seen.append(result)
        if log is not None:             # a line per case, flushed: a run stopped early keeps what it did
            log.write(json.dumps(result) + "\n")
            log.flush()
        if done[0] % 1000 == 0:
            print(f"... {done[0]} cases, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, signal.default_int_handler)      # a background job starts with it ignored
    signal.signal(signal.SIGTERM, _stopped)
    try:
        results = run_pool(range(opts.start, opts.start + opts.cases), seed=opts.seed, workers=opts.workers,
                           timeout_s=opts.timeout, memory_mb=opts.memory_mb, on_result=progress)
    except KeyboardInterrupt:           # stopped early: the figures of the cases that ended
        results = seen
    finally:
        if log is not None:
            log.close()
    seconds = time.monotonic() - started
    stats = figures(results)
    print_figures(stats, results, seconds)
    if opts.json:
        Path(opts.json).write_text(json.dumps({"figures": stats, "seconds": seconds, "seed": opts.seed,
                                               "failing": [r for r in results if r["problems"]]}, indent=1))
    return 1 if any(stats["failures"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
