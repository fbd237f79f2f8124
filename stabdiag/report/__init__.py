"""Reporters: one module per output format, each with `render(diagnoses, **options) -> str`."""

from __future__ import annotations

from importlib import import_module

from ..judge.diagnosis import show_in_notebooks_with

FORMATS = ("terminal", "json", "junit", "markdown", "github", "html")


def render(diagnoses, format: str = "terminal", **options) -> str:
    """Render diagnoses in one of FORMATS."""
    if format not in FORMATS:
        from ..errors import ConfigError

        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}; got {format!r}")
    return import_module(f".{format}", __name__).render(diagnoses, **options)


def _notebook_view(diagnosis) -> str:
    from .html import render_one

    return render_one(diagnosis)


show_in_notebooks_with(_notebook_view)
