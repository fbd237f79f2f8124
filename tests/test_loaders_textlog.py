"""Console logs recognised by content: Megatron, DeepSpeed-Chat, llm.c, verl console, HF Trainer dict lines.
Real logs are read from shared/real_logs (skipped when that folder is absent), never copied here.
The HF console in the wild, hand-written loops and program output that is no log have their own files:
test_loaders_console_hf.py, test_loaders_console_loops.py, test_loaders_console_noise.py."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from stabdiag.errors import InputError
from stabdiag.judge.engine import diagnose
from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats import text as textlog
from stabdiag.read.formats.text import hf_console
from stabdiag.signals.resolve import resolve

REAL = Path(__file__).resolve().parents[2] / "shared" / "real_logs"
real = pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_logs not present")

def _megatron_line(it: int, rest: str) -> str:
    return (f" iteration {it:>8}/    1000 | consumed samples:  3200 | elapsed time per iteration (ms): 1000.0 | "
            + rest)


_TAIL = "num zeros: 0.0 | number of skipped iterations:   {skip} | number of nan iterations:   {nan} |"
MEGATRON = "\n".join([
    _megatron_line(100, "learning rate: 6.000E-05 | global batch size:    32 | lm loss: 3.100000E+00 | "
                        "loss scale: 4096.0 | grad norm: 1.500 | " + _TAIL.format(skip=0, nan=0)),
    "time (ms)",
    "[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 Skipping step.",
    # a record wrapped by the terminal, once after a space and once where the space was lost
    _megatron_line(101, "learning"),
    " rate: 6.000E-05 | global batch size:    32 | lm loss: 3.000000E+00 | loss scale: 2048.0 | "
    "grad norm: 1.400 | num zeros: 0.0 | number of skipped iterations:   1 | number of nan",
    "iterations:   0 |",
    "-" * 96,
    " validation loss at iteration 101 | lm loss value: 3.200000E+00 | lm loss PPL: 2.453253E+01 |",
    "-" * 96,
    # lm loss left out: the interval had no finite loss
    _megatron_line(102, "learning rate: 6.000E-05 | global batch size:    32 | loss scale: 1024.0 | "
                        "grad norm: 0.000 | " + _TAIL.format(skip=0, nan=1)),
]) + "\n"

DSCHAT = """\
***** Running training *****
[2023-04-18 08:48:01,543] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step.
epoch: 0|step: 0|ppo_ep: 1|act_loss: 0.21|cri_loss: 0.15|unsuper_loss: 0.0
average reward score: -0.68
-------------------------------------------------------------------------------------
|E2E latency=3.72s |Gather latency=0.00s (0.00%) |Generate time=2.43s (65.28%)
epoch: 0|step: 1|ppo_ep: 1|act_loss: nan|cri_loss: 0.1|unsuper_loss: 0.0
average reward score: 0.5
epoch: 1|step: 0|ppo_ep: 1|act_loss: 0.1|cri_loss: 0.1|unsuper_loss: 0.0
average reward score: 1.5
"""

LLMC = "s:0 tel:11.0092\ns:0 trl:11.0091 lr:0.000001 norm:15.37\ns:1 trl:10.9598 lr:0.000002 norm:nan\n" \
       "some other line\ns:250 tel:6.1710\n"

VERL = """\
(main_task pid=1234) step:1 - actor/entropy:0.53 - actor/kl_loss:0.001 - critic/score/mean:0.2 - actor/pg_clipfrac:0.01
(main_task pid=1234) INFO something unrelated
step:2 - actor/entropy:0.50 - actor/kl_loss:nan - critic/score/mean:0.3 - actor/pg_clipfrac:0.02 - actor/pg_loss:-0.5
"""

HF_CONSOLE = """\
logging_steps=500,
***** Running training *****
  Num examples = 3,290
  Num Epochs = 10
  Total optimization steps = 5,490
{'loss': 1.1409, 'grad_norm': 2.757542133331299, 'learning_rate': 1.8e-05, 'epoch': 0.91}
 10%|#         | 549/5490 [1:00:00<9:00:00,  1.00it/s]
{'eval_loss': 0.6597, 'eval_rouge-1': 46.54, 'eval_runtime': 2725.7, 'epoch': 1.0}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1.6e-05, 'epoch': 1.82}
{'train_runtime': 100.0, 'train_loss': 0.5, 'epoch': 10.0}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_megatron_console_wrapped_lines_validation_and_missing_loss(tmp_path):
    path = write(tmp_path, "train.log", MEGATRON)
    assert loaders.loader_for(path) is textlog
    run = textlog.load(path)
    loss = run.series["lm loss"]
    assert list(loss.steps) == [100, 101, 102] and math.isnan(loss.values[-1])
    assert list(run.series["loss scale"].values) == [4096.0, 2048.0, 1024.0]
    assert list(run.series["number of nan iterations"].values) == [0, 0, 1]
    assert list(run.series["number of skipped iterations"].values) == [0, 1, 0]
    assert run.series["learning rate"].values[1] == pytest.approx(6e-5)   # wrapped "learning\n rate"
    assert list(run.series["grad norm"].steps) == [100, 101]             # 0.000 = not computed
    assert run.series["lm loss validation"].values[0] == pytest.approx(3.2)
    notes = " ".join(run.notes)
    assert "no lm loss at iteration(s) 102" in notes and "OVERFLOW" in notes and "0.000" in notes
    sig = resolve(run)
    assert sig.framework == "Megatron-LM"
    assert sig.mapping()["eval_loss"] == "lm loss validation" and sig.mapping()["loss_scale"] == "loss scale"


