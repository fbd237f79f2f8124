"""Reading a window of a run's samples, whatever their kind: the read/samples readers, and stabdiag probe's
rollout dumps through the probe's own parser (stabdiag.probe.records; it sits above read/, so read/samples
only finds those files)."""

from __future__ import annotations

import math

from ...errors import InputError
from ...read.samples import MAX_SAMPLES, ROLLOUTS, Sample, SampleSource, SampleWindow


def read_window(source: SampleSource, first: int | None = None, last: int | None = None, *,
                max_samples: int = MAX_SAMPLES) -> SampleWindow:
    if source.kind != ROLLOUTS:
        return source.window(first, last, max_samples=max_samples)
    from ...probe.records import read_rollouts

    records = read_rollouts(list(source.files), max_records=max_samples * 4).records
    samples = []
    for rec in records:
        if rec.step is None or (first is not None and rec.step < first) or (last is not None and rec.step > last):
            continue
        reward = rec.meta.get("reward", rec.meta.get("score"))
        finish = rec.meta.get("finish_reason")
        samples.append(Sample(step=rec.step, completion=None, reward=float(reward) if isinstance(
            reward, (int, float)) else math.nan, tokens=len(rec.response_ids),
            truncated=None if finish is None else str(finish) == "length",
            group=str(rec.meta.get("uid", rec.meta.get("group", ""))) or None,
            response_ids=tuple(int(t) for t in rec.response_ids), where=f"{rec.source}:{rec.line or rec.key}"))
    if not samples:
        raise InputError(source.files[0], "no rollout record with a step in the window")
    return SampleWindow(ROLLOUTS, source.files, tuple(samples[:max_samples]), len(samples),
                        ("rollout records read from the start of the dumps (stabdiag probe's reader)",))
