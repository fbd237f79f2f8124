"""Consoles of hand-written training loops: every excerpt is real text, named where it was seen.

The line shapes the reader must take (a step counter and `key: value` / `key=value` / `key value`
pairs, or a record repeated once per step with no step at all) and the numbers it must never take
(timestamps, dates, versions, logger prefixes, progress bars, the epoch fraction).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import stabdiag
from stabdiag.read.formats import loader_for
from stabdiag.read.formats import text as textlog
from stabdiag.read.formats.text import _console, _loop_line, _loop_templates, loop
from stabdiag.signals.resolve import resolve

# "GRPO from scratch" notebook, its training cell's output: "Average Reward" is printed while a step
# runs, before the step's line
# (aburkov/theLMbook, GRPO_From_Scratch_Multi_GPU_DataParallel_Qwen_2_5_1_5B_Instruct.ipynb)
LMBOOK_GRPO = (
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 0.714285671710968\n'
    'Iteration 1/1, Step 1/500, GRPO iter 1/1, loss: 0.0000\n'
    'Input batch size: 7, Device before model: cuda:0\n'
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 0.7511904835700989\n'
    'Iteration 1/1, Step 2/500, GRPO iter 1/1, loss: 0.0000\n'
    'Input batch size: 7, Device before model: cuda:0\n'
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 1.1464285850524902\n'
    'Iteration 1/1, Step 3/500, GRPO iter 1/1, loss: 0.0001\n'
    'Input batch size: 7, Device before model: cuda:0\n'
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 1.3392857313156128\n'
    'Iteration 1/1, Step 4/500, GRPO iter 1/1, loss: 0.0002\n'
    'Input batch size: 7, Device before model: cuda:0\n'
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 1.4964286088943481\n'
    'Iteration 1/1, Step 5/500, GRPO iter 1/1, loss: 0.0003\n'
    'Input batch size: 7, Device before model: cuda:0\n'
    'Output batch size: 84, Device after model: cuda:0\n'
    'Average Reward: 1.8345239162445068\n'
    'Iteration 1/1, Step 6/500, GRPO iter 1/1, loss: 0.0003\n'
    'Input batch size: 7, Device before model: cuda:0\n'
)

# a GRPO loop that prints no step: one "Percentage of correct examples" per rollout step, among GPU
# memory traces, per-microbatch lines and sample dumps
# (damek/assignment5-alignment, cs336_alignment/outputs/grpo_train_loop_log.txt, lines 28-45, 800-812,
# 885-900 and 1660-1668)
DAMEK_GRPO = (
    '[MEM cuda:1][EI step start (before rollouts)] alloc=6.17 GB  reserved=6.19 GB  peak=6.17 GB\n'
    '[MEM cuda:1][after HF policy load] alloc=6.17 GB  reserved=6.19 GB  peak=6.17 GB\n'
    'Processed prompts:  12%|▌   | 32/256 [00:08<00:57,  3.92it/s, est. speed input: 591.13 toks/s, output: 717'
    '4.93 toks/s]\n'
    "You're using a Qwen2TokenizerFast tokenizer. Please note that with a fast tokenizer, using the `__call__` "
    'method is faster than using a method to encode the text followed by a call to the `pad` method to get a pa'
    'dded encoding.\n'
    "histogram:  {'correct with both format and answer reward 1': 17, 'format reward 1 and answer reward 0': 38"
    ", 'format reward 0 and answer reward 0': 201}\n"
    'Percentage of correct examples:  0.06640625\n'
    'GRPO Iteration:  0 Epoch:  0 Microbatch:  0 / 128\n'
    '[MEM cuda:1][tokenized (B=2, T=1233)] alloc=6.18 GB  reserved=6.19 GB  peak=6.18 GB\n'
    '[MEM cuda:1][after forward] alloc=21.88 GB  reserved=22.05 GB  peak=22.02 GB\n'
    '[MEM cuda:1][after logprob gather] alloc=21.88 GB  reserved=23.54 GB  peak=23.38 GB\n'
    '[MEM cuda:1][Before grpo microbatch train step] alloc=21.88 GB  reserved=23.54 GB  peak=23.38 GB\n'
    '[MEM cuda:1][After grpo microbatch train step] alloc=12.37 GB  reserved=28.05 GB  peak=27.88 GB\n'
    'GRPO Iteration:  0 Epoch:  0 Microbatch:  1 / 128\n'
    '[MEM cuda:1][tokenized (B=2, T=1233)] alloc=12.37 GB  reserved=28.05 GB  peak=27.88 GB\n'
    '[MEM cuda:1][after forward] alloc=28.06 GB  reserved=28.34 GB  peak=28.21 GB\n'
    '[MEM cuda:1][after logprob gather] alloc=28.06 GB  reserved=29.83 GB  peak=29.56 GB\n'
    '[MEM cuda:1][Before grpo microbatch train step] alloc=28.06 GB  reserved=29.83 GB  peak=29.56 GB\n'
    '[MEM cuda:1][After grpo microbatch train step] alloc=12.37 GB  reserved=34.34 GB  peak=34.06 GB\n'
    '[MEM cuda:1][Before grpo microbatch train step] alloc=28.06 GB  reserved=34.34 GB  peak=34.06 GB\n'
    '[MEM cuda:1][After grpo microbatch train step] alloc=12.37 GB  reserved=34.34 GB  peak=34.06 GB\n'
    '[MEM cuda:1][after step] alloc=18.55 GB  reserved=34.34 GB  peak=34.06 GB\n'
    'GRPO Iteration 0, Epoch 0, Evaluating...\n'
    'Processed prompts: 100%|█| 1319/1319 [00:34<00:00, 38.73it/s, est. speed input: 5966.24 toks/s, output: 82'
    '43.83 toks/s\n'
    '/workspace/assignment5-alignment/cs336_alignment/utils.py:321: UserWarning: To copy construct from a tenso'
    'r, it is recommended to use sourceTensor.clone().detach() or sourceTensor.clone().detach().requires_grad_('
    'True), rather than torch.tensor(sourceTensor).\n'
    '  L = torch.tensor(response_length, dtype=torch.float32)\n'
    "histogram:  {'correct with both format and answer reward 1': 54, 'format reward 1 and answer reward 0': 27"
    "1, 'format reward 0 and answer reward 0': 994}\n"
    'Percentage of correct examples:  0.04094010614101592\n'
    'Question:  A conversation between User and Assistant. The User asks a question, and the Assistant solves i'
    't. The Assistant first thinks about the reasoning process in the mind and then provides the User with the '
    'answer. The reasoning process is enclosed within <think> </think> and answer is enclosed within <answer> <'
    '/answer> tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>.'
    '\n'
    "User: Eliza's rate per hour for the first 40 hours she works each week is $10. She also receives an overti"
    'me pay of 1.2 times her regular hourly rate. If Eliza worked for 45 hours this week, how much are her earn'
    'ings for this week?\n'
    'Assistant: <think>\n'
    "Generation:  Let's calculate Eliza's earnings for the first 40 hours by multiplying her hourly rate of $10"
    ' by 40 hours. So, 40 hours * $10/hour = $400. For the 5 hours of overtime, we multiply her hourly rate by '
    '1.2 and then by 5 hours. So, 1.2 * $10/hour * 5 hours = $60. Therefore, her total earnings for the week ar'
    'e the sum of her regular earnings and overtime earnings, which is $400 + $60 = $460. </think> <answer>$460'
    ' </answer>\n'
    'Assistant: <think>\n'
    "Generation:   Jill's earnings from teaching are calculated by multiplying her hourly rate by the number of"
    ' hours she works as a teacher per week, then multiplying that by the number of weeks she works in a year. '
    'This gives us her total earnings from teaching. Similarly, we calculate her earnings from coaching. By add'
    "ing these two amounts, we find her total annual salary. </think> <answer> Let's calculate step by step. Fo"
    'r teaching, Jill earns $20 per hour for 35 hours a week, which totals to $20 \\times 35 = $700 per week. O'
    'ver 50 weeks, this amounts to $700 \\times 50 = $35,000. For coaching, she earns $30 per hour for 15 hours'
    ' a week, which totals to $30 \\times 15 = $450 per week. Over 50 weeks, this amounts to $450 \\times 50 = '
    "$22,500. Adding these two amounts, Jill's total annual salary from both positions is $35,000 + $22,500 = $"
    '57,500. </answer>\n'
    "Metrics:  {'format_reward': 1.0, 'answer_reward': 0.0, 'reward': 0.0}\n"
    'GT Answer:  57500\n'
    '--------------------------------\n'
    '[MEM cuda:1][after HF policy load] alloc=18.55 GB  reserved=34.34 GB  peak=34.06 GB\n'
    'Processed prompts:  12%|▌   | 32/256 [00:07<00:55,  4.00it/s, est. speed input: 580.39 toks/s, output: 705'
    '6.26 toks/s]\n'
    "histogram:  {'correct with both format and answer reward 1': 11, 'format reward 1 and answer reward 0': 54"
    ", 'format reward 0 and answer reward 0': 191}\n"
    'Percentage of correct examples:  0.04296875\n'
    'GRPO Iteration:  1 Epoch:  0 Microbatch:  0 / 128\n'
    '[MEM cuda:1][tokenized (B=2, T=1188)] alloc=18.55 GB  reserved=34.34 GB  peak=34.06 GB\n'
    '[MEM cuda:1][after forward] alloc=33.67 GB  reserved=34.34 GB  peak=34.06 GB\n'
    '[MEM cuda:1][after logprob gather] alloc=33.67 GB  reserved=35.49 GB  peak=35.11 GB\n'
    '[MEM cuda:1][Before grpo microbatch train step] alloc=33.67 GB  reserved=35.49 GB  peak=35.11 GB\n'
    '[MEM cuda:1][After grpo microbatch train step] alloc=24.72 GB  reserved=39.83 GB  peak=39.44 GB\n'
    'GRPO Iteration:  1 Epoch:  0 Microbatch:  1 / 128\n'
    '[MEM cuda:1][Before grpo microbatch train step] alloc=39.84 GB  reserved=45.94 GB  peak=45.62 GB\n'
    '[MEM cuda:1][After grpo microbatch train step] alloc=24.72 GB  reserved=45.94 GB  peak=45.62 GB\n'
    '[MEM cuda:1][after step] alloc=18.55 GB  reserved=45.94 GB  peak=45.62 GB\n'
    '[MEM cuda:1][after HF policy load] alloc=18.55 GB  reserved=45.94 GB  peak=45.62 GB\n'
    'Processed prompts:  12%|▌   | 32/256 [00:08<01:00,  3.72it/s, est. speed input: 570.53 toks/s, output: 623'
    '2.15 toks/s]\n'
    "histogram:  {'correct with both format and answer reward 1': 26, 'format reward 1 and answer reward 0': 61"
    ", 'format reward 0 and answer reward 0': 169}\n"
    'Percentage of correct examples:  0.1015625\n'
    'GRPO Iteration:  2 Epoch:  0 Microbatch:  0 / 128\n'
    '[MEM cuda:1][tokenized (B=2, T=1240)] alloc=18.55 GB  reserved=45.94 GB  peak=45.62 GB\n'
)

# hands-on-modern-rl chapter 1, "a real training log" (walkinglabs.github.io/hands-on-modern-rl/en/
# chapter01_cartpole/metrics)
WALKINGLABS_PPO = """\
------------------------------------------------------------
  Iteration  1/20 | Episodes:  98 | Mean Reward:   20.8 | KL: 0.0047 | clip%: 6.2%
  Iteration  7/20 | Episodes:  10 | Mean Reward:  196.5 | KL: 0.0027 | clip%: 6.0%
  Iteration 13/20 | Episodes:   4 | Mean Reward:  410.0 | KL: 0.0075 | clip%: 10.6%
  Iteration 18/20 | Episodes:   4 | Mean Reward:  500.0 | KL: 0.0050 | clip%: 4.5%
  Iteration 19/20 | Episodes:   4 | Mean Reward:  500.0 | KL: 0.0041 | clip%: 4.0%
  Iteration 20/20 | Episodes:   4 | Mean Reward:  500.0 | KL: 0.0005 | clip%: 0.0%