def test_megatron_nan_loss_is_a_layer3_failure(tmp_path):
    diag = diagnose(textlog.load(write(tmp_path, "train.log", MEGATRON)))
    assert diag.root_layer == 3 and diag.first_nonfinite_step == 102


def test_dschat_console(tmp_path):
    path = write(tmp_path, "actor.log", DSCHAT)
    run = textlog.load(path)
    assert list(run.series["average reward score"].steps) == [0, 1, 2]   # epoch 1 continues the count
    assert math.isnan(run.series["act_loss"].values[1])
    sig = resolve(run)
    assert sig.framework == "DeepSpeed-Chat"
    assert sig.mapping()["reward"] == "average reward score" and sig.mapping()["loss"] == "act_loss"
    assert any("overflow" in n for n in run.notes) and any("read 6 metric line" in n for n in run.notes)


def test_llmc_main_log(tmp_path):
    run = textlog.load(write(tmp_path, "main.log", LLMC))
    assert list(run.series["tel"].steps) == [0, 250]
    assert math.isnan(run.series["norm"].values[1])
    sig = resolve(run)
    assert sig.framework == "llm.c"
    assert sig.mapping() == {"eval_loss": "tel", "loss": "trl", "grad_norm": "norm", "lr": "lr"}
    assert "skipped 1 other line" in run.notes[0]


def test_verl_console_with_and_without_prefix(tmp_path):
    run = textlog.load(write(tmp_path, "verl.out", VERL))
    assert list(run.series["critic/score/mean"].steps) == [1, 2]
    assert math.isnan(run.series["actor/kl_loss"].values[1])
    assert resolve(run).framework == "verl"


def test_hf_console_dicts_step_from_banner_and_nan_filter_trap(tmp_path):
    run = textlog.load(write(tmp_path, "console.txt", HF_CONSOLE))
    assert list(run.series["loss"].steps) == [500, 1000]             # 1.82 x 549 snapped to logging_steps
    assert math.isnan(run.series["loss"].values[1])                      # 0.0 beside grad_norm nan
    assert list(run.series["eval_loss"].steps) == [549]
    assert "train_runtime" not in run.series
    assert any("logging_nan_inf_filter" in n for n in run.notes)


