"""`stabdiag rules list`, `stabdiag rules explain ID` and `stabdiag rules budget`: the rules, from
stabdiag.judge.rules, and the split of the verdict's false-alarm budget among them (stabdiag.judge.budget)."""

# No `from __future__ import annotations`: typer reads the annotations at each start (see _typer.py).
import typer

from ._guard import Exit, choice, guarded, say
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


@app.command("budget", cls=Command)
def rules_budget(format: str = typer.Option("text", "--format", "-f", help="text or json."),
                 rules_dir: list[str] = typer.Option([], "--rules", help="Extra directory of rule files.")) -> None:
    """The verdict's false-alarm budget split among the rules (weighted Bonferroni); exit 1 if overspent."""
    def body() -> None:
        import json
        from dataclasses import asdict

        from ..judge.budget import FAIL_BUDGET, FINDING_BUDGET, allocate
        from ..judge.rules import load_rules

        fmt = choice("--format", format, ("text", "json"))
        plan = allocate(load_rules(rules_dir))
        over = plan.over()
        if fmt == "json":
            print(json.dumps({"fail_budget": FAIL_BUDGET, "finding_budget": FINDING_BUDGET,
                              "fail_spent": plan.fail_spent, "finding_spent": plan.finding_spent,
                              "shares": [asdict(s) for s in plan.shares],
                              "level_rules": list(plan.unclaimed), "over": over}, indent=2))
        else:
            width = max(len(s.rule) for s in plan.shares)
            for s in plan.shares:
                print(f"{s.rule:<{width}}  {s.budget:<7}  {f'{s.param} {s.value:g}':<16}  {s.chance:>7.3%}")
            print(f"fail rules spend {plan.fail_spent:.3%} of the {FAIL_BUDGET:.0%} fail budget; all rules "
                  f"{plan.finding_spent:.3%} of the {FINDING_BUDGET:.0%} budget for any finding (weighted "
                  f"Bonferroni: the run's chance of a false finding is at most the sum)")
            print(f"{len(plan.unclaimed)} level rules make no sureness claim (their rates are measured: "
                  f"bench/calibrate.py): {', '.join(plan.unclaimed)}")
        for said in over:
            say(f"error: over budget: {said}")
        if over:
            raise Exit(1)

    guarded(body)
