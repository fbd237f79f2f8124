"""Every report stabdiag writes, for a set of inputs, saved as files: diff two snapshots to show that a
change is behaviour-neutral (a move, a tidy) byte for byte.

    python bench/report_snapshot.py /tmp/after                        # this checkout
    python bench/report_snapshot.py /tmp/before --rev 74c2597         # a revision (git archive)
    diff -r /tmp/before /tmp/after && echo identical

What is written, per input tree (`--inputs`, default: the shipped samples, the test fixtures, the real runs
in ../shared and, when `--corpus DIR` names a folder that bench/scenarios.py or bench/heldout.py wrote, its
runs): `stabdiag check TREE --format F --exit-zero` for every format (the terminal one at 100 columns, no
colour), and the rule catalogue (`rules list`, `rules explain ID` for every rule, `schema`).  Each command
runs from an empty temporary directory, so no project config applies, and its exit code and stderr are
kept beside its stdout: a change that only moves an error message shows too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stabdiag_cli import REPO, SOURCE, Implementation, extract_rev  # noqa: E402

FORMATS = ("terminal", "json", "markdown", "junit", "github", "html")
SHARED = REPO.parent / "shared"
DEFAULT_INPUTS = {
    "samples": REPO / "sample_logs",
    "fixtures": REPO / "tests" / "fixtures",
    "real_healthy": SHARED / "real_healthy",
    "real_logs": SHARED / "real_logs",
    "real_runs": SHARED / "real_runs",
}


def _run(impl: Implementation, args: list[str], timeout: float) -> str:
    env = impl.env()
    env.update(COLUMNS="100", NO_COLOR="1", TERM="dumb")
    with tempfile.TemporaryDirectory(prefix="stabdiag-cwd-") as empty:
        try:
            proc = subprocess.run([impl.python, "-m", "stabdiag", *args], capture_output=True, text=True,
                                  env=env, cwd=empty, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout:.0f} s\n"
    # a path of the implementation's own files (a git-archive temp dir) is not behaviour
    text = f"exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
    return text.replace(str(Path(impl.src or SOURCE) / "stabdiag"), "<stabdiag>")


def _rule_ids(impl: Implementation) -> list[str]:
    out = _run(impl, ["rules", "list", "--format", "json"], 120)
    return sorted(set(re.findall(r'"id": "(L\d\.[a-z0-9-]+)"', out)))


def snapshot(impl: Implementation, out: Path, inputs: dict[str, Path], timeout: float) -> int:
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for name, tree in inputs.items():
        if not tree.exists():
            print(f"skip {name}: {tree} does not exist", file=sys.stderr)
            continue
        for fmt in FORMATS:
            (out / f"{name}.{fmt}.txt").write_text(
                _run(impl, ["check", str(tree), "--format", fmt, "--exit-zero", "-j", "1"], timeout))
            written += 1
        print(f"{name}: {len(FORMATS)} formats", file=sys.stderr)
    catalogue = out / "rules"
    catalogue.mkdir(exist_ok=True)
    (catalogue / "list.txt").write_text(_run(impl, ["rules", "list"], 120))
    for rule_id in _rule_ids(impl):
        (catalogue / f"{rule_id}.txt").write_text(_run(impl, ["rules", "explain", rule_id], 120))
        written += 1
    for which in ("check", "signals"):
        (out / f"schema.{which}.txt").write_text(_run(impl, ["schema", which], 120))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write the snapshot into")
    ap.add_argument("--rev", help="snapshot this git revision's stabdiag (git archive into a temporary folder)")
    ap.add_argument("--corpus", action="append", default=[],
                    help="NAME=DIR: also check DIR (a corpus bench/scenarios.py or bench/heldout.py wrote)")
    ap.add_argument("--only", help="comma list of the default input names to keep (samples, fixtures, ...)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per command")
    args = ap.parse_args(argv)
    inputs = dict(DEFAULT_INPUTS)
    if args.only:
        inputs = {k: v for k, v in inputs.items() if k in args.only.split(",")}
    for item in args.corpus:
        name, _, folder = item.partition("=")
        inputs[name] = Path(folder)
    impl = Implementation(src=extract_rev(args.rev), label=f"rev {args.rev}") if args.rev else Implementation()
    written = snapshot(impl, Path(args.out), inputs, args.timeout)
    print(f"{written} reports written to {args.out} ({impl.label}, {os.path.basename(sys.executable)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
