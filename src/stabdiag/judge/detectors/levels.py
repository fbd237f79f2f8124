"""Level detectors: a signal whose level is a quantity with a meaning of its own (nats of logprob
drift, a policy version lag, an importance ratio), judged against absolute thresholds with sources.
A catastrophic value is a finding even on one point; a level needs a few points to be judged."""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged


def level_above(values: Curve, *, warn_above, fail_above, min_stretch_steps,
                catastrophic_above) -> Evidence | NotJudged | None:
    """The running median of |`values`| stays above `warn_above` for at least `min_stretch_steps` steps: a
    warning, or a failure where the level it holds (its upper quartile) is above `fail_above`; one value above
    `catastrophic_above` fails alone."""
    v = values.finite()
    return _level(v, np.abs(v.values), warn_above, fail_above, min_stretch_steps, catastrophic_above)


def kl_level_above(values: Curve, loss: Curve | None = None, coef: Curve | None = None, *, warn_above,
                   fail_above, min_stretch_steps, catastrophic_above, min_coef) -> Evidence | NotJudged | None:
    """A KL's level as the other level rules read it (the running median of |`values`| above `warn_above` for
    `min_stretch_steps` steps; above `fail_above` fails; one value above `catastrophic_above` fails alone),
    except beside a KL coefficient under `min_coef`: the run lets KL grow by design, so its level is a
    setting, not a symptom - not judged, with the coefficient said.

    A coefficient the run logs (`coef`: verl's actor/kl_coef) is read as it is and outranks the one implied
    by the run's total loss (`loss`): where the loss is the KL times a coefficient (a GRPO loss is beta x KL
    plus a policy-gradient term that averages ~0, TRL GRPOTrainer), the coefficient is the loss / KL ratio
    (Unsloth's notebooks: 0.001), which a policy-gradient loss that merely rises with the KL (verl's
    actor/pg_loss leaves the KL term out) would fake."""
    v = values.finite()
    logged = _logged_coefficient(coef)
    if logged is not None:
        if logged < min_coef:
            return NotJudged(f"{coef.key} is {logged:.2g}: a KL coefficient under {min_coef:g} lets KL grow by "
                             "design, so its level is not judged")
    else:
        implied = implied_coefficient(v, loss)
        if implied is not None and implied < min_coef:
            return NotJudged(f"{loss.key} tracks {v.key} x {implied:.2g}: a KL coefficient under {min_coef:g} "
                             "lets KL grow by design, so its level is not judged")
    return level_above(v, warn_above=warn_above, fail_above=fail_above, min_stretch_steps=min_stretch_steps,
                       catastrophic_above=catastrophic_above)


def _logged_coefficient(coef: Curve | None) -> float | None:
    """The median of a logged KL coefficient (an adaptive one moves; its typical value is what held the
    policy); None where the run logs none or only non-positive values (KL off)."""
    if coef is None:
        return None
    c = coef.finite().values
    c = c[c > 0]
    return float(st.median(c)) if len(c) else None


