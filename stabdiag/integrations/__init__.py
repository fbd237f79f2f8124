"""Judging a run from inside its training loop, with the same rules and engine as `stabdiag check`.

    from stabdiag.integrations import Monitor                       # hand-written loops
    monitor = Monitor(check_every=10, stop_on="fail", output_dir="out/")
    for step in range(steps):
        ...
        new = monitor.log(step, {"loss": loss, "grad_norm": gn})    # the findings that appeared
        if monitor.should_stop:
            break
    monitor.write()                                                 # out/stabdiag_diagnosis.json

    from stabdiag.integrations import StabdiagCallback              # transformers Trainer, TRL trainers
    trainer = Trainer(..., callbacks=[StabdiagCallback(check_every=10)])

    from stabdiag.integrations import StabdiagLightningCallback     # Lightning
    trainer = L.Trainer(callbacks=[StabdiagLightningCallback(check_every=10)])

Each keeps judging within `max_overhead` (default 0.01) of the training wall time: on a long history its
checks come later than every `check_every` steps (see _governor.py for the rule and what is never
postponed).  Nothing heavy loads with this package: transformers is imported only when StabdiagCallback
is first used, lightning only when StabdiagLightningCallback is (PEP 562).
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["Monitor", "StabdiagCallback", "StabdiagLightningCallback"]

_LAZY = {"Monitor": ".monitor", "StabdiagCallback": ".trainer_callback",
         "StabdiagLightningCallback": ".lightning_callback"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stabdiag.integrations' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
