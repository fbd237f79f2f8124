"""Error rates of stabdiag on broad null families and its power on failure shapes, with Wilson 95% intervals
(issue 43, acceptance 1 and 2).

    python bench/calibrate.py --quick                         # under 2 min on one core
    python bench/calibrate.py -j 2 --save after.json          # full: 200 runs per family, 10 per shape cell
    python bench/calibrate.py --rev main --save before.json   # another revision's stabdiag (git archive)
    python bench/calibrate.py --compare before.json           # before -> after, family by family, shape by shape
    python bench/calibrate.py --families iid_t3,ar_0.99 --shapes none --runs 400 --seed 7
    python bench/calibrate.py --describe                      # how every family and shape is drawn

How the runs are drawn: bench/_families.py's docstring (`--describe`).  Every run is a pandas DataFrame given
to the public API only, `stabdiag.load(frame, name=...)`, the evals loaded apart (`nan="missing"`) and
joined with `Run.with_series`, so that a NaN the training frame holds is a NaN logged; then
`stabdiag.diagnose(run).to_dict()` is read (verdict, root_layer, findings[].rule / severity / downstream,
unknown[].undecided, signals).  Runs are diagnosed in this process, or in a pool of `-j` processes; the same
`--seed` gives the same runs whatever `-j`, `--families` or `--shapes` select.

What is printed
  null families   per family: runs; the share whose verdict is fail / warn / unknown / pass; per rule, the
                  share of runs where it produced a finding of any severity (and of severity fail); the
                  share where a rule was too noisy to tell.  Targets: fail <= 1% and warn <= 5% of a family's
                  runs; per rule, severity fail <= 1% and any finding <= 5%.  "met" = the point estimate is
                  within the target; "upper" says whether the interval's upper end is too.
  failure shapes  per shape x effect x noise level x T: detection = the run's root layer is the shape's layer
                  AND one of its rules fired (any severity); and the rule's own firing rate.  Checks: detection
                  grows with effect size and with T (pooled rates), and never falls when noise shrinks; since
                  effect sizes and noise levels rescale the same draw, a run detected at a smaller effect (or
                  more noise) and missed at a larger one (or less noise) is counted as a paired violation.
  healthy twins   shapes marked healthy (a plateau, a noisy loss, a cosine restart: near misses of the failure
                  shapes): per cell the runs that end fail / warn, pooled by effect with Wilson intervals, the
                  targets of the null families (fail <= 1%, warn <= 5%), and the rules that fired.
Modes: full = 200 runs per family with T up to 100,000 steps (no lower cap is needed: the longest run
takes under a second), shapes at T 200 / 1,000 / 5,000 / 20,000 and noise 1 / 0.3 / 0 with 20 runs per cell
(2,600 + 5,760 runs); --quick = 100 runs per family with T capped at 5,000, shapes at T 300 / 3,000 and
noise 1 / 0.3 / 0 with 6 runs per cell (1,300 + 864 runs).

`--rev REV` runs this script again with `git archive REV stabdiag` (bench/_stabdiag_cli.py's extract_rev)
first on PYTHONPATH; the generators are this checkout's, so both versions see the same runs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")      # -j processes, not BLAS threads, share the cores
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _families as fam  # noqa: E402

TARGET_FAIL, TARGET_WARN = 0.01, 0.05
VERDICTS = ("fail", "warn", "unknown", "pass")
STEP_BUCKETS = ((0, 1_000, "<1k"), (1_000, 10_000, "1k-10k"), (10_000, math.inf, ">=10k"))
BREAKDOWN = [f"T {name}" for *_, name in STEP_BUCKETS] + [f"every {k}" for k in fam.CADENCES] + ["rl", "pretrain"]
MODES = {
    "full": {"runs": 200, "t_max": 100_000, "shape_runs": 20, "shape_steps": (200, 1_000, 5_000, 20_000),
             "noise": (1.0, 0.3, 0.0)},
    "quick": {"runs": 100, "t_max": 5_000, "shape_runs": 6, "shape_steps": (300, 3_000), "noise": (1.0, 0.3, 0.0)},
}


# Wilson's score interval: E. B. Wilson (1927), "Probable inference, the law of succession, and statistical
# inference", JASA 22(158):209-212; recommended over the Wald interval for small n and rates near 0 by
# Brown, Cai & DasGupta (2001), "Interval estimation for a binomial proportion", Statist. Sci. 16(2):101-133.
def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The 95% Wilson score interval of k successes in n trials ((0, 1) when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (0.0 if k == 0 else centre - half), (1.0 if k == n else centre + half)   # exact at the ends


def rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{100 * k / n if n else 0:5.1f}% [{100 * lo:4.1f}-{100 * hi:5.1f}]"


def target_text(k: int, n: int, target: float) -> str:
    met = n > 0 and k / n <= target
    upper = wilson(k, n)[1] <= target
    return ("met" if met else "MISSED") + (" (upper met)" if upper else " (upper MISSED)")


# ---------------------------------------------------------------- one run

def to_run(stabdiag, gen: fam.Generated, name: str):
    """The Run of a drawn run, through the public API: the training metrics as one frame (a NaN in it is a
    NaN logged), the evals as another (`nan="missing"`: logged only at their steps), joined."""
    import pandas as pd

    run = stabdiag.load(pd.DataFrame(gen.train), name=name)[0]
    if len(gen.evals) > 1:
        evals = stabdiag.load(pd.DataFrame(gen.evals), name=name, nan="missing")[0]
        run = run.with_series(evals.series)
    return run


def diagnose_task(task: tuple) -> dict:
    """Draw the task's run, diagnose it, and keep what the tables need (JSON-able)."""
    import stabdiag

    if task[0] == "null":
        _, family, index, seed, t_max = task
        gen = fam.null_run(family, index, seed, t_max)
        name = f"{family}#{index}"
    else:
        _, shape, effect, noise, steps, index, seed = task
        gen = fam.shape_run(shape, effect, noise, steps, index, seed)
        name = f"{shape}/{effect}/noise{noise:g}/T{steps}#{index}"
    record = {"task": task[0], "name": name, **gen.info}
    started = time.perf_counter()
    try:
        diag = stabdiag.diagnose(to_run(stabdiag, gen, name)).to_dict()
    except Exception as exc:    # a crash is a result to count, not the end of the measurement
        record.update(verdict="error", root_layer=None, rules={}, own=[], undecided=[], signals_off=[],
                      error=f"{type(exc).__name__}: {exc}"[:300], seconds=round(time.perf_counter() - started, 3))
        return record
    rules: dict[str, str] = {}
    unknown = {u["rule"]: bool(u.get("undecided")) for u in diag.get("unknown", [])}
    for f in diag.get("findings", []):
        if rules.get(f["rule"]) != "fail":
            rules[f["rule"]] = f["severity"]
    read = diag.get("signals", {})
    record.update(verdict=diag["verdict"], root_layer=diag.get("root_layer"), rules=rules,
                  own=sorted({f["rule"] for f in diag.get("findings", []) if not f.get("downstream")}),
                  undecided=sorted(rule for rule, undecided in unknown.items() if undecided),
                  signals_off=sorted(s for s, key in gen.signals.items() if read.get(s) != key),
                  seconds=round(time.perf_counter() - started, 3))
    if task[0] == "shape":
        spec = fam.SHAPES[gen.info["shape"]]
        record["healthy"] = spec.healthy
        fired = any(r in rules for r in spec.rules)
        record.update(fired=fired, detected=fired and record["root_layer"] == spec.layer,
                      not_judged=any(r in unknown and not unknown[r] for r in spec.rules),
                      too_noisy=any(unknown.get(r, False) for r in spec.rules))
    return record


