"""Published healthy runs, seen as a nightly gate or a live watch would see them: cut short, logged more
sparsely, resumed at another step number.  A healthy run stays healthy under each.

The runs: every run of ../shared/real_healthy, and the runs of ../shared/real_logs that
tests/test_real_logs.py expects to pass (family "real_logs").  bench/score_real.py checks each once, as
published.  A rule that sits just
under its bar on one of those runs passes there and fails on the next run of the same kind; these
variants of the same healthy curves show such margins without new data (and without tuning on the half
of the set that is kept apart):

  first 30..90%     the run as `stabdiag watch` sees it 30%, half-way, three quarters and 90% in (every
                    series cut at that share of the run's step span; the run's ending is not known yet)
  every 2nd / 3rd   only every k-th point of the train-cadence series (those with at least half as many
                    points as the densest one), sparser series (evals) untouched
  steps +50,000     every step shifted (a run resumed from a checkpoint's step)

A variant is checked only where its densest series keeps at least 20 points.  Each is loaded once with
`stabdiag.load` and diagnosed with the shipped rules (`stabdiag.diagnose`).

    python bench/real_stress.py                 # every real_healthy run, every variant; per family
    python bench/real_stress.py -v              # also every variant that warns or fails, with its rules
    python bench/real_stress.py --only verl     # runs whose family/folder starts with a prefix
    python bench/real_stress.py -j 2            # two worker processes

Prints per variant and family the verdict counts; exit 1 when a variant of a healthy run fails (the
bar of score_real.py: no `fail` on a published healthy run), else 0.  `warn` is counted, not a target.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
MIN_POINTS = 20
OFFSET = 50_000
CUTS = (30, 50, 75, 90)
VARIANTS = ("as logged", *(f"first {c}%" for c in CUTS), "every 2nd", "every 3rd", f"steps +{OFFSET:,}")
VERDICTS = ("pass", "warn", "fail", "unknown", "error")


def _densest(run) -> int:
    return max((len(s) for s in run.series.values()), default=0)


def _cut(run, share: float):
    """The run as seen when `share` of its step span had been logged: no ending known yet."""
    firsts = [s.steps[0] for s in run.series.values() if len(s)]
    lasts = [s.steps[-1] for s in run.series.values() if len(s)]
    cutoff = min(firsts) + share * (max(lasts) - min(firsts))
    series = {}
    for key, s in run.series.items():
        keep = s.steps <= cutoff
        if keep.any():
            series[key] = _subset(s, keep)
    return replace(run, series=series, meta={k: v for k, v in run.meta.items() if k != "ending"})


def _thin(run, k: int):
    dense = _densest(run)
    series = {}
    for key, s in run.series.items():
        if 2 * len(s) >= dense:
            idx = np.arange(len(s))
            s = _subset(s, (idx % k == k - 1) | (idx == len(s) - 1))
        series[key] = s
    return replace(run, series=series)


def _shift(run, offset: int):
    series = {k: replace(s, steps=s.steps + offset, superseded_steps=s.superseded_steps + offset)
              for k, s in run.series.items()}
    meta = dict(run.meta)
    ending = meta.get("ending")
    if ending is not None:
        meta["ending"] = replace(ending, step=None if ending.step is None else ending.step + offset,
                                 planned=None if ending.planned is None else ending.planned + offset)
    return replace(run, series=series, meta=meta)


def _subset(s, keep: np.ndarray):
    return replace(s, steps=s.steps[keep], values=s.values[keep],
                   wall_time=None if s.wall_time is None else s.wall_time[keep])


def variant(run, name: str):
    if name == "as logged":
        return run
    if name.startswith("first"):
        return _cut(run, int(name.split()[1].rstrip("%")) / 100)
    if name.startswith("every"):
        return _thin(run, {"every 2nd": 2, "every 3rd": 3}[name])
    return _shift(run, OFFSET)


def check_one(path: str) -> list[dict]:
    """Every variant of the run(s) in one folder: verdict, own findings as rule:severity."""
    import stabdiag

    try:
        runs = stabdiag.load(path)
    except stabdiag.StabdiagError as exc:
        return [{"variant": v, "verdict": "error", "rules": [str(exc)]} for v in VARIANTS]
    out = []
    for name in VARIANTS:
        verdicts, rules = [], set()
        for run in runs:
            v = variant(run, name)
            if _densest(v) < MIN_POINTS:
                continue
            d = stabdiag.diagnose(v)
            verdicts.append(d.verdict)
            rules |= {f"{f.rule}:{f.severity}" for f in d.findings if not f.downstream}
        if verdicts:
            worst = max(verdicts, key=lambda x: ("pass", "unknown", "warn", "fail").index(x))
            out.append({"variant": name, "verdict": worst, "rules": sorted(rules)})
    return out


def healthy_runs(shared: Path) -> dict[str, Path]:
    """family/run -> folder: every run of real_healthy, and the real_logs runs expected to pass."""
    from score_real import expected_real_logs

    base = shared / "real_healthy"
    runs = {name: base / name for name in json.loads((base / "labels.json").read_text())} \
        if (base / "labels.json").is_file() else {}
    runs.update({f"real_logs/{name}": shared / "real_logs" / name
                 for name, (verdicts, _) in expected_real_logs().items()
                 if set(verdicts) == {"pass"} and (shared / "real_logs" / name).is_dir()})
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--only", action="append", default=[], metavar="PREFIX")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    paths = healthy_runs(args.shared)
    if args.only:
        paths = {n: p for n, p in paths.items() if any(n.startswith(x) for x in args.only)}
    if not paths:
        print("error: no runs to check", file=sys.stderr)
        return 2
    names = sorted(paths)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = dict(zip(names, pool.map(check_one, [str(paths[n]) for n in names])))

    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for name, rows in results.items():
        family = name.split("/")[0]
        for row in rows:
            counts[(row["variant"], family)][row["verdict"]] += 1
            counts[(row["variant"], "ALL")][row["verdict"]] += 1
            if args.verbose and row["verdict"] in ("warn", "fail", "error"):
                print(f"{row['variant']:<14} {name:<70} {row['verdict']:<6} {' '.join(row['rules'])}")
    print(f"\n{'variant':<14} {'family':<22}" + "".join(f"{v:>9}" for v in VERDICTS))
    for (vname, family) in sorted(counts, key=lambda k: (VARIANTS.index(k[0]), k[1] == "ALL", k[1])):
        c = counts[(vname, family)]
        print(f"{vname:<14} {family:<22}" + "".join(f"{c[v]:>9}" for v in VERDICTS))
    fails = sum(c["fail"] for (v, f), c in counts.items() if f == "ALL")
    print(f"\n{len(names)} runs, {len(VARIANTS)} variants, {time.perf_counter() - started:.0f} s: "
          f"{fails} variant(s) of a healthy run fail")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
