"""Golden files pin the diagnosis of each sample run: normalised JSON (keys sorted, floats to 4
significant digits, no paths) and the terminal report at width 100 without colour.  Rewrite them with
`pytest tests/test_golden.py --update-golden` and review the diff like code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stabdiag import diagnose
from stabdiag.judge.diagnosis import SCHEMA_VERSION, report_dict
from stabdiag.read.assemble import discover, load
from stabdiag.report import render

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
GOLDEN = Path(__file__).resolve().parent / "golden"
NAMES = sorted(s.name for s in discover(SAMPLES))     # the sample runs (probe/ is not a metric log)


def _normalise(value):
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in sorted(value.items()) if k != "sources"}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value


def _check(path: Path, text: str, update: bool) -> None:
    if update:
        path.write_text(text)
        return
    assert path.exists(), f"{path.name} missing: run pytest tests/test_golden.py --update-golden"
    assert text == path.read_text(), f"{path.name} changed; if intended, rerun with --update-golden"


@pytest.fixture(scope="module")
def diagnoses():
    return {name: diagnose(load(SAMPLES / name)[0]) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_json_golden(name, diagnoses, request):
    doc = report_dict([diagnoses[name]], "golden")
    text = json.dumps(_normalise(doc), indent=2, sort_keys=True, allow_nan=False) + "\n"
    _check(GOLDEN / f"{name}.json", text, request.config.getoption("--update-golden"))


@pytest.mark.parametrize("name", NAMES)
def test_terminal_golden(name, diagnoses, request):
    text = "\n".join(line.rstrip() for line in render([diagnoses[name]], "terminal", width=100).splitlines())
    _check(GOLDEN / f"{name}.txt", text + "\n", request.config.getoption("--update-golden"))


WIDTHS = (80, 100, 200)      # a narrow terminal or tmux pane, the pipe default where CI logs are read, a wide one


@pytest.mark.parametrize("width", WIDTHS)
def test_terminal_tree_golden(width, diagnoses, request):
    """The samples as a tree at each width: every line within it, whole words, cuts marked."""
    text = render([diagnoses[n] for n in NAMES], "terminal", width=width)
    from rich.cells import cell_len

    assert all(cell_len(line) <= width for line in text.splitlines())
    _check(GOLDEN / f"tree_{width}.txt", text, request.config.getoption("--update-golden"))


@pytest.mark.parametrize("width", (80, 200))
def test_terminal_one_run_golden_at_each_width(width, request):
    """One run's full view with its sparklines, at a narrow and a wide width (100 is the golden above)."""
    from stabdiag.report.sparkline import with_trends

    run = load(SAMPLES / "grpo_math_reward_hacking")[0]
    text = render([with_trends(diagnose(run), run)], "terminal", width=width)
    from rich.cells import cell_len

    assert all(cell_len(line) <= width for line in text.splitlines())
    _check(GOLDEN / f"grpo_math_reward_hacking_{width}.txt", text, request.config.getoption("--update-golden"))


def test_golden_json_matches_the_current_schema():
    for path in GOLDEN.glob("*.json"):
        doc = json.loads(path.read_text())
        assert doc["schema_version"] == SCHEMA_VERSION
        (run,) = doc["runs"]
        assert {"run", "verdict", "root_layer", "layers", "findings", "unknown", "signals"} <= set(run)