def tasks_for(args, mode: dict) -> list[tuple]:
    tasks: list[tuple] = [("null", f, i, args.seed, mode["t_max"]) for f in args.families for i in range(mode["runs"])]
    for shape in args.shapes:
        for effect in fam.EFFECTS:
            for noise in mode["noise"]:
                for steps in mode["shape_steps"]:
                    tasks += [("shape", shape, effect, noise, steps, i, args.seed) for i in range(mode["shape_runs"])]
    return tasks


def run_all(tasks: list[tuple], jobs: int) -> list[dict]:
    """Every task's record, in the tasks' order; the longest runs go first so that the pool stays busy."""
    order = sorted(range(len(tasks)), key=lambda i: -_cost(tasks[i]))
    records: list[dict | None] = [None] * len(tasks)
    started = last = time.perf_counter()
    if jobs > 1:
        pool = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                           else "spawn").Pool(jobs)
        results = pool.imap(diagnose_task, [tasks[i] for i in order], chunksize=1)
    else:
        pool, results = None, map(diagnose_task, (tasks[i] for i in order))
    try:
        for done, (i, record) in enumerate(zip(order, results), 1):
            records[i] = record
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                print(f"  {done}/{len(tasks)} runs, {last - started:.0f} s", file=sys.stderr, flush=True)
    except BaseException:
        if pool is not None:
            pool.terminate()
        raise
    if pool is not None:
        pool.close()
        pool.join()
    return [r for r in records if r is not None]