------------------------------------------------------------
Training complete! 20-episode evaluation: 500.0 +/- 0.0
"""

# nanoGPT with a timestamp on every line, quoted in an issue (karpathy/nanoGPT issue #215)
NANOGPT_NAN = (
    '> 2023-03-22 09:31:45 iter 2980: loss 3.8993, time 1099.18ms, mfu 15.34%\n'
    '> \n'
    '> 2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%\n'
    '> \n'
    '> 2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427\n'
    '> \n'
    '> saving checkpoint to out\n'
    '> \n'
    '> 2023-03-22 09:32:41 iter 3000: loss 4.2490, time 35392.33ms, mfu 13.85%\n'
    '> \n'
    '> 2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%\n'
    '> \n'
    '> 2023-03-22 09:33:02 iter 3020: loss nan, time 1015.95ms, mfu 14.36%\n'
)

# nanoGPT's first iterations (karpathy/nanoGPT issue #178)
NANOGPT_START = """\
iter 0: loss 4.2648, time 9371.81ms, mfu -100.00%
iter 10: loss 3.2202, time 893.76ms, mfu 16.68%
iter 20: loss 2.7697, time 894.88ms, mfu 16.67%
iter 30: loss 2.6104, time 893.50ms, mfu 16.68%
"""

# mlx-lm with a gradient-accumulation debug print per micro-batch (ml-explore/mlx-lm pull request #326)
MLX_GRAD_DBG = """\
[GRAD-DBG] it=68 micro=8/10 loss=2.4802 toks=98 grad_l2=1.808e+01 grad_absmax=2.267e+00 accum_l2=8.641e+01 \
accum_absmax=1.072e+01
[GRAD-DBG] it=69 micro=9/10 loss=3.0505 toks=94 grad_l2=1.328e+01 grad_absmax=1.663e+00 accum_l2=9.560e+01 \
accum_absmax=1.145e+01
[GRAD-DBG] it=70 micro=10/10 loss=2.4790 toks=104 grad_l2=1.032e+01 grad_absmax=1.186e+00 accum_l2=1.009e+02 \
accum_absmax=1.212e+01
[GRAD-DBG] UPDATE(local) GA=10 local_l2=1.009e+01 local_absmax=1.212e+00
[GRAD-DBG] UPDATE(world) GA=10 world_l2=1.009e+01 world_absmax=1.212e+00
Iter 70: Train loss 2.786, Learning Rate 1.000e-05, It/sec 17.598, Tokens/sec 1728.137, Trained Tokens 6521, \
Peak mem 1.437 GB
[GRAD-DBG] it=71 micro=1/10 loss=2.7807 toks=108 grad_l2=1.132e+01 grad_absmax=1.449e+00 accum_l2=1.132e+01 \
accum_absmax=1.449e+00
"""

# mlx-lm GRPO: validation and training report at the same iteration (ml-explore/mlx-examples pull request #1233)
MLX_GRPO = """\
Iter 10: Val loss -0.432, Val total_rewards_mean 0.938, Val total_rewards_std 0.062, Val grouped_rewards_mean \
0.938, Val grouped_rewards_std 0.062, Val kl 0.001, Val r1_accuracy_reward_func_mean 0.000, \
Val r1_accuracy_reward_func_std 0.000, Val took 7.466s
Iter 10: Train loss 0.000, Total rewards mean 0.875, Total rewards std 0.000, Grouped rewards mean 0.875, \
Grouped rewards std 0.000, KL 0.001, r1_accuracy_reward_func mean 0.000, r1_accuracy_reward_func std 0.000, \
Learning Rate 1.000e-05, It/sec 0.123, Tokens/sec 26.553, Peak mem 12.237 GB
"""

# a MetricLogger (MAE / DeiT style) whose per-epoch counter restarts (Alpha-VLLM/LLaMA2-Accessory issue #48)
ACCESSORY = """\
[03:24:35.668475] Epoch: [0]  [1490/1504]  lr: 0.000026  closs: 1.0779 (1.1312)  grad_norm: 0.4995 (1.1826)  \
time: 4.5827  data: 0.0002  max mem: 51710
[03:25:21.899546] Epoch: [0]  [1500/1504]  lr: 0.000026  closs: 1.0741 (1.1309)  grad_norm: 0.4995 (1.1826)  \
time: 4.5973  data: 0.0003  max mem: 51710
[03:25:36.277038] Epoch: [0] Total time: 1:52:18
[03:25:36.360888] Averaged stats: lr: 0.000026  closs: 1.0759 (1.1304)  grad_norm: 0.4759 (1.1655)
[03:29:07.917266] optimizer saved
[03:29:07.942103] log_dir: ./output_dir
[03:29:13.729627] Epoch: [1]  [0/1504]  lr: 0.000025  closs: 1.0072 (1.0072)  time: 5.7865  data: 1.2589  \
max mem: 51710
[03:29:59.478134] Epoch: [1]  [10/1504]  lr: 0.000025  closs: 1.0340 (1.0370)  time: 4.6849  data: 0.1147  \
max mem: 51710
"""

# fairseq: epoch and per-epoch update count, epoch summaries and validation lines (facebookresearch/fairseq
# issue #301)
FAIRSEQ = """\
| epoch 010  7000 / 8223 loss=0.86 (1.46), wps=961, wpb=906, bsz=32, lr=0.001, clip=100%, gnorm=2.1233
| epoch 010  8000 / 8223 loss=1.33 (1.45), wps=961, wpb=905, bsz=32, lr=0.001, clip=100%, gnorm=2.1133
| epoch 010 | train loss 1.44 | train ppl 2.72 | s/checkpoint    7747 | words/s    961 | words/batch    906 | \
bsz    32 | lr 0.001000 | clip 100% | gnorm 2.1113
| epoch 010 | valid on 'valid' subset  1000 / 1311 loss=1.60
| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83
| epoch 011  1000 / 8223 loss=1.89 (1.38), wps=963, wpb=918, bsz=32, lr=0.001, clip=100%, gnorm=2.0860
| epoch 011  2000 / 8223 loss=1.37 (1.35), wps=962, wpb=912, bsz=32, lr=0.001, clip=100%, gnorm=2.0606
"""

# a bare step number before the first `|` (nwyin/modded-llama2 issue #10)
MODDED_LLAMA = """\
step 0: train loss 11.6275, val loss 11.6275
0 | loss 11.6250 | lr 3.000000e-04 | 104573.61ms
10 | loss 9.3750 | lr 3.000000e-04 | 13597.70ms
20 | loss 7.5000 | lr 3.000000e-04 | 13614.83ms
30 | loss 6.9062 | lr 3.000000e-04 | 13643.21ms
"""

# TensorFlow object detection: absl prefix and the same line again through the tensorflow logger
# (armaanpriyadarshan/Training-a-Custom-TensorFlow-2.X-Object-Detector issue #6)
TF_OBJECT_DETECTION = """\
I0912 11:40:27.956218 139735407601536 model_lib_v2.py:652] Step 100 per-step time 0.813s loss=1.396
INFO:tensorflow:Step 200 per-step time 0.831s loss=1.192
I0912 11:41:51.976096 139735407601536 model_lib_v2.py:652] Step 200 per-step time 0.831s loss=1.192
INFO:tensorflow:Step 300 per-step time 0.844s loss=1.346
I0912 11:43:14.231966 139735407601536 model_lib_v2.py:652] Step 300 per-step time 0.844s loss=1.346
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _load(tmp_path: Path, text: str, name: str = "train.log"):
    path = write(tmp_path, name, text)
    assert loader_for(path) is textlog
    return textlog.load(path)


