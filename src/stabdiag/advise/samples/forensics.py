"""Forensics on a finding: what the logged samples say the reward is paying for.

For a layer-1 finding, the samples of the steps up to the finding's end are split two ways: samples above
their group's median reward against those below (within the group the samples competed in: the prompt's
group in a step, else the step), and the early half of the steps against the late half.  A feature is
*named* when it is associated with the reward within groups AND moved between early and late steps in the
direction the reward pays for, both beyond chance (stats.within_strata, then stats.over_steps on the
features that passed; Holm at ALPHA in each stage: a gatekeeping procedure whose family-wise error stays
under ALPHA) and both large (MIN_SHARE_POINTS for a share, MIN_RATIO for an amount).  A feature that the
reward pays for but that did not spread (a correct answer the policy has not learned yet), or one that
drifted but that the reward does not pay for (any change of the policy), is not named.

For a layer-2 finding the samples show how the answers narrowed: the repeated-n-gram share and the share
of answers identical to another of their group, early against late steps.

The test statistics are in stats.py; the sentences in wording.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...read.samples import Sample, SampleWindow
from . import stats, wording
from .features import FeatureTable, features

ALPHA = 0.01
MIN_SHARE_POINTS = 0.15          # a share (truncated, contains 'X') must differ by 15 points, high vs low and over time
MIN_RATIO = 1.25                 # an amount (characters, repetition) by a factor of 1.25
MIN_STEPS = 4                    # steps with samples needed to compare early with late
MIN_SAMPLES = 16
SNIPPET_CHARS = 160


@dataclass(frozen=True, slots=True)
class FeatureEffect:
    """How one feature differs between high- and low-reward samples and between early and late steps."""

    feature: str
    label: str
    binary: bool
    high: float
    low: float
    early: float
    late: float
    z: float
    p_reward: float
    p_steps: float | None
    named: bool

    def describe(self) -> str:
        return wording.effect(self)

    def to_dict(self) -> dict:
        return {"feature": self.feature, "label": self.label, "share": self.binary, "high": _num(self.high),
                "low": _num(self.low), "early": _num(self.early), "late": _num(self.late), "z": _num(self.z),
                "p_reward": _num(self.p_reward), "p_steps": _num(self.p_steps), "named": self.named,
                "text": self.describe()}


@dataclass(frozen=True, slots=True)
class Example:
    """A sample shown as evidence: why it was picked, where it is, its reward and the start of its answer."""

    role: str                    # "highest reward", "median reward", "early"
    step: int
    reward: float
    text: str
    where: str

    def to_dict(self) -> dict:
        return {"role": self.role, "step": self.step, "reward": _num(self.reward), "text": self.text,
                "where": self.where}


@dataclass(frozen=True, slots=True)
class SampleForensics:
    """The samples' evidence on one finding (`rule`), or why there is none (`not_judged`)."""

    rule: str
    layer: int
    kind: str                    # the sample source: trl, verl, wandb-table, tinker, jsonl, rollouts
    first_step: int | None
    last_step: int | None
    samples: int = 0             # samples read (at most the window's budget)
    logged: int = 0              # samples logged in those steps
    steps: int = 0
    effects: tuple[FeatureEffect, ...] = ()      # named first, then the rest tested
    examples: tuple[Example, ...] = ()
    not_judged: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def named(self) -> tuple[FeatureEffect, ...]:
        return tuple(e for e in self.effects if e.named)

    def headline(self) -> str:
        return wording.headline(self)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "source": self.kind, "first_step": self.first_step,
                "last_step": self.last_step, "samples": self.samples, "logged": self.logged, "steps": self.steps,
                "headline": self.headline(), "named": [e.to_dict() for e in self.named],
                "tested": [e.to_dict() for e in self.effects if not e.named],
                "examples": [x.to_dict() for x in self.examples], "not_judged": self.not_judged,
                "notes": list(self.notes)}


def _num(value):
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def strata_of(samples: tuple[Sample, ...]) -> np.ndarray:
    """The group each sample competed in: its prompt's group in its step where the group has two samples or
    more, else its step."""
    counts: dict[tuple, int] = {}
    for s in samples:
        counts[(s.step, s.group)] = counts.get((s.step, s.group), 0) + 1
    keys = [(s.step, s.group) if s.group is not None and counts[(s.step, s.group)] > 1 else (s.step, None)
            for s in samples]
    _, ids = np.unique(np.array([f"{k[0]}\x00{k[1]}" for k in keys]), return_inverse=True)
    return ids


def _about(window: SampleWindow, rule: str, layer: int, first_step: int | None, last_step: int | None) -> dict:
    """What every SampleForensics of `window` says, judged or not."""
    return dict(rule=rule, layer=layer, kind=window.kind, first_step=first_step, last_step=last_step,
                samples=len(window.samples), logged=window.logged, steps=len(window.steps), notes=window.notes)


def _large(effect_high: float, effect_low: float, binary: bool) -> bool:
    if not (math.isfinite(effect_high) and math.isfinite(effect_low)):
        return False
    if binary:
        return abs(effect_high - effect_low) >= MIN_SHARE_POINTS
    lo, hi = sorted((abs(effect_high), abs(effect_low)))
    return hi >= MIN_RATIO * lo and hi > 0


