"""The two measuring scripts of issues 24 and 25 keep working: bench/score_real.py on a few fixture runs
and a small stand-in for ../shared built here, bench/evidence.py on a 2-cell grid with one seed.  Both call
the CLI as a subprocess (as they do for any version of stabdiag), so these tests read their output."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def score_real():
    return _module("score_real")


@pytest.fixture(scope="module")
def evidence():
    return _module("evidence")


def _shared_stand_in(root: Path) -> Path:
    """A real_healthy/ with one readable run (a loss curve) and one stabdiag cannot read."""
    healthy = root / "real_healthy"
    (healthy / "famA" / "good").mkdir(parents=True)
    (healthy / "famA" / "bad").mkdir(parents=True)
    steps = np.arange(1, 201)
    loss = 2.0 + 3.0 * np.exp(-steps / 40) + np.random.default_rng(0).normal(0, 0.02, steps.size)
    lines = ["step,loss,grad_norm,learning_rate"] + [f"{s},{v:.5f},{0.5 + 0.01 * (s % 7):.3f},1e-4"
                                                   for s, v in zip(steps, loss)]
    (healthy / "famA" / "good" / "metrics.csv").write_text("\n".join(lines) + "\n")
    (healthy / "famA" / "bad" / "notes.txt").write_text("no metrics in here\n")
    labels = {name: {"label": "healthy", "framework": "-", "format": "-", "steps": 200}
              for name in ("famA/good", "famA/bad")}
    (healthy / "labels.json").write_text(json.dumps(labels))
    return root


def test_score_real_scores_fixtures_and_a_stand_in_for_shared(tmp_path):
    shared = _shared_stand_in(tmp_path / "shared")
    saved = tmp_path / "after.json"
    proc = subprocess.run([sys.executable, str(BENCH / "score_real.py"), "--shared", str(shared),
                           "--only", "framework_runs/grpo_length_hack", "--only", "real_healthy",
                           "--save", str(saved), "-j", "2"], capture_output=True, text=True, timeout=120)
    records = {r["key"]: r for r in json.loads(saved.read_text())["records"]}
    assert set(records) == {"framework_runs/grpo_length_hack", "real_healthy/famA/good", "real_healthy/famA/bad"}
    hack = records["framework_runs/grpo_length_hack"]
    assert (hack["verdict"], hack["root"], hack["matches"]) == ("fail", 1, True), hack
    assert any(rule.startswith("L1.") for rule in hack["rules"])
    bad = records["real_healthy/famA/bad"]
    assert bad["verdict"] == "unreadable" and bad["error"].startswith("error:"), bad
    good = records["real_healthy/famA/good"]
    assert good["verdict"] in {"pass", "warn", "fail", "unknown"} and good["error"] is None
    assert "real_healthy: 1 readable" in proc.stdout
    assert "framework_runs: 1/1 verdict and root as expected" in proc.stdout
    # the exit status is the targets': 1 exactly when the one readable healthy run fails
    assert proc.returncode == (1 if good["verdict"] == "fail" else 0), proc.stdout + proc.stderr


def test_score_real_targets_and_compare(score_real, capsys):
    def rec(key, verdict, root=None, rules=(), matches=None):
        group, family = key.split("/")[0], key.split("/")[1]
        return {"key": key, "group": group, "family": family, "verdict": verdict, "root": root,
                "rules": list(rules), "downstream": [], "runs": 1, "error": None, "matches": matches,
                "expected": None}

    quiet = [rec(f"real_healthy/fam/r{i}", "pass") for i in range(19)]
    assert not [x for x in score_real.acceptance(quiet + [rec("real_healthy/fam/w", "warn")]) if x.startswith("MISS")]
    two_warn = quiet[:18] + [rec("real_healthy/fam/w1", "warn"), rec("real_healthy/fam/w2", "warn")]
    assert any("warn on 10.0%" in x for x in score_real.acceptance(two_warn))
    failing = score_real.acceptance(quiet + [rec("real_healthy/fam/f", "fail", 2, ["L2.kl-level-high:fail"])])
    assert "MISS real_healthy: 1 run(s) fail (target 0)" in failing
    missed = score_real.acceptance([rec("framework_runs/x/y", "pass", matches=False)])
    assert "framework_runs: 0/1 verdict and root as expected" in missed and any(x.startswith("MISS") for x in missed)

    before = {"implementation": "rev old", "version": "0", "records": quiet[:2]}
    after = [quiet[0], rec("real_healthy/fam/r1", "fail", 2, ["L2.kl-level-high:fail"])]
    score_real.compare(before, after)
    out = capsys.readouterr().out
    assert "1 of 2 run(s) changed" in out and "real_healthy/fam/r1" in out and "fail L2 L2.kl-level-high" in out
    assert "real_healthy/fam" in out and "0->1" in out


def test_evidence_curves_are_what_the_docstring_says(evidence):
    hack = evidence.make_run(evidence.Cell(8, 300, "large"), 0)
    null = evidence.make_run(evidence.Cell(8, 300, "none"), 0)
    first, last = slice(0, 30), slice(-30, None)
    assert hack["reward"][last].mean() - hack["reward"][first].mean() > 0.25
    assert hack["truncation"][first].mean() < 0.15 < 0.5 < hack["truncation"][last].mean()
    assert hack["length"][last].mean() > 2 * hack["length"][first].mean()
    assert abs(null["reward"][last].mean() - null["reward"][first].mean()) < 0.1
    for run in (hack, null):
        assert set(np.unique(run["reward"] * 16 * 8).round(6)) <= set(np.arange(0, 129.0))   # k / (P G)
        assert np.ptp(run["eval"]) < 0.15 and run["eval_steps"][0] == 1 and run["eval_steps"][-1] == 300
    again = evidence.make_run(evidence.Cell(8, 300, "large"), 0)
    assert np.array_equal(again["reward"], hack["reward"])                                    # seeded


def test_evidence_runs_a_two_cell_grid(tmp_path):
    saved = tmp_path / "ev.json"
    proc = subprocess.run([sys.executable, str(BENCH / "evidence.py"), "--quick", "--seeds", "1", "--g", "8",
                           "--t", "100", "--effects", "none,large", "--keep", str(tmp_path / "runs"),
                           "--save", str(saved)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(saved.read_text())
    [side] = result["sides"]
    assert set(side["cells"]) == {"G8_T100_none", "G8_T100_large"}
    assert all(row["runs"] == 1 and row["missing"] == 0 for row in side["cells"].values())
    large = side["runs"]["G8_T100_large__s0"]
    assert side["cells"]["G8_T100_large"]["detected"] == float(large["root"] == 1 and large["l1"])
    assert "strong hack at layer 1, G=8, T>=100" in proc.stdout and "nulls, worst rule" in proc.stdout
    header = (tmp_path / "runs" / "G8_T100_large__s0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["step", "reward"] and "completions/clipped_ratio" in header
