"""`stabdiag methods` and `stabdiag methods explain NAME`: the stability methods, from stabdiag.advise.methods."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

from ._guard import choice, guarded
from ._typer import HELP, Command, Group

app = typer.Typer(add_completion=False, cls=Group, context_settings=HELP,
                  help="The stability methods and the layer each acts on.")


@app.callback(invoke_without_command=True)
def methods_list(ctx: typer.Context,
                 format: str = typer.Option("text", "--format", "-f", help="text or json.")) -> None:
    """The stability methods by the layer they act on (run `stabdiag methods explain NAME` for one)."""
    if ctx.invoked_subcommand is not None:
        return

    def body() -> None:
        import json

        from ..advise.methods import methods_map
        from ..judge.rules import LAYER_NAMES

        fmt = choice("--format", format, ("text", "json"))
        table = methods_map()
        if fmt == "json":
            print(json.dumps([{"name": m.name, "layer": m.layer, "component": m.component, "changes": m.changes,
                               "kinds": list(m.kinds), "source": m.source} for m in table.methods], indent=2))
            return
        width = max(len(m.name) for m in table.methods)
        for layer in (1, 2, 3, 4):
            print(f"layer {layer} ({LAYER_NAMES[layer]})")
            for m in (m for m in table.methods if m.layer == layer):
                print(f"  {m.name:<{width}}  {m.component}")

    guarded(body)


@app.command("explain", cls=Command)
def methods_explain(name: str = typer.Argument(..., help="Method name, e.g. clip-higher.")) -> None:
    """What a method changes, the layer it acts on, how a run shows it is on, and the three questions."""
    def body() -> None:
        from ..advise.methods import methods_map

        table = methods_map()
        print(table.get(name).explain(table.questions, table.note))

    guarded(body)