def test_reward_printed_before_its_step_line(tmp_path):
    run = _load(tmp_path, LMBOOK_GRPO)
    assert list(run.series["average_reward"].steps) == [1, 2, 3, 4, 5, 6]
    assert run.series["average_reward"].values[0] == pytest.approx(0.714285671710968)
    assert list(run.series["loss"].steps) == [1, 2, 3, 4, 5, 6]
    assert run.meta["step_axis"] == "printed" and run.meta["printed_keys"] == {"average_reward": "Average Reward"}
    assert not {"input_batch_size", "output_batch_size", "iteration", "grpo_iter"} & set(run.series)
    assert any("step line after it" in n for n in run.notes)


def test_record_without_a_step_is_counted(tmp_path):
    run = _load(tmp_path, DAMEK_GRPO)
    assert set(run.series) == {"percentage_of_correct_examples"}
    assert list(run.series["percentage_of_correct_examples"].steps) == [1, 2, 3, 4]
    assert run.meta["step_axis"] == "counted"
    assert any("step = record number (no step printed)" in n for n in run.notes)


def test_iteration_counter_pipes_and_percent(tmp_path):
    run = _load(tmp_path, WALKINGLABS_PPO)
    assert list(run.series["mean_reward"].steps) == [1, 7, 13, 18, 19, 20]
    assert list(run.series["mean_reward"].values) == [20.8, 196.5, 410.0, 500.0, 500.0, 500.0]
    assert run.series["clip%"].values[2] == pytest.approx(10.6)
    assert resolve(run).mapping()["kl"] == "kl"                  # `KL` written as kl: the alias finds it
    assert any("'Mean Reward' -> mean_reward" in n for n in run.notes)


