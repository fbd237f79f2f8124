"""What the hardening tests share: one run of a path, a CLI call that must not show a traceback, and the
single named error a bad input must give."""

from __future__ import annotations

from typer.testing import CliRunner

from stabdiag.cli import app_for
from stabdiag.read.assemble import load

runner = CliRunner()


def one(path):
    runs = load(path)
    assert len(runs) == 1
    return runs[0]


def cli(*args):
    # the app `stabdiag ARGS` runs: the whole app, or the one command ARGS names (stabdiag.cli.app_for)
    result = runner.invoke(app_for(list(args)), list(args))
    assert "Traceback" not in result.output
    return result


def assert_one_error(result, *parts):
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "internal error" not in errors[0], result.stderr
    for part in parts:
        assert part in errors[0], errors[0]
