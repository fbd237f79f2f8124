"""Detectors of how a run ended that are not a death: a run that stopped short of its planned length."""

from __future__ import annotations

from ._base import Evidence


def ended_unfinished(ending=None) -> Evidence | None:
    """The run's last logged step falls short of its planned length (a progress bar's total, max_steps,
    train_iters) by more than its logging interval, with no final summary and no cause in its logs: it
    was killed without last words (SIGKILL, a preemption, a lost node) or is still running."""
    if ending is None or not ending.stopped_short:
        return None
    return Evidence(ending.step, ending.step, {"message": ending.message, "source": ending.source or "the logs",
                                               "step": ending.step, "planned": ending.planned})
