"""Time each published-log reader against a bare Python loop over the same file's lines.

For every reader the largest published example in shared/real_healthy (and shared/real_logs) is read
twice: `read` is the reader on the file's text (the format sniff and the parse: text.read_console;
for the JSON and notebook readers their whole load), `load` is what `stabdiag check` pays per file (the
file read, and for a console the ending read from its tail, stabdiag/ending.py, which is not a
reader's).  Both are compared with two floors any line-by-line reader pays:

  loop         with open(path) as f: for line in f: pass
  loop+split   with open(path) as f: for line in f: line.split()

The ratios read / floor are printed; at most 1.0 means the reader keeps up with a plain loop over the
lines (the issue's target, against loop+split).  Times are CPU seconds (time.process_time), the best of
--repeat tries, in one process, the reader and the floors taking turns (on a shared machine both then
see the same load), after one warm-up read (imports and regex compilation are not timed).  A reader with no published
example (llm.c's console) is timed on a console of the same shape generated from the llm.c main.log.
A published golden-values file is a few hundred lines (20 kB): its time is json.loads, the YAML of the
model_config.yaml beside it and building five Series, a fixed cost that a loop over 536 lines does not
pay; the row "Megatron golden values (1M)" times the reader on a generated file of the same layout
(5 metrics x 200,000 steps, indented as Megatron writes it, --golden-steps), where the per-line cost
is what is compared (json.loads alone is about 2-3x loop+split there).

    python bench/text_readers.py [--repeat 7] [--shared ../shared] [--golden-steps 200000]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time


def _largest(pattern: str) -> str | None:
    files = [p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]
    return max(files, key=os.path.getsize) if files else None


def _llmc_console(main_log: str, out_dir: str) -> str | None:
    """llm.c's console, from the values of its main.log (`s:N trl:X lr:Y norm:Z`, `s:N tel:X`)."""
    if main_log is None:
        return None
    lines = []
    with open(main_log, encoding="utf-8") as fh:
        for line in fh:
            fields = dict(token.split(":", 1) for token in line.split() if ":" in token)
            step = int(fields.pop("s", "0"))
            if "tel" in fields:
                lines.append(f"val loss {fields['tel']}")
            elif "trl" in fields:
                lines.append(f"step {step + 1:4d}/19560 | train loss {fields['trl']} | norm {fields.get('norm', '0')} "
                             f"| lr {fields.get('lr', '0')} | 301.25 ms | 40.1% bf16 MFU | 1740321 tok/s")
    path = os.path.join(out_dir, "llmc_console.log")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def _golden_values(example: str | None, out_dir: str, steps: int) -> str | None:
    """A golden-values JSON of `steps` steps per metric, with the metrics of `example` and its layout."""
    if example is None:
        return None
    import json
    import random

    with open(example, encoding="utf-8") as fh:
        metrics = list(json.load(fh))
    rnd = random.Random(0)
    data = {key: {"start_step": 1, "end_step": steps, "step_interval": 1,
                  "values": {str(step): round(rnd.uniform(0, 10), 5) for step in range(1, steps + 1)}}
            for key in metrics}
    path = os.path.join(out_dir, "golden_values_generated.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=4)
    return path


def _best(fns, repeat: int) -> list[float]:
    """The best CPU time of each function over `repeat` tries, the functions taking turns (so that on a
    shared machine a reader and its floors are timed under the same load), after one warm-up call."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - start)
    return best


def _loop(path: str) -> None:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for _line in fh:
            pass


def _loop_split(path: str) -> None:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line.split()


def _times(text, loader, path: str, repeat: int) -> tuple[float, float, float, float]:
    """(read, load, loop, loop+split) best times for one reader on one file (for the JSON and notebook
    readers read is their load, timed once)."""
    floors = [lambda: _loop(path), lambda: _loop_split(path)]
    if loader is text:
        with open(path, encoding="utf-8", errors="replace") as fh:
            content = fh.read()
        read, load, loop, split = _best([lambda: text.read_console(path, content), lambda: loader.load(path)]
                                        + floors, repeat)
    else:
        read, loop, split = _best([lambda: loader.load(path)] + floors, repeat)
        load = read
    return read, load, loop, split


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    parser.add_argument("--golden-steps", type=int, default=200_000)
    args = parser.parse_args()
    healthy = os.path.join(args.shared, "real_healthy")
    if not os.path.isdir(healthy):
        print(f"error: {healthy}: not found (the published logs are not beside the checkout)", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from stabdiag.loaders import megatron_golden, text
    from stabdiag.loaders.text import notebook

    with tempfile.TemporaryDirectory() as tmp:
        golden = _largest(os.path.join(healthy, "megatron_golden", "*", "golden_values_*.json"))
        cases = [
            ("modded-nanogpt log", text, _largest(os.path.join(healthy, "moddednanogpt", "*", "*.txt"))),
            ("llm.c console (generated)", text,
             _llmc_console(_largest(os.path.join(args.shared, "real_logs", "llmc*", "main.log")), tmp)),
            ("Megatron golden values", megatron_golden, golden),
            ("Megatron golden values (1M)", megatron_golden, _golden_values(golden, tmp, args.golden_steps)),
            ("DeepSpeed-Chat SFT/RM/DPO", text, _largest(os.path.join(healthy, "dschat", "*", "*.log"))),
            ("verl console", text, _largest(os.path.join(healthy, "verl_*", "*", "*.log"))),
            ("notebook (.ipynb)", notebook, _largest(os.path.join(healthy, "*", "*", "*.ipynb"))),
        ]
        print(f"{'reader':27} {'file':>8} {'lines':>8} {'read s':>7} {'load s':>7} {'loop s':>7} {'split s':>7} "
              f"{'read/loop':>9} {'read/split':>10} {'load/split':>10}  example")
        worst = 0.0
        for name, loader, path in cases:
            if path is None:
                print(f"{name:27} (no example found)")
                continue
            size = os.path.getsize(path)
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = sum(1 for _ in fh)
            # the generated 1M-value file takes seconds a read: fewer tries
            repeat = min(args.repeat, 3) if path.startswith(tmp) and loader is megatron_golden else args.repeat
            read, load, loop, split = _times(text, loader, path, repeat)
            worst = max(worst, read / split)
            shown = os.path.relpath(path, args.shared) if path.startswith(args.shared) else os.path.basename(path)
            print(f"{name:27} {size / 1e6:>6.2f}MB {lines:>8} {read:>7.4f} {load:>7.4f} {loop:>7.4f} {split:>7.4f} "
                  f"{read / loop:>9.2f} {read / split:>10.2f} {load / split:>10.2f}  {shown}")
        print(f"worst read / (loop+split): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
