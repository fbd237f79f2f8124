"""Speed of the sample forensics on 100k samples: features and the two tests, against a baseline measured in
the same run (reading the same 100k completions' words with str.split, the least any text feature costs;
the best of three runs).

    python bench/samples_speed.py              # 100k samples
    python bench/samples_speed.py --n 20000

Prints the time of the features, of the tests, and their ratios to the baseline.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PHRASES = ("the answer is", "as an expert", "let me think", "so", "we get", "\\boxed{7}", "<answer>", "therefore")


def samples(n: int):
    from stabdiag.read.samples import Sample

    rng = random.Random(0)
    out = []
    steps = 200
    for i in range(n):
        step = 1 + i * steps // n
        hacked = step > steps // 2 and rng.random() < 0.7
        words = [rng.choice(PHRASES) for _ in range(rng.randint(20, 120))]
        if hacked:
            words.insert(0, "as an expert")
        text = " ".join(words)
        out.append(Sample(step=step, completion=text, prompt=f"p{i // 16}", reward=float(hacked) + rng.random(),
                          chars=len(text), group=f"p{i // 16}", where=f"row{i}"))
    return tuple(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ns = ap.parse_args()
    from stabdiag.advise.samples.features import features
    from stabdiag.advise.samples.forensics import reward_forensics
    from stabdiag.read.samples import SampleWindow

    data = samples(ns.n)
    base = math.inf
    for _ in range(3):                  # the best of three: the baseline is short, a busy machine skews it
        t = time.perf_counter()
        sum(len(s.completion.split()) for s in data)
        base = min(base, time.perf_counter() - t)
    t = time.perf_counter()
    table = features(data)
    feat = time.perf_counter() - t
    t = time.perf_counter()
    found = reward_forensics(SampleWindow("jsonl", (), data, len(data)), rule="L1.bench", first_step=None,
                             last_step=None, table=table)
    tests = time.perf_counter() - t
    print(f"{ns.n} samples: baseline (split words) {base:.2f} s; features {feat:.2f} s ({feat / base:.0f}x); "
          f"tests {tests:.2f} s ({tests / base:.1f}x); total {(feat + tests):.2f} s")
    print("named:", "; ".join(e.describe() for e in found.named) or "nothing")


if __name__ == "__main__":
    main()
