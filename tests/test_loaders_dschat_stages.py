"""DeepSpeed-Chat step 1 (SFT) and step 2 (reward model, DPO) consoles.  The inputs are built from the
lines DS-Chat's main.py and DeepSpeed print (the reference logs' own lines); the published logs are read
from shared/real_healthy (skipped when that folder is absent), never copied here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stabdiag.read import assemble
from stabdiag.read.formats import text as textlog
from stabdiag.read.formats.text import dschat
from stabdiag.signals.resolve import resolve

HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy" / "dschat"
real = pytest.mark.skipif(not HEALTHY.is_dir(), reason="shared/real_healthy not present")

_PREFIX = "[2023-04-18 01:46:59,171] [INFO] "


def _timer(micro, step, curr=171.9):
    return (f"{_PREFIX}[timer.py:199:stop] epoch=0/micro_step={micro}/global_step={step}, "
            f"RunningAvgSamplesPerSec=173.44, CurrSamplesPerSec={curr}, MemAllocated=3.96GB, MaxMemAllocated=22.95GB")


def _lr(step, lr, skipped=0):
    return (f"{_PREFIX}[logging.py:96:log_dist] [Rank 0] step={step}, skipped={skipped}, lr=[{lr}, {lr}], "
            "mom=[(0.9, 0.95)]")


SFT = "\n".join([
    "cmd = deepspeed main.py --data_path Dahoas/rm-static --num_train_epochs 2 --gradient_accumulation_steps 1",
    "***** Running training *****",
    "***** Evaluating perplexity, Epoch 0/2 *****",
    "ppl: 4998.29638671875",
    "Beginning of Epoch 1/2, Total Micro Batches 20",
    f"{_PREFIX}[loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale",
    _timer(10, 10), _lr(10, 9.6e-06, 1), _timer(10, 10),          # every rank prints the timer line
    _timer(20, 20),
    "***** Evaluating perplexity, Epoch 1/2 *****",
    "ppl: 2.0179834365844727",
    "Beginning of Epoch 2/2, Total Micro Batches 20",
    _timer(30, 30), _timer(40, 40, 170.5),
    "***** Evaluating perplexity, Epoch 2/2 *****",
    "ppl: 1.9718239307403564",
    "saving the final model ...",
]) + "\n"

RM = "\n".join([
    "***** Evaluating reward, Epoch 0/1 *****",
    "chosen_last_scores (higher is better) : 2.8115079402923584, acc (higher is better) : 0.4924241304397583",
    "Beginning of Epoch 1/1, Total Micro Batches 1840",
    _timer(10, 10), _timer(1840, 1840),
    "Epoch 1/1 with loss 0.5754789632299672",
    "***** Evaluating reward, Epoch 1/1 *****",
    "chosen_last_scores (higher is better) : 2.243525981903076, acc (higher is better) : 0.6994950175285339",
]) + "\n"

DPO = "\n".join([
    "***** Running training *****",
    "***** Evaluating rewards, Epoch 0/1 *****",
    "chosen: -30.5, rejected: -30.5, loss: 0.6931471824645996",
    "Beginning of Epoch 1/1, Total Micro Batches 8",
    # --print_loss: every rank prints its micro-batch loss (as a tensor); two micro-batches per update
    "Epoch: 0, Step: 0, Rank: 0, loss = tensor(0.6931, device='cuda:0', grad_fn=<MeanBackward1>)",
    "Epoch: 0, Step: 0, Rank: 1, loss = tensor(0.9000, device='cuda:1', grad_fn=<MeanBackward1>)",
    "Epoch: 0, Step: 1, Rank: 0, loss = tensor(0.6731, device='cuda:0', grad_fn=<MeanBackward1>)",
    "Model Parameters: 0.331 B, Latency: 0.54s, TFLOPs: 0.52, Samples/sec: 3.68, Time/seq 0.27s, Batch Size: 2",
    "Epoch: 0, Step: 2, Rank: 0, loss = tensor(0.6500, device='cuda:0', grad_fn=<MeanBackward1>)",
    "Epoch: 0, Step: 3, Rank: 0, loss = tensor(0.6300, device='cuda:0', grad_fn=<MeanBackward1>)",
    _timer(4, 2, 46.8), _lr(2, 4.5e-05),
    "Epoch: 0, Step: 4, Rank: 0, loss = tensor(nan, device='cuda:0', grad_fn=<MeanBackward1>)",
    "Epoch: 0, Step: 5, Rank: 0, loss = tensor(0.6000, device='cuda:0', grad_fn=<MeanBackward1>)",
    "***** Evaluating rewards, Epoch 1/1 *****",
    "chosen: -31.9375, rejected: -33.96875, loss: 0.6650807857513428",
]) + "\n"


def _load(tmp_path, text, name="training.log"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return textlog.load(str(path))


def test_sft_evaluations_sit_where_their_epoch_ended(tmp_path):
    run = _load(tmp_path, SFT)
    assert run.meta["format"] == "DeepSpeed-Chat SFT/reward/DPO console"
    ppl = run.series["eval_ppl"]
    assert ppl.steps.tolist() == [0, 20, 40] and ppl.values[1] == pytest.approx(2.01798, rel=1e-5)
    # the perplexity is exp(mean eval loss): the loss is its log
    assert run.series["eval_loss"].values[2] == pytest.approx(math.log(1.9718239307403564))
    assert any("eval_loss = ln(ppl)" in n for n in run.notes)
    assert run.series["samples_per_second"].steps.tolist() == [10, 20, 30, 40]
    assert run.series["lr"].values.tolist() == [9.6e-06]
    assert any("1 fp16 loss-scale overflow" in n for n in run.notes)
    assert not run.resumed and run.meta["planned_epochs"] == 2
    assert resolve(run).get("eval_loss").key == "eval_loss"


def test_reward_model_accuracy_and_scores(tmp_path):
    run = _load(tmp_path, RM)
    assert run.series["eval_accuracy"].values.tolist() == pytest.approx([0.49242413, 0.69949502])
    assert run.series["eval_chosen_score"].steps.tolist() == [0, 1840]
    assert run.series["train_loss"].steps.tolist() == [1840]


def test_dpo_rewards_and_rank0_micro_batch_losses(tmp_path):
    run = _load(tmp_path, DPO)
    assert run.series["eval_chosen_reward"].values.tolist() == [-30.5, -31.9375]
    assert run.series["eval_rejected_reward"].values[-1] == -33.96875
    assert run.series["eval_loss"].steps.tolist() == [0, 2]     # the last global step printed before it
    loss = run.series["loss"]
    # 2 micro-batches per update (micro_step 4 / global_step 2); rank 1's 0.9 is not read
    assert loss.steps.tolist() == [1, 2, 3]
    assert loss.values[0] == pytest.approx((0.6931 + 0.6731) / 2)
    assert math.isnan(loss.values[2])                          # a NaN micro-batch loss is a finding
    assert "eval_ppl" not in run.series


@pytest.mark.parametrize("last_step", [50, 2 ** 55])
def test_timer_and_lr_columns_equal_the_points_added_one_by_one(tmp_path, monkeypatch, last_step):
    # the timer and lr lines are gathered per key and converted at the end; ranks repeating a line,
    # a NaN repeated, a rewrite and a step going back must come out as Points gives them one by one.
    # A step past the step range sends every line through Points (which notes the one it leaves out)
    lines = [_timer(10, 10), _timer(10, 10), _timer(20, 20, "nan"), _timer(20, 20, "NaN"), _timer(20, 20, 99.0),
             _lr(20, 1e-5), _lr(20, 1e-5), _lr(30, 2e-5), _timer(30, 30), _timer(20, 20, 50.0),
             _lr(last_step, 3e-5), _timer(last_step, last_step)]
    path = tmp_path / "training.log"
    path.write_text(SFT + "\n".join(lines) + "\n***** Evaluating perplexity, Epoch 3/3 *****\nppl: 1.5\n",
                    encoding="utf-8")
    columns = textlog.load(str(path))
    monkeypatch.setattr(dschat, "_in_step_range", lambda columns: False)
    one_by_one = textlog.load(str(path))
    assert list(columns.series) == list(one_by_one.series)
    for key, series in columns.series.items():
        other = one_by_one.series[key]
        assert series.steps.tolist() == other.steps.tolist(), key
        np.testing.assert_array_equal(series.values, other.values)
        np.testing.assert_array_equal(series.superseded_steps, other.superseded_steps)
        np.testing.assert_array_equal(series.superseded_values, other.superseded_values)
        assert series.stepped_back == other.stepped_back
    assert columns.notes == one_by_one.notes
    sps = columns.series["samples_per_second"]
    assert sps.superseded_values.size and np.isnan(sps.superseded_values).sum() == 1    # NaN NaN is one write
    assert (last_step > 2 ** 53) == any("left out" in n for n in columns.notes)


def test_timer_lines_alone_are_left_to_the_other_readers(tmp_path):
    # an HF Trainer run under DeepSpeed prints the same timer lines: no DS-Chat header, not this format
    text = "\n".join([_timer(10 * i, 10 * i) for i in range(1, 6)]) + "\n"
    assert textlog._format_of(text) != "dschat_stage"


@real
def test_the_reference_sft_and_reward_logs():
    [sft] = assemble.load(str(HEALTHY / "step1_sft_opt1.3b"))
    assert len(sft.series["eval_ppl"]) == 17 and sft.series["eval_ppl"].steps[-1] == 7360
    [rm] = assemble.load(str(HEALTHY / "step2_rm_opt350m"))
    assert rm.series["eval_accuracy"].values[-1] == pytest.approx(0.6994950175285339)
