"""The `stabdiag` command: thin — parse options, call the library, pick a reporter, set the exit code.

Exit codes: 0 nothing at or above --fail-on, 1 something is, 2 a usage, input, config or rule error.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from typing import Optional

import typer

from ._version import __version__
from .errors import ConfigError, StabdiagError
from .probe.cli import app as probe_app

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Which layer of a training run failed first, the evidence, and what to check first.")
rules_app = typer.Typer(add_completion=False, no_args_is_help=True, help="List and explain the rules.")
app.add_typer(rules_app, name="rules")
methods_app = typer.Typer(add_completion=False, help="The stability methods and the layer each acts on.")
app.add_typer(methods_app, name="methods")
app.add_typer(probe_app, name="probe", help="Recompute logprobs with the training-side model and measure "
                                             "rollout-vs-training drift.")

FAIL_ON = ("warn", "fail")
_NO_GUESS_HELP = ("Read only --map and the known framework names: guess no signal from a metric's name "
                  "(config key no-guess).")


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{flag}: expected one of {', '.join(allowed)}; got {value!r}")
    return value


def _guarded(fn, debug: bool = False) -> None:
    """Run a command body; library errors become one `error:` line and exit code 2.  numpy's warnings
    about arithmetic on Inf and NaN (evidence in a metric, reported as findings) stay off stderr
    unless --debug."""
    try:
        with warnings.catch_warnings():
            if not debug:
                warnings.simplefilter("ignore", RuntimeWarning)
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
    except BrokenPipeError:
        # the reader went away (`stabdiag ... | head`): not an error of ours; keep Python from
        # complaining again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
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
               refresh: bool, split_sources: bool = False):
    from .assemble import load
    from .run import merge_runs

    options = {"step_col": step_col, "progress": progress, "refresh": refresh}
    runs = load(paths, split_sources=split_sources, **options)
    for run in runs:
        for warning in run.warnings:
            print(f"warning: {run.name}: {warning}", file=sys.stderr)
    if with_files:
        extra = load(with_files, **options)
        merged = merge_runs("with", extra)
        runs = [r.with_series(merged.series, note="merged series from " + ", ".join(with_files))
                for r in runs]
    return runs


def _settings(paths: list[str], config: Optional[str], flags: dict):
    """Defaults < config file (--config, else the project's: the cwd or a folder above it) < flags.
    A config file inside the data is never read unless named with --config; each one is a warning."""
    from .config import configs_in_data, find_config, read_config, resolve_settings
    from .signals import parse_mapping

    flags = {**flags, "map": parse_mapping(flags.get("map"))}
    cfg = read_config(config) if config else find_config(paths)
    if config and cfg is None:
        raise ConfigError(f"--config {config}: no [tool.stabdiag] table in it")
    for ignored in configs_in_data(paths, cfg):
        print(f"warning: {ignored}: not read: a config file beside the data being judged is never applied; "
              "settings come from the project (the working directory up) or --config FILE", file=sys.stderr)
    return resolve_settings(cfg, flags)


def _check_file_map(settings, run) -> None:
    """A --map entry from a config file names a key the run lacks: say which file and key."""
    for signal, key in settings.map.items():
        where = settings.map_origin.get(signal, "--map")
        if where != "--map" and key not in run.series:
            raise ConfigError(f"{where}: run '{run.name}' has no key '{key}'")


def _diagnose_all(runs, rules, settings, **cost):
    """`cost` carries --gpus / --gpu-hour-cost for the cost estimate."""
    from .engine import diagnose

    out = []
    for run in runs:
        _check_file_map(settings, run)
        out.append(diagnose(run, rules=rules, mapping=settings.map, select=list(settings.select),
                            ignore=list(settings.ignore), params=settings.params, guess=not settings.no_guess,
                            **cost))
    return out


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write the report ({exc.strerror or exc})") from None


def _refuse_to_overwrite(flag: str, output: Optional[str], inputs: list[str]) -> None:
    """The report or image must never replace an input: the logs being judged are read-only."""
    from ._paths import overwritten_input

    victim = overwritten_input(output, [i for i in inputs if i]) if output else None
    if victim is not None:
        raise ConfigError(f"{flag} {output}: would overwrite the input {victim}; write it elsewhere")


def _baseline(path: str, with_files: list[str], step_col: Optional[str], rules, settings):
    runs = _load_runs([path], with_files, step_col, progress=False, refresh=False)
    if len(runs) != 1:
        raise ConfigError(f"--baseline {path}: expected one run; found {len(runs)}")
    return _diagnose_all(runs, rules, settings)[0]


def _with_comparisons(text: str, fmt: str, comparisons) -> str:
    """The report with the baseline comparison added in the format's own way."""
    from .report.github import command

    if not comparisons:
        return text
    if fmt == "json":
        doc = json.loads(text)
        doc["comparisons"] = [c.to_dict() for c in comparisons]
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"
    if fmt == "markdown":
        return text + "\n" + "\n".join(c.markdown() for c in comparisons)
    if fmt == "github":
        return text + "".join(command("notice", c.summary, title=f"stabdiag baseline {c.baseline} -> {c.run}")
                              + "\n" for c in comparisons)
    if fmt == "terminal":
        return text + "\n" + "".join(c.text() for c in comparisons)
    return text


@app.command()
def check(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    format: str = typer.Option("terminal", "--format", "-f",
                               help="terminal, json, junit, markdown or github (annotations)."),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Write the --format report to FILE; the terminal report "
                                              "still prints."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on",
                                          help="Exit 1 on findings at or above: warn or fail "
                                               "(default: fail, or the config file's)."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY."),
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes (L1, L3.loss-spike)."),
    ignore: list[str] = typer.Option([], "--ignore", help="Skip these rule ids or prefixes."),
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter "
                                                         "(e.g. L3.grad-norm-spike.ratio_vs_ema=10)."),
    with_files: list[str] = typer.Option([], "--with", help="Extra series to merge into each run "
                                                            "(e.g. drift.csv from stabdiag probe)."),
    rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="A baseline run (e.g. before a fix): "
                                                                    "per layer, what changed."),
    config: Optional[str] = typer.Option(None, "--config", help="Config file (stabdiag.toml or "
                                                                "pyproject.toml) instead of the one found."),
    show_settings: bool = typer.Option(False, "--show-settings", help="Print the resolved settings and "
                                                                      "where each came from, then exit."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    refresh: bool = typer.Option(False, "--refresh", help="Refetch online runs instead of using the cache."),
    split_sources: bool = typer.Option(False, "--split-sources", help="Read every source (event folder, "
                                                                     "W&B run, trainer_state.json, console "
                                                                     "log) as a run of its own."),
    allow_unknown: bool = typer.Option(False, "--allow-unknown", help="Exit 0 for a run nothing could be "
                                                                      "judged on (default: such a run exits 1)."),
    no_guess: bool = typer.Option(False, "--no-guess", help=_NO_GUESS_HELP),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="GPUs the run used, for the cost estimate "
                                                                   "(default: the run's config, where it says)."),
    gpu_hour_cost: Optional[float] = typer.Option(None, "--gpu-hour-cost", min=0.0,
                                                  help="Price of one GPU-hour, to put the cost estimate in money."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even with findings (2 stays 2)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Diagnose runs: which layer failed first, the evidence, what to check first."""
    def body() -> None:
        from .baseline import compare
        from .report import FORMATS, render
        from .report.sparkline import with_trends
        from .rules import select_rules

        fmt = _choice("--format", format, FORMATS)
        if fail_on is not None:
            _choice("--fail-on", fail_on, FAIL_ON)
        _refuse_to_overwrite("--output", output, [*paths, *with_files, baseline])
        settings, rules = _settings(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                    "fail-on": fail_on, "allow-unknown": allow_unknown,
                                                    "no-guess": no_guess, "map": mapping, "param": params})
        if show_settings:
            sys.stdout.write(settings.show())
            return
        terminal = fmt == "terminal" or output is not None
        runs = _load_runs(paths, with_files, step_col, progress=terminal, refresh=refresh,
                          split_sources=split_sources)
        diagnoses = _diagnose_all(runs, rules, settings, gpus=gpus, gpu_hour_cost=gpu_hour_cost)
        if fmt in ("terminal", "markdown") or terminal:
            diagnoses = [with_trends(d, r, mapping=settings.map) for d, r in zip(diagnoses, runs)]
        comparisons = []
        if baseline is not None:
            before = _baseline(baseline, with_files, step_col, rules, settings)
            comparisons = [compare(before, d) for d in diagnoses]
        chosen = select_rules(rules, list(settings.select), list(settings.ignore))
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
        options = {"fail_on": settings.fail_on, "rules": chosen, "allow_unknown": settings.allow_unknown,
                   "settings": settings}
        if output is not None:
            report = render(diagnoses, fmt, width=100, color=False, **options)
            _write(output, _with_comparisons(report, fmt, comparisons))
        if terminal:
            report = render(diagnoses, "terminal", width=width, color=color, **options)
            sys.stdout.write(_with_comparisons(report, "terminal", comparisons))
        else:
            sys.stdout.write(_with_comparisons(render(diagnoses, fmt, **options), fmt, comparisons))
            if fmt == "junit":
                for c in comparisons:
                    print(f"baseline: {c.summary}", file=sys.stderr)
        if not terminal:
            for diag in diagnoses:
                for note in diag.notes:
                    print(f"warning: {diag.run}: {note}", file=sys.stderr)
        code = max((d.exit_code(settings.fail_on, allow_unknown=settings.allow_unknown) for d in diagnoses),
                   default=0)
        raise _Exit(0 if exit_zero else code)

    _guarded(body, debug)


@app.command()
def plot(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Image file, or a folder for one "
                                                                      "image per run (default: RUN.timeline.png)."),
    format: Optional[str] = typer.Option(None, "--format", "-f", help="png or svg (default: from -o, else png)."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY."),
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes."),
    ignore: list[str] = typer.Option([], "--ignore", help="Skip these rule ids or prefixes."),
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter."),
    with_files: list[str] = typer.Option([], "--with", help="Extra series to merge into each run."),
    rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files."),
    config: Optional[str] = typer.Option(None, "--config", help="Config file instead of the one found."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    split_sources: bool = typer.Option(False, "--split-sources", help="Read every source (event folder, "
                                                                     "W&B run, trainer_state.json, console "
                                                                     "log) as a run of its own."),
    no_guess: bool = typer.Option(False, "--no-guess", help=_NO_GUESS_HELP),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Draw each run's timeline: four layer panels, findings shaded, the first NaN/Inf marked."""
    def body() -> None:
        from pathlib import Path

        from .plot import FORMATS, default_name
        from .plot import plot as draw

        suffix = Path(output).suffix.lstrip(".").lower() if output else ""
        fmt = _choice("--format", format, FORMATS) if format else (suffix if suffix in FORMATS else "png")
        _refuse_to_overwrite("--output", output, [*paths, *with_files])
        settings, rules = _settings(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                    "no-guess": no_guess, "map": mapping, "param": params})
        runs = _load_runs(paths, with_files, step_col, progress=False, refresh=False,
                          split_sources=split_sources)
        folder = output is not None and (Path(output).is_dir() or not suffix)
        if len(runs) > 1 and output is not None and not folder:
            raise ConfigError(f"-o {output}: the input holds {len(runs)} runs; give a folder to write one "
                              "image per run")
        if folder:
            Path(output).mkdir(parents=True, exist_ok=True)
        for run, diag in zip(runs, _diagnose_all(runs, rules, settings)):
            target = (str(Path(output) / default_name(run.name, fmt)) if folder
                      else output or default_name(run.name, fmt))
            _refuse_to_overwrite("--output", target, [*paths, *with_files])
            draw(run, diag, target, fmt, mapping=settings.map)
            root = "no layer failed" if diag.root_layer is None else f"root layer {diag.root_layer}"
            print(f"wrote {target} ({diag.run}: {diag.verdict}, {root})")

    _guarded(body, debug)


