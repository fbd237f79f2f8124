"""One case of bench/fuzz.py: which seed and mutations (from its number alone), the folder it is written
to, the run through the real command line, and what came out (see bench/fuzz.py for what is counted)."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import time
import traceback
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import fuzz_corpus
import fuzz_hostile
import fuzz_mutate

FORMATS = ("json",) * 14 + ("terminal", "terminal", "junit", "markdown", "github")
FAILURES = ("internal error", "traceback", "wrong exit code", "unnamed error", "stray stderr", "warning leak",
            "bad output", "unescaped output", "bad steps", "timeout", "memory", "crash")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):\n  File \"", re.MULTILINE)
_LOCATED = re.compile(r":\d+(?::|\s|$)|byte offset|line \d+|record|\[[^\]]+\]|log_history\[|column|key '")


@dataclass
class Case:
    index: int
    seed: str
    files: dict[str, bytes]
    specials: dict[str, str]                 # path -> "fifo" | "loop" | "dir"
    args: list[str]                          # {base} stands for the case's folder
    what: list[str] = field(default_factory=list)


def make_case(corpus: list[fuzz_corpus.Seed], seed: int, index: int) -> Case:
    """Case `index` of the run seeded `seed`: a corpus seed, one to three mutations, options."""
    rng = random.Random(f"{seed}:{index}")
    base = rng.choice(corpus)
    files = dict(base.files)
    specials: dict[str, str] = {}
    what = []
    target = base.target
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        roll = rng.random()
        name = rng.choice(sorted(files)) if files else None
        if roll < 0.9 and name is not None:
            try:
                files[name], how = fuzz_mutate.mutate_file(name, files[name], rng)
            except Exception as exc:            # the mutator's own slip (a column name pyarrow cannot decode)
                files[name], how = fuzz_mutate.byte_mutation(files[name], rng)
                how += f" (after {type(exc).__name__} in the mutator)"
            what.append(f"{name}: {how}")
        else:
            what.append(_tree_mutation(files, specials, target, rng))
    target = _hostile(files, target, what, random.Random(f"{seed}:{index}:hostile"))
    fmt = rng.choice(FORMATS)
    args = ["check", "{base}/" + target, "--format", fmt]
    if rng.random() < 0.1:
        args.append("--split-sources")
    if rng.random() < 0.04:
        args += ["--step-col", rng.choice(("step", "_step", "epoch", "nope"))]
    if rng.random() < 0.03:
        args += ["--output", "{base}/report.out"]
    return Case(index, base.name, files, specials, args, what)


def _hostile(files: dict[str, bytes], target: str, what: list[str], rng: random.Random) -> str:
    """On top of the case's mutations, in one case in five, a hostile name or size (bench/fuzz_hostile);
    from a Random of its own, so that every other draw of a case is what it was before these existed."""
    roll = rng.random()
    if roll >= 0.2 or not files:
        return target
    if roll < 0.14:
        name = rng.choice(sorted(files))
        try:
            renamed = fuzz_hostile.rename_key(name, files[name], rng) if rng.random() < 0.5 else None
        except Exception:                      # noqa: BLE001 - the mutator's own slip: rename the path
            renamed = None
        if renamed is not None:
            files[name], how = renamed
            what.append(f"{name}: {how}")
            return target
        target, how = fuzz_hostile.rename_path(files, target, rng)
        what.append(how)
        return target
    what.append(fuzz_hostile.size_mutation(files, target, rng))
    return target


def _tree_mutation(files: dict[str, bytes], specials: dict[str, str], target: str, rng: random.Random) -> str:
    folder = target if "." not in os.path.basename(target) else os.path.dirname(target)
    prefix = f"{folder}/" if folder else ""
    op = rng.choice(("remove", "stray", "empty", "fifo", "loop", "dir-named-like-a-log", "copy"))
    if op == "remove" and len(files) > 1:
        del files[rng.choice(sorted(files))]
    elif op == "stray":
        files[prefix + rng.choice(("junk.log", "x.csv", "y.jsonl", "trainer_state.json", "z.parquet",
                                   "events.out.tfevents.1.h"))] = bytes(rng.randrange(256) for _ in range(64))
    elif op == "empty":
        files[prefix + rng.choice(("empty.csv", "empty.log", "trainer_state.json", "e.jsonl"))] = b""
    elif op == "fifo":
        specials[prefix + rng.choice(("pipe.csv", "pipe.log", "trainer_state.json"))] = "fifo"
    elif op == "loop":
        specials[prefix + "loop"] = "loop"
    elif op == "dir-named-like-a-log":
        specials[prefix + "dir.csv"] = "dir"
    else:
        name = rng.choice(sorted(files))
        files[prefix + "copy_" + os.path.basename(name)] = files[name]
    return f"tree:{op}"


def write_case(case: Case, base: Path) -> None:
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    for rel, data in case.files.items():
        path = base / rel
        if path.exists() and path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for rel, kind in case.specials.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            continue
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "loop":
            os.symlink(path, path)
        else:
            path.mkdir()


# --- running one case (in a worker) ----------------------------------------------------------------

def _steps_problem(runs) -> str | None:
    import numpy as np

    for run in runs:
        for key, series in run.series.items():
            steps = series.steps
            if steps.dtype != np.int64 or (len(steps) > 1 and np.any(np.diff(steps) <= 0)):
                return f"{run.name}/{key}: steps not strictly increasing int64"
    return None


def run_case(case: Case, base: Path) -> dict:
    """Run one case through the command line; the classification of what came out."""
    import stabdiag.read.assemble as assemble
    from stabdiag.cli import app

    write_case(case, base)
    args = [a.replace("{base}", str(base)) for a in case.args]
    out, err = io.StringIO(), io.StringIO()
    loaded: list = []
    real_load = assemble.load

    def spy(*a, **k):
        runs = real_load(*a, **k)
        loaded.extend(runs)
        return runs

    assemble.load = spy
    started = time.perf_counter()
    try:
        with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.filterwarnings("ignore", category=quiet)
            try:
                app(args, prog_name="stabdiag", standalone_mode=True)
                code: object = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            except MemoryError:
                code = "memory"
            except BaseException:
                code = "exception"
                err.write(traceback.format_exc())
    finally:
        assemble.load = real_load
    result = classify(case, base, code, out.getvalue(), err.getvalue(), [str(w.message) for w in caught], loaded)
    result["seconds"] = time.perf_counter() - started
    return result


def classify(case: Case, base: Path, code, stdout: str, stderr: str, caught: list[str], runs) -> dict:
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    problems: list[str] = []
    if code == "memory" or any("MemoryError" in line for line in errors):
        problems.append("memory")
    elif any(line.startswith("error: internal error") for line in errors):
        problems.append("internal error")
    if _TRACEBACK.search(stdout + "\n" + stderr) or code == "exception":
        problems.append("traceback")
    if code not in (0, 1, 2, 3) or (code == 2 and len(errors) != 1) or (code in (0, 1, 3) and errors):
        problems.append("wrong exit code")
    stray = [line for line in lines if line.strip() and not line.startswith(("error:", "warning:", "baseline:"))]
    if stray and "traceback" not in problems:
        problems.append("stray stderr")
    if caught:
        problems.append("warning leak")
    located = None
    if code == 2 and errors and "internal error" not in errors[0]:
        if str(base) not in errors[0]:
            problems.append("unnamed error")
        located = bool(_LOCATED.search(errors[0].split(str(base), 1)[-1]))
    fmt = case.args[case.args.index("--format") + 1]
    raw = fuzz_hostile.unescaped(fmt, stdout, stderr.replace(str(base), "{base}"), to_file="--output" in case.args)
    if raw is not None and "traceback" not in problems:
        problems.append("unescaped output")
    if code in (0, 1, 3) and fmt == "json" and "--output" not in case.args:
        try:
            json.loads(stdout)
        except ValueError:
            problems.append("bad output")
    steps = _steps_problem(runs)
    if steps:
        problems.append("bad steps")
    first = errors[0] if errors else (stray[0] if stray else (caught[0] if caught else steps or raw or ""))
    return {"index": case.index, "seed": case.seed, "code": code, "problems": problems, "located": located,
            "message": first.replace(str(base), "{base}")[:300], "what": case.what}
