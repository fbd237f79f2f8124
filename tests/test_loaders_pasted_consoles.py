"""Console logs as people paste them (issue 45 items 1 and 5): step counters that repeat over a gradient
accumulation or start over each epoch, and runs that finished but print a warning, a worker's death or a
destructor's traceback on the way out.  The committed logs under tests/fixtures/pasted/ are written from the
printing code's own format strings by tests/fixtures/pasted/make_pasted.py (each source cited there); the
short logs here are written from the same kind of print statements, quoted beside each."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load
from stabdiag.read.ending import Ending, settle
from stabdiag.read.ending.console import ending_of_console

PASTED = Path(__file__).resolve().parent / "fixtures" / "pasted"
NCCL_EXIT = ("[rank0]:[W414 16:54:27.221573952 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT "
             "been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call "
             "destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare "
             "cases this process can exit before this point and block the progress of another member of the process "
             "group. This constraint has always been present,  but this warning has only been added since PyTorch 2.4 "
             "(function operator())\n")


def one(path):
    [run] = load(str(path))
    return run


# ---------------------------------------------------------------- step axes (item 1)


def test_lit_gpt_iter_step_pairs_are_read_on_the_iteration():
    run = one(PASTED / "litgpt_accumulation")
    loss = run.series["loss"]
    assert loss.steps.tolist() == list(range(240))          # 60 optimizer steps x 4 micro-batches
    assert not run.resumed and run.duplicate_steps == 0
    # `step {iter_num}: val loss` is on the same axis: every 20 optimizer steps = every 80 iterations
    assert run.series["val_loss"].steps.tolist() == [79, 159, 239]
    assert any("`step` stays put over several iterations while `iter` increases" in n for n in run.notes)
    assert run.meta["ending"].kind == "finished" and "Training time" in run.meta["ending"].message


def test_a_step_printed_once_per_micro_batch_is_averaged_per_step(tmp_path):
    # print(f"step {step} | micro {i}/{accum} | loss {loss:.4f}") inside the accumulation loop
    lines = [f"step {s} | micro {i}/4 | loss {3.0 - 0.01 * s + 0.001 * i:.4f}"
             for s in range(1, 31) for i in range(1, 5)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "train.log")
    loss = run.series["loss"]
    assert loss.steps.tolist() == list(range(1, 31)) and not run.resumed
    assert loss.values[0] == pytest.approx(3.0 - 0.01 + 0.0025)
    assert any("micro-batches of one update" in n for n in run.notes)


def test_a_counter_that_starts_over_without_a_sign_of_a_restart_is_continued(tmp_path):
    # print(f"step {i}: loss {loss:.4f}") in a loop over a dataloader, run for 3 passes, no epoch printed
    lines = [f"step {i}: loss {2.0 - 0.01 * (p * 20 + i):.4f}" for p in range(3) for i in range(20)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "train.log")
    assert run.series["loss"].steps.tolist() == list(range(60)) and not run.resumed
    assert any("starts over 2 time(s) with no sign of a restart" in n for n in run.notes)


@pytest.mark.parametrize("sign", ["Resuming training from out/iter-000020-ckpt.pth",
                                  "Loading checkpoint shards from out/step-20", "Namespace(lr=0.0003, seed=1)"])
def test_a_counter_that_starts_over_after_a_sign_of_a_restart_is_a_restart(tmp_path, sign):
    lines = ["Namespace(lr=0.0003, seed=1)"] + [f"step {i}: loss {2.0 - 0.01 * i:.4f}" for i in range(30)]
    lines += [sign] + [f"step {i}: loss {2.1 - 0.01 * i:.4f}" for i in range(40)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "train.log")
    assert run.resumed and run.series["loss"].steps.tolist() == list(range(40))


def test_dschat_per_epoch_steps_continue_without_the_epochs_batch_count():
    from stabdiag.read.formats.text import load_text

    text = (PASTED / "dschat_sft_finished" / "training.log").read_text()
    cut = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("Beginning of Epoch"))
    for variant, body in (("as printed", text), ("without Beginning of Epoch", cut)):
        run = load_text("training.log", body)
        assert run.series["loss"].steps.tolist() == list(range(1, 41)), variant   # 2 x 40 batches / 2 accumulated
        assert not run.resumed, variant


# ---------------------------------------------------------------- endings (item 5)


def test_a_finished_dschat_run_is_not_a_death_for_the_nccl_exit_warning():
    run = one(PASTED / "dschat_sft_finished")
    ending = run.meta["ending"]
    assert ending.kind == "finished" and not ending.failed
    for evidence in ("the final evaluation was printed (Epoch 2/2)", "the final model was saved",
                     "every process exited successfully", "exit-time warning after it is not a death"):
        assert evidence in ending.message
    diag = diagnose(run)
    assert diag.layers[3].status.value != "fail" and diag.root_layer is None


def test_a_ray_run_whose_workers_die_after_100_percent_finished():
    ending = one(PASTED / "verl_ray_shutdown").meta["ending"]
    assert ending.kind == "finished" and ending.planned == 60
    assert "reached step 60 of 60" in ending.message and "shutdown noise" in ending.message


def _loop(steps: int = 30) -> str:
    return "".join(f"step {s}: loss {2.0 - 0.01 * s:.4f}\n" for s in range(1, steps + 1))


def test_the_nccl_warning_alone_is_never_a_death():
    assert ending_of_console(_loop() + NCCL_EXIT, "train.log") is None
    traceback = "Traceback (most recent call last):\n  File \"train.py\", line 9\nRuntimeError: boom\n"
    crashed = _loop() + traceback + NCCL_EXIT
    assert ending_of_console(crashed, "train.log").kind == "exception"


def test_wandb_finishing_lines_and_a_destructor_traceback_at_exit_are_not_deaths():
    tail = ("wandb: 🚀 View run quiet-sky-3 at: https://wandb.ai/me/proj/runs/abc\n"
            "wandb: Find logs at: wandb/run-20250101_000000-abc/logs\n"
            "Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x155470f87880>\n"
            "Traceback (most recent call last):\n"
            "  File \"/site-packages/deepspeed/ops/adam/cpu_adam.py\", line 102, in __del__\n"
            "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n")
    assert ending_of_console(_loop() + tail, "train.log") is None


def test_a_learning_rate_at_the_end_of_its_schedule_is_evidence_of_completion():
    died = Ending("collective", "A worker died or was killed while executing a task", "console.log", 100)
    lr_ended = "the learning rate reached the end of its schedule (lr 0 at the last step)"
    assert settle(died, {}, 100, 1, lr_ended).kind == "finished"
    assert settle(died, {}, 100, 1, None).kind == "collective"
    crashed = Ending("exception", "RuntimeError: CUDA error", "console.log", 100)
    assert settle(crashed, {}, 100, 1, lr_ended).kind == "exception"       # an exception speaks for itself


def test_lr_at_end_is_read_from_the_run(tmp_path):
    # a cosine schedule printed by the loop, then a lost worker: the schedule's end says the run completed
    lines = [f"step {s}: loss {2.0 - 0.01 * s:.4f}, lr {0.5 * 3e-4 * (1 + math.cos(math.pi * s / 50)):.3e}"
             for s in range(1, 51)]
    lines.append("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: worker 3 lost")
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    ending = one(tmp_path / "train.log").meta["ending"]
    assert ending.kind == "finished" and "the learning rate reached the end of its schedule" in ending.message
    half = lines[:25] + lines[-1:]
    (tmp_path / "train.log").write_text("\n".join(half) + "\n")
    assert one(tmp_path / "train.log").meta["ending"].kind == "collective"


def test_a_key_printed_twice_at_a_few_steps_only_is_not_averaged(tmp_path):
    # a train line each step, and an eval line that reuses the name every 10 steps: no accumulation
    lines = []
    for s in range(1, 41):
        lines.append(f"step {s} | loss {2.0 - 0.01 * s:.4f}")
        if s % 10 == 0:
            lines.append(f"Eval step {s} | loss {2.5:.4f}")
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    run = one(tmp_path / "train.log")
    assert not any("averaged per step" in n for n in run.notes)
    assert run.series["loss"].values[9] == pytest.approx(2.5)     # the last write of step 10, as before
