"""The `stabdiag` command: thin — parse options, call the library, pick a reporter, set the exit code.

Exit codes (as pytest's): 0 nothing at or above --fail-on, 1 something is, 2 a usage, input, config or
rule error, 3 a run nothing could be judged on (--allow-unknown: 0).  --debug adds tracebacks, never
changes a code.
"""

# No `from __future__ import annotations`: typer reads every command's annotations at each start, and as
# objects they cost half of what evaluating their strings does (~10 ms of a cold check).
import copy
import json
import os
import shutil
import sys
import warnings
from typing import Optional

import typer
from typer.core import TyperCommand, TyperGroup

from ._version import __version__
from .errors import ConfigError, StabdiagError
from .probe.cli import app as probe_app
from .report import FORMATS


class _LazyCoercion:
    """A parameter's value coerced only where it needs it.  typer >= 0.2x coerces every value through a
    pydantic TypeAdapter: importing pydantic and building one adapter per option costs more CPU than
    checking a small run.  An option left out and a text value for a text option need nothing; any
    other value (--gpus 8) goes through typer's own coercion, built on first use."""

    __slots__ = ("descriptor", "typed")

    def __init__(self, descriptor) -> None:
        self.descriptor, self.typed = descriptor, None

    def coerce(self, value, param, ctx):
        annotation = self.descriptor.annotation
        if value is None:                 # as typer's RuntimeParam.coerce: nothing given
            return () if param.multiple or param.nargs == -1 else None
        if (annotation is str and isinstance(value, str)) or (annotation is bool and isinstance(value, bool)):
            return value          # a flag's False (typer's --install-completion / --show-completion) too
        if annotation == list[str] and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        if self.typed is None:
            from typer._coercion import build_runtime_param

            self.typed = build_runtime_param(self.descriptor)
        return self.typed.coerce(value, param=param, ctx=ctx)


def _defer_coercion(params) -> None:
    for param in params:     # typer before 0.2x has neither attribute: click types, nothing to defer
        if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
            param._runtime_param = _LazyCoercion(param.type_descriptor)
        _readable_metavar(param)


# What the help shows after an option, instead of the Python type typer would show (`<list[str]>`).
_METAVARS = {"paths": "PATH", "format": "FORMAT", "output": "FILE", "fail_on": "warn|fail", "mapping": "SIGNAL=KEY",
             "select": "RULE", "ignore": "RULE", "params": "RULE.NAME=VALUE", "with_files": "FILE",
             "rules_dir": "DIR", "baseline": "RUN", "config": "FILE", "step_col": "NAME", "gpus": "N",
             "gpu_hour_cost": "PRICE", "jobs": "N", "color": "auto|always|never", "rule_id": "RULE", "name": "NAME",
             "since": "AGE", "tags": "TAG", "state": "STATE", "which": "REPORT"}


def _readable_metavar(param) -> None:
    """A flag shows no type at all; any other parameter a word for what it takes (PATH, RULE, N, FILE)."""
    if not hasattr(param, "display_type_rich"):
        return
    if getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False):
        param.display_type_rich = lambda ctx: None
        return
    if param.metavar is None:
        param.metavar = _METAVARS.get(param.name or "", (param.name or "value").upper())
    if param.param_type_name == "argument":     # its name says what it takes: no type column beside it
        param.display_type_rich = lambda ctx: None


