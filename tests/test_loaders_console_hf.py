"""The HF Trainer / TRL console as users paste it: transformers 5's quoted values, tqdm bars sharing
the line with the dicts, dicts wrapped over lines, and the step axis taken from what the log offers.

Every excerpt is real text, named where it was seen.  The transformers 5 logs were written by
transformers 5.24 (Trainer on a 1-layer random LlamaConfig, hidden 32, vocab 100, 20 steps on CPU,
logging_steps=2 or 1, eval_strategy="steps", eval_steps=5, report_to=[], disable_tqdm=False) with
`python train.py 2>&1 | tee console.log`; the bytes are kept exactly, carriage returns and ANSI included.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import stabdiag
from stabdiag.errors import InputError
from stabdiag.read.formats import loader_for
from stabdiag.read.formats import text as textlog
from stabdiag.read.formats.text import hf_console
from stabdiag.signals.resolve import resolve

# transformers 5.24, default log level (no banner), logging_steps=2, eval_steps=5, 2 epochs of 10 steps
HF5_CONSOLE = (
    '\r  0%|          | 0/20 [00:00<?, ?it/s]\r  5%|▌         | 1/20 [00:00<00:14,  1.29it/s]\r 10%|█         |'
    " 2/20 [00:01<00:13,  1.35it/s]\r                                              \r{'loss': '4.611', 'grad_no"
    "rm': '1.071', 'learning_rate': '9.5e-05', 'epoch': '0.2'}\n"
    '\r 10%|█         | 2/20 [00:01<00:13,  1.35it/s]\r 15%|█▌        | 3/20 [00:02<00:12,  1.37it/s]\r 20%|██ '
    "       | 4/20 [00:02<00:11,  1.34it/s]\r                                              \r{'loss': '4.61', '"
    "grad_norm': '1.079', 'learning_rate': '8.5e-05', 'epoch': '0.4'}\n"
    '\r 20%|██        | 4/20 [00:02<00:11,  1.34it/s]\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                              \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0124', 'eval_samp"
    "les_per_second': '646.9', 'eval_steps_per_second': '80.86', 'epoch': '0.5'}\n"
    '\r 25%|██▌       | 5/20 [00:03<00:11,  1.34it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 2201.73it/s]\x1b[A\n'
    '\r                                               \x1b[A\r                                              \r{'
    "'loss': '4.624', 'grad_norm': '1.086', 'learning_rate': '7.5e-05', 'epoch': '0.6'}\n"
    "\r 30%|███       | 6/20 [00:03<00:10,  1.34it/s]\r                                              \r{'loss':"
    " '4.595', 'grad_norm': '1.068', 'learning_rate': '6.5e-05', 'epoch': '0.8'}\n"
    '\r 40%|████      | 8/20 [00:03<00:08,  1.34it/s]\r 50%|█████     | 10/20 [00:03<00:01,  5.32it/s]\r       '
    "                                        \r{'loss': '4.61', 'grad_norm': '1.086', 'learning_rate': '5.5e-05"
    "', 'epoch': '1'}\n"
    '\r 50%|█████     | 10/20 [00:03<00:01,  5.32it/s]\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0028', 'eval_samp"
    "les_per_second': '2847', 'eval_steps_per_second': '355.9', 'epoch': '1'}\n"
    '\r 50%|█████     | 10/20 [00:03<00:01,  5.32it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 2123.70it/s]\x1b[A\n'
    '\r                                               \x1b[A\r 60%|██████    | 12/20 [00:03<00:01,  6.19it/s]\r'
    "                                               \r{'loss': '4.624', 'grad_norm': '1.085', 'learning_rate': "
    "'4.5e-05', 'epoch': '1.2'}\n"
    '\r 60%|██████    | 12/20 [00:03<00:01,  6.19it/s]\r 70%|███████   | 14/20 [00:03<00:01,  5.58it/s]\r      '
    "                                         \r{'loss': '4.594', 'grad_norm': '1.144', 'learning_rate': '3.5e-"
    "05', 'epoch': '1.4'}\n"
    '\r 70%|███████   | 14/20 [00:03<00:01,  5.58it/s]\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0026', 'eval_samp"
    "les_per_second': '3114', 'eval_steps_per_second': '389.3', 'epoch': '1.5'}\n"
    '\r 75%|███████▌  | 15/20 [00:03<00:00,  5.58it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 3063.77it/s]\x1b[A\n'
    '\r                                               \x1b[A\r                                               \r'
    "{'loss': '4.587', 'grad_norm': '1.094', 'learning_rate': '2.5e-05', 'epoch': '1.6'}\n"
    "\r 80%|████████  | 16/20 [00:03<00:00,  5.58it/s]\r                                               \r{'loss"
    "': '4.595', 'grad_norm': '1.068', 'learning_rate': '1.5e-05', 'epoch': '1.8'}\n"
    '\r 90%|█████████ | 18/20 [00:03<00:00,  5.58it/s]\r100%|██████████| 20/20 [00:03<00:00, 10.95it/s]\r      '
    "                                         \r{'loss': '4.612', 'grad_norm': '1.06', 'learning_rate': '5e-06'"
    ", 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:03<00:00, 10.95it/s]\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0026', 'eval_samp"
    "les_per_second': '3120', 'eval_steps_per_second': '390.1', 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:03<00:00, 10.95it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 2411.91it/s]\x1b[A\n'
    '\r                                               \x1b[A\r                                               \r'
    "{'train_runtime': '3.861', 'train_samples_per_second': '20.72', 'train_steps_per_second': '5.18', 'train_l"
    "oss': '4.606', 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:03<00:00, 10.95it/s]\r100%|██████████| 20/20 [00:03<00:00,  5.18it/s]\n'
)

# the same run with log_level="info", logging_first_step=True and the TrainingArguments printed: the
# arguments it prints about logging, then everything from the Trainer banner on (5.x adds
# "Num update steps per epoch" to the 4.x banner and prefixes the lines with "[transformers]")
HF5_INFO_CONSOLE = (
    'eval_steps=5,\n'
    'logging_first_step=True,\n'
    'logging_nan_inf_filter=True,\n'
    'logging_steps=2,\n'
    '[transformers] ***** Running training *****\n'
    '[transformers]   Num examples = 40\n'
    '[transformers]   Num Epochs = 2\n'
    '[transformers]   Num update steps per epoch = 10\n'
    '[transformers]   Instantaneous batch size per device = 4\n'
    '[transformers]   Total train batch size (w. parallel, distributed & accumulation) = 4\n'
    '[transformers]   Gradient Accumulation steps = 1\n'
    '[transformers]   Total optimization steps = 20\n'
    '[transformers]   Number of trainable parameters = 16,736\n'
    "\r  0%|          | 0/20 [00:00<?, ?it/s]\r                                      \r{'loss': '4.584', 'grad_"
    "norm': '1.096', 'learning_rate': '0.0001', 'epoch': '0.1'}\n"
    '\r  5%|▌         | 1/20 [00:00<00:00, 104.54it/s]\r 10%|█         | 2/20 [00:00<00:00, 19.05it/s] \r      '
    "                                        \r{'loss': '4.639', 'grad_norm': '1.071', 'learning_rate': '9.5e-0"
    "5', 'epoch': '0.2'}\n"
    "\r 10%|█         | 2/20 [00:00<00:00, 19.05it/s]\r                                              \r{'loss':"
    " '4.61', 'grad_norm': '1.079', 'learning_rate': '8.5e-05', 'epoch': '0.4'}\n"
    '\r 20%|██        | 4/20 [00:00<00:00, 19.05it/s][transformers] \n'
    '***** Running Evaluation *****\n'
    '[transformers]   Num examples = 8\n'
    '[transformers]   Batch size = 8\n'
    '\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                              \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.1058', 'eval_samp"
    "les_per_second': '75.61', 'eval_steps_per_second': '9.452', 'epoch': '0.5'}\n"
    '\r 25%|██▌       | 5/20 [00:00<00:00, 19.05it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 2123.70it/s]\x1b[A\n'
    '\r                                               \x1b[A\r 30%|███       | 6/20 [00:00<00:01,  7.79it/s]\r '
    "                                             \r{'loss': '4.624', 'grad_norm': '1.086', 'learning_rate': '7"
    ".5e-05', 'epoch': '0.6'}\n"
    '\r 30%|███       | 6/20 [00:00<00:01,  7.79it/s]\r 40%|████      | 8/20 [00:00<00:01,  7.68it/s]\r        '
    "                                      \r{'loss': '4.595', 'grad_norm': '1.068', 'learning_rate': '6.5e-05'"
    ", 'epoch': '0.8'}\n"
    '\r 40%|████      | 8/20 [00:01<00:01,  7.68it/s]\r 45%|████▌     | 9/20 [00:01<00:01,  5.56it/s]\r        '
    "                                      \r{'loss': '4.61', 'grad_norm': '1.086', 'learning_rate': '5.5e-05',"
    " 'epoch': '1'}\n"
    '\r 50%|█████     | 10/20 [00:01<00:01,  5.56it/s][transformers] \n'
    '***** Running Evaluation *****\n'
    '[transformers]   Num examples = 8\n'
    '[transformers]   Batch size = 8\n'
    '\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0028', 'eval_samp"
    "les_per_second': '2897', 'eval_steps_per_second': '362.1', 'epoch': '1'}\n"
    '\r 50%|█████     | 10/20 [00:01<00:01,  5.56it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 3199.32it/s]\x1b[A\n'
    '\r                                               \x1b[A\r 60%|██████    | 12/20 [00:01<00:01,  5.54it/s]\r'
    "                                               \r{'loss': '4.624', 'grad_norm': '1.085', 'learning_rate': "
    "'4.5e-05', 'epoch': '1.2'}\n"
    '\r 60%|██████    | 12/20 [00:01<00:01,  5.54it/s]\r 65%|██████▌   | 13/20 [00:02<00:01,  5.71it/s]\r      '
    "                                         \r{'loss': '4.594', 'grad_norm': '1.144', 'learning_rate': '3.5e-"
    "05', 'epoch': '1.4'}\n"
    '\r 70%|███████   | 14/20 [00:02<00:01,  5.71it/s]\r 75%|███████▌  | 15/20 [00:02<00:00,  6.03it/s][transfo'
    'rmers] \n'
    '***** Running Evaluation *****\n'
    '[transformers]   Num examples = 8\n'
    '[transformers]   Batch size = 8\n'
    '\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0032', 'eval_samp"
    "les_per_second': '2535', 'eval_steps_per_second': '316.9', 'epoch': '1.5'}\n"
    '\r 75%|███████▌  | 15/20 [00:02<00:00,  6.03it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 2794.34it/s]\x1b[A\n'
    '\r                                               \x1b[A\r                                               \r'
    "{'loss': '4.587', 'grad_norm': '1.094', 'learning_rate': '2.5e-05', 'epoch': '1.6'}\n"
    "\r 80%|████████  | 16/20 [00:02<00:00,  6.03it/s]\r                                               \r{'loss"
    "': '4.595', 'grad_norm': '1.068', 'learning_rate': '1.5e-05', 'epoch': '1.8'}\n"
    "\r 90%|█████████ | 18/20 [00:02<00:00,  6.03it/s]\r                                               \r{'loss"
    "': '4.612', 'grad_norm': '1.06', 'learning_rate': '5e-06', 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:02<00:00,  6.03it/s][transformers] \n'
    '***** Running Evaluation *****\n'
    '[transformers]   Num examples = 8\n'
    '[transformers]   Batch size = 8\n'
    '\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                               \r\n'
    "\r                                     \r\x1b[A{'eval_loss': '4.607', 'eval_runtime': '0.0029', 'eval_samp"
    "les_per_second': '2749', 'eval_steps_per_second': '343.6', 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:02<00:00,  6.03it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 3034.95it/s]\x1b[A\n'
    '\r                                               \x1b[A[transformers] \n'
    '\n'
    'Training completed. Do not forget to share your model on huggingface.co/models =)\n'
    '\n'
    '\n'
    "\r                                               \r{'train_runtime': '2.392', 'train_samples_per_second': "
    "'33.45', 'train_steps_per_second': '8.363', 'train_loss': '4.606', 'epoch': '2'}\n"
    '\r100%|██████████| 20/20 [00:02<00:00,  6.03it/s]\r100%|██████████| 20/20 [00:02<00:00,  8.36it/s]\n'
)

# transformers 5.24, learning_rate=100, max_grad_norm=0, logging_nan_inf_filter=False, logging_steps=1:
# the first 12 lines (the loss blows up, then 'nan' is printed quoted like every other value)
HF5_NAN_CONSOLE = (
    '\r  0%|          | 0/20 [00:00<?, ?it/s]\r  5%|▌         | 1/20 [00:00<00:04,  3.85it/s]\r                '
    "                              \r{'loss': '4.584', 'grad_norm': '1.096', 'learning_rate': '100', 'epoch': '"
    "0.1'}\n"
    "\r  5%|▌         | 1/20 [00:00<00:04,  3.85it/s]\r                                              \r{'loss':"
    " '1.082e+05', 'grad_norm': 'nan', 'learning_rate': '95', 'epoch': '0.2'}\n"
    "\r 10%|█         | 2/20 [00:00<00:04,  3.85it/s]\r                                              \r{'loss':"
    " 'nan', 'grad_norm': 'nan', 'learning_rate': '90', 'epoch': '0.3'}\n"
    "\r 15%|█▌        | 3/20 [00:00<00:04,  3.85it/s]\r                                              \r{'loss':"
    " 'nan', 'grad_norm': 'nan', 'learning_rate': '85', 'epoch': '0.4'}\n"
    "\r 20%|██        | 4/20 [00:00<00:04,  3.85it/s]\r                                              \r{'loss':"
    " 'nan', 'grad_norm': 'nan', 'learning_rate': '80', 'epoch': '0.5'}\n"
    '\r 25%|██▌       | 5/20 [00:00<00:03,  3.85it/s]\n'
    '\r  0%|          | 0/1 [00:00<?, ?it/s]\x1b[A\r                                              \r\n'
    "\r                                     \r\x1b[A{'eval_loss': 'nan', 'eval_runtime': '0.0114', 'eval_sample"
    "s_per_second': '702.3', 'eval_steps_per_second': '87.79', 'epoch': '0.5'}\n"
    '\r 25%|██▌       | 5/20 [00:00<00:03,  3.85it/s]\n'
    '\r100%|██████████| 1/1 [00:00<00:00, 1784.05it/s]\x1b[A\n'
    '\r                                               \x1b[A\r 30%|███       | 6/20 [00:00<00:00, 19.29it/s]\r '
    "                                             \r{'loss': 'nan', 'grad_norm': 'nan', 'learning_rate': '75', "
    "'epoch': '0.6'}\n"
    "\r 30%|███       | 6/20 [00:00<00:00, 19.29it/s]\r                                              \r{'loss':"
    " 'nan', 'grad_norm': 'nan', 'learning_rate': '70', 'epoch': '0.7'}\n"
)

# tqdm and the dicts on one physical line, pasted with the carriage returns shown as "^M"
# (h2oai/h2ogpt pull request #86, transformers 4.x)
H2OGPT_CARET_M = (
    "^M  4%|▎         | 1317/36234 [11:37<5:10:26,  1.87it/s]^M  4%|▎         | 1318/36234 [11:37<5:12:34,  "
    "1.86it/s]^M                                                      ^M{'loss': 1.5545, 'learning_rate': "
    "0.00028994575745834946, 'epoch': 0.22}\n"
    "^M  4%|▎         | 1318/36234 [11:37<5:12:34,  1.86it/s]^M  4%|▎         | 1319/36234 [11:38<5:06:46,  "
    "1.90it/s]^M                                                      ^M{'loss': 1.3465, 'learning_rate': "
    "0.000289937455028505, 'epoch': 0.22}\n"
    "^M  4%|▎         | 1319/36234 [11:38<5:06:46,  1.90it/s]^M  4%|▎         | 1320/36234 [11:38<5:06:11,  "
    "1.90it/s]^M                                                      ^M{'loss': 1.3056, 'learning_rate': "
    "0.0002899291525986605, 'epoch': 0.22}\n"
)

# TRL GRPO dicts, the last one cut off by the paste (huggingface/trl issue #3452)
TRL_GRPO = (
    "{'loss': 0.0, 'grad_norm': 0.08656957000494003, 'learning_rate': 6.916666666666667e-06, 'completion_length"
    "': 232.825, 'rewards/format_reward2': 1.0, 'rewards/hint_reward': 0.7171093255281449, 'reward': 1.71710932"
    "85083772, 'reward_std': 0.5700982138514519, 'kl': 0.0005371240986278281, 'epoch': 0.31}\n"
    "{'loss': 0.0, 'grad_norm': 0.09666649252176285, 'learning_rate': 6.708333333333333e-06, 'completion_length"
    "': 237.0375, 'rewards/format_reward2': 1.0, 'rewards/hint_reward': 0.8844376325607299, 'reward': 1.8844376"
    "266002656, 'reward_std': 0.7487143039703369, 'kl': 0.0005386197401094251, 'epoch': 0.33}\n"
    "{'loss': 0.0, 'grad_norm': 0.1058727279305458, 'learning_rate': 6.5000000000000004e-06, 'completion_length"
    "': 233.45, 'rewards/format_reward2': 1.0, 'rewards/hint_reward': 0.6797272339463234, 'reward': 1.679727220"
    "5352782, 'reward_std': 0.6311022289562971, 'kl': 0.0005338093222235329, 'epoch': 0.35}\n"
    "{'loss': 0.0, 'grad_norm': 0.10363585501909256, 'learning_rate': 6.291666666666667e-06, 'completion_length"
    "': 235.6, 'rewards/format_reward2': 0.9875, 'rewards/hint_reward': 0.9810375615954399, 'reward': 1.9685375"
    "63085556, 'reward_std': 0.786603014729917, 'kl': 0.0005278794225887396, 'epoch': 0.37}\n"
    '                                                    \n'
    "{'loss': 0.0, 'grad_norm': 0.09924133121967316, 'learning_rate': 6.083333333333333e-06, 'completion_length"
)

# one real TRL GRPO record (huggingface/trl issue #3857) ...
TRL_RECORD = {
    "loss": 0.0, "grad_norm": 0.0, "learning_rate": 1.7050844078611056e-06, "num_tokens": 1751675.0,
    "completions/mean_length": 701.8125, "completions/min_length": 307.0, "completions/max_length": 1013.0,
    "completions/clipped_ratio": 0.0, "rewards/if_rewrite_reward/mean": -3.0,
    "rewards/if_rewrite_reward/std": 5.080004692077637, "reward": 3.0, "reward_std": 0.0,
    "frac_reward_zero_std": 1.0, "clip_ratio/region_mean": 0.0, "epoch": 0.33,
}

# DeepSpeed timers and vLLM sleep-mode lines between TRL's tqdm bar and a dict the paste cut off
# (huggingface/trl issue #4086): nothing here is a metric record
TRL_DEEPSPEED_CUT = (
    'INFO 09-15 14:42:48 [gpu_worker.py:115] Sleep mode freed 51.57 GiB memory, 77.17 GiB memory is still in us'
    'e.\n'
    'INFO 09-15 14:42:48 [executor_base.py:188] It took 1.600564 seconds to fall asleep.\n'
    '[2025-09-15 14:48:06,446] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | optimizer_allgather: 32.02'
    ' | optimizer_gradients: 14.23 | optimizer_step: 45.45\n'
    '[2025-09-15 14:48:06,449] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd_microstep: 114578.15 |'
    ' bwd_microstep: 117430.47 | bwd_inner_microstep: 117137.45 | bwd_allreduce_microstep: 286.56 | step_micros'
    'tep: 105.41\n'
    '[2025-09-15 14:48:06,452] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd: 114577.10 | bwd: 1174'
    '30.12 | bwd_inner: 117138.34 | bwd_allreduce: 286.16 | step: 105.42\n'
    '\n'
    '  0%|          | 3/1562 [18:48<164:33:29, 379.99s/it]\n'
    '                                                     \n'
    "{'loss': -0.0684, 'grad_nor"
)

# an eval dict without eval_loss, and trailing blanks from the terminal (zhenye234/LLaSA_training issue #47)
LLASA = (
    "{'loss': 0.4376, 'grad_norm': 10.981253623962402, 'learning_rate': 0.0008146601955249188, 'epoch': 0.31}  "
    '        \n'
    "{'loss': 0.5445, 'grad_norm': 5.845736980438232, 'learning_rate': 0.0008022995574311875, 'epoch': 0.32}   "
    '        \n'
    "{'eval_runtime': 18.4471, 'eval_samples_per_second': 2.71, 'eval_steps_per_second': 2.71, 'epoch': 0.32}  "
    '        \n'
    "{'loss': 0.541, 'grad_norm': 12.852228164672852, 'learning_rate': 0.0007896405861713394, 'epoch': 0.33}   "
    '        \n'
)

REAL = Path(__file__).resolve().parents[2] / "shared" / "real_logs"
real = pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_logs not present")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))      # keep carriage returns as written
    return str(path)


def test_transformers5_quoted_values_with_tqdm_on_the_same_line(tmp_path):
    path = write(tmp_path, "console.log", HF5_CONSOLE)
    assert loader_for(path) is textlog
    run = textlog.load(path)
    loss = run.series["loss"]
    assert list(loss.steps) == list(range(1, 11)) and loss.values[0] == pytest.approx(4.611)
    assert run.series["learning_rate"].values[0] == pytest.approx(9.5e-05)
    assert list(run.series["eval_loss"].steps) == [2, 5, 7, 10]        # the step of the record before
    assert run.meta["step_axis"] == "counted"
    assert run.meta["summary"]["train_runtime"] == pytest.approx(3.861) and "train_runtime" not in run.series
    notes = " ".join(run.notes)
    assert "read 10 training and 4 eval record(s)" in notes and "quoted values" in notes
    assert "step = record number" in notes
    assert max(loss.steps) < 20 and 1.35 not in list(loss.values)      # no progress-bar number was read


def test_transformers5_banner_gives_the_epoch_axis(tmp_path):
    run = textlog.load(write(tmp_path, "console.log", HF5_INFO_CONSOLE))
    assert run.meta["step_axis"] == "epoch"
    assert run.meta["steps_per_epoch"] == 10 and run.meta["logging_steps"] == 2 and run.meta["eval_steps"] == 5
    assert list(run.series["loss"].steps) == [1, 2] + list(range(4, 21, 2))   # logging_first_step: step 1
    assert list(run.series["eval_loss"].steps) == [5, 10, 15, 20]              # evals every 5 steps, exact
    assert any("epoch x 10 steps per epoch" in n for n in run.notes)


def test_transformers5_quoted_nan(tmp_path):
    run = textlog.load(write(tmp_path, "console.log", HF5_NAN_CONSOLE))
    loss = run.series["loss"]
    assert loss.values[1] == pytest.approx(1.082e5) and math.isnan(loss.values[2])
    assert math.isnan(run.series["grad_norm"].values[1]) and math.isnan(run.series["eval_loss"].values[0])
    diag = stabdiag.diagnose(run)
    assert diag.root_layer == 3


@pytest.mark.parametrize("raw,expected", [("'nan'", math.nan), ("'inf'", math.inf), ("'-inf'", -math.inf),
                                          ("'9.745e+05'", 9.745e5), ("np.float64(0.25)", 0.25), ("nan", math.nan)])
def test_printed_values(raw, expected):
    value, _ = hf_console._value(raw)
    assert value == expected or (math.isnan(value) and math.isnan(expected))


def test_tqdm_glued_to_the_dicts_with_caret_m(tmp_path):
    run = textlog.load(write(tmp_path, "out.txt", H2OGPT_CARET_M))
    assert list(run.series["loss"].values) == [1.5545, 1.3465, 1.3056]
    assert list(run.series["loss"].steps) == [1, 2, 3]                   # not 1318 from the bar


def test_trl_keys_kept_as_printed_and_a_cut_record_is_counted(tmp_path):
    run = textlog.load(write(tmp_path, "grpo.log", TRL_GRPO))
    assert {"rewards/format_reward2", "rewards/hint_reward", "reward", "reward_std", "kl"} <= set(run.series)
    assert len(run.series["reward"]) == 4
    assert any("grpo.log:6: the last line has no newline yet" in n for n in run.notes)    # cut off: not read
    sig = resolve(run)
    assert sig.mapping()["reward"] == "reward" and sig.mapping()["kl"] == "kl"


def _terminal_wrap(line: str, columns: int) -> str:
    return "\n".join(line[i:i + columns] for i in range(0, len(line), columns))


def test_dicts_wrapped_by_a_terminal_or_pprint(tmp_path):
    import pprint

    record = "{" + ", ".join(f"'{k}': {v!r}" for k, v in TRL_RECORD.items()) + "}"
    wrapped = _terminal_wrap(record, 80)                       # a hard wrap cuts tokens in two
    pretty = pprint.pformat(TRL_RECORD, width=60)              # one key a line, keys sorted
    assert "\n" in wrapped and pretty.count("\n") > 10
    for name, text in (("wrapped.log", wrapped), ("pprint.log", pretty)):
        path = write(tmp_path, name, "some output\n" + text + "\nmore output\n" + text.replace("0.33", "0.34") + "\n")
        assert textlog.can_load(path), name
        run = textlog.load(path)
        assert run.series["rewards/if_rewrite_reward/std"].values[0] == pytest.approx(5.080004692077637), name
        assert run.series["learning_rate"].values[0] == pytest.approx(1.7050844078611056e-06), name
        assert len(run.series["loss"]) == 2, name


def test_eval_dict_without_eval_loss_takes_the_step_before(tmp_path):
    run = textlog.load(write(tmp_path, "train.log", LLASA))
    assert list(run.series["loss"].steps) == [1, 2, 3]
    assert list(run.series["eval_runtime"].steps) == [2]


def test_only_a_cut_record_is_an_input_error_naming_the_file(tmp_path):
    path = write(tmp_path, "trl_ds.log", TRL_DEEPSPEED_CUT)
    assert textlog.can_load(path)                        # the cut dict is a Trainer record
    expected = r"trl_ds.log: no complete Trainer log record found .*the last line \(9\) has no newline yet"
    with pytest.raises(InputError, match=expected):
        textlog.load(path)


def test_printed_step_wins(tmp_path):
    # synthetic: a callback that prints the global step in the dict (no real paste found)
    text = "".join(f"{{'loss': {1.0 / s:.3f}, 'step': {s * 10}, 'epoch': {s / 10:.2f}}}\n" for s in range(1, 4))
    run = textlog.load(write(tmp_path, "cb.log", text))
    assert run.meta["step_axis"] == "printed" and list(run.series["loss"].steps) == [10, 20, 30]
    assert "step" not in run.series


@real
def test_real_console_without_the_banner_uses_logging_steps(tmp_path):
    lines = (REAL / "hf_trainer_cpt_feedback_gen" / "cmd.txt").read_text(encoding="utf-8").splitlines()
    banner = next(i for i, line in enumerate(lines) if "Running training" in line)
    kept = [line for i, line in enumerate(lines) if not banner <= i <= banner + 7]
    run = textlog.load(write(tmp_path, "cmd.txt", "\n".join(kept)))
    assert run.meta["step_axis"] == "logging_steps" and run.meta["logging_steps"] == 500
    assert list(run.series["loss"].steps)[:3] == [500, 1000, 1500]
    assert list(run.series["eval_loss"].steps)[:2] == [500, 1000]
    assert any("logging_steps=500" in n and "record before it" in n for n in run.notes)


@real
def test_real_console_with_the_banner_uses_the_epoch(tmp_path):
    text = (REAL / "hf_trainer_cpt_feedback_gen" / "cmd.txt").read_text(encoding="utf-8")
    run = textlog.load(write(tmp_path, "cmd.txt", text))
    assert run.meta["step_axis"] == "epoch" and run.meta["steps_per_epoch"] == 549
    assert list(run.series["eval_loss"].steps)[:2] == [549, 1098]
    assert "num_beams" not in run.series                 # "Non-default generation parameters: {...}"
    assert run.meta["summary"]["train_loss"] == pytest.approx(0.4479398911550831)


def test_public_load_reads_a_console_alone(tmp_path):
    write(tmp_path, "console.log", HF5_CONSOLE)
    [run] = stabdiag.load(str(tmp_path))
    assert len(run.series["loss"]) == 10