def test_timestamps_quotes_and_nan_as_text(tmp_path):
    run = _load(tmp_path, NANOGPT_NAN)
    loss = run.series["loss"]
    assert list(loss.steps) == [2980, 2990, 3000, 3010, 3020] and math.isnan(loss.values[-1])
    assert run.series["time"].values[0] == pytest.approx(1099.18)      # 1099.18ms
    assert run.series["val_loss"].values[0] == pytest.approx(4.0427)   # the eval line at step 3000
    assert all(k in {"loss", "time", "mfu", "train_loss", "val_loss"} for k in run.series)
    assert stabdiag.diagnose(run).first_nonfinite_step == 3010


def test_units_and_negative_values(tmp_path):
    run = _load(tmp_path, NANOGPT_START)
    assert run.series["mfu"].values[0] == -100.0 and list(run.series["loss"].steps) == [0, 10, 20, 30]


def test_key_value_pairs_beside_a_fraction_that_is_no_metric(tmp_path):
    run = _load(tmp_path, MLX_GRAD_DBG)
    assert list(run.series["loss"].steps) == [68, 69, 70, 71]
    assert run.series["train_loss"].values[0] == pytest.approx(2.786)   # `Iter 70: Train loss 2.786`
    assert "micro" not in run.series and "ga" not in run.series         # 8/10, and the stepless UPDATE lines
    assert run.series["grad_l2"].values[0] == pytest.approx(18.08)


