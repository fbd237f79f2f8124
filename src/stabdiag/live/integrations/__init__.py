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

from ..._lazy import lazy_exports

__all__ = ["Monitor", "StabdiagCallback", "StabdiagLightningCallback"]

_LAZY = {"Monitor": ".monitor", "StabdiagCallback": ".trainer_callback",
         "StabdiagLightningCallback": ".lightning_callback"}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
