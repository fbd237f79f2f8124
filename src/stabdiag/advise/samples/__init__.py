"""What a run's logged samples say about its findings, and a window of them printed with their features.

    features.py   per-sample features from the text alone (length, truncation, repetition, markers, phrases)
    ngrams.py     word n-grams of a batch of answers as hashed arrays (repetition, longest repeat, phrases)
    textscan.py   character features and format markers by C-level string passes
    stats.py      the stratified association test and the early/late test over steps
    forensics.py  which features moved with the reward (layer 1), how the answers narrowed (layer 2)
    wording.py    the sentences
    window.py     reading a window of any kind of samples
    view.py       `stabdiag samples RUN --step S`: a step's samples with their features, as text
"""

from __future__ import annotations

from ...errors import InputError
from ...judge.diagnosis import Diagnosis, Finding
from ...read.run import Run
from .forensics import FeatureEffect, SampleForensics, narrowing, reward_forensics
from .view import window_text
from .window import read_window

__all__ = ["FeatureEffect", "SampleForensics", "sample_evidence", "window_text"]


def _lead(diagnosis: Diagnosis, layer: int) -> Finding | None:
    """The finding of `layer` the samples are read for: a root finding first, then the earliest."""
    mine = [f for f in diagnosis.findings if f.layer == layer]
    if not mine:
        return None
    return min(mine, key=lambda f: (f.downstream, f.severity != "fail", f.onset, f.rule))


def sample_evidence(run: Run, diagnosis: Diagnosis) -> SampleForensics | None:
    """The samples' evidence on the run's lead layer-1 finding (else its lead layer-2 finding); None when
    the run logged no samples or has neither finding.  A sample file that cannot be read is said in the
    evidence, never an error of the check."""
    source = getattr(run, "samples", None)
    if source is None:
        return None
    finding = _lead(diagnosis, 1) or _lead(diagnosis, 2)
    if finding is None:
        return None
    try:
        window = read_window(source, None, finding.end_step)
    except (InputError, OSError, ValueError, MemoryError) as exc:
        why = exc.problem if isinstance(exc, InputError) else str(exc) or type(exc).__name__
        return SampleForensics(finding.rule, finding.layer, source.kind, None, finding.end_step,
                               not_judged=f"could not read the samples: {why}")
    first = int(window.steps[0]) if len(window.samples) else None
    if finding.layer == 1:
        return reward_forensics(window, rule=finding.rule, first_step=first, last_step=finding.end_step)
    return narrowing(window, rule=finding.rule, first_step=first, last_step=finding.end_step)