def test_hf_console_without_banner_counts_lines(tmp_path):
    text = "{'loss': 2.0, 'grad_norm': 1.0, 'learning_rate': 1e-5, 'epoch': 0.1}\n" \
           "{'loss': 1.5, 'grad_norm': 1.0, 'learning_rate': 1e-5, 'epoch': 0.2}\n"
    run = textlog.load(write(tmp_path, "out.txt", text))
    assert list(run.series["loss"].steps) == [1, 2]


def test_hf_console_beside_trainer_state_joins_it_as_one_run(tmp_path):
    path = write(tmp_path, "cmd.txt", HF_CONSOLE)
    write(tmp_path, "trainer_state.json", '{"global_step": 1098, "log_history": ['
          '{"loss": 1.1409, "grad_norm": 2.757542133331299, "learning_rate": 1.8e-05, "epoch": 0.91, "step": 500}]}')
    assert textlog.can_load(path)
    [run] = assemble.load(str(tmp_path))
    assert len(run.sources) == 2 and not run.resumed
    assert run.series["loss"].steps[0] == 500 and run.series["loss"].source == "trainer_state.json (+cmd.txt)"


@real
def test_real_hf_console_and_trainer_state_are_one_run():
    [run] = assemble.load(str(REAL / "hf_trainer_cpt_feedback_gen"))
    assert {os.path.basename(s) for s in run.sources} == {"trainer_state.json", "cmd.txt"}
    assert not run.resumed and not [n for n in run.notes if "disagree" in n]


@pytest.mark.parametrize("name,content", [
    ("notes.txt", "just some prose\nwith no metrics in it\n"),
    ("README.md", MEGATRON),                      # documentation quoting a log is not a log
    ("empty.log", ""),
    ("weights.bin", "\x00\x01binary"),
])
def test_files_it_cannot_read_are_not_claimed(tmp_path, name, content):
    assert not textlog.can_load(write(tmp_path, name, content))


def test_directory_is_not_claimed(tmp_path):
    assert not textlog.can_load(str(tmp_path))


def test_tabular_extensions_stay_with_tabular(tmp_path):
    path = write(tmp_path, "m.csv", "step,loss\n1,2.0\n")
    assert loaders.loader_for(path).__name__.endswith("tabular")


def test_noise_only_directory_has_no_runs(tmp_path):
    write(tmp_path, "stderr.txt", "Traceback (most recent call last):\n  boom\n")
    with pytest.raises(Exception, match="no metric logs"):
        assemble.discover(str(tmp_path))


# ---------------------------------------------------------------- real logs (shared/real_logs)

def _load(folder: str):
    runs = assemble.load(str(REAL / folder))
    assert len(runs) == 1
    return runs[0]


@real
@pytest.mark.parametrize("folder", ["bigscience_tr8_104B_wide_divergence", "bigscience_tr8b_104B_spikes",
                                    "bigscience_tr11_176B_bloom_spike", "bigscience_tr1_13B_glitches"])
def test_real_megatron_logs_load(folder):
    run = _load(folder)
    sig = resolve(run)
    assert sig.framework == "Megatron-LM"
    assert sig.mapping()["loss"] == "lm loss" and sig.mapping()["lr"] == "learning rate"
    assert not [f for f in os.listdir(REAL / folder) if f.endswith(".md") and str(REAL / folder / f) in run.sources]


@real
def test_real_tr8_divergence_to_nan_is_layer3():
    diag = diagnose(_load("bigscience_tr8_104B_wide_divergence"))
    assert diag.root_layer == 3 and diag.first_nonfinite_step == 9027
    assert any(f.rule == "L3.nonfinite-values" and "9027" in f.message for f in diag.findings)


@real
def test_real_tr8b_spikes_are_layer3():
    diag = diagnose(_load("bigscience_tr8b_104B_spikes"))
    assert diag.root_layer == 3
    assert any(f.rule == "L3.grad-norm-spike" for f in diag.findings)


