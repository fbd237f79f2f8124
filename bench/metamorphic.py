"""Metamorphic checks: a diagnosis must not change when only the units, the logging cadence or the step
numbering of the data change.

DESIGN.md asks for scale-free, step-based detectors: "a reward on any scale, evals in percent, any logging
cadence and any step offset give the same verdict".  For every run of a corpus part this script writes the
run as generated and again after one transform of its curves (before writing, in the run's own format),
loads both with `stabdiag.load`, diagnoses both with `stabdiag.diagnose` (the shipped rules and
parameters) and compares the verdict and the root layer:

  reward a*r+b     the training reward (and its per-function components, and TRL's eval/reward, which is
                   the same reward on eval prompts) rescaled: (10, -3), (0.1, 0), (2, -1), (1, 5)
  evals x100       every independent eval logged in percent instead of a fraction
  log every k      only every k-th train point logged (k = 5, 10), evals untouched; only runs long enough
                   (>= 50 points left) whose label does not rest on a few steps (a spike, a 3-step
                   collapse, a rolled-back segment)
  steps +50,000    every step shifted by 50,000 (a run resumed from a checkpoint)
  mean of every k  with --averaged: every k-th step logged as the mean of the k steps since the last log,
                   grad norm and learning rate as the last step's (TRL's logging_steps = k); measured,
                   not a target: the reward's noise per logged point is sqrt(k) smaller, so a small rise
                   of the reward counts as a rise (stabdiag rules explain
                   L1.reward-eval-divergence, known limits)
  sparse every k   with --sparse: only every 25th / 50th train point logged (a run logged every few
                   hundred steps), on runs with >= 20 points left; measured, not a target: a change that
                   happened between two logged points, or within the first one, cannot be timed or sized
                   as finely (L2.policy-moving-fast's window was shorter than the gap between points)

    python bench/metamorphic.py                    # both parts, all transforms
    python bench/metamorphic.py --part tuning -v   # one part, list the runs whose diagnosis changed
    python bench/metamorphic.py --scale 0.3 -j 2   # a smaller corpus, two worker processes
    python bench/metamorphic.py --part tuning --sparse -v   # also every 25th / 50th point, measured

Prints per transform: runs compared, % keeping their verdict, % keeping their root layer; exits 1 when
any transform keeps either below 98%.  Under "log every k" a run whose changed diagnosis rests on a
one-point finding (a spike) at a step the thinning dropped is counted apart, as "point lost": no
detector can see a value that was never logged.  The raw figure, counting those as changed, is printed
beside it.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import heldout  # noqa: E402
import scenarios  # noqa: E402

TARGET_KEPT = 0.98
REWARD_MAPS = ((10.0, -3.0), (0.1, 0.0), (2.0, -1.0), (1.0, 5.0))
THIN = (5, 10)
MEAN = (5, 10)            # --averaged: logging_steps=k as TRL logs it, every value the mean of k steps
OFFSET = 50_000
MIN_POINTS_AFTER_THIN = 50
SPARSE = (25, 50)         # --sparse: logged every few hundred steps
MIN_POINTS_AFTER_SPARSE = 20
# tuning families whose label rests on single steps (beyond scenarios.POINT_EVENT_FAMILIES)
TUNING_SPIKE_FAMILIES = ("loss-spike", "grad-spikes", "healthy-pg-loss-bursts")
HELDOUT_SPIKE_FAMILIES = ()


@dataclass(frozen=True)
class Transform:
    name: str
    kind: str            # reward | evals | thin | mean | offset
    a: float = 1.0
    b: float = 0.0
    k: int = 1
    min_points: int = MIN_POINTS_AFTER_THIN     # thin: points a run must keep to be compared


TRANSFORMS = (*(Transform(f"reward {a:g}*r{b:+g}", "reward", a=a, b=b) for a, b in REWARD_MAPS),
              Transform("evals x100", "evals"),
              *(Transform(f"log every {k}", "thin", k=k) for k in THIN),
              Transform(f"steps +{OFFSET:,}", "offset"))
AVERAGED = tuple(Transform(f"mean of every {k}", "mean", k=k) for k in MEAN)
SPARSER = tuple(Transform(f"sparse every {k}", "thin", k=k, min_points=MIN_POINTS_AFTER_SPARSE) for k in SPARSE)


# --- one run, as either generator builds it ---------------------------------------------------------

def build(part: str, name: str, family: str, index: int):
    """(curves object, label, writer args) for a run of either part."""
    if part == "tuning":
        c, label, framework, fmt, resume = scenarios.build_one(name, family, index)
        return c, label, (framework, fmt, resume, index)
    sim, label = heldout.build_one(name, family, index)
    return sim, label, (index,)


def write(part: str, folder: Path, obj, extra) -> None:
    if part == "tuning":
        framework, fmt, resume, index = extra
        scenarios.write_run(folder, obj, framework, fmt, resume, np.random.default_rng([scenarios.SEED, index, 7]))
    else:
        heldout.write_sim(folder, obj, tag=extra[0])


def _train(obj) -> dict:
    return obj.sig if isinstance(obj, scenarios.Curves) else obj.train


def _first_attempt(obj) -> dict | None:
    if isinstance(obj, scenarios.Curves):
        rb = obj.info.get("rollback")
        return None if rb is None else rb[2]
    return None if obj.first is None else obj.first[2]


def _reward_roles(obj) -> tuple[list[str], list[str]]:
    """Train roles that are the training reward, and eval roles that are too (TRL's eval/reward)."""
    train = [r for r in _train(obj) if r == "reward" or r.startswith("reward:")]
    evals = [r for r in obj.evals if r in ("eval/reward", "eval_reward")]
    return train, evals


def _independent_evals(obj) -> list[str]:
    if isinstance(obj, scenarios.Curves):
        return [r for r in obj.evals if "/" not in r]          # eval/loss, eval/reward carry their key
    return [r for r in obj.evals if r.startswith("eval:")]


def applies(part: str, t: Transform, obj, label, extra) -> bool:
    if t.kind == "reward":
        return bool(_reward_roles(obj)[0])
    if t.kind == "evals":
        return bool(_independent_evals(obj))
    if t.kind in ("thin", "mean"):
        if part == "tuning":
            point = scenarios.POINT_EVENT_FAMILIES + TUNING_SPIKE_FAMILIES
            rewritten = extra[2] is not None or obj.info.get("rollback") is not None
        else:
            point = heldout.POINT_EVENT_FAMILIES + HELDOUT_SPIKE_FAMILIES
            rewritten = obj.first is not None
        return label.family not in point and not rewritten and len(obj.steps) // t.k >= t.min_points
    return True


def apply(t: Transform, obj):
    """A transformed deep copy of a run's curves."""
    o = copy.deepcopy(obj)
    train = _train(o)
    if t.kind == "reward":
        roles, eval_roles = _reward_roles(o)
        parts = [r for r in roles if r != "reward"]

        def rescale(r: str, v: np.ndarray) -> np.ndarray:
            # the per-function rewards share the offset, so that they still add up to the reward
            return t.a * v + (t.b if r == "reward" else t.b / len(parts))

        for r in roles:
            train[r] = rescale(r, train[r])
        attempt = _first_attempt(o)
        if attempt is not None:
            for r in roles:
                if r in attempt:
                    attempt[r] = rescale(r, attempt[r])
        for r in eval_roles:
            s, v = o.evals[r]
            o.evals[r] = (s, t.a * v + t.b)
    elif t.kind == "evals":
        for r in _independent_evals(o):
            s, v = o.evals[r]
            o.evals[r] = (s, 100.0 * v)
    elif t.kind == "thin":
        n = len(o.steps)
        idx = np.arange(n)
        keep = (idx % t.k == t.k - 1) | (idx == n - 1)
        o.steps = o.steps[keep]
        for r in list(train):
            train[r] = train[r][keep]
    elif t.kind == "mean":
        o.steps, averaged = scenarios.average_logging(o.steps, train, t.k)
        train.update(averaged)
    elif t.kind == "offset":
        o.steps = o.steps + OFFSET
        o.evals = {r: (s + OFFSET, v) for r, (s, v) in o.evals.items()}
    return o


# --- diagnosing -------------------------------------------------------------------------------------

def diagnose_folder(folder: Path) -> tuple[tuple[str, int | None], set[tuple[str, int, int]]]:
    """(verdict, root layer), and the findings as (rule, first step, last step)."""
    import stabdiag

    runs = stabdiag.load(str(folder))
    if len(runs) != 1:
        return (f"error: {len(runs)} runs", None), set()
    d = stabdiag.diagnose(runs[0])
    return (d.verdict, d.root_layer), {(f.rule, f.start_step, f.end_step) for f in d.findings}


def _point_lost(before: set[tuple[str, int, int]], after: set[tuple[str, int, int]], kept: np.ndarray) -> bool:
    """The only change is that findings resting on one logged point are gone, each at a step the thinning
    dropped: nothing new fired, nothing else went."""
    rules_after = {rule for rule, _, _ in after}
    gone = [(step, end) for rule, step, end in before if rule not in rules_after]
    new = rules_after - {rule for rule, _, _ in before}
    return bool(gone) and not new and all(step == end and step not in kept for step, end in gone)


def check_run(part: str, name: str, family: str, index: int, transforms: tuple[Transform, ...]) -> dict:
    """Diagnose one run as generated and after each transform that applies to it."""
    obj, label, extra = build(part, name, family, index)
    out: dict = {"name": name, "family": family, "base": None, "after": {}, "point_lost": []}
    points: set[tuple[str, int, int]] = set()
    with tempfile.TemporaryDirectory(prefix="stabdiag-meta-") as tmp:
        base = Path(tmp) / "base" / name
        write(part, base, obj, extra)
        try:
            out["base"], points = diagnose_folder(base)
        except Exception as exc:                   # noqa: BLE001 - a crash is a finding, not a stop
            out["base"] = (f"error: {type(exc).__name__}: {exc}"[:200], None)
        for i, t in enumerate(transforms):
            if not applies(part, t, obj, label, extra):
                continue
            folder = Path(tmp) / f"t{i}" / name
            changed = apply(t, obj)
            write(part, folder, changed, extra)
            try:
                out["after"][t.name], after_points = diagnose_folder(folder)
            except Exception as exc:               # noqa: BLE001
                out["after"][t.name], after_points = (f"error: {type(exc).__name__}: {exc}"[:200], None), set()
            if t.kind == "thin" and _point_lost(points, after_points, changed.steps):
                out["point_lost"].append(t.name)
    return out


def corpus_specs(part: str, scale: float) -> list[tuple[str, str, int]]:
    return scenarios.specs(scenarios.SEED, scale) if part == "tuning" else heldout.specs(scale)


def run_part(part: str, scale: float, jobs: int, transforms=TRANSFORMS, names: list[str] | None = None) -> list[dict]:
    todo = [s for s in corpus_specs(part, scale) if names is None or s[0] in names]
    if jobs <= 1:
        return [check_run(part, *s, transforms) for s in todo]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(check_run, part, *s, transforms) for s in todo]
        return [f.result() for f in futures]


