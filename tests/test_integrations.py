"""stabdiag.integrations: the Monitor of hand-written loops, the transformers TrainerCallback (a real
tiny HF Trainer run on CPU, a learning-rate jump injected) and the Lightning Callback; and that neither
`import stabdiag` nor `import stabdiag.integrations` loads transformers or lightning."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys

import numpy as np
import pytest

from stabdiag.errors import ConfigError
from stabdiag.integrations import Monitor


def test_importing_stabdiag_and_its_integrations_loads_neither_transformers_nor_lightning():
    code = ("import sys, stabdiag, stabdiag.integrations\n"
            "from stabdiag.integrations import Monitor\n"
            "Monitor(check_every=5).log(1, {'loss': 1.0})\n"
            "heavy = [m for m in ('transformers', 'lightning', 'pytorch_lightning', 'torch', 'watchfiles')"
            " if m in sys.modules]\n"
            "print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", done.stdout


def _loop(monitor: Monitor, steps: int, nan_from: int | None = None) -> int:
    """A plain training loop logging to the monitor; the step it stopped at."""
    rng = np.random.default_rng(0)
    for step in range(1, steps + 1):
        loss = 2.0 * math.exp(-step / 80) + 0.5 + 0.03 * rng.standard_normal()
        grad_norm = 1.0 + 0.1 * rng.standard_normal()
        if nan_from is not None and step >= nan_from:
            loss = grad_norm = math.nan
        monitor.log(step, {"loss": loss, "grad_norm": np.float32(grad_norm), "note": "text is left out"})
        if monitor.should_stop:
            return step
    return steps


def test_monitor_stops_a_plain_loop_within_check_every_steps_of_the_failure(tmp_path):
    monitor = Monitor(check_every=10, output_dir=tmp_path, max_overhead=None)
    stopped = _loop(monitor, 300, nan_from=150)
    assert 150 <= stopped <= 160, stopped
    assert monitor.should_stop and "L3.nonfinite-values" in monitor.stop_reason
    assert "root layer 3" in monitor.stop_reason
    assert monitor.write() == str(tmp_path / "stabdiag_diagnosis.json")
    written = json.loads((tmp_path / "stabdiag_diagnosis.json").read_text())
    assert written["stopped"] and written["stop_step"] == stopped
    assert written["report"]["runs"][0]["root_layer"] == 3


def test_monitor_does_not_stop_a_healthy_loop_and_returns_new_findings_only():
    monitor = Monitor(check_every=10, max_overhead=None)
    assert _loop(monitor, 300) == 300 and not monitor.should_stop
    assert monitor.checks == 29 and monitor.diagnosis.verdict == "pass"
    failing = Monitor(check_every=10, stop_on=None, max_overhead=None)                  # never stops: reports only
    _loop(failing, 200, nan_from=120)
    assert not failing.should_stop
    assert [e.finding for e in failing.events if e.event == "finding"] == ["L3.nonfinite-values"]


def test_monitor_stops_only_on_chosen_layers():
    monitor = Monitor(check_every=10, stop_layers=(1, 2), max_overhead=None)
    assert _loop(monitor, 200, nan_from=120) == 200                  # a layer-3 finding does not stop it
    assert any(f.layer == 3 for f in monitor.diagnosis.findings)


class _FakeTime:
    """A training loop's clock: a step takes `step_s`; a judgement of n points takes `cost_per_point_s * n`
    (diagnose patched to advance the clock), so the governor is tested without timing anything."""

    def __init__(self, monkeypatch, step_s: float, cost_per_point_s: float) -> None:
        import stabdiag.judge.engine

        self.now, self.step_s = 0.0, step_s
        self.checks: list[tuple[float, float, int]] = []          # (start, end, step) of each judgement
        real = stabdiag.judge.engine.diagnose

        def timed_diagnose(run, **kwargs):
            start = self.now
            self.now += cost_per_point_s * sum(len(s) for s in run.series.values())
            self.checks.append((start, self.now, max(int(s.steps[-1]) for s in run.series.values())))
            return real(run, **kwargs)

        monkeypatch.setattr(stabdiag.judge.engine, "diagnose", timed_diagnose)

    def clock(self) -> float:
        return self.now

    def train(self, monitor: Monitor, steps: int, nan_from: int | None = None, first: int = 1) -> int:
        for step in range(first, first + steps):
            self.now += self.step_s
            loss = math.nan if nan_from is not None and step >= nan_from else 1.0 + 0.01 * math.sin(step)
            monitor.log(step, {"loss": loss, "grad_norm": 1.0})
            if monitor.should_stop:
                return step
        return first + steps - 1


def test_max_overhead_keeps_judging_within_its_share_of_training_time(monkeypatch):
    # each check costs 0.1 ms a point: at 400 steps x 2 metrics 80 ms, and growing with the history
    fake = _FakeTime(monkeypatch, step_s=0.5, cost_per_point_s=1e-4)
    monitor = Monitor(check_every=10, max_overhead=0.01, clock=fake.clock, stop_on=None)
    fake.train(monitor, 2000)
    judged = sum(end - start for start, end, _ in fake.checks)
    assert judged <= 0.01 * fake.now                                   # 1% of the whole run's wall time
    for (began, end, _), (start, _, _) in zip(fake.checks, fake.checks[1:]):
        assert start - end >= (end - began) / 0.01 - 1e-9              # each wait earned by the check before
    steps = [step for _, _, step in fake.checks]
    assert all(b - a >= 10 and (b - a) % 10 == 0 for a, b in zip(steps, steps[1:]))
    # the cadence the last check implies: 2 x 2000 points x 0.1 ms = 0.4 s -> 40 s -> 80 steps of 0.5 s
    assert monitor.governor.cadence(0.5) == 80 and steps[-1] - steps[-2] in (70, 80)
    assert monitor.governor.postponed > 0 and 1 < monitor.checks < 200


def test_max_overhead_none_checks_every_check_every_steps_whatever_the_cost(monkeypatch):
    fake = _FakeTime(monkeypatch, step_s=0.5, cost_per_point_s=1e-3)
    monitor = Monitor(check_every=10, max_overhead=None, clock=fake.clock, stop_on=None)
    fake.train(monitor, 300)
    assert [step for _, _, step in fake.checks] == list(range(11, 301, 10))
    assert monitor.governor.postponed == 0


def test_a_postponed_check_is_not_dropped_and_the_final_judgement_always_runs(monkeypatch, tmp_path):
    fake = _FakeTime(monkeypatch, step_s=0.5, cost_per_point_s=0.05)  # a check of 100 points: 5 s -> 500 s
    monitor = Monitor(check_every=10, max_overhead=0.01, clock=fake.clock, output_dir=tmp_path, stop_on=None)
    fake.train(monitor, 1000)
    steps = [step for _, _, step in fake.checks]
    assert steps[0] == 11 and len(steps) >= 2                           # postponed, then run once earned
    assert fake.checks[1][0] - fake.checks[0][1] >= (fake.checks[0][1] - fake.checks[0][0]) / 0.01
    fake.now += 0.001
    monitor.write()                                                     # the final judgement: whatever the budget
    assert fake.checks[-1][2] == 1000
    written = json.loads((tmp_path / "stabdiag_diagnosis.json").read_text())
    assert written["last_step"] == 1000 and written["max_overhead"] == 0.01 and written["postponed"] > 0


def test_a_non_finite_value_is_judged_at_the_next_look_whatever_the_budget(monkeypatch):
    # checks so dear (10 s a point) that the budget allows one check in the whole run; a NaN still stops
    fake = _FakeTime(monkeypatch, step_s=0.5, cost_per_point_s=10.0)
    monitor = Monitor(check_every=10, max_overhead=0.01, clock=fake.clock)
    stopped = fake.train(monitor, 1000, nan_from=500)
    assert 500 <= stopped < 510 + 1 and "L3.nonfinite-values" in monitor.stop_reason, (stopped, monitor.stop_reason)
    assert [step for _, _, step in fake.checks] == [11, stopped]


def test_ranks_that_agree_check_at_the_same_steps_whatever_their_clocks(monkeypatch):
    # two ranks in lockstep: rank 1's clock runs 100x slower than rank 0's (alone, its budget would allow
    # far fewer checks); with rank 0's decision shared at each look, both check at the same steps
    fake = _FakeTime(monkeypatch, step_s=0.5, cost_per_point_s=1e-3)
    decisions: list[bool] = []

    def rank0_agree(go: bool) -> bool:
        decisions.append(go)
        return go

    rank0 = Monitor(check_every=10, clock=fake.clock, stop_on=None)
    rank1 = Monitor(check_every=10, clock=lambda: fake.now / 100, stop_on=None)
    rank0.governor.agree, rank1.governor.agree = rank0_agree, lambda go: decisions[-1]
    seen: dict[int, list[int]] = {0: [], 1: []}
    for step in range(1, 1001):
        fake.now += 0.5
        for rank, monitor in ((0, rank0), (1, rank1)):
            before = monitor.checks
            monitor.log(step, {"loss": 1.0, "grad_norm": 1.0})
            if monitor.checks > before:
                seen[rank].append(step)
    assert seen[0] == seen[1] and len(seen[0]) > 2 and rank0.governor.postponed > 0


_RANK_SCRIPT = """
import json, sys
import torch.distributed as dist
from stabdiag.integrations import Monitor
from stabdiag.live.integrations.trainer_callback import rank_zero_decides