@real
def test_real_bloom_wrapped_lines_and_validation():
    run = _load("bigscience_tr11_176B_bloom_spike")
    assert 42783 in run.series["lm loss"].steps                         # a block wrapped at 160 columns
    assert run.series["lm loss validation"].values[0] == pytest.approx(2.327091)
    diag = diagnose(run)
    # the grad norm goes 0.24, 0.95, 2.39 (31216: 9.4x its EMA, past the run's bar), 15.9, 145, 960
    assert diag.root_layer == 3 and any(f.start_step == 31216 for f in diag.findings)


@real
def test_real_tr1_zero_grad_norms_are_left_out():
    run = _load("bigscience_tr1_13B_glitches")
    assert list(run.series["grad norm"].steps) == [43680]
    assert run.series["lm loss"].values.max() == pytest.approx(8.715872)


@real
def test_real_llmc_main_log_passes():
    run = _load("llmc_gpt2_124m_baseline")
    assert len(run.series["trl"]) == 19560 and run.series["tel"].values[-1] == pytest.approx(3.2722)
    diag = diagnose(run)
    # nothing fails; two absorbed 5.3x grad-norm spikes warn (see test_real_logs.py)
    assert diag.verdict in ("pass", "warn") and {f.rule for f in diag.findings} <= {"L3.grad-norm-spike"}
    assert any("layer 1 reads its eval loss" in n and "layers 2 and 4" in n for n in diag.notes)     # val loss


@real
def test_real_dschat_ppo_passes():
    run = _load("dschat_ppo_opt1.3b")
    sig = resolve(run)
    assert sig.framework == "DeepSpeed-Chat" and len(sig.series["reward"]) == 477
    assert np.isfinite(sig.series["reward"].values).all()
    assert diagnose(run).root_layer is None


def test_megatron_same_line_from_two_ranks_is_not_a_resume(tmp_path):
    line = _megatron_line(5, "learning rate: 1.000E-04 | lm loss: 2.000000E+00 | grad norm: 1.000 |")
    run = textlog.load(write(tmp_path, "train.log", f"[default0]:{line}\n[default7]:{line}\n"))
    assert not run.resumed and len(run.series["lm loss"]) == 1


def test_empty_directory_has_no_runs(tmp_path):
    with pytest.raises(Exception, match="no metric logs"):
        assemble.discover(str(tmp_path))


def test_megatron_restart_replaying_iterations_is_a_resume(tmp_path):
    first = _megatron_line(5, "learning rate: 1.000E-04 | lm loss: 2.000000E+00 | grad norm: 1.000 |")
    again = _megatron_line(5, "learning rate: 1.000E-04 | lm loss: 2.500000E+00 | grad norm: 1.000 |")
    run = textlog.load(write(tmp_path, "train.log", f"{first}\nrestarting from checkpoint\n{again}\n"))
    assert run.resumed and run.series["lm loss"].values[-1] == 2.5


def test_metric_lines_after_a_long_startup_dump_are_found(tmp_path):
    path = write(tmp_path, "slurm-1.out", "arg = value\n" * 20000 + LLMC)   # ~240 KB before the first line
    assert textlog.can_load(path) and "trl" in textlog.load(path).series


def test_hf_console_records_the_step_axis_and_the_summary(tmp_path):
    run = textlog.load(write(tmp_path, "console.txt", HF_CONSOLE))
    assert run.meta["step_axis"] == "epoch" and run.meta["steps_per_epoch"] == 549
    assert run.meta["summary"] == {"train_runtime": 100.0, "train_loss": 0.5, "epoch": 10.0}


def test_a_reader_slip_is_an_input_error_naming_the_file(tmp_path, monkeypatch):
    def slip(path, text):
        raise ValueError("could not convert string to float: 'x'")

    monkeypatch.setattr(hf_console, "read", slip)
    with pytest.raises(InputError, match=r"console.txt: could not be read as HF Trainer console \(ValueError"):
        textlog.load(write(tmp_path, "console.txt", HF_CONSOLE))