def test_train_and_validation_reports_at_one_iteration():
    run = loop.read("grpo.log", MLX_GRPO)          # two lines: below the three a sniff asks for
    assert run.series["val_loss"].values[0] == pytest.approx(-0.432)
    assert run.series["total_rewards_mean"].values[0] == pytest.approx(0.875)
    assert list(run.series["kl"].steps) == [10] and "val_took" not in run.series


def test_per_epoch_counter_continues_across_epochs(tmp_path):
    run = _load(tmp_path, ACCESSORY)
    assert list(run.series["closs"].steps) == [1490, 1500, 1504, 1514]
    assert list(run.series["closs"].values) == [1.0779, 1.0741, 1.0072, 1.034]   # not the (running mean)
    assert any("(epoch - 0) x 1504" in n for n in run.notes)


def test_epoch_and_update_count_with_validation_lines(tmp_path):
    run = _load(tmp_path, FAIRSEQ)
    loss = run.series["loss"]
    assert list(loss.steps) == [9 * 8223 + 7000, 9 * 8223 + 8000, 10 * 8223 + 1000, 10 * 8223 + 2000]
    assert list(loss.values) == [0.86, 1.33, 1.89, 1.37]               # the valid loss=1.60 is not one of them
    assert run.series["gnorm"].values[0] == pytest.approx(2.1233) and not run.resumed


