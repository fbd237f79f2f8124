"""Score stabdiag against the labelled scenario corpus and exit non-zero below the targets.

Builds the corpus (bench/scenarios.py), runs `stabdiag check --format json` once over the whole tree,
and prints: the confusion matrix of root layers, per-rule precision/recall, the false-`fail` rate on
healthy runs (and on the six sample runs), the precursor lead before the first NaN, and the check time
of a 50,000-step run with 30 metrics (bench/check_speed.py).

    python bench/score.py                  # build in a temporary directory, score, clean up
    python bench/score.py --out DIR        # keep the corpus (and report.json) in DIR
    python bench/score.py --scale 0.3      # a smaller corpus (every family at least once)
    python bench/score.py -v               # list every run that misses its label

Targets (issue 6): root layer right on >= 97% of failing runs; false `fail` on <= 1% of healthy runs
and on none of the healthy samples; precursor flagged >= 20 steps before the first NaN in >= 80% of the
explosion runs that have a precursor; check of a 50,000-step, 30-metric run in under 1 s after load.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scenarios  # noqa: E402

TARGET_ROOT_ACC = 0.97
TARGET_FALSE_FAIL = 0.01
TARGET_LEAD_STEPS = 20
TARGET_LEAD_FRAC = 0.80
TARGET_SPEED_S = 1.0
PRECURSOR_RULES = ("L3.grad-norm-precursor", "L3.grad-norm-spike", "L3.loss-spike")


def run_check(paths: list[str]) -> dict[str, dict]:
    """One `stabdiag check --format json` over the paths; runs by name."""
    cmd = [sys.executable, "-m", "stabdiag", "check", *paths, "--format", "json", "--exit-zero"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd[2:])} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return {r["run"]: r for r in json.loads(proc.stdout)["runs"]}


def _label_root(x) -> str:
    return "-" if x is None else str(x)


def precursor_lead(label: dict, result: dict) -> int | None:
    """Steps between the first layer-3 warning (precursor, spike) and the first non-finite value."""
    nan = label["nan_step"]
    starts = [f["start_step"] for f in result["findings"]
              if f["rule"] in PRECURSOR_RULES and f["start_step"] is not None and f["start_step"] < nan]
    return nan - min(starts) if starts else None


def score(labels: list[dict], results: dict[str, dict], verbose: bool = False) -> tuple[dict, list[str]]:
    lines: list[str] = []
    say = lines.append
    missing = [lab["name"] for lab in labels if lab["name"] not in results]
    if missing:
        say(f"!! {len(missing)} labelled runs missing from the check output: {missing[:5]}")
    labels = [lab for lab in labels if lab["name"] in results]
    kinds = Counter(lab["kind"] for lab in labels)
    say(f"corpus: {len(labels)} runs ({kinds['healthy']} healthy, {kinds['near-miss']} near misses, "
        f"{kinds['failing']} failing) in {len({lab['family'] for lab in labels})} families; "
        f"{sum(lab['params']['n_steps'] for lab in labels):,} steps in all")

    # confusion matrix of root layers
    cats = ["-", "1", "2", "3", "4"]
    matrix = defaultdict(Counter)
    for lab in labels:
        matrix[_label_root(lab["root_layer"])][_label_root(results[lab["name"]]["root_layer"])] += 1
    say("")
    say("root layer: expected (rows) vs diagnosed (columns); '-' = no root (healthy)")
    say("            " + "".join(f"{c:>6}" for c in cats) + "   total")
    for r in cats:
        if sum(matrix[r].values()):
            row = "".join(f"{matrix[r][c]:>6}" for c in cats)
            say(f"  expected {r:>1} {row}   {sum(matrix[r].values()):>5}")

    failing = [lab for lab in labels if lab["kind"] == "failing"]
    right = [lab for lab in failing if results[lab["name"]]["root_layer"] == lab["root_layer"]]
    root_acc = len(right) / max(1, len(failing))
    verdict_ok = sum(results[lab["name"]]["verdict"] == lab["verdict"] for lab in labels)
    say(f"root layer right on failing runs: {len(right)}/{len(failing)} = {root_acc:.1%}   "
        f"(verdict exactly as labelled on all runs: {verdict_ok}/{len(labels)})")

    # per-rule precision / recall from must_fire / must_not_fire
    say("")
    say("per rule: TP = fired where it must, FN = silent where it must fire, FP = fired where it must not")
    say(f"  {'rule':<28}{'TP':>5}{'FN':>5}{'FP':>5}{'precision':>11}{'recall':>8}")
    per_rule = {}
    for rule in scenarios.ALL_RULES:
        tp = fn = fp = 0
        for lab in labels:
            fired = any(f["rule"] == rule for f in results[lab["name"]]["findings"])
            if rule in lab["must_fire"]:
                tp += fired
                fn += not fired
            elif rule in lab["must_not_fire"]:
                fp += fired
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        per_rule[rule] = {"tp": tp, "fn": fn, "fp": fp, "precision": prec, "recall": rec}
        say(f"  {rule:<28}{tp:>5}{fn:>5}{fp:>5}{prec:>11.1%}{rec:>8.1%}")

    # false fail on healthy runs (near misses included), and on the healthy sample
    say("")
    quiet = [lab for lab in labels if lab["kind"] in ("healthy", "near-miss")]
    ff = [lab for lab in quiet if results[lab["name"]]["verdict"] == "fail"]
    fw = [lab for lab in quiet if results[lab["name"]]["verdict"] == "warn"]
    ff_rate = len(ff) / max(1, len(quiet))
    say(f"false fail on healthy runs (incl. near misses): {len(ff)}/{len(quiet)} = {ff_rate:.1%}   "
        f"(warn: {len(fw)}/{len(quiet)} = {len(fw) / max(1, len(quiet)):.1%})")
    for kind in ("healthy", "near-miss"):
        group = [lab for lab in quiet if lab["kind"] == kind]
        say(f"  {kind:<10} fail {sum(results[lab['name']]['verdict'] == 'fail' for lab in group)}/{len(group)}, "
            f"warn {sum(results[lab['name']]['verdict'] == 'warn' for lab in group)}/{len(group)}")
    if fw:
        fired = Counter(f["rule"] for lab in fw for f in results[lab["name"]]["findings"])
        say("  warnings on healthy runs came from: " + ", ".join(f"{r} x{k}" for r, k in fired.most_common()))

    # precursor lead
    say("")
    exploding = [lab for lab in labels if lab["precursor"] and lab["nan_step"] is not None]
    leads = [precursor_lead(lab, results[lab["name"]]) for lab in exploding]
    got = np.array([x for x in leads if x is not None])
    good = sum(1 for x in leads if x is not None and x >= TARGET_LEAD_STEPS)
    lead_frac = good / max(1, len(exploding))
    say(f"precursor lead (first layer-3 warning -> first NaN) on {len(exploding)} explosion runs "
        "with a precursor:")
    if len(got):
        q = np.percentile(got, [0, 10, 25, 50, 75, 90, 100])
        say("  percentiles (steps)  min {:.0f} | p10 {:.0f} | p25 {:.0f} | median {:.0f} | p75 {:.0f} | "
            "p90 {:.0f} | max {:.0f}".format(*q))
    buckets = Counter()
    for x in leads:
        key = ("none" if x is None else "0-9" if x < 10 else "10-19" if x < 20 else "20-49" if x < 50
               else "50-99" if x < 100 else ">=100")
        buckets[key] += 1
    say("  histogram            " + " | ".join(f"{k}: {buckets[k]}" for k in
                                               ("none", "0-9", "10-19", "20-49", "50-99", ">=100")))
    say(f"  flagged >= {TARGET_LEAD_STEPS} steps ahead: {good}/{len(exploding)} = {lead_frac:.1%}")
    sudden = [lab for lab in labels if lab["family"] == "explosion-sudden"]
    sudden_leads = [precursor_lead(lab, results[lab["name"]]) for lab in sudden]
    spurious = sum(x is not None and x >= TARGET_LEAD_STEPS for x in sudden_leads)
    jump = sum(x is not None and x < TARGET_LEAD_STEPS for x in sudden_leads)
    say(f"  explosions without a precursor: flagged >= {TARGET_LEAD_STEPS} steps ahead anyway "
        f"{spurious}/{len(sudden)}; "
        f"spike in the last steps before the NaN {jump}/{len(sudden)}")
    nan_runs = [lab for lab in labels if lab["nan_signal"]]
    origin_ok = 0
    for lab in nan_runs:
        f = next((f for f in results[lab["name"]]["findings"] if f["rule"] == "L3.nonfinite-values"), None)
        origin_ok += bool(f and f["evidence"].get("signal") == lab["nan_signal"])
    say(f"  NaN origin named right (reward / logprob / loss / grad norm): {origin_ok}/{len(nan_runs)}")

    misses = []
    for lab in labels:
        res = results[lab["name"]]
        fired = {f["rule"]: f for f in res["findings"]}
        problems = []
        if res["root_layer"] != lab["root_layer"]:
            problems.append(f"root {res['root_layer']} != {lab['root_layer']}")
        if res["verdict"] != lab["verdict"]:
            problems.append(f"verdict {res['verdict']} != {lab['verdict']}")
        problems += [f"missed {r}" for r in lab["must_fire"] if r not in fired]
        problems += [f"fired {r} ({fired[r]['severity']} @{fired[r]['start_step']})"
                     for r in lab["must_not_fire"] if r in fired]
        if problems:
            misses.append(f"  {lab['name']:<26} {'; '.join(problems)}   {json.dumps(lab['params'])}")
    say("")
    say(f"runs off their label in some way: {len(misses)}/{len(labels)}" + ("" if verbose else " (-v lists them)"))
    if verbose:
        lines.extend(misses)
    return {"root_acc": root_acc, "false_fail": ff_rate, "lead_frac": lead_frac, "per_rule": per_rule,
            "leads": [x for x in leads], "misses": misses}, lines


def sample_check() -> tuple[bool, list[str]]:
    """The six sample runs keep their verdicts (the healthy one passes)."""
    expected = {"grpo_math_healthy": ("pass", None), "grpo_math_reward_hacking": ("fail", 1),
                "grpo_math_numeric_blowup": ("fail", 3), "grpo_math_version_mismatch": ("fail", 4),
                "grpo_policy_collapse": ("fail", 2), "grpo_easy_data": ("warn", 1)}
    results = run_check([str(HERE.parent / "sample_logs")])
    lines, ok = [], True
    for name, (verdict, root) in expected.items():
        r = results.get(name)
        good = r is not None and r["verdict"] == verdict and r["root_layer"] == root
        ok &= good
        got = "missing" if r is None else f"{r['verdict']} root {r['root_layer']}"
        lines.append(f"  {name:<28} {got:<16} {'ok' if good else f'expected {verdict} root {root}'}")
    return ok, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="keep the corpus here (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=scenarios.SEED)
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor")
    ap.add_argument("--reuse", action="store_true", help="score the corpus already in --out")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every run off its label")
    args = ap.parse_args(argv)

    tmp = None
    if args.out:
        out = Path(args.out)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="stabdiag-bench-")
        out = Path(tmp.name)
    t0 = time.perf_counter()
    if args.reuse and (out / "labels.json").exists():
        labels = json.loads((out / "labels.json").read_text())
    else:
        labels = [lab.__dict__ for lab in scenarios.build(out, seed=args.seed, scale=args.scale)]
    t1 = time.perf_counter()
    results = run_check([str(out / "runs")])
    t2 = time.perf_counter()
    print(f"built corpus in {t1 - t0:.1f} s; `stabdiag check --format json` over it took {t2 - t1:.1f} s")
    summary, lines = score(labels, results, args.verbose)
    print("\n".join(lines))

    print("\nsix sample runs:")
    samples_ok, sample_lines = sample_check()
    print("\n".join(sample_lines))

    import check_speed
    speed = check_speed.measure()
    print(f"\nspeed: check of a {check_speed.STEPS:,}-step run with {check_speed.METRICS} metrics, after load: "
          f"{speed:.3f} s (best of {check_speed.REPEATS})")

    targets = [
        (f"root layer right on >= {TARGET_ROOT_ACC:.0%} of failing runs", summary["root_acc"] >= TARGET_ROOT_ACC,
         f"{summary['root_acc']:.1%}"),
        (f"false fail on <= {TARGET_FALSE_FAIL:.0%} of healthy runs", summary["false_fail"] <= TARGET_FALSE_FAIL,
         f"{summary['false_fail']:.1%}"),
        ("no healthy sample fails; all six samples keep their verdicts", samples_ok,
         "ok" if samples_ok else "changed"),
        (f"precursor >= {TARGET_LEAD_STEPS} steps ahead in >= {TARGET_LEAD_FRAC:.0%} of explosions with one",
         summary["lead_frac"] >= TARGET_LEAD_FRAC, f"{summary['lead_frac']:.1%}"),
        (f"check of a 50,000-step, 30-metric run < {TARGET_SPEED_S:g} s after load", speed < TARGET_SPEED_S,
         f"{speed:.3f} s"),
    ]
    print("\ntargets:")
    for what, ok, value in targets:
        print(f"  [{'met' if ok else 'MISSED'}] {what}: {value}")
    if args.out:
        (out / "report.json").write_text(json.dumps({k: v for k, v in summary.items() if k != "misses"},
                                                    indent=1, default=str) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0 if all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
