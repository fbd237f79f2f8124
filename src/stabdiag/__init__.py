"""stabdiag: which layer of an LLM training run failed first, the evidence, and what to check first.

    import stabdiag
    run = stabdiag.load("runs/exp1/")[0]
    diag = stabdiag.diagnose(run)
    print(diag.root_layer, [f.message for f in diag.root_findings()])

    batch = stabdiag.check_many(["runs/"], jobs=8)      # a tree of runs, checked as `stabdiag check` does

The public names load on first use (PEP 562): `import stabdiag`, and so `stabdiag --version`, read no
numpy and no rule file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__
from .errors import ConfigError, InputError, MissingExtraError, RuleError, StabdiagError

if TYPE_CHECKING:
    from .batch import check_many
    from .judge.diagnosis import Diagnosis, Finding, LayerResult, Status, Unknown
    from .judge.rules import Rule, get_rule
    from .read.run import Run, Series

__all__ = ["__version__", "load", "diagnose", "check_many", "render", "get_rule", "list_rules", "Run", "Series",
           "Diagnosis", "Finding", "LayerResult", "Status", "Unknown", "Rule", "StabdiagError",
           "InputError", "RuleError", "ConfigError", "MissingExtraError"]

_LAZY = {"check_many": ".batch", "Diagnosis": ".judge.diagnosis", "Finding": ".judge.diagnosis",
         "LayerResult": ".judge.diagnosis", "Status": ".judge.diagnosis", "Unknown": ".judge.diagnosis",
         "Rule": ".judge.rules", "get_rule": ".judge.rules", "load_rules": ".judge.rules",
         "Run": ".read.run", "Series": ".read.run"}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


def load(source, *, split_sources: bool = False, **options) -> list[Run]:
    """Every training run found under one or more paths or URIs (format sniffed per file; the files of
    one run, such as an HF output dir's events, trainer_state.json and console log, merged into one Run).
    `split_sources=True` gives every source its own Run instead.

    A source may also be a pandas DataFrame (steps from a `step` column, else the index; `name=` names
    the run, `nan="missing"` reads NaN cells as not logged) or a run object of W&B's public API
    (`wandb.Api().run("entity/project/id")`), read at full resolution as its wandb:// URI is."""
    from .read.frames import is_frame

    items = [source] if isinstance(source, (str, os.PathLike)) or not isinstance(source, Sequence) else source
    runs: list[Run] = []
    paths: list = []

    def flush() -> None:
        if paths:
            from .read.assemble import load as _load

            runs.extend(_load(list(paths), split_sources=split_sources,
                              **{k: v for k, v in options.items() if k not in ("name", "nan")}))
            paths.clear()

    for item in items:
        if is_frame(item):
            from .read.frames import run_from_frame

            flush()
            runs.append(run_from_frame(item, name=options.get("name", "dataframe"),
                                       step_col=options.get("step_col"), nan=options.get("nan", "value")))
        elif not isinstance(item, (str, os.PathLike)) and _is_api_run(item):
            from .read.formats.wandb._online import load_api_run

            flush()
            runs.append(load_api_run(item, **{k: v for k, v in options.items() if k in ("refresh", "step_col",
                                                                                         "progress")}))
        else:
            paths.append(item)
    flush()
    return runs


def _is_api_run(obj) -> bool:
    from .read.formats.wandb._online import is_api_run

    return is_api_run(obj)


def diagnose(run: Run, *, mapping: dict[str, str] | None = None, select: list[str] | None = None,
             ignore: list[str] | None = None, rules_dirs: list[str] | None = None,
             params: dict[str, dict[str, float]] | None = None, guess: bool = True) -> Diagnosis:
    """Walk the four layers top-down on one run; `params` overrides detector parameters per rule id;
    `guess=False` reads only `mapping` and the alias table (no signal guessed from a metric's name)."""
    from . import report  # noqa: F401 - its HTML view is how a notebook shows the Diagnosis
    from .advise import advise
    from .judge.engine import diagnose as _diagnose
    from .judge.rules import load_rules

    return _diagnose(run, rules=load_rules(rules_dirs), mapping=mapping, select=select, ignore=ignore,
                     params=params, guess=guess, advise=advise)


def render(diagnoses: Diagnosis | list[Diagnosis], format: str = "terminal", **options) -> str:
    """Render one or more diagnoses: 'terminal', 'json', 'markdown', 'junit', 'github' or 'html'."""
    from .judge.diagnosis import Diagnosis
    from .report import render as _render

    if isinstance(diagnoses, Diagnosis):
        diagnoses = [diagnoses]
    return _render(list(diagnoses), format, **options)


def list_rules(rules_dirs: list[str] | None = None) -> tuple[Rule, ...]:
    """The shipped rules (plus any in extra directories), layer by layer."""
    from .judge.rules import load_rules

    return load_rules(rules_dirs)
