"""`stabdiag plot`: a timeline image per sample run, with every finding's step range actually drawn."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stabdiag
from stabdiag.cli import app
from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import discover

pytest.importorskip("matplotlib")

from stabdiag.report.plot import plot  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
RUNS = sorted(s.name for s in discover(SAMPLES))      # the sample runs (probe/ is not a metric log)
runner = CliRunner()


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def _spans(ax) -> dict[str, tuple[float, float]]:
    """finding gid -> the x range of its shaded span (data coordinates)."""
    out = {}
    for patch in ax.patches:
        gid = patch.get_gid() or ""
        if gid.startswith("finding:"):
            out[gid.removeprefix("finding:")] = (patch.get_x(), patch.get_x() + patch.get_width())
    return out


@pytest.mark.parametrize("name", RUNS)
def test_plot_draws_every_finding_of_each_sample(name, tmp_path):
    assert len(RUNS) == 6
    run = stabdiag.load(str(SAMPLES / name))[0]
    diag = diagnose(run)
    out = tmp_path / f"{name}.png"
    fig = plot(run, diag, out)
    width, height = _png_size(out)
    assert (width, height) == (1320, 1100)
    assert out.stat().st_size > 30_000
    axes = [ax for ax in fig.axes if ax.get_title(loc="left")]     # the four layer panels, not twins
    assert [int(ax.get_title(loc="left").split()[0]) for ax in axes] == [1, 2, 3, 4]
    for f in diag.findings:
        spans = _spans(axes[f.layer - 1])
        assert f.rule in spans, f"{f.rule} not drawn in panel {f.layer}"
        lo, hi = spans[f.rule]
        assert lo <= f.start_step and hi >= f.end_step and hi - lo <= (f.end_step - f.start_step) + 10
    drawn = {rule for ax in axes for rule in _spans(ax)}
    assert drawn == {f.rule for f in diag.findings}
    for ax in axes:
        lines = [line for line in ax.lines if line.get_gid() == "nonfinite"]
        if diag.first_nonfinite_step is None:
            assert not lines
        else:
            assert len(lines) == 1 and lines[0].get_xdata()[0] == diag.first_nonfinite_step
    for layer, ax in enumerate(axes, 1):
        assert ("ROOT" in ax.get_title(loc="left")) == (layer == diag.root_layer)
    assert name in fig._suptitle.get_text()


def test_plot_svg_and_no_file(tmp_path):
    run = stabdiag.load(str(SAMPLES / "grpo_policy_collapse"))[0]
    diag = diagnose(run)
    out = tmp_path / "t.svg"
    plot(run, diag, out, "svg")
    assert out.read_text(encoding="utf-8").lstrip().startswith("<?xml") and "<svg" in out.read_text()
    fig = plot(run, diag)            # no path: nothing written, the figure still comes back
    assert len(fig.axes) >= 4


def test_plot_cli_one_image_per_run_in_a_folder(tmp_path):
    tree = tmp_path / "runs"
    tree.mkdir()
    two = ["grpo_math_healthy", "grpo_policy_collapse"]     # two runs keep the test fast
    for name in two:
        shutil.copytree(SAMPLES / name, tree / name)
    result = runner.invoke(app, ["plot", str(tree), "-o", str(tmp_path / "plots")])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert files == [f"{name}.timeline.png" for name in two]
    assert result.stdout.count("wrote ") == 2


def test_plot_cli_svg_from_the_suffix(tmp_path):
    out = tmp_path / "timeline.svg"
    result = runner.invoke(app, ["plot", str(SAMPLES / "grpo_easy_data"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "<svg" in out.read_text(encoding="utf-8")


def test_plot_cli_errors_are_one_line(tmp_path):
    many = runner.invoke(app, ["plot", str(SAMPLES), "-o", str(tmp_path / "one.png")])
    assert many.exit_code == 2 and many.stderr.startswith(f"error: -o {tmp_path / 'one.png'}: the input holds 6")
    bad = runner.invoke(app, ["plot", str(SAMPLES / "grpo_easy_data"), "--format", "jpg"])
    assert bad.exit_code == 2 and bad.stderr == "error: --format: expected one of png, svg, pdf; got 'jpg'\n"


def test_plot_cli_writes_a_pdf(tmp_path):
    out = tmp_path / "timeline.pdf"
    result = runner.invoke(app, ["plot", str(SAMPLES / "grpo_easy_data"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data.startswith(b"%PDF-") and b"CreationDate" not in data


def test_check_never_imports_matplotlib():
    code = ("import sys; from typer.testing import CliRunner; from stabdiag.cli import app; "
            "r = CliRunner().invoke(app, ['check', %r]); "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; print(r.exit_code)"
            % str(SAMPLES / "grpo_math_healthy"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
