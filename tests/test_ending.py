"""How a run ended, from the tail of its console log and W&B's exit record (issue 18, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stabdiag.judge.engine import diagnose
from stabdiag.read.assemble import load
from stabdiag.read.ending import Ending, ending_of_wandb, pick
from stabdiag.read.ending.console import ending_of_console

FIXTURES = Path(__file__).parent / "fixtures" / "framework_runs"
REAL = Path(__file__).resolve().parents[2] / "shared" / "real_logs"

RECORD = "{'loss': '0.0213', 'grad_norm': '0.353', 'learning_rate': '0.00088', 'epoch': '0.06'}\n"
OOM = """Traceback (most recent call last):
  File "train.py", line 88, in <module>
    trainer.train()
  File "/usr/lib/python3.11/site-packages/torch/utils/checkpoint.py", line 1145, in backward
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB
"""
NCCL = ("[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1203, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800063 "
        "milliseconds before timing out.\n")
KILLED = "slurmstepd: error: *** JOB 48213 ON node17 CANCELLED AT 2026-11-02T03:14:15 DUE TO TIME LIMIT ***\n"


@pytest.mark.parametrize("tail,kind", [
    (OOM, "oom"), (NCCL, "collective"), (KILLED, "killed"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'reward'\n", "exception"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: loss is nan, stopping\n",
     "nonfinite"),
    ("{'train_runtime': '12.5', 'train_samples_per_second': '3.1', 'train_loss': '1.2', 'epoch': '1.0'}\n",
     "finished"),
])
def test_the_tail_says_how_the_run_ended(tail, kind):
    ending = ending_of_console(RECORD * 5 + tail, "console.log")
    assert ending is not None and ending.kind == kind and ending.source == "console.log"


@pytest.mark.parametrize("line,kind", [
    ("KİLLED", "killed"),                              # the Kelvin sign and İ: re's IGNORECASE folds them to k, i
    ("slurmstepd: ſIGTERM received", "killed"), ("Worker 7 was LOST", "collective"), ("nvlink ERROR", "hardware"),
    ("RuntimeError: CUDA Out Of Memory", "oom"), ("the worker count is 8", None), ("8 signals", None),
])
def test_a_cause_is_found_in_any_case_and_a_line_that_only_looks_like_one_is_not(line, kind):
    # a tail is searched only where it holds a cause's literal, case-folded as re folds it (console_ending._LITERALS)
    ending = ending_of_console(RECORD * 5 + "saving the model\n" + line + "\n", "console.log")
    assert (ending.kind if ending is not None else None) == kind


def test_a_traceback_that_training_went_past_is_not_the_ending():
    text = RECORD + OOM + RECORD * 3
    assert ending_of_console(text, "console.log") is None


def test_wandb_exit_records():
    assert ending_of_wandb({"format": "wandb", "exit_code": 0}, "w").kind == "finished"
    assert ending_of_wandb({"format": "wandb", "exit_code": 1}, "w").kind == "exception"
    assert ending_of_wandb({"format": "wandb", "finished": False}, "w").kind == "unfinished"
    # the console's cause beats W&B's bare exit code; anything beats "unfinished"
    best = pick([Ending("exception", "W&B recorded exit code 1", "w"), Ending("oom", "CUDA out of memory", "c")])
    assert best.kind == "oom"
    assert pick([Ending("unfinished", "", "w"), Ending("finished", "", "c")]).kind == "finished"


def test_the_real_crash_fixture_fails_at_layer_3_and_a_finished_run_does_not():
    [crash] = load(str(FIXTURES / "grpo_crash"))
    diag = diagnose(crash)
    assert diag.verdict == "fail" and diag.root_layer == 3
    assert [f.rule for f in diag.findings] == ["L3.crashed-on-nonfinite"]
    [healthy] = load(str(FIXTURES / "grpo_healthy"))
    assert diagnose(healthy).ending.kind == "finished"


@pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_logs not present")
def test_a_real_hardware_crash_is_the_training_systems():
    [run] = load(str(REAL / "bigscience_tr1_13B_glitches"))
    diag = diagnose(run)
    assert diag.ending.kind == "hardware" and "ECC" in diag.ending.message
    assert "L4.job-died" in {f.rule for f in diag.findings}