def summarize(results: list[dict], transforms=TRANSFORMS) -> list[dict]:
    """Per transform: runs compared, verdicts and roots kept, and the runs that changed."""
    rows = []
    for t in transforms:
        pairs = [(r, tuple(r["after"][t.name])) for r in results
                 if t.name in r["after"] and not str(r["base"][0]).startswith("error")]
        lost = [r["name"] for r, after in pairs if after != tuple(r["base"]) and t.name in r.get("point_lost", ())]
        changed = [(r["name"], r["base"], after) for r, after in pairs
                   if after != tuple(r["base"]) and r["name"] not in lost]
        raw_n, n = len(pairs), len(pairs) - len(lost)
        v_kept = sum(after[0] == r["base"][0] for r, after in pairs if r["name"] not in lost)
        r_kept = sum(after[1] == r["base"][1] and not str(after[0]).startswith("error")
                     for r, after in pairs if r["name"] not in lost)
        rows.append({"transform": t.name, "compared": n, "verdict_kept": v_kept / n if n else 1.0,
                     "root_kept": r_kept / n if n else 1.0, "changed": changed, "point_lost": lost,
                     "raw_verdict_kept": v_kept / raw_n if raw_n else 1.0,
                     "raw_root_kept": r_kept / raw_n if raw_n else 1.0})
    return rows