def _cost(task: tuple) -> float:
    if task[0] == "shape":
        return task[4]
    return fam.null_run_steps(task[1], task[2], task[3], task[4])


# ---------------------------------------------------------------- null families

def family_summary(records: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for rec in records:
        if rec["task"] != "null":
            continue
        s = out.setdefault(rec["family"], {"runs": 0, "verdicts": dict.fromkeys((*VERDICTS, "error"), 0),
                                           "rules": {}, "undecided": {}, "signals_off": 0,
                                           "flagged_by": defaultdict(lambda: [0, 0])})
        s["runs"] += 1
        s["verdicts"][rec["verdict"]] = s["verdicts"].get(rec["verdict"], 0) + 1
        for rule, severity in rec["rules"].items():
            counts = s["rules"].setdefault(rule, {"any": 0, "fail": 0})
            counts["any"] += 1
            counts["fail"] += severity == "fail"
        for rule in rec["undecided"]:
            s["undecided"][rule] = s["undecided"].get(rule, 0) + 1
        s["signals_off"] += bool(rec["signals_off"])
        flagged = rec["verdict"] in ("fail", "warn")
        bucket = next(name for lo, hi, name in STEP_BUCKETS if lo <= rec["steps"] < hi)
        for part in (f"T {bucket}", f"every {rec['cadence']}", rec["kind"]):
            s["flagged_by"][part][0] += flagged
            s["flagged_by"][part][1] += 1
    for s in out.values():
        s["flagged_by"] = dict(s["flagged_by"])
    return out


def print_families(summary: dict[str, dict]) -> list[str]:
    """The per-family table; returns the lines of the families that miss a target."""
    print(f"\nNULL FAMILIES (healthy runs).  Targets: fail <= {TARGET_FAIL:.0%}, warn <= {TARGET_WARN:.0%} of runs; "
          f"per rule: severity fail <= {TARGET_FAIL:.0%}, any finding <= {TARGET_WARN:.0%}")
    print(f"{'family':<18}{'runs':>5}  " + "".join(f"{v:<22}" for v in VERDICTS) + "targets")
    missed = []
    for name, s in summary.items():
        n, v = s["runs"], s["verdicts"]
        fail_t, warn_t = target_text(v["fail"], n, TARGET_FAIL), target_text(v["warn"], n, TARGET_WARN)
        print(f"{name:<18}{n:>5}  " + "".join(f"{rate(v[x], n):<22}" for x in VERDICTS)
              + f"fail {fail_t}, warn {warn_t}" + (f"; {v['error']} errors" if v.get("error") else ""))
        for rule, c in sorted(s["rules"].items(), key=lambda kv: -kv[1]["any"]):
            any_t, fail_rt = target_text(c["any"], n, TARGET_WARN), target_text(c["fail"], n, TARGET_FAIL)
            print(f"    {rule:<34} any {rate(c['any'], n)}  {any_t:<20}  fail {rate(c['fail'], n)}  {fail_rt}")
            if not (any_t.startswith("met") and fail_rt.startswith("met")):
                missed.append(f"{name}: {rule} any {100 * c['any'] / n:.1f}%, fail {100 * c['fail'] / n:.1f}%")
        if s["undecided"]:
            print("    too noisy to tell: " + ", ".join(f"{r} {rate(k, n).split(' [')[0].strip()}"
                                                      for r, k in sorted(s["undecided"].items())))
        parts = sorted(s["flagged_by"].items(), key=lambda kv: BREAKDOWN.index(kv[0]) if kv[0] in BREAKDOWN else 99)
        print("    flagged (fail or warn) by " + ", ".join(f"{part} {k}/{m}" for part, (k, m) in parts))
        if s["signals_off"]:
            print(f"    {s['signals_off']} run(s) whose columns did not resolve to the intended signals")
    return missed


# ---------------------------------------------------------------- failure shapes

def shape_summary(records: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for rec in records:
        if rec["task"] != "shape":
            continue
        cells = out.setdefault(rec["shape"], {})
        key = f"{rec['effect']}|{rec['noise']:g}|{rec['steps']}"
        c = cells.setdefault(key, {"runs": 0, "detected": 0, "fired": 0, "not_judged": 0, "too_noisy": 0,
                                   "roots": {}, "fail": 0, "warn": 0, "rules": {}})
        c["runs"] += 1
        c["fail"] += rec["verdict"] == "fail"
        c["warn"] += rec["verdict"] == "warn"
        for rule in rec["rules"]:
            c["rules"][rule] = c["rules"].get(rule, 0) + 1
        c["not_judged"] += bool(rec.get("not_judged"))
        c["too_noisy"] += bool(rec.get("too_noisy"))
        c["detected"] += bool(rec.get("detected"))
        c["fired"] += bool(rec.get("fired"))
        root = str(rec["root_layer"])
        c["roots"][root] = c["roots"].get(root, 0) + 1
    return out


def _pool(cells: dict, which: int, value: str) -> tuple[int, int, int]:
    parts = [c for key, c in cells.items() if key.split("|")[which] == value]
    return sum(c["detected"] for c in parts), sum(c["fired"] for c in parts), sum(c["runs"] for c in parts)


def paired_losses(records: list[dict], shape: str, along: str) -> tuple[int, int]:
    """Pairs of one draw (same T and index) where the run is detected at the smaller effect (more noise) and
    missed at the next larger effect (less noise): (losses, pairs)."""
    runs = {(r["effect"], r["noise"], r["steps"], r["index"]): bool(r.get("detected"))
            for r in records if r["task"] == "shape" and r["shape"] == shape}
    losses = pairs = 0
    for (effect, noise, steps, index), hit in runs.items():
        if along == "effect":
            nxt = fam.EFFECTS.index(effect) + 1
            other = runs.get((fam.EFFECTS[nxt], noise, steps, index)) if nxt < len(fam.EFFECTS) else None
        else:
            less = sorted(n for n in {k[1] for k in runs} if n < noise)
            other = runs.get((effect, less[-1], steps, index)) if less else None
        if other is not None:
            pairs += 1
            losses += hit and not other
    return losses, pairs


def _grows(rates: list[tuple[str, int, int, int]]) -> str:
    shares = [k / n if n else 0.0 for _, k, _, n in rates]
    drops = [f"{rates[i][0]} -> {rates[i + 1][0]}" for i in range(len(shares) - 1) if shares[i + 1] < shares[i]]
    return "yes" if not drops else "NO (falls " + ", ".join(drops) + ")"


def print_shapes(summary: dict[str, dict], records: list[dict]) -> list[str]:
    print("\nFAILURE SHAPES.  detection = root layer is the shape's layer AND its rule fired; "
          "cell: detected/runs (rule fired)")
    flags = []
    for shape, cells in summary.items():
        spec = fam.SHAPES[shape]
        if spec.healthy:
            flags += print_twin(shape, cells)
            continue
        print(f"\n{shape}  (layer {spec.layer}, {' / '.join(spec.rules)}; effects "
              f"{' / '.join(f'{e:g}' for e in spec.effects)})")
        steps, noises = print_cells(cells, lambda c: f"{c['detected']}/{c['runs']} ({c['fired']})")
        by = {"effect": [(e, *_pool(cells, 0, e)) for e in fam.EFFECTS],
              "noise": [(f"noise {x}", *_pool(cells, 1, x)) for x in noises],
              "T": [(f"T={t}", *_pool(cells, 2, str(t))) for t in steps]}
        for along, rates in by.items():
            text = ", ".join(f"{label} {rate(k, n)} (rule {100 * f / n if n else 0:.0f}%)" for label, k, f, n in rates)
            verdict = _grows(rates)
            print(f"    by {along:<6} {text}")
            paired = ""
            if along in ("effect", "noise"):
                losses, pairs = paired_losses(records, shape, along)
                paired = f"; paired: {losses} of {pairs} runs lost detection" + (" (VIOLATION)" if losses else "")
            word = {"effect": "grows with effect", "noise": "never falls as noise shrinks", "T": "grows with T"}
            print(f"           {word[along]}: {verdict}{paired}")
            if not verdict.startswith("yes") or paired.endswith("(VIOLATION)"):
                flags.append(f"{shape}: {word[along]}: {verdict}{paired}")
        roots = defaultdict(int)
        for c in cells.values():
            for root, k in c["roots"].items():
                roots[root] += k
        total = sum(c["runs"] for c in cells.values())
        print("    root layers: " + ", ".join(f"{r} {k}" for r, k in sorted(roots.items()))
              + f"; the rule was not judged in {sum(c['not_judged'] for c in cells.values())}/{total} runs, "
              f"too noisy to tell in {sum(c['too_noisy'] for c in cells.values())}/{total}")
    return flags


def print_cells(cells: dict, cell_text) -> tuple[list[int], list[str]]:
    """A shape's table, a row per effect and noise, a column per T, each cell as `cell_text` writes it;
    returns the Ts and noises it has."""
    steps = sorted({int(k.split("|")[2]) for k in cells})
    noises = sorted({k.split("|")[1] for k in cells}, key=float, reverse=True)
    print(f"    {'effect':<8}{'noise':<7}" + "".join(f"{'T=' + str(t):<16}" for t in steps))
    for effect in fam.EFFECTS:
        for noise in noises:
            row = [cell_text(c) if (c := cells.get(f"{effect}|{noise}|{t}")) else "-" for t in steps]
            print(f"    {effect:<8}{noise:<7}" + "".join(f"{x:<16}" for x in row))
    return steps, noises


def print_twin(shape: str, cells: dict) -> list[str]:
    """A healthy twin's table: fail / warn runs per cell, pooled by effect against the null targets, and the
    rules that fired on it; returns the lines of the effects that miss a target."""
    spec = fam.SHAPES[shape]
    print(f"\n{shape}  (healthy twin; effects {' / '.join(f'{e:g}' for e in spec.effects)}); "
          "cell: fail/warn/runs")
    print_cells(cells, lambda c: f"{c['fail']}/{c['warn']}/{c['runs']}")
    missed = []
    for effect in fam.EFFECTS:
        parts = [c for key, c in cells.items() if key.split("|")[0] == effect]
        n = sum(c["runs"] for c in parts)
        fail, warn = sum(c["fail"] for c in parts), sum(c["warn"] for c in parts)
        fail_t, warn_t = target_text(fail, n, TARGET_FAIL), target_text(warn, n, TARGET_WARN)
        print(f"    {effect:<8}fail {rate(fail, n)} {fail_t}; warn {rate(warn, n)} {warn_t}")
        if not (fail_t.startswith("met") and warn_t.startswith("met")):
            missed.append(f"healthy twin over target: {shape} {effect}: fail {100 * fail / n:.1f}%, "
                          f"warn {100 * warn / n:.1f}%")
    fired: dict[str, int] = defaultdict(int)
    for c in cells.values():
        for rule, k in c["rules"].items():
            fired[rule] += k
    total = sum(c["runs"] for c in cells.values())
    ranked = sorted(fired.items(), key=lambda kv: -kv[1])
    print("    rules that fired: " + (", ".join(f"{r} {k}/{total}" for r, k in ranked) or "none"))
    return missed


# ---------------------------------------------------------------- compare, CLI

def print_compare(before: dict, records: list[dict], meta: dict) -> None:
    old_f, new_f = family_summary(before["records"]), family_summary(records)
    print(f"\nCOMPARE with {before['meta'].get('label', '?')} (seed {before['meta'].get('seed')}): before -> after; "
          "changed = runs drawn in both whose verdict or rules differ")
    # a run's name fixes its draw once the seed and the null runs' longest T are the same
    same_draws = (before["meta"].get("seed"), before["meta"].get("mode", {}).get("t_max")) == \
        (meta["seed"], meta["mode"]["t_max"])
    if not same_draws:
        print("  note: the runs were drawn with another seed or --t-max: per-run changes are not counted")
    was = {r["name"]: (r["verdict"], r["rules"]) for r in before["records"]} if same_draws else {}
    changed: dict[str, int] = defaultdict(int)
    for r in records:
        if r["name"] in was and was[r["name"]] != (r["verdict"], r["rules"]):
            changed[r.get("family") or r["shape"]] += 1
    for name in sorted(set(old_f) | set(new_f)):
        a, b = old_f.get(name), new_f.get(name)
        cells = []
        for v in ("fail", "warn", "unknown"):
            cells.append(f"{v} " + " -> ".join(f"{100 * s['verdicts'].get(v, 0) / s['runs']:.1f}%" if s else "-"
                                               for s in (a, b)))
        print(f"  {name:<18}" + ", ".join(cells) + f"; changed {changed[name]}")
    old_s, new_s = shape_summary(before["records"]), shape_summary(records)
    for shape in sorted(set(old_s) | set(new_s)):
        if fam.SHAPES[shape].healthy:
            parts = []
            for effect in fam.EFFECTS:
                shares = []
                for s in (old_s.get(shape), new_s.get(shape)):
                    cells = [c for key, c in (s or {}).items() if key.split("|")[0] == effect]
                    n = sum(c["runs"] for c in cells)
                    shares.append(f"{100 * sum(c['fail'] for c in cells) / n:.0f}/"
                                  f"{100 * sum(c['warn'] for c in cells) / n:.0f}%" if n else "-")
                parts.append(f"{effect} " + " -> ".join(shares))
            print(f"  {shape:<18}fail/warn " + ", ".join(parts) + f"; changed {changed[shape]}")
            continue
        parts = []
        for effect in fam.EFFECTS:
            pooled = [_pool(s, 0, effect) if s else None for s in (old_s.get(shape), new_s.get(shape))]
            parts.append(f"{effect} " + " -> ".join(f"{100 * p[0] / p[2]:.0f}%" if p and p[2] else "-"
                                                    for p in pooled))
        print(f"  {shape:<18}detection " + ", ".join(parts) + f"; changed {changed[shape]}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs, T capped at 5,000 (well under 2 min on one core)")
    ap.add_argument("--families", default="all", help=f"comma-separated, 'all' or 'none' ({', '.join(fam.FAMILIES)})")
    ap.add_argument("--shapes", default="all", help=f"comma-separated, 'all' or 'none' ({', '.join(fam.SHAPES)})")
    ap.add_argument("--runs", type=int, help="runs per null family (default 200; --quick 100)")
    ap.add_argument("--shape-runs", type=int, help="runs per shape cell (default 20; --quick 6)")
    ap.add_argument("--t-max", type=int, help="longest null run in steps (default 100,000; --quick 5,000)")
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("-j", "--jobs", type=int, default=1, help="processes diagnosing at once (default 1)")
    ap.add_argument("--save", type=Path, help="write the per-run records and tables to this JSON file")
    ap.add_argument("--compare", type=Path, help="a --save file of another version: print before -> after")
    ap.add_argument("--rev", help="run this git revision's stabdiag (git archive into a temporary directory)")
    ap.add_argument("--label", help=argparse.SUPPRESS)
    ap.add_argument("--describe", action="store_true", help="print how every family and shape is drawn")
    args = ap.parse_args(argv)
    args.families = _names(args.families, fam.FAMILIES, "--families")
    args.shapes = _names(args.shapes, tuple(fam.SHAPES), "--shapes")
    return args


def _names(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    if text == "all":
        return list(known)
    if text == "none":
        return []
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in known]
    if unknown:
        raise SystemExit(f"error: {flag}: unknown {', '.join(unknown)}; expected some of {', '.join(known)}")
    return names


def rerun_at_rev(rev: str, argv: list[str]) -> int:
    """This script again, with REV's stabdiag first on PYTHONPATH (and this checkout's generators)."""
    from _stabdiag_cli import Implementation, extract_rev

    src = extract_rev(rev)
    rest, skip = [], False
    for arg in argv:
        if skip or arg == "--rev" or arg.startswith("--rev="):
            skip = arg == "--rev"
            continue
        rest.append(arg)
    try:
        return subprocess.run([sys.executable, str(Path(__file__).resolve()), *rest, "--label", f"rev {rev}"],
                              env=Implementation(src=src).env(), check=False).returncode
    finally:
        shutil.rmtree(src, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.describe:
        print(fam.__doc__)
        return 0
    if args.rev:
        return rerun_at_rev(args.rev, argv)
    import stabdiag

    mode = dict(MODES["quick" if args.quick else "full"])
    mode.update({k: v for k, v in (("runs", args.runs), ("shape_runs", args.shape_runs), ("t_max", args.t_max))
                 if v is not None})
    label = args.label or "this checkout"
    tasks = tasks_for(args, mode)
    print(f"stabdiag {stabdiag.__version__} ({label}, {os.path.dirname(stabdiag.__file__)}); "
          f"{'quick' if args.quick else 'full'} mode, seed {args.seed}: {len(tasks)} runs, {args.jobs} at a time; "
          f"null T 20..{mode['t_max']:,}, {mode['runs']} per family; shapes T {mode['shape_steps']}, "
          f"noise {mode['noise']}, {mode['shape_runs']} per cell")
    started = time.perf_counter()
    records = run_all(tasks, max(1, args.jobs))
    elapsed = time.perf_counter() - started
    families, shapes = family_summary(records), shape_summary(records)
    missed = print_families(families) if families else []
    flags = print_shapes(shapes, records) if shapes else []
    errors = [r for r in records if r["verdict"] == "error"]
    off = [r["name"] for r in records if r["signals_off"]]
    print(f"\nSUMMARY ({len(records)} runs in {elapsed:.0f} s, {sum(r['seconds'] for r in records):.0f} s diagnosing)")
    for name, s in families.items():
        v, n = s["verdicts"], s["runs"]
        if v["fail"] / n > TARGET_FAIL or v["warn"] / n > TARGET_WARN:
            print(f"  {name}: fail {rate(v['fail'], n)}, warn {rate(v['warn'], n)}")
    for line in missed:
        print(f"  rule over target: {line}")
    for line in flags:
        print(f"  {line}" if line.startswith("healthy twin") else f"  power: {line}")
    if errors:
        print(f"  {len(errors)} run(s) raised, e.g. {errors[0]['name']}: {errors[0]['error']}")
    if off:
        print(f"  {len(off)} run(s) read other signals than intended, e.g. {off[0]}")
    meta = {"label": label, "version": stabdiag.__version__, "stabdiag": os.path.dirname(stabdiag.__file__),
            "harness_commit": _head(), "seed": args.seed, "quick": args.quick,
            "mode": {k: list(v) if isinstance(v, tuple) else v for k, v in mode.items()}, "jobs": args.jobs,
            "seconds": round(elapsed, 1)}
    if args.compare:
        print_compare(json.loads(args.compare.read_text()), records, meta)
    if args.save:
        args.save.write_text(json.dumps({"meta": meta, "families": families, "shapes": shapes, "records": records},
                                        indent=1, default=_json))
        print(f"\nsaved {args.save}")
    return 0


def _head() -> str | None:
    out = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def _json(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON-able: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
