"""A transformers `TrainerCallback` (the HF Trainer, and TRL's trainers, which are Trainers): every
`check_every` steps the logged history is judged (later on long histories, within `max_overhead`); a
finding at `stop_on` in `stop_layers` sets `control.should_training_stop`, logs the reason, and the final
diagnosis is written to the output dir."""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from .monitor import Monitor

logger = logging.getLogger("stabdiag")


class StabdiagCallback(TrainerCallback):
    """`StabdiagCallback(check_every=10, stop_on="fail", stop_layers=(1, 2, 3, 4), output_dir=None,
    max_overhead=0.01, **monitor_options)`; `output_dir` defaults to the Trainer's `args.output_dir`.
    Every process judges the same logged values; with several processes, whether a check may run within
    `max_overhead` is rank 0's decision, broadcast at each look, so every rank checks and stops at the
    same step."""

    def __init__(self, *, check_every: int = 10, stop_on: str | None = "fail", stop_layers=(1, 2, 3, 4),
                 output_dir=None, max_overhead: float | None = 0.01, **monitor_options) -> None:
        self.monitor = Monitor(check_every=check_every, stop_on=stop_on, stop_layers=stop_layers,
                               output_dir=output_dir, max_overhead=max_overhead, **monitor_options)
        self._said = False

    def on_train_begin(self, args, state, control, **kwargs):
        if self.monitor.output_dir is None:
            self.monitor.output_dir = args.output_dir
        if getattr(args, "run_name", None) and self.monitor.name == "run":
            self.monitor.name = str(args.run_name)
        if getattr(args, "world_size", 1) > 1 and self.monitor.max_overhead is not None:
            self.monitor.governor.agree = rank_zero_decides if _distributed() else None
            if self.monitor.governor.agree is None:
                # no process group to share a decision through: each rank's own clock would pick other
                # steps, so the checks keep to every check_every steps, the same on every rank
                self.monitor.governor.max_overhead = None
                logger.info("stabdiag: %d processes and no torch.distributed group; checking every %d steps "
                            "without max_overhead", args.world_size, self.monitor.check_every)

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


def _distributed() -> bool:
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized()


def rank_zero_decides(go: bool) -> bool:
    """Rank 0's `go`, on every rank of the default process group (one small broadcast per look)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([int(go)], dtype=torch.int32, device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())
