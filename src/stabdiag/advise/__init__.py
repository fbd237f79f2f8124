"""Advice on a judged run: what its failure costs, when a trend will cross its bar, which stability
methods it runs and what to try, a baseline compared, the runs a nightly selection picks.

`advise` is what the engine calls after judging (stabdiag.judge.engine.diagnose takes it as `advise=`):
judging never imports this package, the layers above it hand it in.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ..judge.diagnosis import Diagnosis
from ..read.run import Run
from ..signals.resolve import Signals
from .cost import estimate
from .forecast import forecasts
from .methods import active_methods, advice


def advise(run: Run, signals: Signals, diagnosis: Diagnosis, params: dict, *, gpus: int | None = None,
           gpu_hour_cost: float | None = None) -> Diagnosis:
    """The diagnosis with its advice: the compute its failure wasted (`gpus` and `gpu_hour_cost` turn
    the hours into GPU-hours and money), forecasts from the rules' resolved `params`, the stability
    methods the run has on and what to try for its root layer, and what its logged samples show about its
    lead layer-1 (else layer-2) finding."""
    active = tuple(active_methods(run.meta.get("config"), list(run.series)))
    root = diagnosis.root_layer
    return replace(diagnosis,
                   cost=estimate(run, signals, list(diagnosis.findings), root, gpus=gpus, gpu_hour_cost=gpu_hour_cost),
                   forecasts=tuple(forecasts(signals, params, diagnosis.ending)), methods=active,
                   methods_advice=advice(root, list(active), has_config=_has_training_config(run),
                                         kind=signals.kind),
                   samples=_sample_evidence(run, diagnosis))


def _sample_evidence(run: Run, diagnosis: Diagnosis):
    """What the run's logged samples show (None for a run that logged none); the forensics load only for
    a run that has samples: a check of a metrics CSV never pays for them."""
    if getattr(run, "samples", None) is None:
        return None
    from .samples import sample_evidence

    return sample_evidence(run, diagnosis)


def advisor(*, gpus: int | None = None, gpu_hour_cost: float | None = None):
    """`advise` with the cost options bound, as the engine takes it."""
    return partial(advise, gpus=gpus, gpu_hour_cost=gpu_hour_cost)


def _has_training_config(run: Run) -> bool:
    """The run carries a training configuration (a model config.json lends only its vocab_size)."""
    config = run.meta.get("config")
    return isinstance(config, dict) and any(key != "vocab_size" for key in config)
