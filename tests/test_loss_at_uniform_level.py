"""L3.loss-at-uniform-level on real HF Trainer output: a run whose optimizer applies no update keeps its
loss at ln(vocabulary size), its twin that learns leaves it; the vocabulary comes from the model's
config.json that Trainer.save_model writes beside trainer_state.json."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from stabdiag.read.runconfig import read_run_config
from tests.clihelp import cli

_TRAIN = textwrap.dedent("""\
    import sys
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments

    out, lr = sys.argv[1], float(sys.argv[2])
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32))
    # counting sequences: the next token is always the last one + 1, learnable in a few dozen steps
    starts = torch.randint(0, 64, (512, 1), generator=torch.Generator().manual_seed(0))
    ids = (starts + torch.arange(12)) % 64
    rows = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(output_dir=out, max_steps=60, per_device_train_batch_size=8, learning_rate=lr,
                             lr_scheduler_type="constant", logging_steps=2, save_strategy="no", report_to="none",
                             use_cpu=True, disable_tqdm=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    trainer.save_model()
    trainer.save_state()
    """)


def _train(tmp_path, name: str, lr: float):
    out = tmp_path / name
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script), str(out), str(lr)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.torch
@pytest.mark.slow          # ~10 s: two real Trainer runs in subprocesses; they run in CI all the same
def test_a_real_trainer_run_that_never_updates_stays_at_ln_vocab_and_fails_layer_3(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    frozen, learning = _train(tmp_path, "lr_zero", 0.0), _train(tmp_path, "learns", 3e-3)
    config, _, _ = read_run_config(str(frozen))
    assert config == {"vocab_size": 64}                  # from the model's config.json, and nothing else

    result = cli("check", str(frozen), "--format", "json")
    assert result.exit_code == 1, result.stderr
    [run] = json.loads(result.stdout)["runs"]
    assert run["verdict"] == "fail" and run["root_layer"] == 3
    [finding] = [f for f in run["findings"] if f["rule"] == "L3.loss-at-uniform-level"]
    assert finding["evidence"]["vocab"] == 64
    assert abs(finding["evidence"]["lowest"] - math.log(64)) < 0.05 * math.log(64)
    assert "the logs carry no run configuration" in run["methods_advice"]     # a vocab_size alone is not one

    result = cli("check", str(learning), "--format", "json")
    [run] = json.loads(result.stdout)["runs"]
    assert "L3.loss-at-uniform-level" not in [f["rule"] for f in run["findings"]]
    assert "L3.loss-at-uniform-level" not in [u["rule"] for u in run["unknown"]]     # judged, and clean


# A GPT-2-vocabulary model (50,257 tokens, as openai-community/gpt2's config.json) trained by the real
# Trainer with no update reaching the weights, its output directory holding trainer_state.json alone: no
# config.json beside it (save_model not called), so V must come from the common vocabularies.
_TRAIN_GPT2_VOCAB = textwrap.dedent("""\
    import sys
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    out, lr = sys.argv[1], float(sys.argv[2])
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_embd=16, n_layer=1, n_head=2, n_positions=16,
                                       initializer_range=0.002))
    ids = torch.randint(0, 50257, (256, 12), generator=torch.Generator().manual_seed(0))
    # the first label masked: no token predicts it, and Trainer divides the summed loss by the labels it counts
    rows = [{"input_ids": row, "labels": torch.cat([torch.tensor([-100]), row[1:]])} for row in ids]
    args = TrainingArguments(output_dir=out, max_steps=40, per_device_train_batch_size=8, learning_rate=lr,
                             lr_scheduler_type="constant", logging_steps=2, save_strategy="no", report_to="none",
                             use_cpu=True, disable_tqdm=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    trainer.save_state()                # trainer_state.json; no save_model: no config.json beside it
    """)


@pytest.mark.torch
@pytest.mark.slow          # ~10 s: one real Trainer run in a subprocess
def test_a_real_run_without_a_config_stuck_at_gpt2s_ln_vocab_warns_quoting_the_vocabulary(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    out = tmp_path / "no_config"
    script = tmp_path / "train_gpt2_vocab.py"
    script.write_text(_TRAIN_GPT2_VOCAB)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script), str(out), "0.0"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (out / "config.json").exists()
    result = cli("check", str(out), "--format", "json")
    [run] = json.loads(result.stdout)["runs"]
    [finding] = [f for f in run["findings"] if f["rule"] == "L3.loss-at-uniform-level"]
    assert finding["severity"] == "warn" and finding["evidence"]["vocab"] == 50257
    assert "GPT-2's vocabulary" in finding["message"] and "ln(50257)" in finding["message"]
