"""Time each published-log reader against a bare Python loop over the same file's lines.

For every reader the largest published example in shared/real_healthy (and shared/real_logs) is read
twice: `read` is the reader on the file's text (the format sniff and the parse: text.read_console;
for the JSON and notebook readers their whole load), `load` is what `stabdiag check` pays per file (the
file read, and for a console the ending read from its tail, stabdiag/console_ending.py, which is not a
reader's).  Both are compared with two floors any line-by-line reader pays:

  loop         with open(path) as f: for line in f: pass
  loop+split   with open(path) as f: for line in f: line.split()

The ratios read / floor are printed; at most 1.0 means the reader keeps up with a plain loop over the
lines (the issue's target, against loop+split).  An extra baseline, not the issue's floor:

  parse        the simplest correct Python parse of the same records (each record line split, its step
               int() and each value float(), the values kept per key; json.load and the same for the
               JSON files, with the golden values' model_config.yaml loaded as the reader does; a
               notebook's stored output lines split and its HTML tables' cells float())

with read / parse printed beside the others.  Times are CPU seconds (time.process_time), the best of
--repeat tries, in one process, the reader and the floors taking turns (on a shared machine both then
see the same load), after one warm-up read (imports and regex compilation are not timed).  A reader with no published
example (llm.c's console) is timed on a console of the same shape generated from the llm.c main.log.
Two rows are generated too: a training-loop console (lit-gpt's `iter N step M` lines, 100,000 of them) and
verl's FileLogger JSON Lines (the published example's records repeated to 20,000 lines, read by the tabular
reader).  A published golden-values file is a few hundred lines (20 kB): its time is json.loads, the YAML of the
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


def _litgpt_console(out_dir: str, iterations: int = 100_000) -> str:
    """A training-loop console as lit-gpt's pretrain scripts print it (tests/fixtures/pasted/make_pasted.py
    cites the print statements): `iter N step M: loss X, iter time: Tms[ (optimizer.step)]` with a gradient
    accumulation of 4, and `step N: val loss X, val time: Tms` every 100 optimizer steps."""
    import random

    rnd = random.Random(0)
    lines, step = [], 0
    for it in range(iterations):
        accumulating = (it + 1) % 4 != 0
        step += 0 if accumulating else 1
        lines.append(f"iter {it} step {step}: loss {3 + rnd.random():.4f}, iter time: {rnd.uniform(140, 160):.2f}ms"
                     f"{' (optimizer.step)' if not accumulating else ''}")
        if not accumulating and step % 100 == 0:
            lines.append(f"step {it}: val loss {3 + rnd.random():.4f}, val time: {rnd.uniform(800, 900):.2f}ms")
    path = os.path.join(out_dir, "litgpt_console.log")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def _verl_jsonl(example: str | None, out_dir: str, records: int = 20_000) -> str | None:
    """verl's FileLogger JSONL ({"step": N, "data": {...}}), the published example's records repeated with
    steps counting on to `records` lines."""
    import json

    if example is None:
        return None
    with open(example, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    path = os.path.join(out_dir, "verl_metrics.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for step in range(1, records + 1):
            fh.write(json.dumps({"step": step, "data": rows[(step - 1) % len(rows)]["data"]}) + "\n")
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


def _keep(columns: dict, key: str, step: int, value: float) -> None:
    columns.setdefault(key, []).append((step, value))


def _parse_modded(path: str) -> dict:
    """`step:N/M key:value ...` lines (a unit `ms` cut from a value)."""
    columns: dict = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("step:"):
                head, *pairs = line.split()
                step = int(head[5:].partition("/")[0])
                for pair in pairs:
                    key, _, raw = pair.partition(":")
                    _keep(columns, key, step, float(raw.removesuffix("ms")))
    return columns


def _parse_llmc(path: str) -> dict:
    """`step N/M | train loss X | norm Y | lr Z | T ms | F% bf16 MFU | R tok/s` and `val loss X` lines."""
    columns: dict = {}
    step = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("step "):
                parts = line.split(" | ")
                step = int(parts[0].split()[1].partition("/")[0])
                for part in parts[1:]:
                    words = part.split()
                    number = words[-1] if words[0][0].isalpha() else words[0]
                    _keep(columns, " ".join(w for w in words if w is not number), step, float(number.rstrip("%")))
            elif line.startswith("val loss "):
                _keep(columns, "val_loss", step, float(line.split()[2]))
    return columns


def _parse_golden(path: str) -> dict:
    """json.load, then each metric's {step: value} as ints and floats; and the model_config.yaml beside
    it loaded (the reader takes the run's configuration and planned length from it)."""
    import json

    import yaml

    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    config = os.path.join(os.path.dirname(path), "model_config.yaml")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as fh:
            yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return {key: ([int(k) for k in entry["values"]], [float(v) for v in entry["values"].values()])
            for key, entry in data.items()}


def _parse_dschat(path: str) -> dict:
    """DeepSpeed's timer lines (`global_step=N, ..., CurrSamplesPerSec=X, MemAllocated=YGB, ...`), its lr
    lines (`step=N, skipped=K, lr=[X, ...]`) and the evaluation results (`ppl: X`, `key: X, key: Y`)."""
    columns: dict = {}
    step = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if "/global_step=" in line:
                fields = dict(f.split("=", 1) for f in line[line.index("global_step="):].rstrip().split(", "))
                step = int(fields["global_step"])
                for key in ("CurrSamplesPerSec", "MemAllocated", "MaxMemAllocated"):
                    _keep(columns, key, step, float(fields[key].removesuffix("GB")))
            elif "] step=" in line:
                _keep(columns, "lr", step, float(line.split("lr=[", 1)[1].split(",", 1)[0].rstrip("]\n")))
            elif line.startswith(("ppl: ", "chosen")):
                for pair in line.split(", "):
                    key, _, raw = pair.rpartition(": ")
                    _keep(columns, key, step, float(raw))
    return columns


def _parse_verl(path: str) -> dict:
    """`step:N - key:value - key:value ...` lines, after any prefix."""
    columns: dict = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            at = line.find("step:")
            if at >= 0 and " - " in line:
                parts = line[at:].rstrip().split(" - ")
                try:
                    step = int(parts[0][5:])
                    for part in parts[1:]:
                        key, _, raw = part.partition(":")
                        _keep(columns, key, step, float(raw))
                except ValueError:
                    continue
    return columns


def _parse_litgpt(path: str) -> dict:
    """`iter N step M: loss X, iter time: Tms ...` (on the iteration) and `step N: val loss X, val time: ...`."""
    columns: dict = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            words = line.split()
            if line.startswith("iter "):
                step = int(words[1])
                _keep(columns, "loss", step, float(words[5].rstrip(",")))
                _keep(columns, "iter_time", step, float(words[8].removesuffix("ms")))
            elif line.startswith("step ") and words[2] == "val":
                step = int(words[1].rstrip(":"))
                _keep(columns, "val_loss", step, float(words[4].rstrip(",")))
                _keep(columns, "val_time", step, float(words[7].removesuffix("ms")))
    return columns


def _parse_jsonl(path: str) -> dict:
    """json.loads of each line, then each number of the record (a nested `data` lifted) kept per key."""
    import json

    columns: dict = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            record.update(record.pop("data", None) or {})
            step = record.pop("step")
            for key, value in record.items():
                if isinstance(value, (int, float)):
                    _keep(columns, key, step, float(value))
    return columns


def _parse_notebook(path: str) -> int:
    """json.load, then every stored output's text split line by line, and the cells of every HTML
    table (HF Trainer's progress table) converted with float() where they are numbers."""
    import json
    import re

    rows, cells = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S), re.compile(r"<t[dh][^>]*>\s*(.*?)\s*</t[dh]>", re.S)
    with open(path, encoding="utf-8") as fh:
        notebook = json.load(fh)
    tokens = 0
    for cell in notebook.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            html = data.get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            if "<table" in html:
                for row in rows.findall(html):
                    for value in cells.findall(row):
                        try:
                            float(value)
                            tokens += 1
                        except ValueError:
                            pass
                continue
            text = out.get("text") or data.get("text/plain", "")
            for line in ("".join(text) if isinstance(text, list) else text).splitlines():
                tokens += len(line.split())
    return tokens


