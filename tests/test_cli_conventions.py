"""CLI conventions: readable metavars, -h, shell completion, --color with NO_COLOR/FORCE_COLOR, COLUMNS,
no trailing spaces when piped, image formats by extension or refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
RUN = str(SAMPLES / "grpo_math_reward_hacking")
runner = CliRunner()
ANSI = re.compile(r"\x1b\[")


def invoke(*args, env=None):
    return runner.invoke(app, list(args), env={"COLUMNS": "", "NO_COLOR": None, "FORCE_COLOR": None, **(env or {})})


@pytest.mark.parametrize("command", [["check"], ["plot"], ["signals"], ["rules", "explain"], ["rules", "list"],
                                     ["rules", "budget"], ["schema"], ["methods", "explain"], ["samples"]])
def test_help_shows_words_not_python_types_and_h_is_help(command):
    long = invoke(*command, "--help", env={"COLUMNS": "160"})
    short = invoke(*command, "-h", env={"COLUMNS": "160"})
    assert long.exit_code == short.exit_code == 0 and long.stdout == short.stdout
    assert not re.search(r"<(list\[str\]|bool|str|int|float)[^>]*>", long.stdout), long.stdout


def test_check_help_names_what_each_option_takes():
    text = invoke("check", "-h", env={"COLUMNS": "160"}).stdout
    for option, metavar in (("--output", "FILE"), ("--select", "RULE"), ("--jobs", "N"), ("--map", "SIGNAL=KEY"),
                            ("--color", "auto|always|never")):
        assert re.search(re.escape(option) + r"\s+(-\w\s+)?" + re.escape(metavar), text), option


def test_shell_completion_is_offered():
    text = invoke("--help", env={"COLUMNS": "160"}).stdout
    assert "--install-completion" in text and "--show-completion" in text


@pytest.mark.parametrize("flag, env, colored", [
    ("always", {}, True), ("never", {"FORCE_COLOR": "1"}, False), ("auto", {"FORCE_COLOR": "1"}, True),
    ("auto", {}, False), ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True), ("auto", {"FORCE_COLOR": "0"}, False),
])
def test_color(flag, env, colored):
    result = invoke("check", RUN, "--color", flag, env=env)
    assert result.exit_code == 1 and bool(ANSI.search(result.stdout)) is colored


def test_a_bad_color_is_one_error_line():
    result = invoke("check", RUN, "--color", "sometimes")
    assert result.exit_code == 2 and result.stderr.startswith("error: --color: expected one of auto, always, never")


@pytest.mark.parametrize("columns", [60, 140])
def test_columns_sets_the_width(columns):
    lines = invoke("check", RUN, env={"COLUMNS": str(columns)}).stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert max(len(line) for line in lines) > columns - 10


def test_no_trailing_spaces_when_piped():
    for args in ([RUN], [str(SAMPLES)], [str(SAMPLES), "-v"], [RUN, "--ignore", "L1"]):
        out = invoke("check", *args).stdout
        assert out and not [line for line in out.splitlines() if line != line.rstrip()], args


def test_plot_refuses_an_image_format_it_does_not_write(tmp_path):
    target = tmp_path / "timeline.jpg"
    result = invoke("plot", RUN, "-o", str(target))
    assert result.exit_code == 2 and "writes png or svg" in result.stderr and not target.exists()
