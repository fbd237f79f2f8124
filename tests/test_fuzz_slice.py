"""A seeded slice of bench/fuzz.py (300 mutated inputs of every format through the real command line, in
two worker processes with a time and a memory limit): no internal error, traceback, wrong exit code,
unnamed error, stray stderr line, leaked warning, bad JSON or bad steps.  The full run, 100,000 inputs:
`python bench/fuzz.py --cases 100000`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import fuzz  # noqa: E402

pytest.importorskip("tensorboard")
pytest.importorskip("google_crc32c")

SEED = 15
CASES = 300


def test_a_seeded_slice_of_the_fuzzer_finds_nothing():
    results = fuzz.run_pool(range(CASES), seed=SEED, workers=2, timeout_s=30.0, memory_mb=4096)
    assert len(results) == CASES
    stats = fuzz.figures(results)
    bad = sorted((r for r in results if r["problems"]), key=lambda r: r["index"])
    shown = "\n".join(f"case {r['index']} [{r['seed']}] {','.join(r['problems'])}: {r['message']} <- "
                      f"{'; '.join(r['what'])} (rebuild: python bench/fuzz.py --seed {SEED} --case {r['index']})"
                      for r in bad[:10])
    assert not any(stats["failures"].values()), shown
    codes = stats["exit_codes"]
    assert codes.get("0", 0) + codes.get("1", 0) > CASES // 3 and codes.get("2", 0) > CASES // 10   # both paths
