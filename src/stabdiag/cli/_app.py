"""The typer app: the root (its help, --version), the commands of this package and the groups (rules,
methods, probe) mounted on it.  `app_for` builds only what one start needs."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
from functools import lru_cache
from importlib import import_module
from typing import Optional

import typer

from ._typer import HELP, Command, Group

# Each command is the function of the same name in the module of the same name, in the order the help lists them.
COMMANDS = ("check", "plot", "signals", "samples", "schema", "watch")
PROBE_HELP = "Recompute logprobs with the training-side model and measure rollout-vs-training drift."


def _version(value: bool) -> None:
    if value:
        from .._version import __version__

        print(f"stabdiag {__version__}")
        raise typer.Exit(0)


def _main(version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")) -> None:
    """Read a run's metric logs and walk the four-layer checklist top-down."""


def _root() -> typer.Typer:
    root = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, cls=Group,
                       context_settings=HELP,
                       help="Which layer of a training run failed first, the evidence, and what to check first.")
    root.callback()(_main)
    return root


def _command(name: str):
    return getattr(import_module(f".{name}", __package__), name)


@lru_cache(maxsize=None)
def whole() -> typer.Typer:
    """The whole app: every command and group."""
    from ..probe.cli import _CommandLikeGroup
    from ..probe.cli import app as probe_app
    from . import methods, rules
    from ._typer import readable

    app = _root()
    app.add_typer(rules.app, name="rules")
    app.add_typer(methods.app, name="methods")
    # the probe's options read as every other command's in its help (FILE, N; no `<list[Path]>`, `<bool>`)
    app.add_typer(probe_app, name="probe", help=PROBE_HELP, cls=readable(_CommandLikeGroup))
    for name in COMMANDS:
        app.command(cls=Command)(_command(name))
    return app


def app_for(args: list[str]) -> typer.Typer:
    """The app, or where the first argument names one of its commands, an app with only that command:
    typer builds every command and reads its annotations at each start (~8 ms), and `stabdiag check`
    needs its own alone (nor need the other commands' modules be imported).  Its usage, help and errors
    read the same; anything else (no command, a group such as `rules`, an option first) gets the whole
    app."""
    if not args or args[0] not in COMMANDS:
        return whole()
    solo = _root()
    solo.command(cls=Command)(_command(args[0]))
    return solo
