"""`stabdiag rules list` and `stabdiag rules explain ID`: the rules, from stabdiag.judge.rules."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

from ._guard import choice, guarded, say
from ._typer import HELP, Command, Group

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=Group, context_settings=HELP,
                  help="List and explain the rules.")


@app.command("list", cls=Command)
def rules_list(format: str = typer.Option("text", "--format", "-f", help="text or json."),
               rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """One row per rule: id, layer, severity, status, title."""
    def body() -> None:
        import json

        from ..judge.rules import load_rules

        fmt = choice("--format", format, ("text", "json"))
        rules = load_rules(rules_dir)
        if fmt == "json":
            print(json.dumps([r.to_dict() for r in rules], indent=2))
            return
        width = max(len(r.id) for r in rules)
        for r in rules:
            print(f"{r.id:<{width}}  L{r.layer}  {r.severity:<4}  {r.status:<8}  {r.title}")

    guarded(body)


@app.command("explain", cls=Command)
def rules_explain(rule_id: str = typer.Argument(..., help="Rule id (or alias), e.g. L1.reward-eval-divergence."),
                  format: str = typer.Option("text", "--format", "-f", help="text or json."),
                  rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """What a rule checks, why it matters, what to check first, and an example."""
    def body() -> None:
        import json

        from ..judge.rules import get_rule, load_rules

        fmt = choice("--format", format, ("text", "json"))
        rule = get_rule(rule_id, load_rules(rules_dir))
        if rule_id != rule.id:
            say(f"note: '{rule_id}' is an old id of {rule.id}")
        print(json.dumps(rule.to_dict(), indent=2) if fmt == "json" else rule.explain())

    guarded(body)