def test_leading_step_number(tmp_path):
    run = _load(tmp_path, MODDED_LLAMA)
    assert list(run.series["loss"].steps) == [0, 10, 20, 30]
    assert run.series["val_loss"].values[0] == pytest.approx(11.6275)


def test_glog_prefix_and_the_same_line_twice(tmp_path):
    run = _load(tmp_path, TF_OBJECT_DETECTION)
    assert list(run.series["loss"].steps) == [100, 200, 300] and not run.resumed
    assert "139735407601536" not in " ".join(run.series)


# the line shapes named in the issue, for which no real paste was found: the counter and pairs read
@pytest.mark.parametrize("line,step,pairs", [
    ("Step 12/500 | loss: 0.31 | reward: 0.42", 12, {"loss": 0.31, "reward": 0.42}),
    ("step 12 loss=0.31 reward=0.42", 12, {"loss": 0.31, "reward": 0.42}),
    ("it 12: loss 0.31", 12, {"loss": 0.31}),
    ("Iteration 1/1, Step 12/500, Loss: 0.31, Reward: 0.42", 12, {"loss": 0.31, "reward": 0.42}),
    ("[Epoch 1] step 12 - loss: 0.31 - kl: 0.002", 12, {"loss": 0.31, "kl": 0.002}),
    ("Epoch 2 | step 7 | global_step 1031 | loss: 0.5", 1031, {"loss": 0.5}),          # the global step wins
    ("2024-03-22 09:51:20,123 [INFO] v1.2.3 step 5 loss: 0.3", 5, {"loss": 0.3}),       # no date, time, version
    ("epoch: 0.37, step: 40, loss: 0.3", 40, {"loss": 0.3}),                            # the epoch fraction
    (" 45%|████▌     | 9/20 [00:01<00:01,  5.56it/s]step 9 | loss: 0.3", 9, {"loss": 0.3}),
])
def test_issue_line_shapes(tmp_path, line, step, pairs):
    run = loop.read("x.log", line + "\n")
    assert {k: float(s.values[0]) for k, s in run.series.items()} == pairs
    assert all(list(s.steps) == [step] for s in run.series.values())


def test_step_from_a_float_is_no_step():
    assert loop.step_counter("step: 105.42") is None and loop.step_counter("optimizer_step: 45") is None
    assert loop.step_counter("Epoch 0.5") is None


