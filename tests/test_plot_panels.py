"""Plots show the panels a run's kind has signals for: an SFT run is not drawn with three empty
"not logged" panels; an RL run keeps all four (an empty one says what to start logging)."""

from __future__ import annotations

from pathlib import Path

import stabdiag
from stabdiag.judge.engine import diagnose
from stabdiag.report.plot import panel_layers, plot

ROOT = Path(__file__).resolve().parent.parent
SFT = ROOT / "tests" / "fixtures" / "framework_runs" / "sft_diverging"


def _panels(fig) -> list[int]:
    return [int(ax.get_title(loc="left").split()[0]) for ax in fig.axes if ax.get_title(loc="left")]


def test_an_sft_run_gets_only_the_panels_it_logged_signals_for(tmp_path):
    run = stabdiag.load(str(SFT))[0]
    diag = diagnose(run)
    assert diag.kind == "sft"
    fig = plot(run, diag, tmp_path / "sft.png")
    assert _panels(fig) == [3]
    assert "not drawn: layer 1 (data & reward), 2 (policy change), 4 (training system)" in fig._supxlabel.get_text()
    assert (tmp_path / "sft.png").stat().st_size > 10_000


def test_panel_layers_by_kind():
    some = {1: False, 2: False, 3: True, 4: False}
    assert panel_layers("sft", some) == [3]
    assert panel_layers("rl", some) == [1, 2, 3, 4]
    assert panel_layers("sft", dict.fromkeys(range(1, 5), False)) == [1, 2, 3, 4]