rank, init, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
step_s = 0.5 if rank == 0 else 0.005          # rank 1's clock: 100x slower, so alone it would check less
monitor = Monitor(check_every=10, stop_on=None)
# a fake clock: the steps so far at step_s, and 1 s for each check (its end reads one check more)
monitor.governor.clock = lambda: state["step"] * step_s + monitor.checks * 1.0
state = {"step": 0}
monitor.governor.agree = rank_zero_decides
checks = []
for step in range(1, 601):
    state["step"] = step
    before = monitor.checks
    monitor.log(step, {"loss": 1.0 + 0.01 * (step % 7), "grad_norm": 1.0})
    if monitor.checks > before:
        checks.append(step)
json.dump({"checks": checks, "postponed": monitor.governor.postponed}, open(out, "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.torch
def test_two_processes_check_at_the_same_steps_through_rank_zero_decides(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = tmp_path / "rank.py"
    script.write_text(_RANK_SCRIPT)
    init = f"file://{tmp_path / 'rendezvous'}"
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), init, str(tmp_path / f"{rank}.json")])
             for rank in (0, 1)]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    rank0, rank1 = (json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1))
    assert rank0["checks"] == rank1["checks"] and len(rank0["checks"]) > 2
    # 1 s a check at 0.5 s a step: 100 s -> 200 steps between checks on rank 0's clock
    assert all(b - a == 200 for a, b in zip(rank0["checks"], rank0["checks"][1:])), rank0["checks"]


