"""Memory of reading logged samples from a large dump: a generated JSONL of about 2 GB (one file holding a
whole run, the hardest case: no per-step files) is indexed, a window of it read and the forensics run on
that window; the peak resident memory is compared with the budget read/samples/source.py states (the index
plus at most MAX_SAMPLES samples of at most TEXT_CAP characters: under 100 MB) and with the file's size.

    python bench/samples_memory.py                 # writes /tmp/stabdiag_samples_2g.jsonl, deletes it after
    python bench/samples_memory.py --gb 0.2 --keep # a smaller dump, kept for the next run

Prints the dump's size, the index, window and forensics times, the peak RSS growth (ru_maxrss after minus
before) after reading and after the forensics, and its ratio to the budget and to the file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGET_MB = 100
WORDS = ("the answer is", "as an expert", "let me think", "certainly", "step by step", "\\boxed{42}", "<answer>")


def write_dump(path: str, gigabytes: float) -> None:
    rng = random.Random(0)
    target = int(gigabytes * (1 << 30))
    size, step = 0, 0
    with open(path, "w") as fh:
        while size < target:
            step += 1
            for group in range(16):
                prompt = f"problem {step}-{group}: " + "x" * 200
                for _ in range(16):
                    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(50, 600)))
                    line = json.dumps({"step": step, "prompt": prompt, "completion": text,
                                       "reward": rng.random(), "advantage": rng.gauss(0, 1)}) + "\n"
                    fh.write(line)
                    size += len(line)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--path", default=None)
    ap.add_argument("--keep", action="store_true", help="keep a dump this run wrote")
    ns = ap.parse_args()
    path = ns.path or f"/tmp/stabdiag_samples_{ns.gb:g}g.jsonl"
    wrote = not os.path.exists(path)
    if wrote:
        t = time.perf_counter()
        write_dump(path, ns.gb)
        print(f"wrote {path} in {time.perf_counter() - t:.0f} s")
    try:
        measure(path)
    finally:
        if wrote and not ns.keep:
            os.remove(path)


def measure(path: str) -> None:
    from stabdiag.advise.samples.forensics import reward_forensics
    from stabdiag.read.samples import SampleSource

    size_mb = os.path.getsize(path) / (1 << 20)
    before = rss_mb()
    source = SampleSource.of([path])
    t = time.perf_counter()
    steps = source.steps()
    index_s = time.perf_counter() - t
    t = time.perf_counter()
    window = source.window(None, int(steps[-1]))
    window_s = time.perf_counter() - t
    read = rss_mb() - before
    t = time.perf_counter()
    found = reward_forensics(window, rule="L1.bench", first_step=None, last_step=int(steps[-1]))
    forensics_s = time.perf_counter() - t
    total = rss_mb() - before
    print(f"dump {size_mb:.0f} MB, {len(steps)} steps; index {index_s:.1f} s, window {window_s:.1f} s "
          f"({len(window.samples)} samples of {window.logged} logged in the chosen steps), forensics "
          f"{forensics_s:.1f} s ({found.headline()})")
    for what, grown in (("reading", read), ("reading and forensics", total)):
        print(f"peak RSS growth, {what}: {grown:.0f} MB: {grown / BUDGET_MB:.2f}x the {BUDGET_MB} MB budget, "
              f"{grown / size_mb:.3f}x the file")


if __name__ == "__main__":
    main()
