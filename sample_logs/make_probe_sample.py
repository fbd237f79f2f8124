"""Write sample_logs/probe/: a tiny random causal LM and 48 rollouts whose engine ran it in bf16, so that
recomputing in fp32 shows a known, small bf16-vs-fp32 drift (needs the probe extra: torch, transformers).

    python sample_logs/make_probe_sample.py
    stabdiag probe sample_logs/probe/rollouts.jsonl --model sample_logs/probe/model \\
        --dtype fp32 --dtype bf16 --series-out drift.csv
    stabdiag check sample_logs/grpo_math_healthy --with drift.csv

The rollouts' steps are 50, 100, ..., 400 so that the drift series lines up with the 400-step samples.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stabdiag.probe.synthetic import make_sample

OUT = Path(__file__).resolve().parent / "probe"
STEP_EVERY = 50


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    model_dir, rollouts = make_sample(OUT, n_records=48, steps=8, seed=0, engine_dtype="bf16")
    path = Path(rollouts)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        row["step"] = (int(row["step"]) + 1) * STEP_EVERY
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"wrote {Path(model_dir).relative_to(OUT.parent.parent)} and {path.relative_to(OUT.parent.parent)}")


if __name__ == "__main__":
    main()
