"""How a run ended against its planned length (issue 26 item 2, issue 25 item 6): a run killed without
last words is "unfinished at step S of N", a layer-4 warning, never a pass; shutdown noise after the
training completed is not a death; a console that holds only a traceback died before its first step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load
from stabdiag.read.ending import Ending, settle
from stabdiag.read.ending.console import died_before_first_step, planned_of_console
from tests.clihelp import cli

REAL_HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy"
RECORD = "{{'loss': '{loss}', 'grad_norm': '0.353', 'learning_rate': '0.00088', 'epoch': '{epoch}'}}\n"


def _hf_console(steps: int, total: int, tail: str = "") -> str:
    """An HF Trainer console: the bar redrawn at each step, a record per step, then `tail`."""
    out = []
    for step in range(1, steps + 1):
        out.append(f"\r{100 * step // total:3d}%|█         | {step}/{total} [00:0{step % 10}<00:10,  2.0it/s]")
        out.append(RECORD.format(loss=round(3.0 - step * 0.01, 3), epoch=round(step / 10, 2)))
    return "".join(out) + tail


def test_the_planned_length_is_read_from_bars_and_counters():
    assert planned_of_console(_hf_console(5, 40)).steps == 40
    verl = "(TaskRunner pid=1) Training Progress:  50%|█████     | 105/210 [1:00<1:00, 3.1s/it]\n"
    eval_bar = "Evaluating: 100%|██████████| 500/500 [00:10<00:00]\nMap: 100%|██████████| 9000/9000 [00:01]\n"
    assert planned_of_console(eval_bar + verl).steps == 210           # named bars of other work are not the run's
    assert planned_of_console("iteration      100/    1000 | lm loss: 2.3E+00 |\n").steps == 1000
    assert planned_of_console("step:500/1750 train_loss:3.9 train_time:1ms\n").steps == 1750
    assert planned_of_console("Epoch 1/3, Step 12/500 | loss: 0.31\n") is None   # a per-epoch total
    assert planned_of_console("{'loss': 0.3}\n") is None


def test_every_spelling_of_the_counter_word_counts_and_the_first_shown_total_wins_a_tie():
    # the counter is read once per spelling of its word (console_ending._COUNTER_SPELLINGS): their counts add up
    mixed = "ITERATION 1/50\nIter 2/50\nSTEP 3/50\niteration 4/ 50\nstep 5/80\nStep:6 / 80\nxstep 7/80\n"
    assert planned_of_console(mixed).steps == 50            # 4 of 50 against 2 of 80 (`xstep` is no counter)
    assert planned_of_console("step 1/80\nITER 1/50\nstep 2/80\nITER 2/50\n").steps == 80   # tied: shown first
    assert planned_of_console("ITER 1/50\nstep 1/80\nstep 2/80\nITER 2/50\n").steps == 50
    assert planned_of_console("sTep 1/80\nsteps 2/80\n") is None                 # neither is the word
    # an `epoch` that is no epoch counter is no reason to doubt the step counter; one on its line is
    assert planned_of_console("{'epoch': 0.5}\nepoch 3\nstep 12/500 | epoch: 1 / 3\n") is None
    assert planned_of_console("{'epoch': 0.5}\nepoch 3\nstep 12/500\nEpoch 1/3 done\n").steps == 500


def test_settle_says_unfinished_only_when_the_run_stopped_short():
    meta = {"planned": planned_of_console(_hf_console(5, 200))}
    short = settle(None, meta, 60, 1)
    assert short.kind == "unfinished" and short.stopped_short and (short.step, short.planned) == (60, 200)
    assert short.message.startswith("unfinished at step 60 of 200 (no final summary")
    assert settle(None, meta, 199, 1) is None                     # within one logging interval of the end
    assert settle(None, meta, 190, 10) is None                    # logging every 10 steps, last at 190 of 200
    summary = {**meta, "summary": {"train_runtime": 12.5}}
    assert settle(None, summary, 60, 1) is None                   # stopped early with a summary: finished
    done = Ending("finished", "the trainer printed its final summary", "console.log", 60)
    assert settle(done, meta, 60, 1) == done.__class__(**{**done.to_dict(), "planned": 200})
    assert settle(None, {"config": {"trainer": {"total_training_steps": 500}}}, 40, 1).planned == 500
    assert settle(None, {"config": {"max_steps": -1}}, 40, 1) is None    # HF: "train by epochs"


def test_a_death_after_the_progress_reached_its_total_is_shutdown_noise():
    died = Ending("collective", "A worker died or was killed while executing a task", "console.log", 210)
    meta = {"planned": planned_of_console("Training Progress: 100%|█████████▉| 209/210 [23:24:44<06:36]\n")}
    assert settle(died, meta, 210, 1).kind == "finished"
    assert settle(died, meta, 105, 1).kind == "collective"        # half-way: a death


WORKER_DIED = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. "
               "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly by a signal. "
               "SystemExit is raised (sys.exit is called). Exit code: 1. The process receives a SIGTERM.\n")


def _verl_console(steps: int, total: int, final: bool) -> str:
    lines = []
    for step in range(1, steps + 1):
        lines.append(f"(TaskRunner pid=9) Training Progress:  {100 * step // total}%|█  | {step}/{total} "
                     "[00:10<00:10, 3.1s/it]\n")
        lines.append(f"(TaskRunner pid=9) step:{step} - actor/entropy:{1.2 - step * 0.001:.3f} - "
                     f"actor/pg_loss:0.01 - critic/score/mean:{0.2 + step * 0.002:.3f}\n")
    if final:
        lines.append("(TaskRunner pid=9) (\"Final validation metrics: "
                     "{'val-core/openai/gsm8k/reward/mean@1': 0.87}\")\n")
    return "".join(lines) + WORKER_DIED


def test_a_built_verl_console_dies_only_when_it_did_not_complete(tmp_path):
    for name, steps, final in (("complete", 60, True), ("cut", 30, False)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "train.log").write_text(_verl_console(steps, 60, final))
    complete, cut = (diagnose(run) for run in load(str(tmp_path)))
    assert complete.ending.kind == "finished" and "shutdown noise" in complete.ending.message
    assert "L4.job-died" not in {f.rule for f in complete.findings}
    assert cut.ending.kind == "killed" and "A worker died" in cut.ending.message
    assert "L4.job-died" in {f.rule for f in cut.findings}


@pytest.mark.skipif(not REAL_HEALTHY.is_dir(), reason="shared/real_healthy not present")
def test_rays_worker_died_after_verls_last_step_is_not_a_death():
    # verl's progress bar stops at 209/210 and step:210 is logged; then the trainer prints its final
    # validation metrics and Ray, shutting down, prints "A worker died ... receives a SIGTERM"
    [run] = load(str(REAL_HEALTHY / "verl_baseline_ext" / "qwen2_7b_gpg_gsm8k_math_fsdp"))
    diag = diagnose(run)
    assert diag.ending.kind == "finished" and "A worker died" in diag.ending.message
    assert (diag.ending.step, diag.ending.planned) == (210, 210)
    assert "L4.job-died" not in {f.rule for f in diag.findings}


def test_a_console_holding_only_a_traceback_died_before_its_first_step(tmp_path):
    text = textwrap.dedent("""\
        Loading checkpoint shards: 100%|██████████| 4/4 [00:13<00:00,  3.24s/it]
        Traceback (most recent call last):
          File "train.py", line 88, in <module>
            trainer.train()
        torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
        """)
    assert died_before_first_step(text) == ("died before its first logged step: OutOfMemoryError: CUDA out of "
                                            "memory. Tried to allocate 2.00 GiB")
    assert died_before_first_step(_hf_console(3, 10, text)) is None
    log = tmp_path / "console.log"
    log.write_text(text)
    result = cli("check", str(log))
    assert result.exit_code == 2
    assert "died before its first logged step: OutOfMemoryError: CUDA out of memory" in result.stderr


_TRAIN = textwrap.dedent("""\
    import os, signal, sys
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainerCallback, TrainingArguments

    out, kill_at = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32))
    ids = torch.randint(0, 32, (256, 8), generator=torch.Generator().manual_seed(0))
    rows = [{"input_ids": row, "labels": row} for row in ids]

    class KillNine(TrainerCallback):          # what a scheduler's kill -9 does: no traceback, no summary
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.global_step >= kill_at:
                sys.stdout.flush()
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGKILL)

    args = TrainingArguments(output_dir=out, max_steps=200, per_device_train_batch_size=4, learning_rate=1e-3,
                             logging_steps=1, save_steps=5, save_only_model=True, report_to="none", use_cpu=True,
                             disable_tqdm=False, seed=0)
    Trainer(model=model, args=args, train_dataset=rows, callbacks=[KillNine()]).train()
    """)


@pytest.mark.torch
@pytest.mark.slow          # ~15 s: a real Trainer in a subprocess; it runs in CI all the same
def test_a_real_hf_trainer_run_killed_with_sigkill_is_unfinished_not_pass(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    out = tmp_path / "sft_killed"
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    out.mkdir()
    with open(out / "console.log", "wb") as console:          # python train.py 2>&1 | tee console.log
        done = subprocess.run([sys.executable, str(script), str(out), "12"], stdout=console,
                              stderr=subprocess.STDOUT, env=env, timeout=300)
    assert done.returncode == -signal.SIGKILL, (out / "console.log").read_text()[-2000:]
    assert (out / "checkpoint-10" / "trainer_state.json").is_file()

    result = cli("check", str(out), "--format", "json")
    assert result.exit_code == 0, result.stderr                  # a warning under the default gate
    [run] = json.loads(result.stdout)["runs"]
    assert run["verdict"] == "warn" and run["root_layer"] == 4
    assert run["ending"]["kind"] == "unfinished" and run["ending"]["planned"] == 200
    assert run["ending"]["message"].startswith(f"unfinished at step {run['ending']['step']} of 200 (no final summary")
    assert 10 <= run["ending"]["step"] <= 12
    assert [f["rule"] for f in run["findings"] if f["layer"] == 4] == ["L4.run-unfinished"]
    # and the gate that fails on warnings fails it
    assert cli("check", str(out), "--fail-on", "warn").exit_code == 1


def test_an_eval_bar_after_the_training_bar_is_not_the_plan():
    # max_steps 10 with a 500-batch eval: the eval bar is redrawn more often, but it is not the run's length
    text = _hf_console(10, 10) + "".join(f"\r{n * 100 // 500:3d}%|█   | {n}/500 [00:01<00:10]" for n in range(500))
    assert planned_of_console(text).steps == 10


def test_a_wandb_run_without_an_exit_record_short_of_its_max_steps_is_unfinished():
    no_exit = Ending("unfinished", "W&B has no exit record: still running, or stopped before wandb.finish()",
                     "run-abc.wandb", 100)
    ending = settle(no_exit, {"config": {"max_steps": 400}}, 100, 1)      # HF's W&B callback logs its args
    assert ending.stopped_short and ending.planned == 400 and "W&B has no exit record" in ending.message
    assert not settle(no_exit, {"config": {"max_steps": 400}}, 400, 1).stopped_short
