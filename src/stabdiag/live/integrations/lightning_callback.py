"""A Lightning `Callback`: after every training batch the metrics logged with `self.log` (and the
step's loss) join the history on rank 0; every `check_every` steps it is judged (later on long
histories, within `max_overhead`: rank 0's clock alone decides, so no rank can differ), a finding at `stop_on`
in `stop_layers` sets `trainer.should_stop` on every rank, and the final diagnosis is written to the
Trainer's `default_root_dir`."""

from __future__ import annotations

import logging

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:                                   # the older package name
    from pytorch_lightning.callbacks import Callback

from .monitor import Monitor

logger = logging.getLogger("stabdiag")


class StabdiagLightningCallback(Callback):
    """`StabdiagLightningCallback(check_every=10, stop_on="fail", stop_layers=(1, 2, 3, 4), output_dir=None,
    max_overhead=0.01, **monitor_options)`; `output_dir` defaults to the Trainer's `default_root_dir`."""

    def __init__(self, *, check_every: int = 10, stop_on: str | None = "fail", stop_layers=(1, 2, 3, 4),
                 output_dir=None, max_overhead: float | None = 0.01, **monitor_options) -> None:
        super().__init__()
        self.monitor = Monitor(check_every=check_every, stop_on=stop_on, stop_layers=stop_layers,
                               output_dir=output_dir, max_overhead=max_overhead, **monitor_options)
        self._said = False

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_global_zero:                    # rank 0 judges; the decision is shared below
            metrics = dict(trainer.callback_metrics)
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if "loss" not in metrics and loss is not None:
                metrics["loss"] = loss
            for finding in self.monitor.log(trainer.global_step, metrics):
                logger.warning("stabdiag: %s (%s, layer %d): %s", finding.rule, finding.severity, finding.layer,
                               finding.message)
        # every check_every steps (the same steps on every rank) rank 0's decision is shared, as
        # EarlyStopping shares its own: one rank stopping alone would hang the others
        if trainer.global_step % self.monitor.check_every == 0 and \
                trainer.strategy.reduce_boolean_decision(self.monitor.should_stop, all=False):
            trainer.should_stop = True
            if not self._said and self.monitor.should_stop:
                self._said = True
                logger.warning("%s; stopping training", self.monitor.stop_reason)

    def on_train_end(self, trainer, pl_module):
        if trainer.is_global_zero:
            self.monitor.write(self.monitor.output_dir or trainer.default_root_dir)
