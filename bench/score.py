"""Score stabdiag against the labelled corpus - the tuning part and the frozen held-out part - and exit
non-zero below the targets.

Builds each part (bench/scenarios.py: the tuning corpus the thresholds were set on; bench/heldout.py: the
held-out corpus nobody tunes on), runs `stabdiag check --format json` once over each, and prints per part:
the confusion matrix of root layers, per-rule precision/recall, the false-`fail` rate on runs a careful
expert would not fail, the "not judged" expectations (a rule that had to say "not judged" but judged, a
`pass` where `unknown` was expected), rule severities the labels pin, the precursor lead before the first
NaN and the NaN origin; for the tuning part also the six sample runs and the check time of a 50,000-step
run with 30 metrics (bench/check_speed.py).

    python bench/score.py                      # both parts, built in a temporary directory
    python bench/score.py --part heldout       # one part: tuning | heldout | both
    python bench/score.py --out DIR            # keep the corpora (DIR/tuning, DIR/heldout) and report.json
    python bench/score.py --out DIR --reuse    # score the corpora already in DIR
    python bench/score.py --scale 0.3          # smaller corpora (every family at least once)
    python bench/score.py -v                   # list every run that misses its label
    python bench/score.py --part heldout --heldout-seed 7   # a fresh draw of the held-out families (a
                                               # development draw to work on; the frozen draw stays unseen)

Targets.  Tuning (issue 6): root layer right on >= 97% of failing runs; false `fail` on <= 1% of quiet
runs and on none of the healthy samples; precursor flagged >= 20 steps before the first NaN in >= 80% of
the explosion runs that have one; check of a 50,000-step, 30-metric run in under 1 s after load.
Held-out: root layer right on >= 97% of failing runs; no quiet run called `fail`.

The check's JSON is read as it is: where it carries no per-rule "not judged" list (schema 1.0 lists only
rules whose signals are missing), an expectation that a rule is not judged is reported "n/a" unless the
rule fired (then it surely judged).
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

import heldout  # noqa: E402
import scenarios  # noqa: E402

TARGET_ROOT_ACC = 0.97
TARGET_FALSE_FAIL = 0.01
TARGET_LEAD_STEPS = 20
TARGET_LEAD_FRAC = 0.80
TARGET_SPEED_S = 1.0
PRECURSOR_RULES = ("L3.grad-norm-precursor", "L3.grad-norm-spike", "L3.loss-spike")
QUIET_KINDS = ("healthy", "near-miss", "not-judged")     # runs a careful expert would not fail
PARTS = ("tuning", "heldout")


# --- running the check ------------------------------------------------------------------------------

def _check_cmd(paths: list[str]) -> list[str]:
    return [sys.executable, "-m", "stabdiag", "check", *paths, "--format", "json", "--exit-zero"]


def run_check(paths: list[str]) -> dict[str, dict]:
    """One `stabdiag check --format json` over the paths; runs by name.  If the whole-tree call fails
    (one run the check cannot read), each run directory is checked alone and the failures are recorded
    as verdict "error" instead of aborting the score."""
    proc = subprocess.run(_check_cmd(paths), capture_output=True, text=True)
    parsed = _parse(proc.stdout)
    if parsed is not None:
        return parsed
    results: dict[str, dict] = {}
    for path in paths:
        root = Path(path)
        for run_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [root]:
            one = subprocess.run(_check_cmd([str(run_dir)]), capture_output=True, text=True)
            got = _parse(one.stdout)
            if got:
                results.update({run_dir.name if len(got) == 1 else k: v for k, v in got.items()})
            else:
                err = (one.stderr.strip().splitlines() or [f"exit {one.returncode}"])[-1]
                results[run_dir.name] = {"run": run_dir.name, "verdict": "error", "root_layer": None,
                                         "findings": [], "error": err[:300]}
    if not results:
        sys.exit(f"error: {' '.join(_check_cmd(paths)[2:])} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return results


def _parse(stdout: str) -> dict[str, dict] | None:
    try:
        return {r["run"]: r for r in json.loads(stdout)["runs"]}
    except (ValueError, KeyError, TypeError):
        return None


# --- reading a result whatever its schema -----------------------------------------------------------

def fired_rules(result: dict) -> dict[str, dict]:
    """The rules that fired.  A finding the engine explains as the consequence of another rule's
    earlier finding (equal rewards after an entropy collapse) is reported, but not as a cause: it does
    not count as that rule firing."""
    return {f["rule"]: f for f in result.get("findings", []) if not str(f.get("explained_by") or "").startswith("L")}


def judged_state(result: dict, rule: str) -> str:
    """'fired', 'judged' (judged, nothing found), 'not judged', or 'n/a' (the JSON cannot tell)."""
    if rule in fired_rules(result):
        return "fired"
    explicit = result.get("not_judged")
    if isinstance(explicit, list):
        names = {x if isinstance(x, str) else x.get("rule") for x in explicit}
        if rule in names:
            return "not judged"
    if any(isinstance(u, dict) and u.get("rule") == rule for u in result.get("unknown", [])):
        return "not judged"
    layers = result.get("layers", [])
    if layers and all(isinstance(lay, dict) and "judged_rules" in lay for lay in layers):
        if any(rule in lay["judged_rules"] for lay in layers):
            return "judged"
        return "n/a"            # in neither list: the check does not know the rule (yet)
    return "n/a"


def has_not_judged_list(results: dict[str, dict]) -> bool:
    """Whether the JSON says, per rule, which judged and which did not (schema 2.0), not only which
    lacked a signal."""
    return any("not_judged" in r or any(isinstance(u, dict) and "reason" in u for u in r.get("unknown", []))
               or any(isinstance(lay, dict) and "judged_rules" in lay for lay in r.get("layers", []))
               for r in results.values())


def _root(x) -> str:
    return "-" if x is None else str(x)


def precursor_lead(label: dict, result: dict) -> int | None:
    """Steps between the first layer-3 warning (precursor, spike) and the first non-finite value."""
    nan = label["nan_step"]
    starts = [f["start_step"] for f in result.get("findings", [])
              if f["rule"] in PRECURSOR_RULES and f.get("start_step") is not None and f["start_step"] < nan]
    return nan - min(starts) if starts else None


# --- scoring one part -------------------------------------------------------------------------------

def score(labels: list[dict], results: dict[str, dict], verbose: bool = False, part: str = "tuning") \
        -> tuple[dict, list[str]]:
    lines: list[str] = []
    say = lines.append
    missing = [lab["name"] for lab in labels if lab["name"] not in results]
    if missing:
        say(f"!! {len(missing)} labelled runs missing from the check output: {missing[:5]}")
    labels = [lab for lab in labels if lab["name"] in results]
    errors = [lab["name"] for lab in labels if results[lab["name"]].get("verdict") == "error"]
    if errors:
        say(f"!! the check could not read {len(errors)} run(s): " + ", ".join(
            f"{n} ({results[n].get('error', '')[:80]})" for n in errors[:5]))
    kinds = Counter(lab["kind"] for lab in labels)
    say(f"corpus: {len(labels)} runs ({kinds['healthy']} healthy, {kinds['near-miss']} near misses, "
        f"{kinds['failing']} failing, {kinds['not-judged']} not judgeable) in "
        f"{len({lab['family'] for lab in labels})} families; "
        f"{sum(lab['params'].get('n_steps', 0) for lab in labels):,} steps in all")

    # confusion matrix of root layers
    cats = ["-", "1", "2", "3", "4"]
    matrix: dict[str, Counter] = defaultdict(Counter)
    for lab in labels:
        matrix[_root(lab["root_layer"])][_root(results[lab["name"]].get("root_layer"))] += 1
    say("")
    say("root layer: expected (rows) vs diagnosed (columns); '-' = no root")
    say("            " + "".join(f"{c:>6}" for c in cats) + "   total")
    for r in cats:
        if sum(matrix[r].values()):
            row = "".join(f"{matrix[r][c]:>6}" for c in cats)
            say(f"  expected {r:>1} {row}   {sum(matrix[r].values()):>5}")

    failing = [lab for lab in labels if lab["kind"] == "failing"]
    right = [lab for lab in failing if results[lab["name"]].get("root_layer") == lab["root_layer"]]
    root_acc = len(right) / max(1, len(failing))
    verdicts = Counter((lab["verdict"], results[lab["name"]].get("verdict")) for lab in labels)
    verdict_ok = sum(n for (a, b), n in verdicts.items() if a == b)
    say(f"root layer right on failing runs: {len(right)}/{len(failing)} = {root_acc:.1%}   "
        f"(verdict exactly as labelled on all runs: {verdict_ok}/{len(labels)})")
    off = [f"{a}->{b} x{n}" for (a, b), n in sorted(verdicts.items(), key=str) if a != b]
    say("verdict off its label (expected->diagnosed): " + (", ".join(off) if off else "none"))

    # per-rule precision / recall from must_fire / must_not_fire
    say("")
    say("per rule: TP = fired where it must, FN = silent where it must fire, FP = fired where it must not")
    say(f"  {'rule':<34}{'TP':>5}{'FN':>5}{'FP':>5}{'precision':>11}{'recall':>8}")
    per_rule = {}
    for rule in scenarios.ALL_RULES:
        tp = fn = fp = 0
        for lab in labels:
            fired = rule in fired_rules(results[lab["name"]])
            if rule in lab["must_fire"]:
                tp += fired
                fn += not fired
            elif rule in lab["must_not_fire"]:
                fp += fired
        if tp + fn + fp == 0:
            continue
        prec = tp / (tp + fp) if tp + fp else float("nan")
        rec = tp / (tp + fn) if tp + fn else float("nan")
        per_rule[rule] = {"tp": tp, "fn": fn, "fp": fp, "precision": prec, "recall": rec}
        say(f"  {rule:<34}{tp:>5}{fn:>5}{fp:>5}{prec:>11.1%}{rec:>8.1%}")

    # false fail on quiet runs
    say("")
    quiet = [lab for lab in labels if lab["kind"] in QUIET_KINDS]
    ff = [lab for lab in quiet if results[lab["name"]].get("verdict") == "fail"]
    fw = [lab for lab in quiet if results[lab["name"]].get("verdict") == "warn" and lab["verdict"] != "warn"]
    ff_rate = len(ff) / max(1, len(quiet))
    say(f"false fail on quiet runs (healthy, near misses, not judgeable): {len(ff)}/{len(quiet)} = {ff_rate:.1%}   "
        f"(unexpected warn: {len(fw)}/{len(quiet)} = {len(fw) / max(1, len(quiet)):.1%})")
    for kind in QUIET_KINDS:
        group = [lab for lab in quiet if lab["kind"] == kind]
        if group:
            got = Counter(results[lab["name"]].get("verdict") for lab in group)
            say(f"  {kind:<10} fail {got['fail']}/{len(group)}, warn {got['warn']}/{len(group)}")
    for what, group in (("fails", ff), ("unexpected warnings", fw)):
        if group:
            fired = Counter(f["rule"] for lab in group for f in results[lab["name"]].get("findings", [])
                            if f.get("severity") in ("fail", "warn"))
            say(f"  {what} on quiet runs came from: " + ", ".join(f"{r} x{k}" for r, k in fired.most_common()))

    # not judged
    say("")
    nj = not_judged_report(labels, results)
    say(f"not judged: {nj['expected']} expectations on {nj['runs']} runs - as expected {nj['ok']}, "
        f"violated {len(nj['violations'])}, " + (f"undetermined {nj['na']} (n/a)" if nj["na"] else "none undetermined")
        + ("" if nj["schema"] else "   [n/a: the check's JSON has no per-rule 'not judged' list; "
                                   "only rules that fired are known to have judged]"))
    unknown_expected = [lab for lab in labels if lab["verdict"] == "unknown"]
    passed_unknown = [lab["name"] for lab in unknown_expected if results[lab["name"]].get("verdict") == "pass"]
    got_unknown = sum(results[lab["name"]].get("verdict") == "unknown" for lab in unknown_expected)
    say(f"  verdict unknown expected on {len(unknown_expected)} runs: unknown {got_unknown}, "
        f"pass {len(passed_unknown)} (a pass where nothing could be judged is a violation)")
    for v in nj["violations"][: None if verbose else 12]:
        say(f"  violation: {v}")
    if len(nj["violations"]) > 12 and not verbose:
        say(f"  ... {len(nj['violations']) - 12} more (-v lists them)")
    for name in passed_unknown[: None if verbose else 8]:
        say(f"  violation: {name}: verdict pass, expected unknown")

    # severities some labels pin (e.g. a transient Inf reported as a warning)
    pinned = [(lab, rule, sev) for lab in labels for rule, sev in lab["params"].get("rule_severity", {}).items()]
    if pinned:
        sev_ok = sum(fired_rules(results[lab["name"]]).get(rule, {}).get("severity") == sev
                     for lab, rule, sev in pinned)
        say(f"rule severities pinned by the labels: {sev_ok}/{len(pinned)} as labelled")

    # precursor lead and NaN origin
    say("")
    exploding = [lab for lab in labels if lab["precursor"] and lab["nan_step"] is not None]
    leads = [precursor_lead(lab, results[lab["name"]]) for lab in exploding]
    good = sum(1 for x in leads if x is not None and x >= TARGET_LEAD_STEPS)
    lead_frac = good / max(1, len(exploding))
    if exploding:
        got = np.array([x for x in leads if x is not None])
        say(f"precursor lead (first layer-3 warning -> first NaN) on {len(exploding)} explosion runs with a precursor:")
        if len(got):
            q = np.percentile(got, [0, 10, 25, 50, 75, 90, 100])
            say("  percentiles (steps)  min {:.0f} | p10 {:.0f} | p25 {:.0f} | median {:.0f} | p75 {:.0f} | "
                "p90 {:.0f} | max {:.0f}".format(*q))
        buckets = Counter("none" if x is None else "0-9" if x < 10 else "10-19" if x < 20 else "20-49" if x < 50
                          else "50-99" if x < 100 else ">=100" for x in leads)
        say("  histogram            " + " | ".join(f"{k}: {buckets[k]}" for k in
                                                   ("none", "0-9", "10-19", "20-49", "50-99", ">=100")))
        say(f"  flagged >= {TARGET_LEAD_STEPS} steps ahead: {good}/{len(exploding)} = {lead_frac:.1%}")
        sudden = [lab for lab in labels if lab["family"] == "explosion-sudden"]
        if sudden:
            sudden_leads = [precursor_lead(lab, results[lab["name"]]) for lab in sudden if lab["nan_step"]]
            spurious = sum(x is not None and x >= TARGET_LEAD_STEPS for x in sudden_leads)
            jump = sum(x is not None and x < TARGET_LEAD_STEPS for x in sudden_leads)
            say(f"  explosions without a precursor: flagged >= {TARGET_LEAD_STEPS} steps ahead anyway "
                f"{spurious}/{len(sudden)}; spike in the last steps before the NaN {jump}/{len(sudden)}")
    nan_runs = [lab for lab in labels if lab["nan_signal"]]
    origin_ok = 0
    for lab in nan_runs:
        f = fired_rules(results[lab["name"]]).get("L3.nonfinite-values")
        origin_ok += bool(f and f.get("evidence", {}).get("signal") == lab["nan_signal"])
    if nan_runs:
        say(f"  NaN origin named right (reward / logprob / loss / grad norm): {origin_ok}/{len(nan_runs)}")

    misses = []
    for lab in labels:
        res = results[lab["name"]]
        fired = fired_rules(res)
        problems = []
        if res.get("root_layer") != lab["root_layer"]:
            problems.append(f"root {res.get('root_layer')} != {lab['root_layer']}")
        if res.get("verdict") != lab["verdict"]:
            problems.append(f"verdict {res.get('verdict')} != {lab['verdict']}")
        problems += [f"missed {r}" for r in lab["must_fire"] if r not in fired]
        problems += [f"fired {r} ({fired[r].get('severity')} @{fired[r].get('start_step')})"
                     for r in lab["must_not_fire"] if r in fired]
        problems += [f"{r} judged ({state})" for r in lab.get("not_judged", [])
                     if (state := judged_state(res, r)) in ("fired", "judged") and r not in lab["must_not_fire"]]
        if problems:
            misses.append(f"  {lab['name']:<32} {'; '.join(problems)}   {json.dumps(lab['params'])[:300]}")
    say("")
    say(f"runs off their label in some way: {len(misses)}/{len(labels)}" + ("" if verbose else " (-v lists them)"))
    if verbose:
        lines.extend(misses)
    return {"part": part, "runs": len(labels), "root_acc": root_acc, "false_fail": ff_rate, "false_fails": len(ff),
            "lead_frac": lead_frac, "has_precursor_runs": bool(exploding), "per_rule": per_rule,
            "not_judged": {k: v for k, v in nj.items() if k != "violations"},
            "not_judged_violations": nj["violations"], "unknown_passed": passed_unknown,
            "verdict_exact": verdict_ok, "misses": misses, "leads": leads}, lines


def not_judged_report(labels: list[dict], results: dict[str, dict]) -> dict:
    """Each (run, rule) a label says must be "not judged": as expected, violated, or undetermined."""
    ok = na = 0
    violations: list[str] = []
    runs = 0
    for lab in labels:
        rules = lab.get("not_judged", [])
        runs += bool(rules)
        for rule in rules:
            state = judged_state(results[lab["name"]], rule)
            if state == "not judged":
                ok += 1
            elif state == "n/a":
                na += 1
            else:
                f = fired_rules(results[lab["name"]]).get(rule)
                how = f"fired ({f.get('severity')} @{f.get('start_step')})" if f else "judged"
                violations.append(f"{lab['name']}: {rule} {how}, expected not judged")
    return {"runs": runs, "expected": ok + na + len(violations), "ok": ok, "na": na, "violations": violations,
            "schema": has_not_judged_list(results)}


# --- the whole thing --------------------------------------------------------------------------------

def sample_check() -> tuple[bool, list[str]]:
    """The six sample runs keep their verdicts (the healthy one passes)."""
    expected = {"grpo_math_healthy": ("pass", None), "grpo_math_reward_hacking": ("fail", 1),
                "grpo_math_numeric_blowup": ("fail", 3), "grpo_math_version_mismatch": ("fail", 4),
                "grpo_policy_collapse": ("fail", 2), "grpo_easy_data": ("warn", 1)}
    results = run_check([str(HERE.parent / "sample_logs")])
    lines, ok = [], True
    for name, (verdict, root) in expected.items():
        r = results.get(name)
        good = r is not None and r.get("verdict") == verdict and r.get("root_layer") == root
        ok &= good
        got = "missing" if r is None else f"{r.get('verdict')} root {r.get('root_layer')}"
        lines.append(f"  {name:<28} {got:<16} {'ok' if good else f'expected {verdict} root {root}'}")
    return ok, lines


def build_part(part: str, out: Path, args) -> list[dict]:
    if args.reuse and (out / "labels.json").exists():
        return json.loads((out / "labels.json").read_text())
    if part == "tuning":
        return [lab.__dict__ for lab in scenarios.build(out, seed=args.seed, scale=args.scale)]
    return [lab.__dict__ for lab in heldout.build(out, scale=args.scale, seed=args.heldout_seed)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("tuning", "heldout", "both"), default="both")
    ap.add_argument("--out", help="keep the corpora here, one folder per part (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=scenarios.SEED, help="seed of the tuning part (held-out is frozen)")
    ap.add_argument("--heldout-seed", type=int, default=heldout.SEED,
                    help="draw the held-out families with another seed: a development draw, not the frozen part")
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor")
    ap.add_argument("--reuse", action="store_true", help="score the corpora already in --out")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every run off its label")
    args = ap.parse_args(argv)

    tmp = None
    if args.out:
        base = Path(args.out)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="stabdiag-bench-")
        base = Path(tmp.name)
    parts = PARTS if args.part == "both" else (args.part,)
    summaries: dict[str, dict] = {}
    targets: list[tuple[str, bool, str]] = []
    for part in parts:
        out = base / part
        t0 = time.perf_counter()
        labels = build_part(part, out, args)
        t1 = time.perf_counter()
        results = run_check([str(out / "runs")])
        t2 = time.perf_counter()
        title = {"tuning": "TUNING part (bench/scenarios.py: the thresholds were set here)",
                 "heldout": "HELD-OUT part (bench/heldout.py: frozen, never tuned on)"}[part]
        if part == "heldout" and args.heldout_seed != heldout.SEED:
            title = (f"DEVELOPMENT draw of the held-out families (bench/heldout.py, seed {args.heldout_seed}: "
                     "not the frozen part)")
        print(f"\n{'=' * 100}\n{title}\n{'=' * 100}")
        print(f"built in {t1 - t0:.1f} s; `stabdiag check --format json` over it took {t2 - t1:.1f} s")
        summary, lines = score(labels, results, args.verbose, part)
        print("\n".join(lines))
        summaries[part] = summary
        tag = "tuning" if part == "tuning" else "held-out"
        targets.append((f"{tag}: root layer right on >= {TARGET_ROOT_ACC:.0%} of failing runs",
                        summary["root_acc"] >= TARGET_ROOT_ACC, f"{summary['root_acc']:.1%}"))
        if part == "tuning":
            targets.append((f"tuning: false fail on <= {TARGET_FALSE_FAIL:.0%} of quiet runs",
                            summary["false_fail"] <= TARGET_FALSE_FAIL, f"{summary['false_fail']:.1%}"))
            if summary["has_precursor_runs"]:
                targets.append((f"tuning: precursor >= {TARGET_LEAD_STEPS} steps ahead in >= {TARGET_LEAD_FRAC:.0%} "
                                "of explosions with one", summary["lead_frac"] >= TARGET_LEAD_FRAC,
                                f"{summary['lead_frac']:.1%}"))
        else:
            targets.append(("held-out: no quiet run (healthy, near miss, not judgeable) called fail",
                            summary["false_fails"] == 0, f"{summary['false_fails']} called fail"))
        nj = summary["not_judged"]
        print(f"\n{tag} not-judged violations: {len(summary['not_judged_violations'])} rule(s) judged that "
              f"could not be, {len(summary['unknown_passed'])} pass(es) where unknown was expected"
              + (f", {nj['na']} expectation(s) n/a" if nj["na"] else ""))

    if "tuning" in parts:
        print("\nsix sample runs:")
        samples_ok, sample_lines = sample_check()
        print("\n".join(sample_lines))
        import check_speed
        speed = check_speed.measure()
        print(f"\nspeed: check of a {check_speed.STEPS:,}-step run with {check_speed.METRICS} metrics, after load: "
              f"{speed:.3f} s (best of {check_speed.REPEATS})")
        targets += [("tuning: no healthy sample fails; all six samples keep their verdicts", samples_ok,
                     "ok" if samples_ok else "changed"),
                    (f"check of a 50,000-step, 30-metric run < {TARGET_SPEED_S:g} s after load",
                     speed < TARGET_SPEED_S, f"{speed:.3f} s")]

    print("\ntargets:")
    for what, ok, value in targets:
        print(f"  [{'met' if ok else 'MISSED'}] {what}: {value}")
    if args.out:
        report = {p: {k: v for k, v in s.items() if k not in ("misses", "leads")} for p, s in summaries.items()}
        (base / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0 if all(ok for _, ok, _ in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
