"""The verdict's false-alarm budget and its split among the rules (issue 43 item 6).

The budget is the run's, not a rule's: a healthy run should end `fail` with chance at most FAIL_BUDGET and
raise any finding (`fail` or `warn`) with chance at most FINDING_BUDGET, across every rule together.  It is
split by weighted Bonferroni (the union bound; Bretz, Maurer, Brannath & Posch 2009): each rule that makes a
sureness claim declares its own share in its `[rule.params]` - a `sure_z` (or `min_rise_z`, `min_drop_z`)
is the one-sided normal tail it stands for, a `run_alpha` is its share as written - and the shares of
the `fail` rules, and of all rules, must sum within their budgets (`stabdiag rules budget`).  By the union
bound the run's chance of any false finding is then at most the sum, whatever the rules' dependence.  A
rule asks its question once per run (one that asks it of several evals corrects for their number:
stats/evidence.family_z, Sidak's). Holm's step-down (1979; weighted: Holm's own, Bretz et al.'s graphs) would
change no verdict, so it is not done: at the declared shares its first step is this union bound (a run has a
finding under Holm exactly when it has one here), and only after a rejection does it pass the rejected rule's
share to the others - more findings on a run that already has one, never a first. Within the `fail` budget the
same holds for `fail`.

Nominal shares hold under each rule's noise model; the rates measured on broad null families
(bench/calibrate.py, README "Calibration") are what a user meets.  Level rules (a threshold on a level,
no sureness claim: entropy under a floor, a KL over a bar, a NaN) spend no share here: their rates are
measured only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FAIL_BUDGET = 0.01          # a healthy run ends `fail` with chance at most 1%
FINDING_BUDGET = 0.05       # ... and raises any finding (`fail` or `warn`) with chance at most 5%
SURENESS_PARAMS = ("sure_z", "min_rise_z", "min_drop_z")    # how sure, in standard errors (one-sided)
SHARE_PARAMS = ("run_alpha",)                               # a share of the run, written as a chance


@dataclass(frozen=True, slots=True)
class Share:
    """One rule's share: the parameter it is read from, its value, the chance it stands for, and the budget
    it is charged to ("fail", or "finding": any finding, `fail` or `warn`)."""

    rule: str
    budget: str
    param: str
    value: float
    chance: float


@dataclass(frozen=True, slots=True)
class Allocation:
    """Every rule's share, and what the `fail` rules and all rules spend of their budgets."""

    shares: tuple[Share, ...]
    unclaimed: tuple[str, ...]          # rules without a sureness claim (level rules): measured only

    @property
    def fail_spent(self) -> float:
        return sum(s.chance for s in self.shares if s.budget == "fail")

    @property
    def finding_spent(self) -> float:
        return sum(s.chance for s in self.shares)

    def over(self) -> list[str]:
        """The budgets the shares overspend, said with their sums; empty when both hold."""
        said = []
        if self.fail_spent > FAIL_BUDGET:
            said.append(f"the fail rules spend {self.fail_spent:.3%} of the {FAIL_BUDGET:.0%} fail budget")
        if self.finding_spent > FINDING_BUDGET:
            said.append(f"all rules spend {self.finding_spent:.3%} of the {FINDING_BUDGET:.0%} budget for any finding")
        return said


def share_of(rule_id: str, severity: str, params: dict) -> Share | None:
    """The share of the budget a rule's parameters declare; None for a rule that makes no sureness claim.
    A sureness claim is charged to the budget of the rule's severity.  A `run_alpha` is the chance that a
    healthy run raises the event at all, and a healthy run's false event is one it absorbs (a spike that
    comes back: a warning; a kept one needs the level to stay), so it is charged to the finding budget."""
    for name in SURENESS_PARAMS:
        if name in params:
            z = float(params[name])
            return Share(rule_id, "fail" if severity == "fail" else "finding", name, z,
                         0.5 * math.erfc(z / math.sqrt(2.0)))
    for name in SHARE_PARAMS:
        if name in params:
            return Share(rule_id, "finding", name, float(params[name]), float(params[name]))
    return None


def allocate(rules) -> Allocation:
    """The split of the budget among `rules` (judge.rules.Rule, removed ones left out)."""
    shares, unclaimed = [], []
    for rule in rules:
        if rule.status == "removed":
            continue
        share = share_of(rule.id, rule.severity, rule.params)
        if share is None:
            unclaimed.append(rule.id)
        else:
            shares.append(share)
    return Allocation(tuple(shares), tuple(unclaimed))


def describe(share: Share) -> str:
    """"0.135% of healthy runs (sure_z 3: one-sided normal tail), of the 1% fail budget"."""
    how = "one-sided normal tail" if share.param in SURENESS_PARAMS else "as declared"
    budget = (f"of the {FAIL_BUDGET:.0%} fail budget" if share.budget == "fail"
              else f"of the {FINDING_BUDGET:.0%} budget for any finding")
    return f"{share.chance:.3%} of healthy runs ({share.param} {share.value:g}: {how}), {budget}"