def reward_forensics(window: SampleWindow, *, rule: str, first_step: int | None, last_step: int | None,
                     table: FeatureTable | None = None) -> SampleForensics:
    """Name the features that moved with the reward in `window` (see the module docstring)."""
    base = _about(window, rule, 1, first_step, last_step)
    scores = np.array([s.score for s in window.samples], dtype=np.float64)
    if len(window.samples) < MIN_SAMPLES or np.isfinite(scores).sum() < MIN_SAMPLES:
        return SampleForensics(**base, not_judged=f"{np.isfinite(scores).sum()} samples with a reward in steps "
                                                  f"{first_step}-{last_step}; {MIN_SAMPLES} needed")
    if len(window.steps) < MIN_STEPS:
        return SampleForensics(**base, not_judged=f"samples at {len(window.steps)} step(s); {MIN_STEPS} needed "
                                                  "to compare early with late")
    table = table or features(window.samples)
    strata = strata_of(table.samples)
    high = stats.reward_halves(scores, strata)
    tested: list[tuple[str, stats.Association]] = []
    for name, column in table.columns.items():
        found = stats.within_strata(column, high, strata)
        if found is not None and found.z != 0:
            tested.append((name, found))
    first_stage = stats.holm([a.p for _, a in tested], ALPHA)
    shifts: dict[str, stats.Shift | None] = {}
    for (name, assoc), passed in zip(tested, first_stage):
        if passed and _large(assoc.high, assoc.low, name in table.binary):
            shifts[name] = stats.over_steps(table.columns[name], table.steps, direction=1 if assoc.z > 0 else -1)
    shift_names = [n for n, s in shifts.items() if s is not None]
    second_stage = dict(zip(shift_names, stats.holm([shifts[n].p for n in shift_names], ALPHA)))
    effects = []
    for name, assoc in tested:
        shift = shifts.get(name)
        early, late = (shift.early, shift.late) if shift else _early_late(table, name)
        named = bool(second_stage.get(name)) and shift is not None and _large(late, early, name in table.binary)
        effects.append(FeatureEffect(name, table.labels[name], name in table.binary, assoc.high, assoc.low, early,
                                     late, assoc.z, assoc.p, shift.p if shift else None, named))
    effects.sort(key=lambda e: (not e.named, e.p_reward))
    return SampleForensics(**base, effects=tuple(effects), examples=examples(window.samples))


def _early_late(table: FeatureTable, name: str) -> tuple[float, float]:
    early, late = stats.step_halves(table.columns[name], table.steps)
    return (float(early.mean()) if len(early) else math.nan, float(late.mean()) if len(late) else math.nan)


def narrowing(window: SampleWindow, *, rule: str, first_step: int | None, last_step: int | None) -> SampleForensics:
    """For a layer-2 finding: repetition and identical answers within a group, early against late steps."""
    base = _about(window, rule, 2, first_step, last_step)
    if len(window.steps) < MIN_STEPS or len(window.samples) < MIN_SAMPLES:
        return SampleForensics(**base, not_judged=f"{len(window.samples)} samples at {len(window.steps)} step(s); "
                                                  f"{MIN_SAMPLES} samples at {MIN_STEPS} steps needed")
    table = features(window.samples, markers={})
    effects = []
    names = [n for n in ("repeated_ngrams", "same_in_group") if n in table.columns]
    shifts = {n: stats.over_steps(table.columns[n], table.steps, direction=1) for n in names}
    names = [n for n in names if shifts[n] is not None]
    passed = dict(zip(names, stats.holm([shifts[n].p for n in names], ALPHA)))
    for name in names:
        shift = shifts[name]
        named = passed[name] and _large(shift.late, shift.early, name in table.binary)
        effects.append(FeatureEffect(name, table.labels[name], name in table.binary, math.nan, math.nan,
                                     shift.early, shift.late, math.nan, math.nan, shift.p, named))
    effects.sort(key=lambda e: not e.named)
    return SampleForensics(**base, effects=tuple(effects), examples=examples(window.samples))


def examples(samples: tuple[Sample, ...]) -> tuple[Example, ...]:
    """Three samples to read: the highest reward and a median one among the late half of the steps, and one
    from the earliest step."""
    if not samples:
        return ()
    steps = sorted({s.step for s in samples})
    late = [s for s in samples if s.step >= steps[len(steps) // 2]]
    scored = sorted((s for s in late if math.isfinite(s.score)), key=lambda s: (-s.score, s.step, s.where))
    picks: list[tuple[str, Sample]] = []
    if scored:
        picks.append(("highest reward", scored[0]))
        picks.append(("median reward", scored[len(scored) // 2]))
    early = [s for s in samples if s.step == steps[0]]
    if early:
        picks.append(("early", early[0]))
    return tuple(Example(role, s.step, s.reward if math.isfinite(s.reward) else s.score, snippet(s), s.where)
                 for role, s in picks)


def snippet(sample: Sample, limit: int = SNIPPET_CHARS) -> str:
    """The start of the answer (or its token ids), cut at `limit` characters; not yet escaped."""
    if sample.completion is not None:
        text = sample.completion
    elif sample.response_ids is not None:
        text = "token ids " + " ".join(map(str, sample.response_ids[:40]))
    else:
        text = f"({sample.tokens} tokens, no text logged)"
    return text if len(text) <= limit else text[:limit - 1] + "…"