class _DeferredCoercion:
    """Mixed into typer's command and group classes: their options (--help included) coerce lazily."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _defer_coercion(self.params)

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        _defer_coercion([option] if option is not None else [])
        return option

    def parse_args(self, ctx, args):
        # typer adds --install-completion / --show-completion after the group is built
        _defer_coercion(self.params)
        return super().parse_args(ctx, args)


class _Command(_DeferredCoercion, TyperCommand):
    pass


class _Group(_DeferredCoercion, TyperGroup):
    pass


_HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False, cls=_Group,
                  context_settings=_HELP,
                  help="Which layer of a training run failed first, the evidence, and what to check first.")
rules_app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_Group, context_settings=_HELP,
                        help="List and explain the rules.")
app.add_typer(rules_app, name="rules")
methods_app = typer.Typer(add_completion=False, cls=_Group, context_settings=_HELP,
                          help="The stability methods and the layer each acts on.")
app.add_typer(methods_app, name="methods")
app.add_typer(probe_app, name="probe", help="Recompute logprobs with the training-side model and measure "
                                             "rollout-vs-training drift.")

FAIL_ON = ("warn", "fail")
_NO_GUESS_HELP = ("Read only --map and the known framework names: guess no signal from a metric's name "
                  "(config key no-guess).")


_ISOLATED_HELP = "Read no config file (the project's or any other), as ruff's --isolated."


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{flag}: expected one of {', '.join(allowed)}; got {value!r}")
    return value


def _say(line: str) -> None:
    """One `error:`/`warning:`/`note:` line on stderr, every value in it escaped (report._escape)."""
    from .report._escape import stderr

    print(stderr(line), file=sys.stderr)


def _said_config() -> None:
    for line in _ANNOUNCED:
        _say(line)
    _ANNOUNCED.clear()


def _guarded(fn, debug: bool = False) -> None:
    """Run a command body; library errors become one `error:` line and exit code 2.  numpy's warnings
    about arithmetic on Inf and NaN (evidence in a metric, reported as findings) stay off stderr
    unless --debug.  --debug prints the traceback as well, and exits with the same code as without it:
    a CI job rerun with --debug to see why must not turn red or green because of it."""
    try:
        os.getcwd()
    except OSError:
        _say("error: the working directory no longer exists (deleted?); cd to one that does and rerun")
        raise typer.Exit(2) from None
    _ANNOUNCED.clear()
    try:
        with warnings.catch_warnings():
            if not debug:
                warnings.simplefilter("ignore", RuntimeWarning)
            fn()
        _said_config()
    except _Exit as done:
        _said_config()
        raise typer.Exit(done.code) from None
    except StabdiagError as exc:
        _traceback(debug)
        _say(f"error: {exc}")
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
        _traceback(debug)
        _say(f"error: internal error: {type(exc).__name__}: {exc}; rerun with --debug and report it")
        raise typer.Exit(2) from None


def _traceback(debug: bool) -> None:
    """With --debug, the traceback of the exception being handled, on stderr, before its `error:` line."""
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)


def _color(when: str) -> bool:
    """--color always|never, or auto: FORCE_COLOR (set, not 0) forces it, NO_COLOR (set) stops it, else
    colour exactly when stdout is a terminal (https://no-color.org, https://force-color.org)."""
    _choice("--color", when, ("auto", "always", "never"))
    if when != "auto":
        return when == "always"
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    return "NO_COLOR" not in os.environ and sys.stdout.isatty()


def _width() -> int:
    """The report's width: COLUMNS when set (as a terminal or a CI job sets it), else the terminal's,
    else 100 (a pipe or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100


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
    from .read.assemble import load

    options = {"step_col": step_col, "progress": progress, "refresh": refresh}
    runs = load(paths, split_sources=split_sources, **options)
    for run in runs:
        for warning in run.warnings:
            _say(f"warning: {run.name}: {warning}")
    if with_files:
        from .batch import load_extra, with_note

        merged = load_extra(with_files, options)
        runs = [r.with_series(merged.series, note=with_note(with_files)) for r in runs]
    return runs


def _settings(paths: list[str], config: Optional[str], flags: dict, isolated: bool = False):
    """Defaults < config file (--config, else the project's: the cwd or a folder above it) < flags.
    A config file inside the data is never read unless named with --config; each one is a warning.
    --isolated reads no config file at all.  A config file that changes a setting says so on stderr,
    in every format: one found above a downloaded data tree must not change a verdict unseen."""
    from .judge.config import configs_in_data, find_config, read_config, resolve_settings
    from .signals.resolve import parse_mapping

    if isolated and config:
        raise ConfigError("--isolated: reads no config file; it cannot be given with --config")
    flags = {**flags, "map": parse_mapping(flags.get("map"))}
    cfg = None if isolated else read_config(config) if config else find_config(paths)
    if config and cfg is None:
        raise ConfigError(f"--config {config}: no [tool.stabdiag] table in it")
    for ignored in configs_in_data(paths, cfg):
        _say(f"warning: {ignored}: not read: a config file beside the data being judged is never applied; "
             "settings come from the project (the working directory up) or --config FILE")
    return _announce(resolve_settings(cfg, flags), cfg)


def _announce(resolved, cfg):
    """A `note:` on stderr naming the config file used and each setting it changed (--isolated: none)."""
    if cfg is not None:
        from .report.settings import changed

        settings = resolved[0] if isinstance(resolved, tuple) else resolved
        mine = [f"{key} {text}" for key, text, origin in changed(settings) if "file" in origin]
        if mine:
            _ANNOUNCED.append(f"note: config {cfg.where} changes: {'; '.join(mine)} (--isolated reads no config file)")
    return resolved


_ANNOUNCED: list[str] = []    # said by `_guarded` once the command has run: an error stays one line


def _diagnose_all(runs, rules, settings):
    from .batch import diagnose_run

    return [diagnose_run(run, rules, settings) for run in runs]


def _said(batch):
    """Say what the check of many runs said, in its order (its Python warnings once each), then raise
    the error that ended it, if one did."""
    registry: dict = {}            # one registry: a warning repeated by several runs is shown once
    for message in batch.messages:
        if message.kind == "python":
            warnings.warn_explicit(message.text, message.category, message.filename, message.lineno,
                                   registry=registry)
        elif message.kind == "error":
            print(f"error: {message.text}", file=sys.stderr)
        else:
            _say(f"warning: {message.text}")
    batch.raise_for_error()
    return batch


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write the report ({exc.strerror or exc})") from None


def _refuse_to_overwrite(flag: str, output: Optional[str], inputs: list[str]) -> None:
    """The report or image must never replace an input: the logs being judged are read-only."""
    from .read._paths import overwritten_input

    victim = overwritten_input(output, [i for i in inputs if i]) if output else None
    if victim is not None:
        raise ConfigError(f"{flag} {output}: would overwrite the input {victim}; write it elsewhere")


def _baseline(path: str, with_files: list[str], step_col: Optional[str], rules, settings):
    runs = _load_runs([path], with_files, step_col, progress=False, refresh=False)
    if len(runs) != 1:
        raise ConfigError(f"--baseline {path}: expected one run; found {len(runs)}")
    return _diagnose_all(runs, rules, settings)[0]


def _listed(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}"


# the formats as the registry lists them: a new format shows here with no change to this file
_FORMAT_HELP = "What stdout gets: " + _listed([name + (f" ({fmt.note})" if fmt.note else "")
                                               for name, fmt in FORMATS.items()]) + "."
_OUTPUT_HELP = ("Also write a report to FILE, in the format its extension names ("
                + ", ".join(fmt.extensions[0] + ("" if fmt.extensions[0][1:] == name else f" {name}")
                            for name, fmt in FORMATS.items() if fmt.extensions)
                + "); repeat for several, all from one read.")


@app.command(cls=_Command)
def check(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    format: Optional[str] = typer.Option(None, "--format", "-f", metavar="FORMAT", help=_FORMAT_HELP),
    output: list[str] = typer.Option([], "--output", "-o", metavar="FILE", help=_OUTPUT_HELP),
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
                                                                    "per layer, what changed; last-pass: each "
                                                                    "selected run against the newest passing "
                                                                    "run before it."),
    since: Optional[str] = typer.Option(None, "--since", help="With a project (wandb://ENTITY/PROJECT): "
                                                              "only runs created within AGE (24h, 7d)."),
    tags: list[str] = typer.Option([], "--tag", help="With a project: only runs with this tag (repeat: all "
                                                     "of them)."),
    state: Optional[str] = typer.Option(None, "--state", help="With a project: only runs in this state "
                                                              "(finished, crashed, failed, running)."),
    config: Optional[str] = typer.Option(None, "--config", help="Config file (stabdiag.toml or "
                                                                "pyproject.toml) instead of the one found."),
    isolated: bool = typer.Option(False, "--isolated", help=_ISOLATED_HELP),
    show_settings: bool = typer.Option(False, "--show-settings", help="Print the resolved settings and "
                                                                      "where each came from, then exit."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    refresh: bool = typer.Option(False, "--refresh", help="Refetch online runs instead of using the cache."),
    split_sources: bool = typer.Option(False, "--split-sources", help="Read every source (event folder, "
                                                                     "W&B run, trainer_state.json, console "
                                                                     "log) as a run of its own."),
    allow_unknown: bool = typer.Option(False, "--allow-unknown", help="Exit 0 for a run nothing could be "
                                                                      "judged on (default: such a run exits 3)."),
    no_guess: bool = typer.Option(False, "--no-guess", help=_NO_GUESS_HELP),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="GPUs the run used, for the cost estimate "
                                                                   "(default: the run's config, where it says)."),
    gpu_hour_cost: Optional[float] = typer.Option(None, "--gpu-hour-cost", min=0.0,
                                                  help="Price of one GPU-hour, to put the cost estimate in money."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even with findings (2 stays 2)."),
    jobs: Optional[str] = typer.Option(None, "--jobs", "-j", metavar="N",
                                       help="Check a tree of runs with N worker processes (default: the usable "
                                            "cores, or the config's jobs; 1 checks one run at a time)."),
    color_when: str = typer.Option("auto", "--color", metavar="auto|always|never",
                                   help="Colour on stdout: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces "
                                        "it), always or never."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Every run's full view (the four-layer table, "
                                                                "sparklines, all findings)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="The table of runs alone, one line per run."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks (checks one run at a time; the exit "
                                                      "code stays the same)."),
) -> None:
    """Diagnose runs: which layer failed first, the evidence, what to check first."""
    def body() -> None:
        from .judge.config import parse_jobs
        from .judge.selection import choose
        from .report import render, with_comparisons
        from .report.outputs import plan, with_trends

        fmt = _choice("--format", format or "terminal", tuple(FORMATS))
        last_pass = baseline == "last-pass"
        for target in output:        # the inputs are read-only: said before anything else about a target
            _refuse_to_overwrite("--output", target, [*paths, *with_files, None if last_pass else baseline])
        outputs = plan(output, format)
        if fail_on is not None:
            _choice("--fail-on", fail_on, FAIL_ON)
        workers = parse_jobs(jobs, "--jobs") if jobs is not None else None
        settings, rules = _settings(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                    "fail-on": fail_on, "allow-unknown": allow_unknown,
                                                    "no-guess": no_guess, "map": mapping, "param": params,
                                                    "jobs": workers}, isolated)
        if show_settings:
            sys.stdout.write(settings.show())
            return
        if verbose and quiet:
            raise ConfigError("--verbose and --quiet: give one of them")
        view = "full" if verbose else "quiet" if quiet else "auto"
        terminal = fmt == "terminal"
        color, width = _color(color_when), _width()
        if since or any(tags) or state or any("://" in str(p) for p in paths):
            from .advise import nightly

            selected, groups = nightly.expand(list(paths), nightly.filters(since, tags, state))
        else:                            # plain paths, nothing to select: nightly's regexes stay unread
            selected, groups = list(paths), []
        if last_pass and not groups:
            raise ConfigError("--baseline last-pass: compares the runs of a selection; give a project, e.g. "
                              "wandb://ENTITY/PROJECT --since 7d")
        from .batch import check_many

        batch = _said(check_many(
            selected, settings=settings, rules=rules, with_files=with_files, split_sources=split_sources,
            step_col=step_col, refresh=refresh, gpus=gpus, gpu_hour_cost=gpu_hour_cost, progress=terminal,
            trends=with_trends([fmt, *(o.format for o in outputs)]), debug=debug,
            draw={"width": width, "color": color, "shared": True} if terminal and verbose else None))
        diagnoses = batch.diagnoses
        comparisons = []
        if baseline is not None:
            from .advise.baseline import compare

            if last_pass:
                comparisons = [compare(before, d) for before, d in nightly.last_pass(diagnoses, groups)]
            else:
                before = _baseline(baseline, with_files, step_col, rules, settings)
                comparisons = [compare(before, d) for d in diagnoses]
        chosen, _ = choose(rules, settings.select, settings.ignore)
        options = {"fail_on": settings.fail_on, "rules": chosen, "allow_unknown": settings.allow_unknown,
                   "settings": settings, "view": view, "not_read": batch.not_read}
        drawn = [run.drawn for run in batch.runs]
        for target, target_fmt in outputs:       # files: no colour, 100 columns, the stdout parts when alike
            same = terminal and width == 100 and not color
            report = render(diagnoses, target_fmt, width=100, color=False, drawn=drawn if same else None, **options)
            _write(target, with_comparisons(report, target_fmt, comparisons))
        report = render(diagnoses, fmt, width=width, color=color, drawn=drawn if terminal else None, **options)
        sys.stdout.write(with_comparisons(report, fmt, comparisons))
        if FORMATS[fmt].comparisons_on_stderr:
            for c in comparisons:
                _say(f"baseline: {c.summary}")
        from .judge.diagnosis import exit_code_of

        code = exit_code_of(diagnoses, settings.fail_on, allow_unknown=settings.allow_unknown)
        raise _Exit(0 if exit_zero else code)

    _guarded(body, debug)


@app.command(cls=_Command)
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
    isolated: bool = typer.Option(False, "--isolated", help=_ISOLATED_HELP),
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

        from .report._escape import visible
        from .report.plot import FORMATS, default_name
        from .report.plot import plot as draw

        suffix = Path(output).suffix.lstrip(".").lower() if output else ""
        if suffix and suffix not in FORMATS and not Path(output).is_dir():
            raise ConfigError(f"-o {output}: stabdiag plot writes {' or '.join(FORMATS)}; name the file "
                              f"{' or '.join('.' + f for f in FORMATS)}, or give a folder")
        fmt = _choice("--format", format, FORMATS) if format else (suffix if suffix in FORMATS else "png")
        _refuse_to_overwrite("--output", output, [*paths, *with_files])
        settings, rules = _settings(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                    "no-guess": no_guess, "map": mapping, "param": params},
                                    isolated)
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
            print(visible(f"wrote {target} ({diag.run}: {diag.verdict}, {root})"))

    _guarded(body, debug)


@app.command(cls=_Command)
def signals(
    paths: list[str] = typer.Argument(..., help="Run files, directories or URIs."),
    format: str = typer.Option("text", "--format", "-f", help="text or json."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY overrides."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    split_sources: bool = typer.Option(False, "--split-sources", help="Read every source (event folder, "
                                                                     "W&B run, trainer_state.json, console "
                                                                     "log) as a run of its own."),
    no_guess: bool = typer.Option(False, "--no-guess", help=_NO_GUESS_HELP),
    isolated: bool = typer.Option(False, "--isolated", help=_ISOLATED_HELP),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Show which of your metric keys feeds each canonical signal, what was guessed, and what stayed unmapped."""
    def body() -> None:
        from .report.signals import render_signals
        from .signals.resolve import parse_mapping, resolve

        fmt = _choice("--format", format, ("text", "json"))
        user_map = parse_mapping(mapping)
        settings, _ = _settings(paths, None, {"no-guess": no_guess}, isolated)   # the config file's no-guess too
        runs = _load_runs(paths, [], step_col, progress=fmt == "text", refresh=False,
                          split_sources=split_sources)
        resolved = [resolve(r, user_map, guess=not settings.no_guess) for r in runs]
        sys.stdout.write(render_signals(resolved, fmt))

    _guarded(body, debug)


@app.command(cls=_Command)
def schema(which: str = typer.Argument("check", metavar="REPORT",
                                       help="check (the check --format json report) or signals.")) -> None:
    """Print the JSON Schema (draft 2020-12) of a JSON report; its version is the report's schema_version."""
    def body() -> None:
        from .report.schema import SCHEMAS

        print(json.dumps(SCHEMAS[_choice("schema", which, tuple(SCHEMAS))](), indent=2))

    _guarded(body)


@app.command(cls=_Command)
def watch(
    paths: list[str] = typer.Argument(..., help="Run files, run directories, trees of runs, or wandb:// URIs."),
    interval: float = typer.Option(1.0, "--interval", help="Judge each run at most every this many seconds."),
    format: str = typer.Option("text", "--format", "-f", help="text or jsonl (one JSON object per event)."),
    exit_on: Optional[str] = typer.Option(None, "--exit-on", help="Exit 1 once a finding at warn or fail appears."),
    on_alert: Optional[str] = typer.Option(None, "--on-alert", help="Command (argv, no shell) run per new finding, "
                                                                   "the event's JSON on stdin."),
    mapping: list[str] = typer.Option([], "--map", help="SIGNAL=KEY: read SIGNAL from your metric KEY."),
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes."),
    ignore: list[str] = typer.Option([], "--ignore", help="Skip these rule ids or prefixes."),
    step_col: Optional[str] = typer.Option(None, "--step-col", help="Name of the step column."),
    polling: bool = typer.Option(False, "--polling", help="Poll the files instead of using watchfiles."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Follow runs while they train: judge them again as their logs grow, and say when a finding appears."""
    def body() -> None:
        from .live.watch.watcher import Watcher, settings_from_flags

        settings, rules = _settings(paths, None, {"select": select, "ignore": ignore, "map": mapping})
        raise _Exit(Watcher(paths, settings_from_flags(settings, rules, interval=interval, format=format,
                                                       exit_on=exit_on, on_alert=on_alert, step_col=step_col,
                                                       polling=polling)).run())

    _guarded(body, debug)


@rules_app.command("list", cls=_Command)
def rules_list(format: str = typer.Option("text", "--format", "-f", help="text or json."),
               rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """One row per rule: id, layer, severity, status, title."""
    def body() -> None:
        from .judge.rules import load_rules

        fmt = _choice("--format", format, ("text", "json"))
        rules = load_rules(rules_dir)
        if fmt == "json":
            print(json.dumps([r.to_dict() for r in rules], indent=2))
            return
        width = max(len(r.id) for r in rules)
        for r in rules:
            print(f"{r.id:<{width}}  L{r.layer}  {r.severity:<4}  {r.status:<8}  {r.title}")

    _guarded(body)


@rules_app.command("explain", cls=_Command)
def rules_explain(rule_id: str = typer.Argument(..., help="Rule id (or alias), e.g. L1.reward-eval-divergence."),
                  format: str = typer.Option("text", "--format", "-f", help="text or json."),
                  rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """What a rule checks, why it matters, what to check first, and an example."""
    def body() -> None:
        from .judge.rules import get_rule, load_rules

        fmt = _choice("--format", format, ("text", "json"))
        rule = get_rule(rule_id, load_rules(rules_dir))
        if rule_id != rule.id:
            _say(f"note: '{rule_id}' is an old id of {rule.id}")
        print(json.dumps(rule.to_dict(), indent=2) if fmt == "json" else rule.explain())

    _guarded(body)


@methods_app.callback(invoke_without_command=True)
def methods_list(ctx: typer.Context,
                 format: str = typer.Option("text", "--format", "-f", help="text or json.")) -> None:
    """The stability methods by the layer they act on (run `stabdiag methods explain NAME` for one)."""
    if ctx.invoked_subcommand is not None:
        return

    def body() -> None:
        from .advise.methods import methods_map
        from .judge.rules import LAYER_NAMES

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


@methods_app.command("explain", cls=_Command)
def methods_explain(name: str = typer.Argument(..., help="Method name, e.g. clip-higher.")) -> None:
    """What a method changes, the layer it acts on, how a run shows it is on, and the three questions."""
    def body() -> None:
        from .advise.methods import methods_map

        table = methods_map()
        print(table.get(name).explain(table.questions, table.note))

    _guarded(body)


def main() -> None:
    # one BLAS thread unless the user says otherwise: the detectors' least squares have 3 columns, and
    # OpenBLAS starting a thread per core costs ~0.1 s CPU of every start (numpy is not imported yet here)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _app_for(sys.argv[1:])(prog_name="stabdiag")


def _app_for(args: list[str]) -> typer.Typer:
    """The app, or where the first argument names one of its commands, the app with only that command:
    typer builds every command and reads its annotations at each start (~8 ms), and `stabdiag check`
    needs its own alone.  Its usage, help and errors read the same; anything else (no command, a
    group such as `rules`, an option first) gets the whole app."""
    chosen = [c for c in app.registered_commands
              if args and (c.name or typer.main.get_command_name(c.callback.__name__)) == args[0]]
    if not chosen:
        return app
    solo = copy.copy(app)
    solo.registered_commands, solo.registered_groups = chosen, []
    return solo