def _times(text, loader, path: str, repeat: int, parse) -> tuple[float, float, float, float, float]:
    """(read, load, loop, loop+split, parse) best times for one reader on one file (for the JSON and
    notebook readers read is their load, timed once)."""
    floors = [lambda: _loop(path), lambda: _loop_split(path), lambda: parse(path)]
    if loader is text:
        with open(path, encoding="utf-8", errors="replace") as fh:
            content = fh.read()
        read, load, loop, split, parsed = _best([lambda: text.read_console(path, content),
                                                 lambda: loader.load(path)] + floors, repeat)
    else:
        read, loop, split, parsed = _best([lambda: loader.load(path)] + floors, repeat)
        load = read
    return read, load, loop, split, parsed


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
    from stabdiag.read.formats import megatron_golden, tabular, text
    from stabdiag.read.formats.text import notebook

    with tempfile.TemporaryDirectory() as tmp:
        golden = _largest(os.path.join(healthy, "megatron_golden", "*", "golden_values_*.json"))
        cases = [
            ("modded-nanogpt log", text, _largest(os.path.join(healthy, "moddednanogpt", "*", "*.txt")),
             _parse_modded),
            ("llm.c console (generated)", text,
             _llmc_console(_largest(os.path.join(args.shared, "real_logs", "llmc*", "main.log")), tmp), _parse_llmc),
            ("Megatron golden values", megatron_golden, golden, _parse_golden),
            ("Megatron golden values (1M)", megatron_golden, _golden_values(golden, tmp, args.golden_steps),
             _parse_golden),
            ("DeepSpeed-Chat SFT/RM/DPO", text, _largest(os.path.join(healthy, "dschat", "*", "*.log")),
             _parse_dschat),
            ("verl console", text, _largest(os.path.join(healthy, "verl_*", "*", "*.log")), _parse_verl),
            ("notebook (.ipynb)", notebook, _largest(os.path.join(healthy, "*", "*", "*.ipynb")), _parse_notebook),
            ("training loop: lit-gpt (gen.)", text, _litgpt_console(tmp), _parse_litgpt),
            ("JSON Lines (verl, gen.)", tabular,
             _verl_jsonl(_largest(os.path.join(args.shared, "real_logs", "verl_*", "*.jsonl")), tmp), _parse_jsonl),
        ]
        print(f"{'reader':27} {'file':>8} {'lines':>8} {'read s':>7} {'load s':>7} {'loop s':>7} {'split s':>7} "
              f"{'read/loop':>9} {'read/split':>10} {'load/split':>10} {'parse s':>7} {'read/parse':>10}  example")
        worst = 0.0
        for name, loader, path, parse in cases:
            if path is None:
                print(f"{name:27} (no example found)")
                continue
            size = os.path.getsize(path)
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = sum(1 for _ in fh)
            # the generated 1M-value file takes seconds a read: fewer tries
            repeat = min(args.repeat, 3) if path.startswith(tmp) and loader is megatron_golden else args.repeat
            read, load, loop, split, parsed = _times(text, loader, path, repeat, parse)
            worst = max(worst, read / split)
            shown = os.path.relpath(path, args.shared) if path.startswith(args.shared) else os.path.basename(path)
            print(f"{name:27} {size / 1e6:>6.2f}MB {lines:>8} {read:>7.4f} {load:>7.4f} {loop:>7.4f} {split:>7.4f} "
                  f"{read / loop:>9.2f} {read / split:>10.2f} {load / split:>10.2f} {parsed:>7.4f} "
                  f"{read / parsed:>10.2f}  {shown}")
        print(f"worst read / (loop+split): {worst:.2f}")
        print("parse (an extra baseline, not the issue's floor): the simplest Python parse of the same records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