@app.command()
def signals(
    paths: list[str] = typer.Argument(..., help="Run files, directories or URIs."),
    format: str = typer.Option("text", "--format", "-f", help="text or json."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY overrides."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    split_sources: bool = typer.Option(False, "--split-sources", help="Read every source (event folder, "
                                                                     "W&B run, trainer_state.json, console "
                                                                     "log) as a run of its own."),
    no_guess: bool = typer.Option(False, "--no-guess", help=_NO_GUESS_HELP),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Show which of your metric keys feeds each canonical signal, what was guessed, and what stayed unmapped."""
    def body() -> None:
        from .report.signals import render_signals
        from .signals import parse_mapping, resolve

        fmt = _choice("--format", format, ("text", "json"))
        user_map = parse_mapping(mapping)
        settings, _ = _settings(paths, None, {"no-guess": no_guess})    # the config file's no-guess too
        runs = _load_runs(paths, [], step_col, progress=fmt == "text", refresh=False,
                          split_sources=split_sources)
        resolved = [resolve(r, user_map, guess=not settings.no_guess) for r in runs]
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


@methods_app.callback(invoke_without_command=True)
def methods_list(ctx: typer.Context,
                 format: str = typer.Option("text", "--format", "-f", help="text or json.")) -> None:
    """The stability methods by the layer they act on (run `stabdiag methods explain NAME` for one)."""
    if ctx.invoked_subcommand is not None:
        return

    def body() -> None:
        from .methods import methods_map
        from .rules import LAYER_NAMES

        fmt = _choice("--format", format, ("text", "json"))
        table = methods_map()
        if fmt == "json":
            print(json.dumps([{"name": m.name, "layer": m.layer, "component": m.component, "changes": m.changes,
                               "source": m.source} for m in table.methods], indent=2))
            return
        width = max(len(m.name) for m in table.methods)
        for layer in (1, 2, 3, 4):
            print(f"layer {layer} ({LAYER_NAMES[layer]})")
            for m in (m for m in table.methods if m.layer == layer):
                print(f"  {m.name:<{width}}  {m.component}")

    _guarded(body)


@methods_app.command("explain")
def methods_explain(name: str = typer.Argument(..., help="Method name, e.g. clip-higher.")) -> None:
    """What a method changes, the layer it acts on, how a run shows it is on, and the three questions."""
    def body() -> None:
        from .methods import methods_map

        table = methods_map()
        print(table.get(name).explain(table.questions, table.note))

    _guarded(body)


def main() -> None:
    app(prog_name="stabdiag")