def test_public_load_names_the_run_after_the_file(tmp_path):
    write(tmp_path, "grpo_run.log", LMBOOK_GRPO)
    [run] = stabdiag.load(str(tmp_path / "grpo_run.log"))
    assert run.name == "grpo_run" and len(run.series["loss"]) == 6


def test_a_line_that_names_a_metric_without_a_number_is_skipped_and_counted(tmp_path):
    # NANOGPT_START plus a line as a loop prints a tensor instead of its value (constructed: the shape of
    # `print(f"iter {i}: loss {loss}")` without .item())
    text = NANOGPT_START + "iter 40: loss tensor(2.5339, device='cuda:0', grad_fn=<DivBackward0>), time 893.90ms\n"
    run = _load(tmp_path, text)
    assert list(run.series["loss"].steps) == [0, 10, 20, 30]
    assert any("1 line(s) with a step and a metric name but no readable value" in n and "line 5" in n
               for n in run.notes)


def test_a_loop_console_is_parsed_once_from_sniff_to_read(tmp_path, monkeypatch):
    """Finding the reader sniffs the file's head (here the whole file) before the reader reads it: the
    lines are parsed once, and the parse is not kept after the read."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"Step {i}/40 | loss: {2 - i / 40:.3f} | reward: {i / 40:.3f}\n" for i in range(1, 41)))
    parsed = []
    real_read = loop.read_lines
    monkeypatch.setattr(loop, "read_lines", lambda text: parsed.append(text) or real_read(text))
    run = stabdiag.load(str(path))[0]
    assert run.series["loss"].steps.tolist() == list(range(1, 41))
    assert parsed == [path.read_text()]
    assert loop._parse.cache_info().currsize == 0


def test_lines_read_by_their_template_read_as_they_do_from_scratch():
    """A loop prints a few templates over and over; after its first lines a template's numbers are taken
    from where they sit.  Whatever the lines - values that happen to be equal on the first lines, nan
    and inf, a number inside a name, micro-batch counters, timestamps, a counter's place holding a
    fraction - the reading is the one a line read
    from scratch gives (and on the 245k lines of every console under ../shared and tests/fixtures: 0 of
    245k differ, measured when this was written)."""
    import random

    rnd = random.Random(7)
    lines = []
    for i in range(600):
        loss = rnd.choice([1.0, 2.5, float("nan"), float("inf"), round(rnd.uniform(0, 4), 4)])
        same = f"{i % 3}.0"                                  # equal to another value now and then
        lines += [f"2024-01-0{1 + i % 9} 12:{i % 60:02d}:00 | Step {i}/600 | loss: {loss} | kl: {same} | lr: 1e-05",
                  f"iter {i} step {i // 4}: loss {loss}, iter time: {rnd.uniform(100, 200):.2f}ms",
                  f"sample {i % 7}abc reward {rnd.random():.3f} acc{i % 2} {rnd.random():.2f}",
                  f"[GRAD-DBG] it={i} micro={i % 4}/4 loss={rnd.random():.4f} grad_l2={rnd.random():.3e}",
                  f"step {i if i % 37 else f'{i}.5'}: reward {rnd.random():.3f}"]     # now and then no counter
    by_template, from_scratch = _read_by_template_and_from_scratch("\n".join(lines) + "\n")
    assert len(by_template) == len(from_scratch) > 2000
    assert all(_loop_templates._same((a, False), (b, False)) for a, b in zip(by_template, from_scratch))


def _read_by_template_and_from_scratch(text: str) -> tuple[list, list]:
    table, _ = _loop_templates.read_lines(text)
    by_template = [table.line(row) for row in range(len(table))]
    read = [(n, s) for n, s in _console.segments(text) if len(s) <= _loop_templates._MAX_LINE]   # no dumps
    from_scratch = [line for line, _ in (_loop_line.parse_line(n, s) for n, s in read) if line is not None]
    return by_template, from_scratch


def _number_in_some_form(rnd) -> str:
    """A number as a loop may print it: fixed or exponent notation, signed, a leading or trailing dot,
    leading zeros, more digits than float64 holds (now and then enough to make the line a dump, past
    4000 characters), a power of ten past 10**22, a non-ASCII digit."""
    value = rnd.uniform(-1, 1) * 10 ** rnd.randint(-30, 30)
    return rnd.choice([f"{value:.4f}", f"{abs(value):.{rnd.randint(0, 20)}f}", f"{value:.{rnd.randint(0, 17)}e}",
                       f"{value:.17g}", f"{value:E}", f"+{abs(value):.3g}", f".{rnd.randint(0, 10 ** 9)}",
                       f"-.{rnd.randint(0, 99)}", f"{rnd.randint(0, 999)}.", f"000{rnd.randint(0, 99)}",
                       str(rnd.randint(0, 10 ** rnd.randint(1, 25))), f"{rnd.randint(1, 9)}e-{rnd.randint(20, 330)}",
                       "-0", "-0.0e0", "nan", "inf", "\u0663.\u0665", "7" * rnd.choice([30, 4100])])


def test_numbers_taken_from_their_slots_read_as_from_scratch_whatever_their_form():
    """A template's later lines take their numbers from its slots a skeleton at a time (_digit_runs: lines
    alike but for their digits, read with numpy over the bytes), the rest of them one at a time.  Whatever
    form a number is printed in, padded or not, in an ASCII line or not, with a counter's place holding
    no counter now and then (13 digits, a fraction), each line reads as it does from scratch.  (A plan
    is learnt from a template's first lines, which print their counters as counters: a template whose
    first lines hold a fraction where its counter goes is read as printing none until a check, every
    256th line, finds otherwise.)"""
    import random

    rnd = random.Random(11)
    lines = []
    for i in range(900):
        odd = rnd.random() < 0.3                           # the plain form most of the time, as a loop prints
        number = (lambda: _number_in_some_form(rnd)) if odd else (lambda: f"{rnd.uniform(0, 5):.4f}")
        odd_step = i > 10 and not odd and rnd.random() < 0.2
        step = rnd.choice([f"{i}.5", str(10 ** 12 + i), f"00{i}"]) if odd_step else str(i)
        lines += [f"Step {step}/900 | loss: {number()} | reward: {number()}",
                  f"iter {i} step {step}: loss {number()}, iter time: {number()}ms",
                  f"  Epoch: [{i // 100}]  [{step}/100]  lr: {number()}  grad_norm: {number()} ({number()})\t",
                  f"step {step} | lōss: {number()} | kl: {number()}"]
    by_template, from_scratch = _read_by_template_and_from_scratch("\n".join(lines) + "\n")
    assert len(by_template) == len(from_scratch) > 3000
    assert all(_loop_templates._same((a, False), (b, False)) for a, b in zip(by_template, from_scratch))


def test_digit_runs_read_a_number_as_float_and_int_do():
    """The numbers of a skeleton's lines are rebuilt from their digits: float() of the number's text to
    the last bit (a mantissa of 15 digits and a power of ten up to 22 by one multiply or divide, any
    other by float()), and a counter as int() where it is at most 12 digits."""
    import random

    from stabdiag.read.formats.text import _digit_runs

    rnd = random.Random(3)
    numbers = [t for t in (_number_in_some_form(rnd) for _ in range(5000)) if t.isascii() and t[0] not in "ni"]
    counters = [str(rnd.randint(0, 10 ** rnd.randint(1, 14))) for _ in numbers]
    lines = [f"value {number} at {counter}" for number, counter in zip(numbers, counters)]
    runs = _digit_runs.Runs.of("\n".join(lines))
    floats, read_counters = np.empty(len(lines)), [None] * len(lines)
    for members in runs.members:
        first = lines[members[0]]
        spans = [found.span() for found in _loop_templates._SLOT.finditer(first)]
        value_slot, counter_slot = runs.slot_forms(int(members[0]), 0, first, spans)
        floats[members] = runs.floats(members, value_slot)
        for row, value, read in zip(members.tolist(), *runs.counters(members, counter_slot)):
            read_counters[row] = int(value) if read else None
    assert floats.view(np.int64).tolist() == np.array([float(n) for n in numbers]).view(np.int64).tolist()
    assert read_counters == [int(c) if len(c) <= 12 else None for c in counters]


def test_a_line_printed_twice_with_nan_is_no_micro_batch(tmp_path):
    """Two ranks print every step's line.  A nan is the same value on both copies whether a copy was read
    by its template or from scratch (every 256th line is), so the copies are repeats, not micro-batches
    whose values differ (before: read as micro-batches once the log passed 256 lines)."""
    text = "".join(f"step {i} | loss: nan | kl: 0.{i % 7}\n" * 2 for i in range(1, 301))
    run = _load(tmp_path, text)
    assert not any("micro-batches" in n for n in run.notes)
    assert run.series["kl"].steps.tolist() == list(range(1, 301))
    assert math.isnan(run.series["loss"].values[-1])
