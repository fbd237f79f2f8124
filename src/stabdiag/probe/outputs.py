"""Files the probe writes: report.json, the per-token Parquet and the per-step drift series.

The series file (`--series-out drift.csv`) is a wide CSV with a `step` column and one column per
layer-4 signal under stabdiag's canonical names, so `stabdiag check RUN --with drift.csv` (and
`stabdiag.read.assemble.load`) read it like any other metric log:

    logprob_delta       mean |lp_train − lp_roll| per scored token
    logprob_k3_kl       mean e^d − d − 1 (vllm-kl)
    is_ratio_mean       mean token importance ratio e^d
    mult_prob_error     mean e^|d| (NeMo-RL token_mult_prob_error)
    prob_delta          mean |e^lp_train − e^lp_roll| (verl rollout_probs_diff_mean)
    policy_version_lag  mean trainer version − token policy_version (only when records carry versions)
"""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np

from ..errors import InputError
from .analysis import step_series
from .pipeline import ProbeRun


def _writable(path: str) -> str:
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(path, "cannot write: the directory does not exist")
    return path


def write_json(doc: dict, path: str) -> None:
    with open(_writable(path), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, allow_nan=False)
        fh.write("\n")


def write_series(run: ProbeRun, path: str) -> dict[str, np.ndarray]:
    """Write the per-step series of the primary precision and return its columns."""
    cols = step_series(run.rollouts.records, run.result.primary)
    names = list(cols)
    with open(_writable(path), "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for i in range(len(cols["step"])):
            writer.writerow([int(cols["step"][i])] + [_cell(cols[k][i]) for k in names[1:]])
    return cols


def _cell(value: float) -> str:
    value = float(value)
    return "nan" if math.isnan(value) else repr(value)


def write_tokens(run: ProbeRun, path: str) -> None:
    """One row per response token: record_id, step (null when the record has none), pos, token_id, lp_roll,
    lp_train_<label>..., entropy_<label>..., loss_mask."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = run.rollouts.records
    lengths = [len(r.response_ids) for r in records]
    table = {
        "record_id": np.repeat(np.array([r.id for r in records], dtype=object), lengths),
        "step": pa.array([r.step for r, n in zip(records, lengths) for _ in range(n)], type=pa.int64()),
        "pos": np.concatenate([np.arange(n, dtype=np.int64) for n in lengths]),
        "token_id": np.concatenate([r.response_ids for r in records]),
        "lp_roll": np.concatenate([r.logprobs for r in records]),
    }
    for label, lps in run.train.items():
        table[f"lp_train_{label}"] = np.concatenate(lps)
    for label, ents in run.entropy.items():
        if ents is not None and all(e is not None for e in ents):
            table[f"entropy_{label}"] = np.concatenate(ents)
    table["loss_mask"] = np.concatenate([r.loss_mask for r in records])
    columns = {k: v if isinstance(v, pa.Array) else pa.array(v) for k, v in table.items()}
    pq.write_table(pa.table(columns), _writable(path))
