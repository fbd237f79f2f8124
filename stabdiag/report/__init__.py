"""Reporters: one module per output format, each with `render(diagnoses, **options) -> str`."""

from __future__ import annotations

from importlib import import_module

FORMATS = ("terminal", "json", "junit", "markdown", "github", "html")


def render(diagnoses, format: str = "terminal", **options) -> str:
    """Render diagnoses in one of FORMATS."""
    if format not in FORMATS:
        from ..errors import ConfigError

        raise ConfigError(f"--format: expected one of {', '.join(FORMATS)}; got {format!r}")
    return import_module(f".{format}", __name__).render(diagnoses, **options)
