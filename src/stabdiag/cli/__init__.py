"""The `stabdiag` command: thin — parse options, call the library, pick a reporter, set the exit code.

One module per command (check, plot, signals, samples, schema, watch, rules, methods; probe's app is
stabdiag/probe/cli.py, mounted), each a face over the library: options in, a library call, a reporter,
an exit code.  Beside them: `_app` (the typer app, and the one-command app a start builds), `_typer`
(what typer needs to start fast and read well), `_guard` (errors, exit codes, what is said on stderr),
`_settings` (config file < flags, the help the judging commands share), `_files` (runs read for plot and
signals, outputs that must not replace an input) and `_screen` (the terminal's width and colour).

Exit codes (as pytest's): 0 nothing at or above --fail-on, 1 something is, 2 a usage, input, config or
rule error, 3 a run nothing could be judged on (--allow-unknown: 0).  --debug adds tracebacks, never
changes a code.

Importing this package imports no typer: `stabdiag --version` answers from here, and `app` (the whole
typer app, as tests use it) is built on first use.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    # one BLAS thread unless the user says otherwise: the detectors' least squares have 3 columns, and
    # OpenBLAS starting a thread per core costs ~0.1 s CPU of every start (numpy is not imported yet here)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = sys.argv[1:]
    if args == ["--version"]:        # what the app's eager --version says, without importing typer
        from .._version import __version__

        print(f"stabdiag {__version__}")
        sys.exit(0)
    from ._app import app_for

    app_for(args)(prog_name="stabdiag")


def __getattr__(name: str):
    if name == "app":
        from ._app import whole

        return whole()
    if name == "app_for":
        from ._app import app_for

        return app_for
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
