"""Default danger thresholds for the drift metrics and the verdict they give (probe.md §6.3, §3.7).

Every threshold carries its provenance: a short tag printed next to it and the basis it rests on.
Rows tagged `[proposal]` are this project's suggestion, not a published number; they are marked so
in every report. The verdict is the worst severity among the gating metrics; non-gating metrics are
shown with their flag but do not move the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import ConfigError

LEVELS = ("ok", "warn", "danger")


@dataclass(frozen=True, slots=True)
class Threshold:
    """When a metric is warn or danger, whether it gates the verdict, and where the numbers come from."""

    metric: str
    warn: float | tuple[float, float] | None     # a bound, or for kind "outside" an allowed band
    danger: float | tuple[float, float] | None
    kind: str                                    # "above" | "below" | "outside"
    gating: bool
    source: str                                  # short tag printed beside the threshold
    basis: str                                   # what the numbers rest on

    def level(self, value: float) -> str | None:
        """The severity of a value, or None when the value is missing (NaN)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        for name, bound in (("danger", self.danger), ("warn", self.warn)):
            if bound is not None and _breaks(value, bound, self.kind):
                return name
        return "ok"

    def describe(self, level: str) -> str:
        bound = self.danger if level == "danger" else self.warn
        if self.kind == "outside":
            return f"outside [{bound[0]:g}, {bound[1]:g}]"
        return f"{'>' if self.kind == 'above' else '<'} {bound:g}"


def _breaks(value: float, bound, kind: str) -> bool:
    if kind == "above":
        return value > bound
    if kind == "below":
        return value < bound
    return value < bound[0] or value > bound[1]


_LN2, _LN5 = math.log(2.0), math.log(5.0)

