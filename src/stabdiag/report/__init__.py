"""Reporters: one module per output format, each with `render(diagnoses, **options) -> str`, and FORMATS,
the one registry of them: rendering, `check -o FILE` (which format a file's name asks for), whether runs
are judged with their trends, how a --baseline comparison joins a report, and the CLI's help all read it.
A new format is its module plus one entry here."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import NamedTuple

from ..judge.diagnosis import show_in_notebooks_with


def _after_text(report: str, comparisons) -> str:
    from .comparison import text  # every name in it escaped for the format (report._escape)

    return report + "\n" + "".join(text(c) for c in comparisons)


def _in_json(report: str, comparisons) -> str:
    import json

    doc = json.loads(report)
    doc["comparisons"] = [c.to_dict() for c in comparisons]
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _after_markdown(report: str, comparisons) -> str:
    from .comparison import markdown

    return report + "\n" + "\n".join(markdown(c) for c in comparisons)


def _after_github(report: str, comparisons) -> str:
    from .comparison import github

    return report + "".join(github(c) for c in comparisons)


class Format(NamedTuple):
    """One output format."""

    module: str                            # stabdiag.report.<module>, whose render() writes it
    extensions: tuple[str, ...] = ()       # `-o FILE` names it by these; none: stdout only
    note: str = ""                         # said after its name in the help, e.g. "annotations"
    trends: bool = False                   # draws the signals (sparklines, timelines): runs carry their trends
    comparisons: Callable[[str, list], str] | None = None    # adds --baseline comparisons to the report
    comparisons_on_stderr: bool = False    # has no place for them: on stdout, they are said on stderr


FORMATS: dict[str, Format] = {           # in the order the help and the errors list them
    "terminal": Format("terminal", (".txt",), "default", trends=True, comparisons=_after_text),
    "json": Format("json", (".json",), comparisons=_in_json),
    "junit": Format("junit", (".xml",), comparisons_on_stderr=True),    # a CI log shows stderr
    "markdown": Format("markdown", (".md", ".markdown"), trends=True, comparisons=_after_markdown),
    "github": Format("github", (), "annotations", comparisons=_after_github),
    "html": Format("html", (".html", ".htm"), trends=True),
    "concise": Format("concise", (), "path:step: RULE message", comparisons_on_stderr=True),
    "sarif": Format("sarif", (".sarif",), "code scanning", comparisons_on_stderr=True),
}


def render(diagnoses, format: str = "terminal", **options) -> str:
    """Render diagnoses in one of FORMATS."""
    if format not in FORMATS:
        from ..errors import ConfigError

        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}; got {format!r}")
    return import_module(f".{FORMATS[format].module}", __name__).render(diagnoses, **options)


def with_comparisons(report: str, format: str, comparisons) -> str:
    """The report with the --baseline comparisons added in its format's own way (unchanged where the
    format has no place for them)."""
    add = FORMATS[format].comparisons
    return add(report, comparisons) if comparisons and add is not None else report


def _notebook_view(diagnosis) -> str:
    from .html import render_one

    return render_one(diagnosis)


show_in_notebooks_with(_notebook_view)
