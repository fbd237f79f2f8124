"""`stabdiag probe`: measure the drift between the logprobs a rollout engine reported and the ones the
training-side model computes for the same tokens (layer 4).

    records.py / adapters.py   read and validate rollout dumps (normalized, vLLM, SGLang)
    sampling.py                which distribution the engine's logprobs came from (raw / processed)
    model.py / recompute.py    the transformers recompute: chunked fp32 lm head, token-budget batches
    distributed.py             sharding under torchrun
    metrics.py / analysis.py   drift metrics, stratified tables, per-precision comparison
    thresholds.py / hints.py   verdict with sourced thresholds; likely causes
    report.py / outputs.py     terminal summary, report.json, tokens Parquet, per-step series CSV
    pipeline.py / cli.py       the command end to end

Nothing here imports torch or transformers at module level.
"""
