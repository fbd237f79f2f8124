"""Learning-rate schedule detectors: a schedule that reached ~0 long before the run ended.

A learning rate is read as a fraction of its own peak, never in absolute units (1e-6 is a normal RL
rate and a dead pretraining one).  Warm-up from 0 comes before the peak and is never read; a cosine or
linear decay to 0 spends only its last few percent under 1% of the peak (cosine: the last 6.4%,
linear: the last 1%), so a collapse has to hold for a large share of the run to count.  An lr logged
as exactly 0 at every step is not a schedule at all: some verl engines log `actor/lr` as 0 while the
run trains (../shared/real_healthy/verl_baseline_ext), so that is not judged.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _stats as st
from ._base import MIN_CLEAN_POINTS, Curve, Evidence, NotJudged


def lr_collapsed_early(lr: Curve, loss: Curve | None = None, *, collapse_frac, min_after_frac_of_run,
                       min_after_steps) -> Evidence | NotJudged | None:
    """After its peak (of a 3-point running median) `lr` falls below `collapse_frac` x that peak and stays
    there for at least `min_after_frac_of_run` of the run and `min_after_steps` steps: the optimizer has
    stopped updating while the run still spends compute.  A schedule that did not collapse is a clean bill for
    the numeric update only beside a readable `loss`; an lr logged as 0 at every step is a logging artefact,
    not judged.

    A run whose loss was logged once (DeepSpeed-Chat's reward-model step logs 184 learning rates and one loss)
    is not judged on its schedule alone."""
    v = lr.finite()
    if len(v.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"{v.signal} has {len(v.values)} finite point(s); {MIN_CLEAN_POINTS} are needed to "
                         "read a schedule")
    if float(np.min(v.values)) < 0:
        return NotJudged(f"{v.key} has negative values: not a learning rate")
    # the peak of a 3-point running median: one stray write does not become the schedule's peak
    smooth = st.rolling_median(v.values, 3)
    peak_i = int(np.argmax(smooth))
    peak = float(smooth[peak_i])
    if peak <= 0:
        return NotJudged(f"{v.key} is 0 at every logged step while the run trains: a logging artefact "
                         "(some verl engines log actor/lr as 0), not a schedule")
    need = max(min_after_steps, min_after_frac_of_run * v.span)
    # strictly below: two 10x plateau cuts land exactly on 1% of the peak and are a schedule, not a collapse
    collapsed = smooth < collapse_frac * peak * (1 - 1e-6)       # (1 - 1e-6): rounding of the product
    collapsed[:peak_i + 1] = False                       # warm-up from 0 comes before the peak
    stretch = st.first_long_run(v.steps, collapsed, need)
    if stretch is not None:
        a, b = stretch
        level = float(st.median(v.values[a:b + 1]))
        return Evidence(int(v.steps[a]), int(v.steps[b]), {
            "signal": v.signal, "key": v.key, "peak": peak, "peak_step": int(v.steps[peak_i]),
            "level": level, "frac_of_peak": level / peak,
            "stretch": int(v.steps[b] - v.steps[a]),
            "run_frac": float(v.steps[b] - v.steps[a]) / max(v.span, 1)})
    points = 0 if loss is None else len(loss.finite().values)
    if points < MIN_CLEAN_POINTS:
        return NotJudged(f"the schedule did not collapse, but the loss has {points} finite point(s): the "
                         f"numeric update is not judged on the learning rate alone ({MIN_CLEAN_POINTS} needed)")
    return None


def loss_flat_in_warmup(loss: Curve, lr: Curve, reward: Curve | None = None, *, min_drop_frac, edge_frac,
                        min_climb_ratio) -> Evidence | NotJudged | None:
    """`lr` is still climbing at the end of the run (its last level the highest and `min_climb_ratio` x its
    mid-run level) while `loss` ends within `min_drop_frac` of where it started, in either direction (the
    levels of its first and last `edge_frac` of the step span): the run never reached the rate it was meant to
    train at, and has not learned.  Not judged on an RL run (a `reward` is logged), whose loss is a surrogate
    objective.

    Whether the rate is far below what the configuration intended needs the configuration; here only the shape
    of the logged rate is read."""
    if reward is not None:
        return NotJudged("an RL run's loss is a surrogate objective: whether it moved from its start says "
                         "nothing about learning")
    v, r = loss.finite(), lr.finite()
    if len(v.values) < MIN_CLEAN_POINTS or len(r.values) < MIN_CLEAN_POINTS:
        return NotJudged(f"loss and lr need {MIN_CLEAN_POINTS} finite points each; the run has "
                         f"{len(v.values)} and {len(r.values)}")
    smooth = st.rolling_median(r.values, 3)
    middle = float(np.interp(0.5 * (r.steps[0] + r.steps[-1]), r.steps, smooth))
    still_climbing = int(np.argmax(smooth)) >= len(smooth) - 2 and smooth[-1] > 0 and \
        smooth[-1] >= min_climb_ratio * middle
    if not still_climbing:
        return None                                      # warm-up finished: its intent was reached
    start = min(st.edge_level_by_steps(v.steps, v.values, edge_frac), float(st.median(v.values[:3])))
    end = st.edge_level_by_steps(v.steps, v.values, edge_frac, end=True)
    if start <= 0:
        return NotJudged(f"{v.key} starts at {start:.3g}: no positive level to read a drop from")
    drop = (start - end) / start
    if abs(drop) >= min_drop_frac:
        return None                                      # it learned, or it rose (the loss rules read that)
    return Evidence(int(v.steps[0]), int(v.steps[-1]), {
        "signal": v.signal, "key": v.key, "level_start": start, "level_end": end, "drop": drop,
        "lr_key": r.key, "lr_middle": middle, "lr_end": float(smooth[-1])})


# where a run's configuration names its vocabulary (HF config.json / TrainingArguments dumps, Megatron's
# padded_vocab_size, nanoGPT's vocab_size, GPT-2-era n_vocab), searched at any depth (model.vocab_size)
_VOCAB_KEYS = ("vocab_size", "padded_vocab_size", "n_vocab")


def vocabulary_size(config) -> int | None:
    """The vocabulary size a run's configuration names (the first of _VOCAB_KEYS found, breadth first)."""
    level = [config] if isinstance(config, dict) else []
    while level:
        for node in level:
            for key in _VOCAB_KEYS:
                value = node.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 2:
                    return int(value)
        level = [v for node in level for v in node.values() if isinstance(v, dict)]
    return None


def loss_at_uniform_level(loss: Curve, config=None, reward: Curve | None = None, *, max_gap_frac,
                          max_gap_frac_common_vocab, after_frac, min_points) -> Evidence | NotJudged | None:
    """`loss`, a cross-entropy, still sits at ln(vocabulary size), the loss of a uniform guess over every
    token, after the first `after_frac` of the run: its 3-point running median from there on stays within
    `max_gap_frac` of ln V, above or below (a loss far above it diverged: another rule's). The model has
    learned nothing, not even how often each token occurs.  V comes from the run's `config`; where it names
    none, a loss within `max_gap_frac_common_vocab` of ln V for a common tokenizer's V (GPT-2, Llama 2/3,
    Qwen2, Mistral, Gemma) is the same finding at warn, quoting the V it matched.  Not judged on an RL run
    (a `reward` is logged), whose loss is a surrogate objective, nor with fewer than `min_points` loss
    points after `after_frac`."""
    if reward is not None:
        return NotJudged("an RL run's loss is a surrogate objective, not a cross-entropy over the vocabulary")
    vocab = vocabulary_size(config)
    v = loss.finite()
    late = v.steps >= (v.steps[0] + after_frac * v.span if len(v.steps) else 0)
    if int(late.sum()) < min_points:
        if vocab is None:
            return _no_vocabulary()
        return NotJudged(f"{v.key} has {int(late.sum())} points after the first {after_frac:.0%} of the run; "
                         f"{min_points:g} are needed")
    tail = st.rolling_median(v.values[late], 3)
    source = "V from the run's configuration"
    if vocab is not None:
        gap = _gap(tail, vocab)
        if gap > max_gap_frac:
            return None         # it left the uniform level: learning, or diverging past it (loss-divergence's)
        severity = None
    else:
        vocab, source = _common_vocabulary(tail, max_gap_frac_common_vocab)
        if vocab is None:
            return _no_vocabulary()
        gap, severity = _gap(tail, vocab), "warn"   # V is a guess: warn, and say which V
    start = int(v.steps[late][0])
    return Evidence(start, int(v.steps[-1]), {
        "signal": v.signal, "key": v.key, "vocab": vocab, "vocab_source": source, "uniform": math.log(vocab),
        "lowest": float(tail.min()), "highest": float(tail.max()), "last": float(tail[-1]), "gap": gap},
        severity=severity)


def _gap(tail: np.ndarray, vocab: int) -> float:
    """How far the loss strays from ln V, as a fraction of ln V, at its farthest."""
    return float(np.max(np.abs(tail / math.log(vocab) - 1)))


def _no_vocabulary() -> NotJudged:
    return NotJudged("the run's configuration names no vocabulary size (" + ", ".join(_VOCAB_KEYS) + ") and "
                     "the loss does not sit at ln V of a common tokenizer's vocabulary")


# The vocabulary sizes of common tokenizers, as the checkpoints' config.json on the Hugging Face Hub give
# `vocab_size`: openai-community/gpt2 (50257); meta-llama/Llama-2-7b-hf (32000); meta-llama/Meta-Llama-3-8B
# (128256); Qwen/Qwen2-0.5B and Qwen2-1.5B (151936), Qwen/Qwen2-7B and Qwen2-72B (152064, the embedding
# padded); mistralai/Mistral-7B-v0.1 (32000) and Mistral-7B-v0.3 ("extended vocabulary to 32768", its model
# card); google/gemma-7b (256000).  A loss flat at one of their ln V is a model that learned nothing, even
# where the logs carry no configuration to say which V.
COMMON_VOCABULARIES = {50257: "GPT-2", 32000: "Llama 2 / Mistral v0.1", 128256: "Llama 3",
                       151936: "Qwen2 (0.5B, 1.5B)", 152064: "Qwen2 (7B, 72B)", 32768: "Mistral v0.3",
                       256000: "Gemma"}


def _common_vocabulary(tail: np.ndarray, max_gap_frac: float) -> tuple[int | None, str]:
    """The common vocabulary whose ln V the loss stays within `max_gap_frac` of (the closest, where two
    are that close: 32000 and 32768 are 0.2% apart), with the words that say where V came from."""
    near = [(gap, vocab) for vocab in COMMON_VOCABULARIES if (gap := _gap(tail, vocab)) <= max_gap_frac]
    if not near:
        return None, ""
    vocab = min(near)[1]
    return vocab, f"{COMMON_VOCABULARIES[vocab]}'s vocabulary; the run's configuration names none"