DEFAULT_THRESHOLDS: tuple[Threshold, ...] = (
    Threshold("k3_kl", 1e-3, 1e-2, "above", True, "[NeMo-RL docs; verl K3-RS]",
              "NeMo-RL grpo.md: vllm-kl ~1e-3 typical, < 1e-3 acceptable; danger = verl K3-RS default "
              "0.01 / top of 'typical 0.001-0.01'"),
    Threshold("mult_prob_error", 1.02, 1.05, "above", True, "[NeMo-RL docs]",
              "NeMo-RL adding-new-models.md: token_mult_prob_error <= 1.05 acceptable; upward trend past "
              "~1-2% is a bug"),
    Threshold("mean_abs_dprob", 0.005, 0.01, "above", True, "[verl FAQ]",
              "verl docs/faq: rollout_probs_diff_mean normally < 0.005; > 0.01 = inference precision issue"),
    Threshold("seq_mean_abs_dlogp", 0.05, 0.1, "above", True, "[slime default; warn derived]",
              "slime CI gate train_rollout_logprob_abs_diff <= 0.1; warn derived: mean|d| 0.05 ~ "
              "mult_prob_error 1.05"),
    Threshold("abs_mean_dlogp", 0.01, 0.1, "above", True, "[verl doc example; warn proposal]",
              "verl rollout_corr.md health check |kl| > 0.1; warn is a proposal"),
    Threshold("chi2_token", 0.1, 1.0, "above", True, "[verl doc example; warn proposal]",
              "verl rollout_corr.md health check chi2_token > 1.0; warn is a proposal"),
    Threshold("is_mean", (0.9, 1.1), (0.5, 2.0), "outside", True, "[verl doc example; warn proposal]",
              "verl rollout_corr.md: IS mean outside [0.5, 2]; NeMo-RL 'should hover around 1'; warn is "
              "a proposal"),
    Threshold("is_ess", 0.9, 0.3, "below", True, "[verl doc example; warn proposal]",
              "verl rollout_corr.md: ESS < 0.3; warn is a proposal"),
    Threshold("frac_ratio_out[0.5,2]", 1e-3, 1e-2, "above", True, "[proposal]",
              "share of tokens a token-TIS cap of 2 (verl/slime default) would alter"),
    Threshold("frac_ratio_out[0.8,1.2]", 1e-2, 5e-2, "above", False, "[proposal; ROLL band]",
              "band from ROLL's default ratio filter [0.8, 1.2]"),
    Threshold("frac_extreme_tau10", 0.0, 1e-3, "above", True, "[proposal; R3]",
              "R3 'extreme tokens'; NeMo-RL's 10-nat spike example"),
    Threshold("max_abs_dlogp", _LN2, _LN5, "above", False, "[derived from TIS caps 2 and 5]",
              "ln 2 exceeds the verl/slime TIS cap, ln 5 the OpenRLHF/AReaL cap; a single token"),
    Threshold("frac_seq_saturated", 0.0, 1e-2, "above", True, "[verl SAFETY_BOUND; Mismatch Praxis]",
              "|sum d| >= 20 saturates verl's SAFETY_BOUND; sequence IS collapses once T*KL >= 20"),
    Threshold("frac_seq_k3_gt0.01", 1e-2, 0.1, "above", False, "[verl K3-RS; fractions proposal]",
              "verl K3-RS preset threshold 0.01 per sequence; the fractions are a proposal"),
    Threshold("frac_seq_veto_1e-4", 0.0, 1e-2, "above", False, "[slime veto]",
              "slime veto: a token with ratio < 1e-4 rejects its sequence"),
    Threshold("tail_anomaly_ratio", 5.0, 20.0, "above", False, "[proposal; Taming the Tail]",
              "mean(|d|/(1-p)) for p < 1e-3 over that for p in [0.1, 0.5); (1-p) scaling predicts ~1"),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The overall level and the metrics that set it."""

    level: str                      # ok | warn | danger | inconclusive
    reasons: list[dict]             # gating metrics at warn or danger, worst first
    flags: list[dict]               # non-gating metrics at warn or danger


def judge(metrics: dict[str, float], thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS,
          inconclusive: list[str] | None = None) -> Verdict:
    """The verdict for one set of metrics; `inconclusive` reasons override the thresholds."""
    reasons, flags = [], []
    for th in thresholds:
        value = metrics.get(th.metric)
        level = th.level(value)
        if level in (None, "ok"):
            continue
        entry = {"metric": th.metric, "value": value, "level": level, "threshold": th.describe(level),
                 "source": th.source, "gating": th.gating}
        (reasons if th.gating else flags).append(entry)
    reasons.sort(key=lambda r: -LEVELS.index(r["level"]))
    flags.sort(key=lambda r: -LEVELS.index(r["level"]))
    if inconclusive:
        return Verdict("inconclusive", [{"metric": None, "level": "inconclusive", "problem": p}
                                        for p in inconclusive] + reasons, flags)
    level = reasons[0]["level"] if reasons else "ok"
    return Verdict(level, reasons, flags)


def apply_overrides(settings: list[str], thresholds: tuple[Threshold, ...] = DEFAULT_THRESHOLDS
                    ) -> tuple[Threshold, ...]:
    """Thresholds with `metric.warn=X`, `metric.danger=X` (a band as `LO:HI`) or `metric.gating=BOOL`."""
    by_name = {th.metric: th for th in thresholds}
    for item in settings:
        key, sep, raw = item.partition("=")
        metric, dot, field_name = key.strip().rpartition(".")
        if not sep or not dot or field_name not in ("warn", "danger", "gating"):
            raise ConfigError(f"--set {item!r}: expected METRIC.warn=VALUE, METRIC.danger=VALUE or "
                              "METRIC.gating=true|false")
        if metric not in by_name:
            raise ConfigError(f"--set {item!r}: no threshold for {metric!r}; known: "
                              f"{', '.join(by_name)}")
        th = by_name[metric]
        raw = raw.strip()
        if field_name == "gating":
            if raw.lower() not in ("true", "false"):
                raise ConfigError(f"--set {item!r}: gating takes true or false")
            by_name[metric] = replace(th, gating=raw.lower() == "true")
            continue
        by_name[metric] = replace(th, source="[--set]", **{field_name: _parse_bound(item, raw, th.kind)})
    return tuple(by_name.values())


def _parse_bound(item: str, raw: str, kind: str):
    if raw.lower() in ("none", "off"):
        return None
    try:
        if kind == "outside":
            lo, _, hi = raw.partition(":")
            return (float(lo), float(hi))
        return float(raw)
    except ValueError:
        raise ConfigError(f"--set {item!r}: {raw!r} is not a number"
                          + (" (a band is written LO:HI)" if kind == "outside" else "")) from None