def implied_coefficient(kl: Curve, loss: Curve | None) -> float | None:
    """loss / KL where the logged loss moves with the KL (Spearman correlation >= 0.9 over their shared
    steps, at least 10): the coefficient the loss applies to it; None where the loss does not track it,
    or is logged without its KL term (_POLICY_TERM_KEYS)."""
    if loss is None or _policy_term_only(loss.key):
        return None
    lo = loss.finite()
    # the steps both log (strictly increasing in each, so a binary search finds them)
    if np.array_equal(lo.steps, kl.steps):        # logged together (the usual case): no search, no copies
        k, l_ = kl.values, lo.values
    else:
        at, hit = _positions(lo.steps, kl.steps)
        k, l_ = kl.values[hit], lo.values[at[hit]]
    if len(k) < 10:
        return None
    ok = k > 0
    if not ok.all():
        k, l_ = k[ok], l_[ok]
    if len(k) < 10:
        return None
    # the rank correlation read on at most _RANK_POINTS evenly spaced pairs: its 0.9 bar does not need a
    # million, and two double argsorts of a million cost a tenth of a second
    every = max(1, len(k) // _RANK_POINTS)
    ks, ls = k[::every], l_[::every]
    rank_k, rank_l = np.argsort(np.argsort(ks)), np.argsort(np.argsort(ls))
    if float(np.corrcoef(rank_k, rank_l)[0, 1]) < 0.9:
        return None
    return float(st.median(l_ / k))


_RANK_POINTS = 20_000


def _positions(steps: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `wanted` stands in `steps` (both strictly increasing integers) and whether it is there
    (where not, the position is meaningless).  Steps that span a few times their count (the usual log) are
    looked up in a table over their range, in one pass; sparse ones by binary search."""
    if not len(steps) or not len(wanted):
        return np.zeros(len(wanted), dtype=np.intp), np.zeros(len(wanted), dtype=bool)
    low, high = min(int(steps[0]), int(wanted[0])), max(int(steps[-1]), int(wanted[-1]))
    if high - low <= 4 * (len(steps) + len(wanted)):
        table = np.full(high - low + 1, -1, dtype=np.intp)
        table[steps - low] = np.arange(len(steps))
        at = table[wanted - low]
        return at, at >= 0
    at = np.searchsorted(steps, wanted)
    hit = at < len(steps)
    hit[hit] = steps[at[hit]] == wanted[hit]
    return at, hit

# losses logged without the KL term, which the trainer adds to them after logging: their ratio to the KL
# is no coefficient, however closely both rise with training (verl dp_actor: actor/pg_loss beside
# actor/kl_loss; OpenRLHF ppo_actor logs status["policy_loss"] = actor_loss, before it adds kl_loss x
# kl_ctl; slime train/pg_loss beside train/kl_loss; TRL PPO loss/policy_avg; DeepSpeed-Chat act_loss,
# whose KL is in the reward)
_POLICY_TERM_KEYS = frozenset({"actor/pg_loss", "policy_loss", "pg_loss", "loss/policy_avg", "act_loss"})


def _policy_term_only(key: str) -> bool:
    return key in _POLICY_TERM_KEYS or key.removeprefix("train/") in _POLICY_TERM_KEYS


def log_ratio_off(values: Curve, *, warn_above, fail_above, min_stretch_steps,
                  catastrophic_above) -> Evidence | NotJudged | None:
    """`values`, an importance ratio that should sit at 1, is off: the running median of its |log ratio| stays
    above `warn_above` for at least `min_stretch_steps` steps (a failure where the level it holds is above
    `fail_above`), or one point is off by more than `catastrophic_above` (a ratio <= 0 is as far off as it
    gets). A mean ratio of 2 or 0.5 is |log| 0.69 either way."""
    v = values.finite()
    with np.errstate(divide="ignore"):
        off = np.abs(np.log(np.where(v.values > 0, v.values, np.nan)))
    off = np.where(np.isfinite(off), off, math.inf)          # a ratio <= 0 is as far off as it gets
    return _level(v, off, warn_above, fail_above, min_stretch_steps, catastrophic_above)


def _level(v: Curve, level: np.ndarray, warn_above: float, fail_above: float, min_stretch_steps: float,
           catastrophic_above: float) -> Evidence | NotJudged | None:
    """`level` per point of the finite curve `v` against the thresholds."""
    if len(level) and float(np.max(level)) > catastrophic_above:
        i = int(np.argmax(level))
        return _evidence(v, i, i, float(level[i]), fail_above, catastrophic=True, value=float(v.values[i]))
    need = v.points_for(min_stretch_steps, 2)
    alone = f" (one value above {catastrophic_above:g} would count alone)" if math.isfinite(catastrophic_above) \
        else ""
    if len(level) < need:
        return NotJudged(f"{v.signal} has {len(level)} point(s); a level is judged on {need}{alone}")
    best = None
    for a, b in st.true_runs(st.median_passes(level, min(5, need) | 1, lambda s: s > warn_above)):
        if b - a + 1 >= need:
            # the level the stretch holds: its upper quartile (a KL that climbs to 0.95 is judged near
            # 0.95, not at the median of its climb; a quantile, not a maximum, so that logging every
            # k-th step or one noisy point does not change it)
            held = float(st.quantile(level[a:b + 1], 0.75))
            if best is None or held > best[2]:
                best = (a, b, held)
    if best is None:
        if len(level) < MIN_CLEAN_POINTS:
            return NotJudged(f"{v.signal} has {len(level)} point(s): none above the level, but "
                             f"{MIN_CLEAN_POINTS} are needed to call it clean{alone}")
        return None
    a, b, held = best
    # severity from the highest level held; the level reported is the stretch's median, the value the
    # raw value at that median
    median = float(st.median(level[a:b + 1]))
    i = a + int(np.argmin(np.abs(level[a:b + 1] - median)))
    return _evidence(v, a, b, median, fail_above if held > fail_above else warn_above,
                     severity=None if held > fail_above else "warn", value=float(v.values[i]), peak=held)


def _evidence(v: Curve, a: int, b: int, level: float, threshold: float, *, value: float, peak: float | None = None,
              catastrophic: bool = False, severity: str | None = None) -> Evidence:
    return Evidence(int(v.steps[a]), int(v.steps[b]), {
        "signal": v.signal, "key": v.key, "level": level, "peak": level if peak is None else peak, "value": value,
        "ratio": math.exp(-level) if level < 700 else 0.0,
        "off_pct": 100.0 * (1.0 - math.exp(-level)) if level < 700 else 100.0, "threshold": threshold,
        "points": int(b - a + 1), "catastrophic": "one value is enough" if catastrophic else ""},
        severity=severity)
