"""`stabdiag rules list` and `stabdiag rules explain ID`: the rules, from stabdiag.judge.rules."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

from ._guard import choice, guarded, say
from ._typer import HELP, Command, Group

app = typer.Typer(add_completion=False, cls=Group, context_settings=HELP, invoke_without_command=True,
                  help="List and explain the rules (a bare `stabdiag rules` lists them).")


@app.callback()
def _rules(ctx: typer.Context) -> None:
    """List and explain the rules."""
    if ctx.invoked_subcommand is None:        # a bare `stabdiag rules` is `rules list`, exit 0
        rules_list(format="text", rules_dir=[])


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
def rules_explain(rule_id: str = typer.Argument(..., help="Rule id, alias or prefix in any case, as --select "
                                                         "takes them: L1.reward-eval-divergence, l3.grad."),
                  format: str = typer.Option("text", "--format", "-f", help="text or json."),
                  rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """What a rule checks, why it matters, what to check first, and an example (a prefix: every rule it picks)."""
    def body() -> None:
        import json

        from ..judge.rules import get_rule, load_rules
        from ..judge.selection import hits

        fmt = choice("--format", format, ("text", "json"))
        rules = load_rules(rules_dir)
        exact = [r for r in rules if rule_id.lower() in (name.lower() for name in (r.id, *r.aliases))]
        picked = exact or [r for r in rules if r.status != "removed" and hits(rule_id, r)]
        if not picked:
            get_rule(rule_id, rules)          # the error, with the closest id
        if len(picked) == 1:
            rule = picked[0]
            if rule_id.lower() in (a.lower() for a in rule.aliases):
                say(f"note: '{rule_id}' is an old id of {rule.id}")
            print(json.dumps(rule.to_dict(), indent=2) if fmt == "json" else rule.explain())
            return
        say(f"note: '{rule_id}' picks {len(picked)} rules: {', '.join(r.id for r in picked)}")
        if fmt == "json":
            print(json.dumps([r.to_dict() for r in picked], indent=2))
        else:
            print("\n\n".join(r.explain() for r in picked))

    guarded(body)
