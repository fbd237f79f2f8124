"""Score stabdiag on real runs: published healthy runs, the real logs of ../shared and the framework fixtures.

    python bench/score_real.py                          # this checkout; prints per run, per rule, per family
    python bench/score_real.py --save after.json -j 2
    python bench/score_real.py --rev 063d260 --save before.json --no-targets   # the base commit's stabdiag
    python bench/score_real.py --compare before.json    # what changed, run by run and family by family
    python bench/score_real.py --only framework_runs    # one group or family (a key prefix)

What it reads (read-only, never copied; ../shared resolves beside the checkout, `--shared` to point elsewhere):
  real_healthy    ../shared/real_healthy/labels.json: every run is a published healthy run (INDEX.md there
                  says why), grouped in families by the first folder of its path.  Target: no `fail`, and
                  `warn` on at most 5% of the readable runs.
  real_logs       every folder of ../shared/real_logs; the verdicts and roots their authors' words imply are
                  taken from EXPECTED in tests/test_real_logs.py (read as data, not imported).
  framework_runs  tests/fixtures/framework_runs, with tests/fixtures/framework_runs/EXPECTED.toml.
An expected root is checked whenever the run gets `fail` or `warn` (test_real_logs.py checks it on `fail`
only, so this is the stricter reading: a `warn` from the wrong layer is a miss too).

Each run is one `stabdiag check RUN --format json --exit-zero` call (bench/_stabdiag_cli.py), so any
version can be measured: `--python PATH` (another venv), `--src DIR` (a directory holding a stabdiag/
package, first on PYTHONPATH) or `--rev REV` (`git archive REV stabdiag` extracted to a temporary
directory).  Exit 2 is "unreadable" and keeps stabdiag's `error:` line.  A folder that stabdiag splits in
several runs gets the worst of their verdicts (fail > warn > unknown > pass), the root of that run and the
union of the rules that fired.  Readable = every run that got a verdict, `unknown` included.

Exit status: 1 when a target is missed (a real_healthy run fails, real_healthy warns on more than 5% of its
readable runs, or a real_logs / framework_runs verdict or root is not the expected one), else 0;
`--no-targets` always exits 0.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stabdiag_cli import REPO, Implementation, check, extract_rev, fired, version_of, worst  # noqa: E402

try:
    import tomllib
except ImportError:                        # Python 3.10: the project's own reader (this script's only import of it)
    from stabdiag import _toml as tomllib

WARN_CAP = 0.05
VERDICTS = ("pass", "warn", "fail", "unknown", "unreadable")


@dataclass(frozen=True)
class Case:
    key: str                            # group/family/... : unique, stable across versions
    group: str                          # real_healthy | real_logs | framework_runs
    family: str
    path: Path
    verdicts: frozenset[str] | None     # allowed verdicts, None = no expectation
    root: int | None = None             # expected root layer when the verdict is fail or warn


def healthy_cases(shared: Path) -> list[Case]:
    base = shared / "real_healthy"
    labels = json.loads((base / "labels.json").read_text())
    return [Case(f"real_healthy/{name}", "real_healthy", name.split("/")[0], base / name, None)
            for name in sorted(labels)]


def expected_real_logs() -> dict[str, tuple[set[str], int | None]]:
    """EXPECTED of tests/test_real_logs.py, read with ast so that this script imports no stabdiag."""
    tree = ast.parse((REPO / "tests" / "test_real_logs.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("error: tests/test_real_logs.py: no EXPECTED table")


def real_log_cases(shared: Path) -> list[Case]:
    base = shared / "real_logs"
    expected = expected_real_logs()
    cases = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        verdicts, root = expected.get(folder.name, (None, None))
        cases.append(Case(f"real_logs/{folder.name}", "real_logs", "real_logs", folder,
                          frozenset(verdicts) if verdicts else None, root))
    return cases


def fixture_cases(fixtures: Path) -> list[Case]:
    expected = tomllib.loads((fixtures / "EXPECTED.toml").read_text())
    return [Case(f"framework_runs/{name}", "framework_runs", "framework_runs", fixtures / name,
                 frozenset({want["expected_verdict"]}), want.get("expected_root_layer"))
            for name, want in sorted(expected.items())]


def score(impl: Implementation, case: Case) -> dict:
    result = check(impl, case.path)
    record = {"key": case.key, "group": case.group, "family": case.family}
    if result.error is not None:
        record.update(verdict="unreadable", root=None, rules=[], downstream=[], undecided=[], runs=0,
                      error=result.error)
    else:
        runs = list(result.runs)
        verdict = worst([r["verdict"] for r in runs])
        rooted = next((r for r in runs if r["verdict"] == verdict), {})
        own, down = set(), set()
        for r in runs:
            o, d = fired(r)
            own.update(o)
            down.update(d)
        # rules that saw a change of the size they look for and could not tell (a pass beside them is
        # "pass, ... too noisy to tell", not a bare pass)
        undecided = {u["rule"] for r in runs for u in r["unknown"] if u.get("undecided")}
        record.update(verdict=verdict, root=rooted.get("root_layer"), rules=sorted(own),
                      downstream=sorted(down - own), undecided=sorted(undecided), runs=len(runs), error=None)
    record["expected"] = None if case.verdicts is None else {"verdicts": sorted(case.verdicts), "root": case.root}
    record["matches"] = matches(case, record)
    return record


def matches(case: Case, record: dict) -> bool | None:
    if case.verdicts is None:
        return None
    if record["verdict"] not in case.verdicts:
        return False
    if case.root is not None and record["verdict"] in ("fail", "warn"):
        return record["root"] == case.root
    return record["root"] is None if record["verdict"] == "pass" else True


# ---------------------------------------------------------------- report

def run_line(rec: dict) -> str:
    root = f"L{rec['root']}" if rec["root"] else "-"
    text = f"{rec['key']:<78} {rec['verdict']:<10} {root:<3}"
    if rec["error"]:
        return f"{text} {rec['error']}"
    if rec["runs"] != 1:
        text += f" ({rec['runs']} runs)"
    text += " " + (" ".join(rec["rules"]) or "-")
    if rec["downstream"]:
        text += "  | downstream: " + " ".join(rec["downstream"])
    if rec.get("undecided"):
        text += "  | too noisy to tell: " + " ".join(rec["undecided"])
    if rec["matches"] is not None:
        root = rec["expected"]["root"]
        want = "/".join(rec["expected"]["verdicts"]) + (f" L{root}" if root else "")
        text += "  [ok]" if rec["matches"] else f"  [MISS: expected {want}]"
    return text


def family_counts(records: list[dict]) -> dict[tuple[str, str], Counter]:
    table: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for rec in records:
        table[(rec["group"], rec["family"])][rec["verdict"]] += 1
        table[(rec["group"], "ALL")][rec["verdict"]] += 1
    for group in {g for g, _ in table}:
        if sum(1 for g, f in table if g == group and f != "ALL") == 1:
            del table[(group, "ALL")]       # one family: its total is that family's row
    return dict(sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1] == "ALL", kv[0][1])))


def shares(counts: Counter) -> tuple[int, float, float]:
    readable = sum(counts[v] for v in VERDICTS if v != "unreadable")
    if not readable:
        return 0, 0.0, 0.0
    return readable, 100 * counts["fail"] / readable, 100 * counts["warn"] / readable


def print_families(records: list[dict]) -> None:
    print(f"\n{'group/family':<40}" + "".join(f"{v:>11}" for v in VERDICTS) + f"{'% fail':>9}{'% warn':>9}")
    for (group, family), counts in family_counts(records).items():
        _, pfail, pwarn = shares(counts)
        print(f"{group + '/' + family:<40}" + "".join(f"{counts[v]:>11}" for v in VERDICTS)
              + f"{pfail:>8.1f}%{pwarn:>8.1f}%")


def print_unreadable(records: list[dict]) -> None:
    """Why runs were unreadable, per family: stabdiag's error with the run's own path taken out."""
    reasons: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for rec in records:
        if rec["verdict"] == "unreadable":
            what = rec["error"].split(": ", 2)[-1] if rec["error"].startswith("error: ") else rec["error"]
            what = re.sub(r"\(tried [^:()]+: ", "(tried FILE: ", what)       # one line per reason, not per file
            reasons[(rec["group"], rec["family"])][what[:120]] += 1
    if reasons:
        print("\nunreadable, by reason:")
    for (group, family), counts in sorted(reasons.items()):
        for what, n in counts.most_common():
            print(f"  {group}/{family}: {n} x {what}")


def print_rules(records: list[dict]) -> None:
    for group in sorted({r["group"] for r in records}):
        mine = [r for r in records if r["group"] == group]
        own = Counter(name for r in mine for name in {rule.split(":")[0] for rule in r["rules"]})
        down = Counter(name for r in mine for name in {rule.split(":")[0] for rule in r["downstream"]})
        noisy = Counter(name for r in mine for name in r.get("undecided", ()))
        if own or down:
            print(f"\nrules firing on {group} ({len(mine)} runs): runs where it is a finding of its own / downstream")
            for rule in sorted(set(own) | set(down), key=lambda x: (-own[x], -down[x], x)):
                print(f"  {rule:<40} {own[rule]:>4} / {down[rule]:>3}")
        if noisy:
            print(f"\nrules too noisy to tell on {group} ({len(mine)} runs): runs")
            for rule, n in sorted(noisy.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"  {rule:<40} {n:>4}")


def acceptance(records: list[dict]) -> list[str]:
    """The target lines, and the misses among them (empty when every target is met)."""
    lines, misses = [], []
    healthy = [r for r in records if r["group"] == "real_healthy"]
    if healthy:
        per_family = [(f"real_healthy/{family}", counts) for (_, family), counts in family_counts(healthy).items()
                      if family != "ALL"]
        for name, counts in [*per_family, ("real_healthy", Counter(r["verdict"] for r in healthy))]:
            readable, _, pwarn = shares(counts)
            share = f"{pwarn:.1f}%" if readable else "-"
            lines.append(f"{name}: {readable} readable, {counts['fail']} fail, {counts['warn']} warn "
                         f"({counts['warn']}/{readable} = {share}), {counts['unreadable']} unreadable")
        total = Counter(r["verdict"] for r in healthy)
        readable, _, pwarn = shares(total)
        if total["fail"]:
            misses.append(f"real_healthy: {total['fail']} run(s) fail (target 0)")
        if readable and total["warn"] > WARN_CAP * readable:
            misses.append(f"real_healthy: warn on {pwarn:.1f}% of readable runs (target <= {100 * WARN_CAP:.0f}%)")
    for group in ("real_logs", "framework_runs"):
        judged = [r for r in records if r["group"] == group and r["matches"] is not None]
        if judged:
            missed = [r["key"] for r in judged if not r["matches"]]
            lines.append(f"{group}: {len(judged) - len(missed)}/{len(judged)} verdict and root as expected")
            misses.extend(f"{key}: verdict or root not the expected one" for key in missed)
    return lines + [f"MISS {m}" for m in misses]


def compare(before: dict, after: list[dict], only: list[str] = ()) -> None:
    """Run by run and family by family; with `only`, the before side is cut to the same key prefixes."""
    old = {r["key"]: r for r in before["records"] if not only or any(r["key"].startswith(p) for p in only)}
    new = {r["key"]: r for r in after}

    def brief(rec: dict | None) -> str:
        if rec is None:
            return "(absent)"
        root = f" L{rec['root']}" if rec["root"] else ""
        rules = " ".join(rec["rules"]) or "-"
        down = f" | downstream: {' '.join(rec['downstream'])}" if rec["downstream"] else ""
        down += f" | too noisy to tell: {' '.join(rec['undecided'])}" if rec.get("undecided") else ""
        return f"{rec['verdict']}{root} {rules}{down}" if not rec["error"] else f"unreadable ({rec['error']})"

    fields = ("verdict", "root", "rules", "downstream", "undecided", "error")
    changed = [k for k in sorted(set(old) | set(new))     # .get: a --save file older than `undecided`
               if k not in old or k not in new or any(old[k].get(f, []) != new[k].get(f, []) for f in fields)]
    print(f"\ncompared with {before.get('implementation', '?')} ({before.get('version', '?')}): "
          f"{len(changed)} of {len(set(old) | set(new))} run(s) changed")
    for key in changed:
        print(f"  {key}\n      before: {brief(old.get(key))}\n      after:  {brief(new.get(key))}")
    olds, news = family_counts(list(old.values())), family_counts(after)
    print(f"\n{'group/family (before -> after)':<40}" + "".join(f"{v:>12}" for v in VERDICTS))
    for fam in sorted(set(olds) | set(news), key=lambda kv: (kv[0], kv[1] == "ALL", kv[1])):
        a, b = olds.get(fam, Counter()), news.get(fam, Counter())
        cells = "".join(f"{f'{a[v]}->{b[v]}' if a[v] != b[v] else str(b[v]):>12}" for v in VERDICTS)
        print(f"{fam[0] + '/' + fam[1]:<40}{cells}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                    help="folder holding real_healthy/ and real_logs/ (default: ../shared beside the checkout)")
    ap.add_argument("--fixtures", type=Path, default=REPO / "tests" / "fixtures" / "framework_runs")
    ap.add_argument("--only", action="append", default=[], metavar="PREFIX",
                    help="score only the runs whose key starts with PREFIX (real_healthy/dschat, framework_runs, ...)")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs `-m stabdiag`")
    ap.add_argument("--src", help="directory holding the stabdiag/ package to run (first on PYTHONPATH)")
    ap.add_argument("--rev", help="run this git revision's stabdiag (git archive into a temporary directory)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="runs checked at once (default 1)")
    ap.add_argument("--save", type=Path, help="write the per-run results to this JSON file")
    ap.add_argument("--compare", type=Path, help="a --save file of another version: print what changed")
    ap.add_argument("--no-targets", action="store_true", help="exit 0 even when a target is missed")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-run lines")
    args = ap.parse_args(argv)

    src = extract_rev(args.rev) if args.rev else args.src
    label = f"rev {args.rev}" if args.rev else (f"src {src}" if src else "this checkout") + \
        ("" if args.python == sys.executable else f", python {args.python}")
    impl = Implementation(python=args.python, src=src, label=label)
    before = json.loads(args.compare.read_text()) if args.compare else None

    cases: list[Case] = []
    if (args.shared / "real_healthy" / "labels.json").is_file():
        cases += healthy_cases(args.shared)
    else:
        print(f"note: {args.shared / 'real_healthy'} not found: real_healthy not scored", file=sys.stderr)
    if (args.shared / "real_logs").is_dir():
        cases += real_log_cases(args.shared)
    else:
        print(f"note: {args.shared / 'real_logs'} not found: real_logs not scored", file=sys.stderr)
    if (args.fixtures / "EXPECTED.toml").is_file():
        cases += fixture_cases(args.fixtures)
    if args.only:
        cases = [c for c in cases if any(c.key.startswith(p) for p in args.only)]
    if not cases:
        print("error: no runs to score", file=sys.stderr)
        return 2

    version = version_of(impl)
    print(f"stabdiag {version} ({label}): {len(cases)} run(s), {args.jobs} at a time")
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            records = list(pool.map(lambda c: score(impl, c), cases))
    finally:
        if args.rev:
            shutil.rmtree(src, ignore_errors=True)
    elapsed = time.perf_counter() - started
    if not args.quiet:
        for rec in records:
            print(run_line(rec))
    print_rules(records)
    print_unreadable(records)
    print_families(records)
    if before is not None:
        compare(before, records, args.only)
    print(f"\nacceptance ({elapsed:.0f} s):")
    lines = acceptance(records)
    for line in lines:
        print(f"  {line}")
    if args.save:
        args.save.write_text(json.dumps({"implementation": label, "version": version, "records": records},
                                        indent=1) + "\n")
    missed = any(line.startswith("MISS") for line in lines)
    return 0 if args.no_targets or not missed else 1


if __name__ == "__main__":
    sys.exit(main())
