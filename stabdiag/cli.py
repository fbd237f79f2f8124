"""The `stabdiag` command: thin — parse options, call the library, pick a reporter, set the exit code.

Exit codes: 0 nothing at or above --fail-on, 1 something is, 2 a usage, input, config or rule error.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Optional

import typer

from ._version import __version__
from .errors import ConfigError, StabdiagError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Which layer of a training run failed first, the evidence, and what to check first.")
rules_app = typer.Typer(add_completion=False, no_args_is_help=True, help="List and explain the rules.")
app.add_typer(rules_app, name="rules")

FAIL_ON = ("warn", "fail")


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{flag}: expected one of {', '.join(allowed)}; got {value!r}")
    return value


def _guarded(fn, debug: bool = False) -> None:
    """Run a command body; library errors become one `error:` line and exit code 2."""
    try:
        fn()
    except _Exit as done:
        raise typer.Exit(done.code) from None
    except StabdiagError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise typer.Exit(2) from None
    except Exception as exc:  # an internal error still gets one line; --debug shows the traceback
        if debug:
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc}; rerun with --debug and report it",
              file=sys.stderr)
        raise typer.Exit(2) from None


def _version(value: bool) -> None:
    if value:
        print(f"stabdiag {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                                 help="Print the version and exit.")) -> None:
    """Read a run's metric logs and walk the four-layer checklist top-down."""


def _load_runs(paths: list[str], with_files: list[str], step_col: Optional[str], progress: bool,
               refresh: bool):
    from .loaders import load
    from .run import merge_runs

    options = {"step_col": step_col, "progress": progress, "refresh": refresh}
    runs = load(paths, **options)
    if with_files:
        extra = load(with_files, **options)
        merged = merge_runs("with", extra)
        runs = [r.with_series(merged.series, note="merged series from " + ", ".join(with_files))
                for r in runs]
    return runs


@app.command()
def check(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    format: str = typer.Option("terminal", "--format", "-f", help="terminal or json."),
    fail_on: str = typer.Option("fail", "--fail-on", help="Exit 1 on findings at or above: warn or fail."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY."),
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes (L1, L3.loss-spike)."),
    ignore: list[str] = typer.Option([], "--ignore", help="Skip these rule ids or prefixes."),
    with_files: list[str] = typer.Option([], "--with", help="Extra series to merge into each run "
                                                            "(e.g. drift.csv from stabdiag probe)."),
    rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    refresh: bool = typer.Option(False, "--refresh", help="Refetch online runs instead of using the cache."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even with findings (2 stays 2)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Diagnose runs: which layer failed first, the evidence, what to check first."""
    def body() -> None:
        from .engine import diagnose
        from .report import render
        from .rules import load_rules
        from .signals import parse_mapping

        fmt = _choice("--format", format, ("terminal", "json"))
        bar = _choice("--fail-on", fail_on, FAIL_ON)
        user_map = parse_mapping(mapping)
        rules = load_rules(rules_dir)
        runs = _load_runs(paths, with_files, step_col, progress=fmt == "terminal", refresh=refresh)
        diagnoses = [diagnose(r, rules=rules, mapping=user_map, select=select, ignore=ignore) for r in runs]
        color = fmt == "terminal" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
        sys.stdout.write(render(diagnoses, fmt, width=width, color=color))
        for diag in diagnoses:
            for note in diag.notes:
                if fmt == "json":
                    print(f"warning: {diag.run}: {note}", file=sys.stderr)
        code = max((d.exit_code(bar) for d in diagnoses), default=0)
        raise _Exit(0 if exit_zero else code)

    _guarded(body, debug)


@app.command()
def signals(
    paths: list[str] = typer.Argument(..., help="Run files, directories or URIs."),
    format: str = typer.Option("text", "--format", "-f", help="text or json."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY overrides."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Show which of your metric keys feeds each canonical signal, and what stayed unmapped."""
    def body() -> None:
        from .report.signals import render_signals
        from .signals import parse_mapping, resolve

        fmt = _choice("--format", format, ("text", "json"))
        user_map = parse_mapping(mapping)
        runs = _load_runs(paths, [], step_col, progress=fmt == "text", refresh=False)
        resolved = [resolve(r, user_map) for r in runs]
        sys.stdout.write(render_signals(resolved, fmt))

    _guarded(body, debug)


@rules_app.command("list")
def rules_list(format: str = typer.Option("text", "--format", "-f", help="text or json."),
               rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """One row per rule: id, layer, severity, status, title."""
    def body() -> None:
        from .rules import load_rules

        fmt = _choice("--format", format, ("text", "json"))
        rules = load_rules(rules_dir)
        if fmt == "json":
            print(json.dumps([r.to_dict() for r in rules], indent=2))
            return
        width = max(len(r.id) for r in rules)
        for r in rules:
            print(f"{r.id:<{width}}  L{r.layer}  {r.severity:<4}  {r.status:<8}  {r.title}")

    _guarded(body)


@rules_app.command("explain")
def rules_explain(rule_id: str = typer.Argument(..., help="Rule id (or alias), e.g. L1.reward-eval-divergence."),
                  format: str = typer.Option("text", "--format", "-f", help="text or json."),
                  rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """What a rule checks, why it matters, what to check first, and an example."""
    def body() -> None:
        from .rules import get_rule, load_rules

        fmt = _choice("--format", format, ("text", "json"))
        rule = get_rule(rule_id, load_rules(rules_dir))
        if rule_id != rule.id:
            print(f"note: '{rule_id}' is an old id of {rule.id}", file=sys.stderr)
        print(json.dumps(rule.to_dict(), indent=2) if fmt == "json" else rule.explain())

    _guarded(body)


def main() -> None:
    app(prog_name="stabdiag")
