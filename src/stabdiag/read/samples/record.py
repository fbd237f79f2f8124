"""One logged sample (a prompt, the completion sampled for it, what the reward paid) and a window of them.

Every source kind (TRL's completions parquet, W&B tables, verl's rollout dumps, Tinker's rollout summaries,
a generic JSONL/Parquet) becomes `Sample`s through `sample_from_row`: one place decides which field is the
step, the prompt, the completion, the reward and its components, so the readers only say where rows are.
Text is kept up to `TEXT_CAP` characters (its full length is kept apart): a window of samples stays within
its memory budget whatever a completion holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..run import exact_step

TEXT_CAP = 16_384            # characters of a completion kept for features and snippets
PROMPT_CAP = 2_048

STEP_FIELDS = ("step", "global_step", "iteration", "training_step", "_step")
PROMPT_FIELDS = ("prompt", "input", "query", "question", "prompts")
COMPLETION_FIELDS = ("completion", "response", "output", "generation", "completions", "responses")
REWARD_FIELDS = ("reward", "score", "total_reward", "rewards")
ADVANTAGE_FIELDS = ("advantage", "advantages")
TOKEN_FIELDS = ("response_length", "completion_length", "num_tokens", "response_tokens", "completion_tokens")
TRUNCATED_FIELDS = ("truncated", "clipped", "is_truncated")
FINISH_FIELDS = ("finish_reason", "stop_reason")
GROUP_FIELDS = ("uid", "group", "group_id", "prompt_id", "group_idx")
_NOT_COMPONENTS = set(STEP_FIELDS + PROMPT_FIELDS + COMPLETION_FIELDS + ADVANTAGE_FIELDS + TOKEN_FIELDS
                      + TRUNCATED_FIELDS + FINISH_FIELDS + GROUP_FIELDS) | {"reward", "score", "total_reward",
                                                                           "gts", "ground_truth", "id", "image"}


@dataclass(frozen=True, slots=True)
class Sample:
    """One completion with what was logged about it; None / NaN where the source does not say."""

    step: int
    completion: str | None                  # None: the source holds no text (Tinker summaries, token ids only)
    prompt: str | None = None
    reward: float = math.nan
    components: Mapping[str, float] = field(default_factory=dict)   # reward:<fn> and other numbers per sample
    advantage: float = math.nan
    tokens: int | None = None               # response length in tokens, where logged
    chars: int | None = None                # its full length in characters (the text may be cut at TEXT_CAP)
    truncated: bool | None = None           # stopped by the length limit, where logged
    group: str | None = None                # which prompt's group it was sampled in (GRPO), where known
    response_ids: tuple[int, ...] | None = None
    where: str = ""                         # file:line (or row), for the reader

    @property
    def score(self) -> float:
        """What ranks samples within a group: the reward, else the advantage (same order within a group)."""
        return self.reward if math.isfinite(self.reward) else self.advantage


@dataclass(frozen=True, slots=True)
class SampleWindow:
    """The samples read for some steps: at most a budget of them, spread over the steps."""

    kind: str
    files: tuple[str, ...]
    samples: tuple[Sample, ...]
    logged: int = 0                         # samples logged in the window (before thinning to the budget)
    notes: tuple[str, ...] = ()

    @property
    def steps(self) -> np.ndarray:
        return np.unique(np.array([s.step for s in self.samples], dtype=np.int64))


def text_of(value) -> str | None:
    """A field as text: a string, or a chat (a list of {"role", "content"} messages) joined; None else."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        content = value.get("content")
        return text_of(content) if content is not None else None
    if isinstance(value, (list, tuple, np.ndarray)):
        parts = [text_of(v) for v in value]
        parts = [p for p in parts if p]
        return "\n".join(parts) if parts else None
    return None


def number_of(value) -> float:
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return math.nan


def first_field(row: Mapping, names: tuple[str, ...]):
    """The value of the first of `names` the row holds (not None), else None."""
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    return None


def _components(row: Mapping, extra: bool) -> dict[str, float]:
    """Reward components: a `rewards` mapping, `reward/<fn>`-style keys and (`extra`) every other number."""
    out: dict[str, float] = {}
    nested = row.get("rewards")
    if isinstance(nested, Mapping):
        out.update({str(k): number_of(v) for k, v in nested.items() if math.isfinite(number_of(v))})
    for key, value in row.items():
        key = str(key)
        name = None
        for prefix in ("rewards/", "reward/", "reward_", "rewards_"):
            if key.startswith(prefix) and len(key) > len(prefix):
                name = key[len(prefix):]
        if name is None and extra and key not in _NOT_COMPONENTS:
            name = key
        number = number_of(value)
        if name is not None and math.isfinite(number):
            out[name] = number
    return out


def sample_from_row(row: Mapping, *, where: str, step: int | None = None, extra_components: bool = True,
                    weights: Mapping[str, float] | None = None) -> Sample | None:
    """A Sample from one logged row (any source's field names); None when the row has no step or no text
    and no length (nothing to look at).  `weights` turn components into the total reward where the source
    logs only the components (TRL's parquet)."""
    if step is None:
        step = exact_step(first_field(row, STEP_FIELDS))
    if step is None:
        return None
    completion = text_of(first_field(row, COMPLETION_FIELDS))
    tokens_raw = number_of(first_field(row, TOKEN_FIELDS))
    tokens = int(tokens_raw) if math.isfinite(tokens_raw) and tokens_raw >= 0 else None
    if completion is None and tokens is None:
        return None
    components = _components(row, extra_components)
    reward = number_of(first_field(row, REWARD_FIELDS))
    if not math.isfinite(reward) and weights and components:
        known = [k for k in weights if k in components]
        if known:
            reward = float(sum(weights[k] * components[k] for k in known))
    prompt = text_of(first_field(row, PROMPT_FIELDS))
    group = first_field(row, GROUP_FIELDS)
    truncated = first_field(row, TRUNCATED_FIELDS)
    if truncated is None:
        finish = first_field(row, FINISH_FIELDS)
        truncated = None if finish is None else str(finish).lower() in ("length", "max_tokens", "truncated")
    return Sample(step=step, completion=None if completion is None else completion[:TEXT_CAP],
                  prompt=None if prompt is None else prompt[:PROMPT_CAP], reward=reward, components=components,
                  advantage=number_of(first_field(row, ADVANTAGE_FIELDS)), tokens=tokens,
                  chars=None if completion is None else len(completion),
                  truncated=None if truncated is None else bool(truncated),
                  group=str(group) if group is not None else (prompt[:PROMPT_CAP] if prompt else None), where=where)
