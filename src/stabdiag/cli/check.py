"""`stabdiag check`: the runs under some paths judged (stabdiag.batch.check_many), a report on stdout and
one per -o FILE (stabdiag.report), and the exit code the verdicts give."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import sys
import warnings
from typing import Optional

import typer

from ..errors import ConfigError
from ..report import FORMATS
from . import _options as opt
from . import _screen as screen
from ._files import diagnose_all, load_runs, refuse_to_overwrite, write
from ._guard import Exit, choice, guarded, say
from ._settings import settings_for

FAIL_ON = ("warn", "fail")


def _listed(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}"


# the formats as the registry lists them: a new format shows here with no change to this file
_FORMAT_HELP = "What stdout gets: " + _listed([name + (f" ({fmt.note})" if fmt.note else "")
                                               for name, fmt in FORMATS.items()]) + "."
_OUTPUT_HELP = ("Also write a report to FILE, in the format its extension names ("
                + ", ".join(fmt.extensions[0] + ("" if fmt.extensions[0][1:] == name else f" {name}")
                            for name, fmt in FORMATS.items() if fmt.extensions)
                + "); repeat for several, all from one read.")


def check(
    paths: list[str] = opt.PATHS,
    format: Optional[str] = typer.Option(None, "--format", "-f", metavar="FORMAT", help=_FORMAT_HELP),
    output: list[str] = typer.Option([], "--output", "-o", metavar="FILE", help=_OUTPUT_HELP),
    fail_on: Optional[str] = typer.Option(None, "--fail-on",
                                          help="Exit 1 on findings at or above: warn or fail "
                                               "(default: fail, or the config file's)."),
    mapping: list[str] = opt.MAP,
    select: list[str] = typer.Option([], "--select", help="Only these rule ids or prefixes (L1, L3.loss-spike)."),
    ignore: list[str] = opt.IGNORE,
    params: list[str] = typer.Option([], "--param", help="RULE.NAME=VALUE: override a rule parameter "
                                                         "(e.g. L3.grad-norm-spike.ratio_vs_ema=10)."),
    with_files: list[str] = typer.Option([], "--with", help="Extra series to merge into each run "
                                                            "(e.g. drift.csv from stabdiag probe)."),
    rules_dir: list[str] = opt.RULES_DIR,
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
    config: Optional[str] = opt.CONFIG,
    isolated: bool = opt.ISOLATED,
    show_settings: bool = typer.Option(False, "--show-settings", help="Print the resolved settings and "
                                                                      "where each came from, then exit."),
    step_col: Optional[str] = opt.STEP_COL,
    refresh: bool = typer.Option(False, "--refresh", help="Refetch online runs instead of using the cache."),
    split_sources: bool = opt.SPLIT_SOURCES,
    one_run: bool = opt.ONE_RUN,
    split_files: bool = opt.SPLIT_FILES,
    allow_unknown: bool = typer.Option(False, "--allow-unknown", help="Exit 0 for a run nothing could be "
                                                                      "judged on (default: such a run exits 3)."),
    no_guess: bool = opt.NO_GUESS,
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="GPUs the run used, for the cost estimate "
                                                                   "(default: the run's config, where it says)."),
    gpu_hour_cost: Optional[float] = typer.Option(None, "--gpu-hour-cost", min=0.0,
                                                  help="Price of one GPU-hour, to put the cost estimate in money."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even with findings (2 stays 2)."),
    jobs: Optional[str] = typer.Option(None, "--jobs", "-j", metavar="N",
                                       help="Check a tree of runs with N worker processes (default: the config's "
                                            "jobs, else one at a time on 2 cores or fewer or for under 64 MB of "
                                            "logs, where a pool costs more than it gives, else the usable cores)."),
    color_when: str = typer.Option("auto", "--color", metavar="auto|always|never",
                                   help="Colour on stdout: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces "
                                        "it), always or never."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Every run's full view (the four-layer table, "
                                                                "sparklines, all findings)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="The table of runs alone, failures first."),
    show_passes: bool = typer.Option(False, "--show-passes", help="List the passing runs of a tree too (by "
                                                                  "default they are one count line)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks (checks one run at a time; the exit "
                                                      "code stays the same)."),
) -> None:
    """Diagnose runs: which layer failed first, the evidence, what to check first."""
    def body() -> None:
        from ..batch import check_many
        from ..judge.config import parse_jobs
        from ..judge.diagnosis import exit_code_of
        from ..judge.selection import choose
        from ..report import render, with_comparisons
        from ..report.outputs import plan, with_trends

        fmt = choice("--format", format or "terminal", tuple(FORMATS))
        last_pass = baseline == "last-pass"
        for target in output:        # the inputs are read-only: said before anything else about a target
            refuse_to_overwrite("--output", target, [*paths, *with_files, None if last_pass else baseline])
        outputs = plan(output, format)
        if fail_on is not None:
            choice("--fail-on", fail_on, FAIL_ON)
        workers = parse_jobs(jobs, "--jobs") if jobs is not None else None
        settings, rules = settings_for(paths, config, {"select": select, "ignore": ignore, "rules": rules_dir,
                                                       "fail-on": fail_on, "allow-unknown": allow_unknown,
                                                       "no-guess": no_guess, "map": mapping, "param": params,
                                                       "jobs": workers, "one-run": one_run,
                                                       "split-files": split_files}, isolated)
        if show_settings:
            sys.stdout.write(settings.show())
            return
        if verbose and quiet:
            raise ConfigError("--verbose and --quiet: give one of them")
        view = "full" if verbose else "quiet" if quiet else "auto"
        terminal = fmt == "terminal"
        color, width = screen.color(color_when), screen.width()
        if since or any(tags) or state or any("://" in str(p) for p in paths):
            from ..advise import nightly

            selected, groups = nightly.expand(list(paths), nightly.filters(since, tags, state))
        else:                            # plain paths, nothing to select: nightly's regexes stay unread
            selected, groups = list(paths), []
        if last_pass and not groups:
            raise ConfigError("--baseline last-pass: compares the runs of a selection; give a project, e.g. "
                              "wandb://ENTITY/PROJECT --since 7d")
        batch = said(check_many(
            selected, settings=settings, rules=rules, with_files=with_files, split_sources=split_sources,
            step_col=step_col, refresh=refresh, gpus=gpus, gpu_hour_cost=gpu_hour_cost, progress=terminal,
            trends=with_trends([fmt, *(o.format for o in outputs)]), debug=debug,
            draw={"width": width, "color": color, "shared": True} if terminal and verbose else None))
        diagnoses = batch.diagnoses
        comparisons = []
        if baseline is not None:
            from ..advise.baseline import compare

            if last_pass:
                comparisons = [compare(before, d) for before, d in nightly.last_pass(diagnoses, groups)]
            else:
                before = _baseline(baseline, with_files, step_col, rules, settings)
                comparisons = [compare(before, d) for d in diagnoses]
        chosen, _ = choose(rules, settings.select, settings.ignore)
        options = {"fail_on": settings.fail_on, "rules": chosen, "allow_unknown": settings.allow_unknown,
                   "settings": settings, "view": view, "not_read": batch.not_read, "show_passes": show_passes}
        drawn = [run.drawn for run in batch.runs]
        for target, target_fmt in outputs:       # files: no colour, 100 columns, the stdout parts when alike
            same = terminal and width == 100 and not color
            report = render(diagnoses, target_fmt, width=100, color=False, drawn=drawn if same else None, **options)
            write(target, with_comparisons(report, target_fmt, comparisons))
        report = render(diagnoses, fmt, width=width, color=color, drawn=drawn if terminal else None, **options)
        sys.stdout.write(with_comparisons(report, fmt, comparisons))
        if FORMATS[fmt].comparisons_on_stderr:
            for c in comparisons:
                say(f"baseline: {c.summary}")
        code = exit_code_of(diagnoses, settings.fail_on, allow_unknown=settings.allow_unknown)
        raise Exit(0 if exit_zero else code)

    guarded(body, debug)


def said(batch):
    """Say what checking the runs said, in its order (each Python warning once), then raise the error
    that ended it, if one did: as a serial check says it, whatever --jobs was."""
    registry: dict = {}            # one registry: a warning repeated by several runs is shown once
    for message in batch.messages:
        if message.kind == "python":
            warnings.warn_explicit(message.text, message.category, message.filename, message.lineno,
                                   registry=registry)
        elif message.kind == "error":
            print(f"error: {message.text}", file=sys.stderr)
        else:
            say(f"warning: {message.text}")
    batch.raise_for_error()
    return batch


def _baseline(path: str, with_files: list[str], step_col: Optional[str], rules, settings):
    runs = load_runs([path], with_files, step_col, progress=False, refresh=False, settings=settings)
    if len(runs) != 1:
        raise ConfigError(f"--baseline {path}: expected one run; found {len(runs)}")
    return diagnose_all(runs, rules, settings)[0]
