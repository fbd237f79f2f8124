"""A real TRL GRPOTrainer run on CPU with StabdiagCallback: a tiny GPT-2 (about 4k parameters) and a
word-level tokenizer built here (no hub, no network), rewarded for distinct words.  The learning rate
jumps 1000x (1e-3 -> 1.0) at step 20 in one twin: the policy collapses onto one answer and the callback
stops training within N = 20 steps of the jump, the reason in the `stabdiag` log and in
stabdiag_diagnosis.json; the healthy twin trains its 40 steps.  Skipped where trl is not installed (the
dev extra pins the version it was written against)."""

from __future__ import annotations

import json
import logging

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.torch]

JUMP_AT, STEPS, N = 20, 40, 20
WORDS = ["<pad>", "<eos>", "a", "b", "c", "d", "e", "f", "g", "h"]


def _grpo_run(out_dir, jump_at: int | None):
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from stabdiag.integrations import StabdiagCallback

    words = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="a"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, pad_token="<pad>", eos_token="<eos>")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_positions=32, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=1, eos_token_id=1, pad_token_id=0))
    prompts = Dataset.from_dict({"prompt": [" ".join("abcdefgh"[(i + j) % 8] for j in range(3)) for i in range(64)]})

    def distinct_words(completions, **kwargs):      # varied answers score higher: a collapse scores low
        return [len(set(c.split())) / 8.0 for c in completions]

    class LearningRateJump(TrainerCallback):         # the injected failure, hidden from the logged learning_rate
        def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
            if jump_at is not None and state.global_step >= jump_at:
                for group in optimizer.param_groups:
                    group["lr"] = 1.0

    args = GRPOConfig(output_dir=str(out_dir), max_steps=STEPS, logging_steps=1, learning_rate=1e-3,
                      lr_scheduler_type="constant", per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, beta=0.0, seed=0, use_cpu=True, report_to=[], save_strategy="no",
                      disable_tqdm=True, log_level="error")
    # the step cadence (max_overhead=None): the stop latency tested here is the rules' and check_every's;
    # the governor's own is tested with a fake clock in test_integrations.py
    callback = StabdiagCallback(check_every=5, max_overhead=None)
    trainer = GRPOTrainer(model=model, reward_funcs=distinct_words, args=args, train_dataset=prompts,
                          processing_class=tokenizer, callbacks=[LearningRateJump(), callback])
    trainer.train()
    return trainer, json.loads((out_dir / "stabdiag_diagnosis.json").read_text())


@pytest.fixture
def one_thread():
    """Tiny models train faster on one thread than on cores shared with other jobs."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_grpo_trainer_with_a_learning_rate_jump_is_stopped_within_n_steps_and_its_healthy_twin_is_not(
        tmp_path, caplog, one_thread):
    with caplog.at_level(logging.WARNING, logger="stabdiag"):
        trainer, written = _grpo_run(tmp_path / "jump", JUMP_AT)
    stopped = trainer.state.global_step
    assert JUMP_AT < stopped <= JUMP_AT + N, stopped
    assert written["stopped"] and written["stop_step"] == stopped
    report = written["report"]["runs"][0]
    assert report["verdict"] == "fail" and f"root layer {report['root_layer']}" in written["stop_reason"]
    root = [f for f in report["findings"] if f["layer"] == report["root_layer"] and f["severity"] == "fail"]
    assert root and root[0]["rule"] in written["stop_reason"], (root, written["stop_reason"])
    said = [r.getMessage() for r in caplog.records if "stopping training" in r.getMessage()]
    assert len(said) == 1 and root[0]["rule"] in said[0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stabdiag"):
        healthy, written = _grpo_run(tmp_path / "healthy", None)
    assert healthy.state.global_step == STEPS and not written["stopped"] and written["stop_reason"] is None
    assert written["report"]["runs"][0]["verdict"] == "pass"
    assert not [r for r in caplog.records if "stopping training" in r.getMessage()]
