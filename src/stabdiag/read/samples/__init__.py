"""Logged samples (completions with their rewards), found beside a run's metrics and read lazily.

    record.py        Sample, SampleWindow, and the one mapping of a logged row's fields to a Sample
    source.py        SampleSource: a run's sample files, indexed and read a window of steps at a time
    trl.py           TRL's completions/completions_NNNNN.parquet (log_completions=True)
    wandb_tables.py  W&B tables in run folders (files/media/table/*.table.json), and online runs by URI
    verl.py          verl's trainer.rollout_data_dir dumps (<step>.jsonl)
    tinker.py        the Tinker cookbook's iteration_N/train_rollout_summaries.jsonl
    generic.py       any JSONL/Parquet with a step and a completion per row
    _rows.py         rows of those files with locators, for reading a part of a large file

stabdiag probe's rollout dumps are found here too (kind "rollouts") and parsed by stabdiag.probe.records.
"""

from __future__ import annotations

from .record import Sample, SampleWindow
from .source import MAX_SAMPLES, ROLLOUTS, SampleSource, online_source, sample_kind

__all__ = ["MAX_SAMPLES", "ROLLOUTS", "Sample", "SampleSource", "SampleWindow", "online_source", "sample_kind"]