@pytest.mark.parametrize("kwargs, word", [({"check_every": 0}, "check_every"), ({"stop_on": "error"}, "stop_on"),
                                          ({"max_overhead": 2.0}, "max_overhead"),
                                          ({"max_overhead": "1%"}, "max_overhead"),
                                          ({"stop_layers": (5,)}, "stop_layers"), ({"select": ["L9"]}, "L9")])
def test_monitor_refuses_bad_settings(kwargs, word):
    with pytest.raises(ConfigError, match=word):
        Monitor(**kwargs)


# --- a real tiny HF Trainer run on CPU ----------------------------------------------------------------------

def _hf_run(tmp_path, jump_at: int | None, caplog):
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from stabdiag.integrations import StabdiagCallback

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)

        def forward(self, x, labels=None):
            pred = self.lin(x).squeeze(-1)
            return {"loss": ((pred - labels) ** 2).mean(), "logits": pred}

    class LearningRateJump(TrainerCallback):          # the injected failure: lr 0.02 -> 50 at `jump_at`
        def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
            if jump_at is not None and state.global_step >= jump_at:
                for group in optimizer.param_groups:
                    group["lr"] = 50.0

    torch.manual_seed(0)
    w = torch.randn(8)
    xs = torch.randn(2000, 8)
    ys = xs @ w + 0.1 * torch.randn(2000)
    data = [{"x": x, "labels": y} for x, y in zip(xs, ys)]
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, logging_steps=1, learning_rate=0.02,
                             optim="sgd", lr_scheduler_type="constant", per_device_train_batch_size=16,
                             report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True)
    callback = StabdiagCallback(check_every=5, max_overhead=None)     # step cadence: the governor is tested above
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[callback, LearningRateJump()])
    with caplog.at_level(logging.WARNING, logger="stabdiag"):
        trainer.train()
    return trainer, callback, json.loads((tmp_path / "stabdiag_diagnosis.json").read_text())