def report(part: str, rows: list[dict], verbose: bool) -> list[str]:
    lines = [f"{part}: {'transform':<18}{'runs':>6}{'verdict kept':>14}{'root kept':>11}{'point lost':>12}"
             f"{'raw verdict/root':>19}"]
    for row in rows:
        mark = "" if min(row["verdict_kept"], row["root_kept"]) >= TARGET_KEPT else "   < 98%"
        if row["transform"].startswith(("mean of", "sparse every")):
            mark = "   (not a target)"
        raw = f"{row['raw_verdict_kept']:.1%} / {row['raw_root_kept']:.1%}" if row["point_lost"] else ""
        lines.append(f"{'':>{len(part) + 2}}{row['transform']:<18}{row['compared']:>6}"
                     f"{row['verdict_kept']:>14.1%}{row['root_kept']:>11.1%}{len(row['point_lost']):>12}"
                     f"{raw:>19}{mark}")
        if verbose:
            for name, (v0, r0), (v1, r1) in row["changed"]:
                lines.append(f"{'':>{len(part) + 6}}{name:<34} {v0} root {r0}  ->  {v1} root {r1}")
            lines.extend(f"{'':>{len(part) + 6}}{name:<34} point lost" for name in row["point_lost"])
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("tuning", "heldout", "both"), default="both")
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the runs whose diagnosis changed")
    ap.add_argument("--averaged", action="store_true",
                    help="also log every 5th / 10th step as the mean of the steps since the last log (TRL's "
                         "logging_steps); measured, not part of the target (L1.reward-eval-divergence's known limits)")
    ap.add_argument("--sparse", action="store_true",
                    help="also log only every 25th / 50th train point (runs keeping >= 20 points); measured, "
                         "not part of the target")
    args = ap.parse_args(argv)
    transforms = TRANSFORMS + (AVERAGED if args.averaged else ()) + (SPARSER if args.sparse else ())
    ok = True
    for part in (("tuning", "heldout") if args.part == "both" else (args.part,)):
        t0 = time.perf_counter()
        results = run_part(part, args.scale, args.jobs, transforms)
        rows = summarize(results, transforms)
        errors = [r["name"] for r in results if str(r["base"][0]).startswith("error")]
        print(f"\n{part}: {len(results)} runs, each diagnosed as generated and after every transform that applies "
              f"({time.perf_counter() - t0:.0f} s)")
        if errors:
            print(f"{part}: {len(errors)} run(s) could not be diagnosed as generated: {errors[:5]}")
        print("\n".join(report(part, rows, args.verbose)))
        ok &= all(min(r["verdict_kept"], r["root_kept"]) >= TARGET_KEPT for r in rows[:len(TRANSFORMS)])
    print(f"\ntarget: every transform keeps >= {TARGET_KEPT:.0%} of verdicts and root layers: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
