"""Which rules a check runs, as ruff picks its rules: `--select` and `--ignore` take rule ids, aliases and
prefixes of either (`L3`, `L3.grad-norm`), comma lists (`L1,L3`), in any case (`l1`).

What a selection leaves out is never silent.  The rules left out are run once more on their own (only
when there are some), so that a report can say "pass, L1 and L3 ignored" and, where an ignored rule
would have fired, which one: `--ignore L3` must not turn a run that died on a NaN into a bare pass.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Iterable

from ..errors import ConfigError
from .diagnosis import Diagnosis, Status


def split_selectors(items: Iterable[str]) -> tuple[str, ...]:
    """`--select L1,L3 --select l4` as ("L1", "L3", "l4"): comma lists split, blanks dropped."""
    return tuple(part.strip() for item in items for part in str(item).split(",") if part.strip())


def _names(rule) -> tuple[str, ...]:
    return (rule.id, *rule.aliases)


def hits(selector: str, rule) -> bool:
    """A selector picks a rule when it is a prefix of the rule's id or of one of its aliases, any case."""
    wanted = selector.lower()
    return any(name.lower().startswith(wanted) for name in _names(rule))


def canonical(selectors: Iterable[str], rules, where: str) -> tuple[str, ...]:
    """Each selector in the case the rules spell it (`l3.GRAD-norm` -> `L3.grad-norm`), duplicates
    dropped; one that picks no rule is a ConfigError naming `where` and the closest id."""
    out: list[str] = []
    names = [name for rule in rules for name in _names(rule)]
    for selector in split_selectors(selectors):
        spelled = next((name[:len(selector)] for name in names if name.lower().startswith(selector.lower())), None)
        if spelled is None:
            close = difflib.get_close_matches(selector, names, n=1, cutoff=0.5)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown rule id or prefix '{selector}'{hint}")
        if spelled not in out:
            out.append(spelled)
    return tuple(out)


def choose(rules, select: Iterable[str] = (), ignore: Iterable[str] = ()) -> tuple[tuple, tuple]:
    """(the rules to run, the rules left out by the selection), both in the rules' order; removed rules
    are in neither."""
    select, ignore = tuple(select), tuple(ignore)
    live = [r for r in rules if r.status != "removed"]
    chosen = [r for r in live if (not select or any(hits(s, r) for s in select))
              and not any(hits(s, r) for s in ignore)]
    left_out = [r for r in live if r not in chosen]
    return tuple(chosen), tuple(left_out)


def ignored_layers(left_out, rules) -> tuple[int, ...]:
    """The layers every live rule of which was left out."""
    live = [r for r in rules if r.status != "removed"]
    out = {r.layer for r in left_out}
    return tuple(sorted(layer for layer in out if all(r in left_out for r in live if r.layer == layer)))


def mark_ignored(diag: Diagnosis, left_out, rules, shadow: Diagnosis | None = None) -> Diagnosis:
    """The diagnosis with what the selection left out: the rules' ids, each wholly ignored layer's status
    `ignored` (not `unknown`: nobody asked), and the findings the ignored rules would have made
    (`shadow`: the same run checked with the left-out rules alone)."""
    if not left_out:
        return diag
    whole = ignored_layers(left_out, rules)
    layers = tuple(replace(r, status=Status.IGNORED, not_judged=(), missing_signals=())
                   if r.layer in whole and not r.findings else r for r in diag.layers)
    fired = tuple(replace(f, downstream=False) for f in shadow.findings) if shadow is not None else ()
    return replace(diag, layers=layers, ignored=tuple(r.id for r in left_out), ignored_layers=whole,
                   ignored_findings=fired)


def diagnose_selected(run, rules, *, select: Iterable[str] = (), ignore: Iterable[str] = (), **options) -> Diagnosis:
    """`engine.diagnose` with the selection applied and recorded: the chosen rules judge the run; the
    left-out ones, when there are any, run apart so the report can say what they would have found."""
    from .engine import diagnose

    chosen, left_out = choose(rules, select, ignore)
    diag = diagnose(run, rules=chosen, **options)
    if not left_out:
        return diag
    return mark_ignored(diag, left_out, rules, diagnose(run, rules=left_out, **options))
