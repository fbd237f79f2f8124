"""A transformers `TrainerCallback` (the HF Trainer, and TRL's trainers, which are Trainers): every
`check_every` steps the logged history is judged; a finding at `stop_on` in `stop_layers` sets
`control.should_training_stop`, logs the reason, and the final diagnosis is written to the output dir."""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from .monitor import Monitor

logger = logging.getLogger("stabdiag")


class StabdiagCallback(TrainerCallback):
    """`StabdiagCallback(check_every=10, stop_on="fail", stop_layers=(1, 2, 3, 4), output_dir=None,
    **monitor_options)`; `output_dir` defaults to the Trainer's `args.output_dir`.  Every process judges
    the same logged values and so stops at the same step; with several processes leave `max_overhead`
    unset, since its timing is each process's own."""

    def __init__(self, *, check_every: int = 10, stop_on: str | None = "fail", stop_layers=(1, 2, 3, 4),
                 output_dir=None, **monitor_options) -> None:
        self.monitor = Monitor(check_every=check_every, stop_on=stop_on, stop_layers=stop_layers,
                               output_dir=output_dir, **monitor_options)
        self._said = False

    def on_train_begin(self, args, state, control, **kwargs):
        if self.monitor.output_dir is None:
            self.monitor.output_dir = args.output_dir
        if getattr(args, "run_name", None) and self.monitor.name == "run":
            self.monitor.name = str(args.run_name)

    def on_log(self, args, state, control, logs=None, **kwargs):
        # every rank judges the same logged values (the Trainer logs reduced metrics on all of them), so
        # every rank decides to stop at the same step: a stop on rank 0 alone would hang the others
        if not logs:
            return
        for finding in self.monitor.log(state.global_step, logs):
            logger.warning("stabdiag: %s (%s, layer %d): %s", finding.rule, finding.severity, finding.layer,
                           finding.message)
        if self.monitor.should_stop:
            control.should_training_stop = True
            if not self._said and state.is_world_process_zero:
                self._said = True
                logger.warning("%s; stopping training", self.monitor.stop_reason)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = self.monitor.write()
            if path is not None:
                logger.info("stabdiag: diagnosis written to %s", path)
