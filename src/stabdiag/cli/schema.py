"""`stabdiag schema`: the JSON Schema of a JSON report (stabdiag.report.schema)."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

from ._guard import choice, guarded


def schema(which: str = typer.Argument("check", metavar="REPORT",
                                       help="check (the check --format json report) or signals.")) -> None:
    """Print the JSON Schema (draft 2020-12) of a JSON report; its version is the report's schema_version."""
    def body() -> None:
        import json

        from ..report.schema import SCHEMAS

        print(json.dumps(SCHEMAS[choice("schema", which, tuple(SCHEMAS))](), indent=2))

    guarded(body)
