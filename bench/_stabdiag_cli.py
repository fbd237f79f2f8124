"""Run some version of stabdiag through its CLI and read its JSON, for the bench scripts that compare
versions (score_real.py, evidence.py).

They measure any checkout, old or new, so they never import stabdiag: they call `python -m stabdiag check
PATH --format json --exit-zero` and read only the documented JSON fields (README, "In CI": runs[].verdict,
root_layer, findings[], unknown[]).  An implementation is an interpreter plus, optionally, a directory put
first on PYTHONPATH that holds a `stabdiag/` package (a checkout's `src/`, or the package of `git archive REV`
extracted by `extract_rev`: `src/stabdiag` since the src layout, `stabdiag` before it); PYTHONPATH wins over
the editable install of the checkout the venv was made from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "src"            # the folder that holds this checkout's stabdiag/ package
SEVERITY_ORDER = {"fail": 3, "warn": 2, "unknown": 1, "pass": 0}


@dataclass(frozen=True)
class Implementation:
    """Which stabdiag to run: `python -m stabdiag` with `src` (if any) first on PYTHONPATH."""

    python: str = sys.executable
    src: str | None = None
    label: str = "this checkout"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        first = self.src if self.src is not None else str(SOURCE)
        env["PYTHONPATH"] = first + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("NO_COLOR", "1")
        return env


@dataclass(frozen=True)
class CheckResult:
    """One `stabdiag check` call: the parsed JSON, or the one line that says why there is none."""

    returncode: int
    runs: tuple[dict, ...]
    error: str | None          # the `error: ...` line (exit 2), or the last stderr line of a crash


def extract_rev(rev: str, into: str | None = None) -> str:
    """REV's stabdiag package (`src/stabdiag`, or `stabdiag` in a revision from before the src layout) by
    `git archive`, extracted into a temporary directory; returns the folder that holds `stabdiag/`."""
    target = into or tempfile.mkdtemp(prefix=f"stabdiag-{rev}-")
    Path(target).mkdir(parents=True, exist_ok=True)
    for package in ("src/stabdiag", "stabdiag"):
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, package],
                                 capture_output=True, check=False)
        if archive.returncode == 0:
            break
    else:
        raise SystemExit(f"error: git archive {rev}: {archive.stderr.decode(errors='replace').strip()}")
    tar_path = Path(target) / "src.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(target, filter="data")
    tar_path.unlink()
    return str(Path(target) / package.removesuffix("stabdiag"))


def version_of(impl: Implementation) -> str:
    # from an empty directory: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH
    with tempfile.TemporaryDirectory(prefix="stabdiag-cwd-") as empty:
        out = subprocess.run([impl.python, "-c", "import stabdiag, os; print(getattr(stabdiag, '__version__', '?'),"
                              " os.path.dirname(stabdiag.__file__))"],
                             capture_output=True, text=True, env=impl.env(), cwd=empty, check=False)
    if out.stdout.strip():
        return out.stdout.strip()
    lines = out.stderr.strip().splitlines()
    return lines[-1] if lines else "?"


def check(impl: Implementation, path: str | Path, extra: tuple[str, ...] = (), cwd: str | None = None,
          timeout: float = 900) -> CheckResult:
    """`stabdiag check PATH --format json --exit-zero`.  Run from `cwd` (default: an empty temporary
    directory), so that no project config (stabdiag.toml, [tool.stabdiag]) of the caller's folder applies."""
    cmd = [impl.python, "-m", "stabdiag", "check", str(path), "--format", "json", "--exit-zero", *extra]
    with tempfile.TemporaryDirectory(prefix="stabdiag-cwd-") as empty:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=impl.env(), cwd=cwd or empty,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return CheckResult(-1, (), f"timed out after {timeout:.0f} s")
    if proc.returncode == 0:
        try:
            return CheckResult(0, tuple(json.loads(proc.stdout)["runs"]), None)
        except (ValueError, KeyError, TypeError) as exc:
            return CheckResult(0, (), f"output is not stabdiag JSON: {exc}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("error:")]
    return CheckResult(proc.returncode, (), (said or lines or [f"exit {proc.returncode}, nothing on stderr"])[-1])


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=lambda v: SEVERITY_ORDER.get(v, -1)) if verdicts else "unknown"


def fired(run: dict) -> tuple[list[str], list[str]]:
    """(rules that fired as their own finding, rules that fired downstream of the root), each `rule:severity`."""
    own, down = [], []
    for f in run.get("findings", []):
        (down if f.get("downstream") else own).append(f"{f['rule']}:{f['severity']}")
    return sorted(set(own)), sorted(set(down))
