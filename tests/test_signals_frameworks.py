"""Alias groups per framework (key names from shared/reference/metric_keys.md §13), the §12 traps,
eval detection, framework fingerprints and the `stabdiag signals` framework line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stabdiag.read.run import Run, Series
from stabdiag.report.signals import framework_line, render_signals, signals_dict
from stabdiag.signals.resolve import default_alias_table, detect_framework, resolve


def make_run(keys, steps=10, values=None, meta=None) -> Run:
    values = values or {}
    series = {}
    for i, key in enumerate(keys):
        v = values.get(key, np.linspace(0.1, 0.2, steps) + i * 1e-3)
        series[key] = Series.from_points(key, np.arange(1, steps + 1), v)
    return Run("run", series, meta=meta or {})


# (framework expected, the run's keys in that framework's real shape, signal -> key expected)
FRAMEWORKS = [
    ("verl", ["critic/score/mean", "critic/rewards/mean", "actor/pg_clipfrac", "actor/kl_loss", "actor/ppo_kl",
              "actor/entropy", "actor/pg_loss", "actor/grad_norm", "actor/lr", "response_length/mean",
              "response_length/clip_ratio", "training/rollout_probs_diff_mean", "rollout_corr/kl",
              "rollout_corr/k3_kl", "training/off_policy/trajectory_staleness/mean", "rollout/moe/max_vio/max",
              "training/filter_groups/evicted_samples"],
     {"reward": "critic/score/mean", "clip_frac": "actor/pg_clipfrac", "kl": "actor/kl_loss",
      "update_kl": "actor/ppo_kl", "entropy": "actor/entropy", "loss": "actor/pg_loss",
      "grad_norm": "actor/grad_norm", "lr": "actor/lr", "response_length": "response_length/mean",
      "truncation_rate": "response_length/clip_ratio", "prob_delta": "training/rollout_probs_diff_mean",
      "rollout_kl": "rollout_corr/kl", "logprob_k3_kl": "rollout_corr/k3_kl",
      "policy_version_lag": "training/off_policy/trajectory_staleness/mean",
      "moe_imbalance": "rollout/moe/max_vio/max", "zero_std_count": "training/filter_groups/evicted_samples"}),
    ("TRL GRPO", ["train/reward", "train/reward_std", "train/frac_reward_zero_std", "train/completions/mean_length",
                  "train/completions/clipped_ratio", "train/kl", "train/entropy", "train/clip_ratio/region_mean",
                  "train/loss", "train/grad_norm", "train/learning_rate",
                  "train/sampling/sampling_logp_difference/mean", "train/sampling/importance_sampling_ratio/mean",
                  "train/aux_loss", "eval/reward", "eval/loss"],
     {"reward": "train/reward", "reward_std": "train/reward_std", "zero_std_frac": "train/frac_reward_zero_std",
      "response_length": "train/completions/mean_length", "truncation_rate": "train/completions/clipped_ratio",
      "kl": "train/kl", "entropy": "train/entropy", "clip_frac": "train/clip_ratio/region_mean",
      "loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/learning_rate",
      "logprob_delta": "train/sampling/sampling_logp_difference/mean",
      "is_ratio_mean": "train/sampling/importance_sampling_ratio/mean", "moe_load_balance": "train/aux_loss",
      "eval_loss": "eval/loss"}),     # eval/reward: the training reward on eval prompts, not an independent eval
    ("TRL PPO", ["train/objective/rlhf_reward", "train/objective/scores", "train/objective/kl",
                 "train/policy/approxkl_avg", "train/policy/clipfrac_avg", "train/policy/entropy_avg",
                 "train/loss/policy_avg", "train/lr"],
     {"reward": "train/objective/scores", "kl": "train/objective/kl", "update_kl": "train/policy/approxkl_avg",
      "clip_frac": "train/policy/clipfrac_avg", "entropy": "train/policy/entropy_avg",
      "loss": "train/loss/policy_avg", "lr": "train/lr"}),
    ("OpenRLHF", ["train/reward", "train/rollout/reward_mean", "train/kl", "train/ppo_kl", "train/ppo_clip_ratio",
                  "train/entropy_loss", "train/policy_loss", "train/actor_grad_norm", "train/actor_lr",
                  "train/vllm_kl", "train/rollout/truncated_rate", "train/response_length",
                  "eval/eval_gsm8k_pass1", "eval/eval_gsm8k_response_length_mean", "eval/eval_gsm8k_truncated_rate"],
     {"reward": "train/reward", "kl": "train/kl", "update_kl": "train/ppo_kl", "clip_frac": "train/ppo_clip_ratio",
      "entropy": "train/entropy_loss", "loss": "train/policy_loss", "grad_norm": "train/actor_grad_norm",
      "lr": "train/actor_lr", "rollout_kl": "train/vllm_kl", "truncation_rate": "train/rollout/truncated_rate",
      "response_length": "train/response_length", "eval:gsm8k": "eval/eval_gsm8k_pass1"}),
    ("NeMo-RL", ["train/reward", "train/kl_penalty", "train/approx_entropy", "train/probs_ratio", "train/loss",
                 "train/grad_norm", "train/lr", "train/token_mult_prob_error", "train/gen_kl_error",
                 "train/sampling_importance_ratio", "train/avg_trajectory_age", "train/truncation_rate",
                 "train/mean_gen_tokens_per_sample", "train/moe/load_balancing_loss", "validation/accuracy",
                 "validation/avg_length"],
     {"reward": "train/reward", "kl": "train/kl_penalty", "entropy": "train/approx_entropy",
      "update_ratio": "train/probs_ratio", "loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr",
      "mult_prob_error": "train/token_mult_prob_error", "rollout_kl": "train/gen_kl_error",
      "is_ratio_mean": "train/sampling_importance_ratio", "policy_version_lag": "train/avg_trajectory_age",
      "truncation_rate": "train/truncation_rate", "response_length": "train/mean_gen_tokens_per_sample",
      "moe_load_balance": "train/moe/load_balancing_loss", "eval:accuracy": "validation/accuracy"}),
    ("slime", ["rollout/raw_reward", "rollout/rewards", "rollout/response_len/mean", "rollout/truncated_ratio",
               "rollout/kl", "train/kl_loss", "train/ppo_kl", "train/pg_clipfrac", "train/entropy_loss",
               "train/loss", "train/grad_norm", "train/lr-pg_0", "train/train_rollout_logprob_abs_diff",
               "eval/aime", "eval/aime-truncated_ratio", "eval/aime/response_len/mean"],
     {"reward": "rollout/raw_reward", "response_length": "rollout/response_len/mean",
      "truncation_rate": "rollout/truncated_ratio", "kl": "train/kl_loss", "update_kl": "train/ppo_kl",
      "clip_frac": "train/pg_clipfrac", "entropy": "train/entropy_loss", "loss": "train/loss",
      "grad_norm": "train/grad_norm", "lr": "train/lr-pg_0",
      "logprob_delta": "train/train_rollout_logprob_abs_diff", "eval:aime": "eval/aime"}),
    ("ROLL", ["critic/score/mean", "critic/rewards/mean", "actor/ppo_ratio_clipfrac", "critic/kl", "actor/approxkl",
              "critic/entropy/mean", "actor/pg_loss", "actor_train/grad_norm", "actor/lr",
              "actor/train_infer_diff_token_mean", "actor/train_infer_ratio_token_mean",
              "scheduler/off_policy_ratio", "token/response_length/mean", "token/total_response_length/clip",
              "group/mixed_groups_ratio", "val_correct/all/mean", "actor_train/load_balancing_loss"],
     {"reward": "critic/score/mean", "clip_frac": "actor/ppo_ratio_clipfrac", "kl": "critic/kl",
      "update_kl": "actor/approxkl", "entropy": "critic/entropy/mean", "loss": "actor/pg_loss",
      "grad_norm": "actor_train/grad_norm", "lr": "actor/lr", "prob_delta": "actor/train_infer_diff_token_mean",
      "is_ratio_mean": "actor/train_infer_ratio_token_mean", "policy_version_lag": "scheduler/off_policy_ratio",
      "response_length": "token/response_length/mean", "truncated_count": "token/total_response_length/clip",
      "eval:all": "val_correct/all/mean", "moe_load_balance": "actor_train/load_balancing_loss"}),
    ("AReaL", ["rollout/reward", "ppo_actor/task_reward/avg", "ppo_actor/no_eos_ratios/avg",
               "ppo_actor/kl_rewards/avg", "ppo_actor/update/approx_kl/avg", "ppo_actor/update/entropy/avg",
               "ppo_actor/update/clip_ratio/avg", "ppo_actor/update/actor_loss/avg", "ppo_actor/update/grad_norm",
               "ppo_actor/update/lr", "ppo_actor/update/behave_approx_kl/avg",
               "ppo_actor/update/behave_imp_weight/avg",
               "ppo_actor/update/version_stats/sample_staleness_theta_avg", "eval-rollout/reward",
               "eval-rollout/reward__count"],
     {"reward": "rollout/reward", "truncation_rate": "ppo_actor/no_eos_ratios/avg",
      "kl_penalty": "ppo_actor/kl_rewards/avg", "update_kl": "ppo_actor/update/approx_kl/avg",
      "entropy": "ppo_actor/update/entropy/avg", "clip_frac": "ppo_actor/update/clip_ratio/avg",
      "loss": "ppo_actor/update/actor_loss/avg", "grad_norm": "ppo_actor/update/grad_norm",
      "lr": "ppo_actor/update/lr", "rollout_kl": "ppo_actor/update/behave_approx_kl/avg",
      "is_ratio_mean": "ppo_actor/update/behave_imp_weight/avg",
      "policy_version_lag": "ppo_actor/update/version_stats/sample_staleness_theta_avg"}),
    ("Megatron-LM", ["lm loss", "grad-norm", "loss-scale", "learning-rate", "num-zeros", "params-norm",
                     "skipped-train-samples", "lm loss validation", "load_balancing_loss"],
     {"loss": "lm loss", "grad_norm": "grad-norm", "loss_scale": "loss-scale", "lr": "learning-rate",
      "grad_zeros": "num-zeros", "params_norm": "params-norm", "skipped_steps": "skipped-train-samples",
      "eval_loss": "lm loss validation", "moe_load_balance": "load_balancing_loss"}),
    ("torchtitan", ["loss_metrics/global_avg_loss", "grad_norm", "lr/AdamW", "validation_metrics/loss", "mfu(%)"],
     {"loss": "loss_metrics/global_avg_loss", "grad_norm": "grad_norm", "lr": "lr/AdamW",
      "eval_loss": "validation_metrics/loss"}),
    ("OLMo-core", ["train/CE loss", "optim/total grad norm", "optim/LR (group 0)", "optim/step skipped",
                   "train/load imbalance", "eval/lm/c4/CE loss", "eval/downstream/hellaswag_acc"],
     {"loss": "train/CE loss", "grad_norm": "optim/total grad norm", "lr": "optim/LR (group 0)",
      "skipped_steps": "optim/step skipped", "moe_imbalance": "train/load imbalance",
      "eval_loss": "eval/lm/c4/CE loss", "eval:downstream/hellaswag": "eval/downstream/hellaswag_acc"}),
    ("OLMo", ["train/CrossEntropyLoss", "optim/total_grad_norm", "optim/learning_rate_group0",
              "eval/c4/CrossEntropyLoss"],
     {"loss": "train/CrossEntropyLoss", "grad_norm": "optim/total_grad_norm", "lr": "optim/learning_rate_group0",
      "eval_loss": "eval/c4/CrossEntropyLoss"}),
    ("DeepSpeed", ["Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/loss_scale",
                   "Train/Samples/eval_loss"],
     {"loss": "Train/Samples/train_loss", "lr": "Train/Samples/lr", "loss_scale": "Train/Samples/loss_scale",
      "eval_loss": "Train/Samples/eval_loss"}),
]


@pytest.mark.parametrize("framework,keys,expected", FRAMEWORKS, ids=[f[0] for f in FRAMEWORKS])
def test_framework_alias_group(framework, keys, expected):
    sig = resolve(make_run(keys))
    assert sig.framework == framework
    assert {name: sig.series[name].key for name in expected if name in sig.series} == expected


def test_every_new_signal_is_in_the_table():
    table = default_alias_table()
    for name in ("update_kl", "clip_frac", "truncation_rate", "zero_std_frac", "policy_version_lag",
                 "moe_load_balance", "moe_imbalance", "moe_dead_expert_frac", "attention_logit_max", "loss_scale",
                 "is_ratio_mean", "eval_loss", "rollout_kl"):
        assert name in table.signals, name


def test_three_kinds_of_kl_stay_apart():
    sig = resolve(make_run(["actor/kl_loss", "actor/ppo_kl", "rollout_corr/kl", "rollout_corr/k3_kl"]))
    assert sig.series["kl"].key == "actor/kl_loss"
    assert sig.series["update_kl"].key == "actor/ppo_kl"
    assert sig.series["rollout_kl"].key == "rollout_corr/kl"
    assert sig.series["logprob_k3_kl"].key == "rollout_corr/k3_kl"


def test_probability_and_log_space_get_separate_signals():
    sig = resolve(make_run(["training/rollout_probs_diff_mean", "train/train_rollout_logprob_abs_diff"]))
    assert sig.series["prob_delta"].key == "training/rollout_probs_diff_mean"
    assert sig.series["logprob_delta"].key == "train/train_rollout_logprob_abs_diff"
    assert default_alias_table().signals["prob_delta"].layer == 4


def test_counts_never_feed_fractions():
    sig = resolve(make_run(["token/total_response_length/clip", "training/filter_groups/evicted_samples"]))
    assert "truncation_rate" not in sig.series and "zero_std_frac" not in sig.series
    assert sig.series["truncated_count"].key == "token/total_response_length/clip"
    assert sig.series["zero_std_count"].key == "training/filter_groups/evicted_samples"


def test_shaped_rewards_are_not_the_reward():
    verl = resolve(make_run(["critic/rewards/mean", "critic/score/mean"]))
    assert verl.series["reward"].key == "critic/score/mean"
    slime = resolve(make_run(["rollout/rewards", "rollout/raw_reward"]))
    assert slime.series["reward"].key == "rollout/raw_reward"
    assert "rollout/rewards" in slime.unmapped


def test_roll_zero_std_fraction_is_the_sum_of_two_ratios():
    run = make_run(["group/all_correct_groups_ratio", "group/all_incorrect_groups_ratio"],
                   values={"group/all_correct_groups_ratio": np.full(10, 0.3),
                           "group/all_incorrect_groups_ratio": np.full(10, 0.2)})
    s = resolve(run).series["zero_std_frac"]
    assert np.allclose(s.values, 0.5) and "+" in s.key


def test_nemo_percent_baseline_is_rescaled():
    run = make_run(["train/baseline_reward/pct_0", "train/baseline_reward/pct_1"],
                   values={"train/baseline_reward/pct_0": np.full(10, 40.0),
                           "train/baseline_reward/pct_1": np.full(10, 20.0)})
    assert np.allclose(resolve(run).series["zero_std_frac"].values, 0.6)


@pytest.mark.parametrize("values,signal,key,first", [
    ({"rollout/zero_std/count_0.0": 3.0, "rollout/zero_std/count_1.0": 2.0}, "zero_std_count",
     "rollout/zero_std/count_0.0 + rollout/zero_std/count_1.0", 5.0),                      # slime counts
    ({"train/dynamic_filtering_pass_rate": 0.7}, "zero_std_frac", "1 - train/dynamic_filtering_pass_rate", 0.3),
    ({"nonzero_groups_ratio": 0.4}, "zero_std_frac", "1 - nonzero_groups_ratio", 0.6),      # Megatron-LM RL
    ({"ppo_actor/seq_len/avg": 500.0, "ppo_actor/prompt_len/avg": 120.0}, "response_length",
     "ppo_actor/seq_len/avg - ppo_actor/prompt_len/avg", 380.0),                             # AReaL
    ({"ppo_actor/update/update_successful": 0.0}, "skipped_steps", "1 - ppo_actor/update/update_successful", 1.0),
])
def test_derived_signals(values, signal, key, first):
    run = make_run(list(values), values={k: np.full(10, v) for k, v in values.items()})
    s = resolve(run).series[signal]
    assert s.key == key and s.values[0] == pytest.approx(first)


@pytest.mark.parametrize("key,name", [
    ("val-core/openai/gsm8k/acc/mean@8", "eval:openai/gsm8k"),
    ("val-core/math/reward/mean@4", "eval:math"),
    ("val/test_score/gsm8k", "eval:gsm8k"),
    ("eval/eval_math500_pass1", "eval:math500"),
    ("validation/accuracy", "eval:accuracy"),
    ("eval/aime", "eval:aime"),
    ("val_correct/all/mean", "eval:all"),
    ("eval_gsm8k_challenge_accuracy", "eval:gsm8k_challenge"),
])
def test_eval_scores_are_found(key, name):
    sig = resolve(make_run([key]))
    assert name in sig.series and sig.series[name].key == key


@pytest.mark.parametrize("key", ["val-core/openai/gsm8k/acc/maj@8/mean", "eval/eval_gsm8k_response_length_mean",
                                 "eval/aime-truncated_ratio", "eval_runtime", "eval_samples_per_second",
                                 "eval-rollout/reward__count", "validation/avg_length", "eval/lm/c4/Perplexity",
                                 # the training reward on eval prompts is not an independent check (issue 13)
                                 "eval/reward", "eval_reward", "eval/rewards/accuracy_reward/mean",
                                 "eval-rollout/reward", "eval/completions/mean_length"])
def test_non_scores_are_not_evals(key):
    assert not resolve(make_run([key])).evals()


def test_eval_losses_become_eval_loss():
    assert resolve(make_run(["eval_loss"])).series["eval_loss"].key == "eval_loss"
    sig = resolve(make_run(["eval/lm/c4/CE loss", "eval/lm/wiki/CE loss"]))
    assert sig.series["eval_loss"].key == "eval/lm/c4/CE loss" and not sig.evals()
    assert any("eval/lm/wiki/CE loss" in n for n in sig.notes)


def test_percent_eval_is_rescaled():
    run = make_run(["validation/accuracy"], values={"validation/accuracy": np.linspace(20, 45, 10)})
    sig = resolve(run)
    assert sig.series["eval:accuracy"].values.max() == pytest.approx(0.45)
    assert any("percentage" in n for n in sig.notes)


def test_roll_is_told_from_verl():
    assert detect_framework(make_run(["critic/score/mean", "actor/ppo_ratio_clipfrac"])) == "ROLL"
    assert detect_framework(make_run(["critic/score/mean", "actor/pg_clipfrac"])) == "verl"


def test_framework_falls_back_to_the_loader_word():
    assert detect_framework(make_run(["something"], meta={"framework": "llm.c"})) == "llm.c"
    assert detect_framework(make_run(["something"])) is None


def test_pretraining_run_says_which_layers_cannot_be_judged():
    sig = resolve(make_run(["lm loss", "grad-norm"]))
    assert any("layers 1, 2 and 4" in n for n in sig.notes)
    assert not any("layers 1, 2 and 4" in n for n in resolve(make_run(["reward", "loss"])).notes)


def test_signals_report_names_the_framework():
    sig = resolve(make_run(["critic/score/mean", "actor/pg_clipfrac", "actor/kl_loss"]))
    assert framework_line(sig).startswith("verl detected; reward <- critic/score/mean, kl <- actor/kl_loss")
    assert "verl detected" in render_signals([sig])
    data = json.loads(render_signals([sig], "json"))
    run = data["runs"][0]
    assert run["framework"] == "verl" and {"run", "signals", "unmapped", "notes"} <= set(run)
    assert signals_dict([resolve(make_run(["x"]))])["runs"][0]["framework"] is None
