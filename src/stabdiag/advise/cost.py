"""What a failure cost: compute spent on rollouts that taught nothing, and steps trained after the root
layer failed.  Every figure comes with its inputs; a cost is never claimed without a step time.

Step time, in order: a logged per-step time (TRL `step_time`, verl `timing_s/step`, OpenRLHF
`timing/step_total`, Megatron `elapsed time per iteration (ms)`), else the trainer's `train_runtime`
over its steps, else the wall clock of TensorBoard / W&B points.  GPU-hours need the number of GPUs
(`--gpus`, else the run's own config where it says); money needs `--gpu-hour-cost`.

Zero-variance groups (every answer of a group scored alike) produce no GRPO gradient: their share of
each step's rollouts is wasted.  It is the data's cost only when the data caused it; when equal groups
follow an entropy collapse (the finding is explained as its consequence) the waste is said to be the
collapse's, layer 2's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._stats import median
from ..read.run import Run
from ..signals.resolve import Signals

_STEP_TIME_KEYS = ("step_time", "train/step_time", "timing_s/step", "timing/step_total", "train/timing/step_total",
                   "timeperf/train_step", "iteration-time", "elapsed time per iteration (ms)")
_GPU_CONFIG_KEYS = ("world_size", "n_gpus", "num_gpus", "gpus")
_MIN_LIVE_STEP_SECONDS = 0.01


@dataclass(frozen=True, slots=True)
class StepTime:
    seconds: float
    source: str


def step_time(run: Run) -> StepTime | None:
    """Seconds per training step, and where that figure came from."""
    for key in _STEP_TIME_KEYS:
        s = run.series.get(key)
        if s is not None and len(s):
            values = s.values[np.isfinite(s.values) & (s.values > 0)]
            if len(values):
                seconds = float(median(values)) * (1e-3 if "(ms)" in key else 1.0)
                return StepTime(seconds, f"median {key}")
    summary = run.meta.get("summary") if isinstance(run.meta.get("summary"), dict) else {}
    runtime, steps = summary.get("train_runtime"), run.meta.get("global_step")
    if isinstance(runtime, (int, float)) and isinstance(steps, int) and steps > 0 and 0 < runtime < math.inf:
        return StepTime(runtime / steps, f"train_runtime {runtime:.4g} s / {steps} steps")
    return _wall_clock(run)


def _wall_clock(run: Run) -> StepTime | None:
    rates = []
    for s in run.series.values():
        if s.wall_time is None or len(s) < 3:
            continue
        ok = np.isfinite(s.wall_time)
        if ok.sum() < 3:
            continue
        dt, ds = np.diff(s.wall_time[ok]), np.diff(s.steps[ok]).astype(float)
        good = (ds > 0) & (dt > 0)
        if good.sum() >= 2:
            rates.append(float(median(dt[good] / ds[good])))
    if not rates:
        return None
    seconds = float(median(rates))
    if seconds < _MIN_LIVE_STEP_SECONDS:
        return None          # written faster than any training step: replayed or generated, not timed live
    return StepTime(seconds, "the wall clock of the logged points")


def gpus_of(run: Run, given: int | None) -> tuple[int | None, str]:
    if given:
        return given, "--gpus"
    from .methods import flatten

    config = flatten(run.meta.get("config") if isinstance(run.meta.get("config"), dict) else {})
    for key in _GPU_CONFIG_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"the run's config {key}"
    per_node, nodes = config.get("trainer.n_gpus_per_node"), config.get("trainer.nnodes", 1)   # verl
    if isinstance(per_node, int) and isinstance(nodes, int) and per_node > 0 and nodes > 0:
        return per_node * nodes, "the run's config trainer.n_gpus_per_node x trainer.nnodes"
    return None, "unknown (pass --gpus N)"


def estimate(run: Run, signals: Signals, findings, root_layer: int | None, *, gpus: int | None = None,
             gpu_hour_cost: float | None = None) -> dict:
    """The cost figures of a diagnosed run, or {"reason": ...} when there is no step time."""
    time = step_time(run)
    if time is None:
        return {"reason": "no step time logged (step_time, timing_s/step, train_runtime) and no live wall "
                          "clock: no cost is claimed"}
    n_gpus, gpus_source = gpus_of(run, gpus)
    last = max((int(s.steps[-1]) for s in run.series.values() if len(s)), default=0)
    if not math.isfinite(time.seconds * max(last, 1) * (n_gpus or 1) * (gpu_hour_cost or 1.0)):
        return {"reason": f"a step time of {time.seconds:.3g} s ({time.source}) over {last} steps is past what a "
                          "number holds: no cost is claimed"}
    out: dict = {"step_seconds": time.seconds, "step_seconds_source": time.source, "gpus": n_gpus,
                 "gpus_source": gpus_source, "gpu_hour_cost": gpu_hour_cost}

    def price(steps: float) -> dict:
        hours = steps * time.seconds / 3600.0
        figure = {"steps": round(steps, 1), "hours": round(hours, 3)}
        if n_gpus:
            figure["gpu_hours"] = round(hours * n_gpus, 3)
            if gpu_hour_cost is not None:
                figure["cost"] = round(hours * n_gpus * gpu_hour_cost, 2)
        return figure

    zero = signals.get("zero_std_frac")
    if zero is not None and len(zero) > 1:
        ok = np.isfinite(zero.values)
        steps, frac = zero.steps[ok], np.clip(zero.values[ok], 0, 1)
        spans = np.diff(np.concatenate([[steps[0] - 1], steps])).astype(float)
        wasted = float(np.sum(frac * spans))
        finding = next((f for f in findings if f.rule == "L1.zero-variance-groups"), None)
        if finding is None:
            owner = "no finding: the usual share of equal groups"
        elif (finding.explained_by or "").startswith("L2"):
            owner = f"the policy collapse (layer 2, {finding.explained_by}): equal groups followed it"
        else:
            owner = "the data (layer 1: " + str(finding.evidence.get("kind", "equal groups")) + ")"
        kind = finding.evidence.get("kind") if finding is not None else None
        out["zero_variance"] = {**price(wasted), "share": round(wasted / max(float(spans.sum()), 1.0), 3),
                                "owner": owner, "kind": kind,
                                "inputs": f"sum over logged steps of {zero.key} x steps it covers"}
    if root_layer is not None:
        onset = min(f.start_step for f in findings if f.layer == root_layer and not f.downstream)
        if last > onset:
            out["after_root"] = {**price(float(last - onset)), "from_step": onset, "to_step": last,
                                 "layer": root_layer}
    return out


def describe(cost: dict) -> list[str]:
    """The cost as report lines, each with its inputs."""
    if "reason" in cost:
        return [f"cost: not estimated: {cost['reason']}"]
    lines = []
    unit = f"step time {cost['step_seconds']:.3g} s from {cost['step_seconds_source']}; GPUs {cost['gpus'] or '?'} " \
           f"({cost['gpus_source']})"

    def money(figure: dict) -> str:
        text = f"{figure['hours']:.3g} h"
        if "gpu_hours" in figure:
            text += f" = {figure['gpu_hours']:.3g} GPU-h"
        if "cost" in figure:
            text += f" = {figure['cost']:,.2f} at {cost['gpu_hour_cost']:g}/GPU-h"
        return text

    zero = cost.get("zero_variance")
    if zero and zero["steps"] > 0:
        lines.append(f"cost: {zero['share']:.0%} of rollouts were in zero-variance groups (no learning signal): "
                     f"{zero['steps']:g} steps' worth, {money(zero)}; {zero['owner']}")
    after = cost.get("after_root")
    if after:
        lines.append(f"cost: {after['steps']:g} steps trained after layer {after['layer']} failed at step "
                     f"{after['from_step']}: {money(after)}")
    return [line + f" [{unit}]" for line in lines]