@pytest.mark.slow
@pytest.mark.torch
def test_hf_trainer_with_a_learning_rate_jump_is_stopped_within_n_steps(tmp_path, caplog):
    trainer, callback, written = _hf_run(tmp_path, 40, caplog)
    stopped = trainer.state.global_step
    assert 40 < stopped <= 40 + 10, stopped                # check_every 5: found and stopped within 10 steps
    assert written["stopped"] and written["stop_step"] == stopped
    assert "layer 3" in written["stop_reason"] and written["report"]["runs"][0]["root_layer"] == 3
    assert any("stopping training" in r.getMessage() and "L3." in r.getMessage() for r in caplog.records)


@pytest.mark.slow
@pytest.mark.torch
def test_a_healthy_hf_trainer_run_is_not_stopped(tmp_path, caplog):
    trainer, callback, written = _hf_run(tmp_path, None, caplog)
    assert trainer.state.global_step == 100 and not written["stopped"] and written["stop_reason"] is None
    assert written["report"]["runs"][0]["verdict"] == "pass"


@pytest.mark.slow
@pytest.mark.torch
def test_lightning_callback_stops_a_diverging_run(tmp_path):
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")

    from stabdiag.integrations import StabdiagLightningCallback

    class Tiny(L.LightningModule):
        def __init__(self, jump_at):
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)
            self.jump_at = jump_at

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = ((self.lin(x).squeeze(-1) - y) ** 2).mean()
            self.log("train/loss", loss, on_step=True, on_epoch=False)
            return loss

        def on_train_batch_start(self, batch, batch_idx):
            if self.jump_at is not None and self.global_step >= self.jump_at:
                for group in self.optimizers().optimizer.param_groups:
                    group["lr"] = 50.0

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.02)

    torch.manual_seed(0)
    xs = torch.randn(2000, 8)
    ys = xs @ torch.randn(8) + 0.1 * torch.randn(2000)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=16)
    results = {}
    for jump_at in (40, None):
        callback = StabdiagLightningCallback(check_every=5, max_overhead=None)
        trainer = L.Trainer(max_steps=100, accelerator="cpu", logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=str(tmp_path / str(jump_at)), callbacks=[callback])
        trainer.fit(Tiny(jump_at), loader)
        results[jump_at] = (trainer.global_step, callback.monitor)
    stopped, monitor = results[40]
    assert 40 < stopped <= 50 and monitor.should_stop, (stopped, monitor.stop_reason)
    assert json.loads((tmp_path / "40" / "stabdiag_diagnosis.json").read_text())["stopped"]
    assert results[None][0] == 100 and not results[None][1].should_stop
