"""Name inference (issue 17): the words of a key, the patterns, ambiguity, --map and the alias table
winning, --no-guess, the names-in-the-wild bench, and the two runs the issue describes: a benign GRPO
JSONL and a reward-hacked CSV whose keys no framework registered."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.errors import RuleError
from stabdiag.judge.engine import diagnose
from stabdiag.judge.rules import load_rules
from stabdiag.read.assemble import load
from stabdiag.read.run import Run, Series
from stabdiag.report.signals import render_signals
from stabdiag.signals.guess import canonical_words, guess_signals, match_key, parse_name_patterns, tokenize
from stabdiag.signals.resolve import resolve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import name_inference  # noqa: E402

runner = CliRunner()


def make_run(keys, steps: int = 30) -> Run:
    return Run("run", {k: Series.from_points(k, np.arange(1, steps + 1), np.linspace(0.1, 0.3, steps)) for k in keys})


# ---------------------------------------------------------------- words


@pytest.mark.parametrize("key, words", [
    ("train/reward_mean", ("train", "reward", "mean")),
    ("policyEntropy", ("policy", "entropy")),
    ("KLDiv", ("kl", "div")),
    ("CELoss", ("ce", "loss")),
    ("lr-AdamW", ("lr", "adam", "w")),
    ("gsm8k.val acc", ("gsm", "8", "k", "val", "acc")),
    ("pass@1", ("pass", "1")),
    ("optim/LR (group 0)", ("optim", "lr", "group", "0")),
])
def test_keys_split_at_separators_camel_case_and_digits(key, words):
    assert tokenize(key) == words


@pytest.mark.parametrize("key, words", [
    ("learning_rate", ("lr",)),
    ("avg_output_token_lenght", ("mean", "output", "token", "length")),
    ("gen_len_mean", ("generation", "length", "mean")),
    ("grad_norm_total", ("gradnorm", "total")),
    ("kl_divergence", ("kl",)),
    ("val/pass_at_8", ("val", "passk")),
    ("reward_p90", ("reward", "p90")),
    ("losses/clipfrac", ("loss", "clip", "frac")),
])
def test_words_take_their_canonical_form(key, words):
    assert canonical_words(key) == words


# ---------------------------------------------------------------- patterns


@pytest.mark.parametrize("key, signal", [
    ("train_reward", "reward"), ("avg_reward", "reward"), ("reward_mean", "reward"),
    ("val_acc", "eval:val_acc"), ("test_score", "eval:test_score"), ("oracle_reward", "eval:oracle_reward"),
    ("heldout/pass@1", "eval:heldout/pass@1"), ("benchmark_solve_rate", "eval:benchmark_solve_rate"),
    ("mean_response_len", "response_length"), ("avg_completion_tokens", "response_length"),
    ("gen_len_mean", "response_length"),
    ("kl_div", "kl"), ("kl_mean", "kl"), ("approx_kl", "update_kl"), ("ppo_kl", "update_kl"),
    ("entropy_mean", "entropy"), ("policy_entropy", "entropy"),
    ("total_loss", "loss"), ("train_loss", "loss"), ("val_loss", None), ("valid_loss", "eval_loss"),
    ("gradnorm", "grad_norm"), ("grad_norm_total", "grad_norm"), ("gnorm", "grad_norm"),
    ("learning_rate_group_0", "lr"), ("train/clip_fraction", "clip_frac"),
    ("frac_zero_std_groups", "zero_std_frac"), ("truncated_ratio", "truncation_rate"),
    ("vllm_train_logprob_diff", "logprob_delta"),
])
def test_common_hand_written_names_are_read(key, signal):
    match = match_key(key)
    if signal is None:       # val_loss is an alias: resolution maps it before inference
        assert resolve(make_run([key])).mapping() == {"eval_loss": key}
    else:
        assert match is not None and match.target == signal, (key, match)


@pytest.mark.parametrize("key", [
    "reward_std", "reward_min", "reward_max", "reward_p90", "std_reward", "val_acc_std", "kl_max",
    "response_length/max", "train/ent_coef", "actor/kl_coef", "kl_ctl_value", "train/clip_range",
    "format_reward", "rewards/chosen", "ngram_diversity", "tokens_per_second_per_gpu", "lrm",
    "eval/reward", "eval_gen_len", "critic/grad_norm", "ppo/val/clipfrac",
    "logprob_diff",             # layer 4 only from explicit rollout-engine words
    "rollout/kl",               # slime's KL to the reference, not rollout vs trainer
])
def test_statistics_coefficients_and_vague_names_are_never_guessed(key):
    assert match_key(key) is None


# ---------------------------------------------------------------- resolution


def test_guesses_are_recorded_noted_and_feed_the_signals():
    sig = resolve(make_run(["avg_reward", "val_acc", "kl_div", "ngram_diversity"]))
    assert sig.mapping() == {"reward": "avg_reward", "eval:val_acc": "val_acc", "kl": "kl_div"}
    assert sig.guessed == {"reward": "reward", "eval:val_acc": "eval-score", "kl": "kl"}
    assert sig.guessed_keys() == {"reward": "avg_reward", "eval:val_acc": "val_acc", "kl": "kl_div"}
    assert sig.unmapped == ("ngram_diversity",)
    assert any(n.startswith("guessed from names: reward <- avg_reward") for n in sig.notes)
    assert sig.kind == "rl"


def test_alias_table_and_map_always_win():
    sig = resolve(make_run(["reward", "avg_reward", "kl_mean"]))
    assert sig.mapping()["reward"] == "reward" and "avg_reward" in sig.unmapped   # signal present: no guess
    assert sig.guessed == {"kl": "kl"}
    sig = resolve(make_run(["avg_reward", "train_reward"]), {"reward": "train_reward"})
    assert sig.mapping() == {"reward": "train_reward"} and not sig.guessed and not sig.ambiguous


def test_tied_candidates_are_listed_not_guessed():
    sig = resolve(make_run(["losses/approx_kl", "losses/old_approx_kl", "avg_reward", "mean_reward_per_batch"]))
    assert "update_kl" not in sig.series
    assert sig.ambiguous["update_kl"] == ("losses/approx_kl", "losses/old_approx_kl")
    assert any("update_kl not guessed" in n and "--map update_kl=KEY" in n for n in sig.notes)
    text = render_signals([sig])
    assert "--map update_kl=losses/approx_kl" in text and "--map update_kl=losses/old_approx_kl" in text


def test_a_clear_leader_is_not_ambiguous():
    # both read as the reward: by the reward word (0.9) and by a score word (0.8)
    assert match_key("rollout_scores/mean").signal == "reward"
    result = guess_signals(["rollout_scores/mean", "train_reward"], [])
    assert result.chosen["reward"].key == "train_reward" and not result.ambiguous
    assert guess_signals(["train_reward"], ["reward"]).chosen == {}     # a signal present is never guessed


def test_no_guess_reads_only_the_alias_table():
    sig = resolve(make_run(["avg_reward", "val_acc", "loss"]), guess=False)
    assert sig.mapping() == {"loss": "loss"} and not sig.guessed
    assert not any(n.startswith("guessed from names") for n in sig.notes)


def test_percent_evals_guessed_go_through_the_same_unit_decision():
    run = Run("run", {"val_acc": Series.from_points("val_acc", np.arange(1, 11), np.linspace(40.0, 55.0, 10))})
    sig = resolve(run)
    assert sig.units["eval:val_acc"] == "percent, shown 0-1"
    assert sig.series["eval:val_acc"].values.max() == pytest.approx(0.55)


def test_the_patterns_file_is_not_read_as_rules_and_refuses_unknown_keys():
    assert load_rules()           # checklist/name_patterns.toml sits beside the rule files
    bad = '[[pattern]]\nid = "x"\nsignal = "reward"\nall = [["reward"]]\nconfidnce = 0.9\n'
    with pytest.raises(RuleError, match="unknown key 'confidnce'"):
        parse_name_patterns(bad, "name_patterns.toml")


def test_signals_json_marks_each_guess():
    sig = resolve(make_run(["avg_reward", "loss"]))
    entry = json.loads(render_signals([sig], "json"))["runs"][0]
    assert entry["signals"]["reward"]["guessed"] is True
    assert entry["signals"]["reward"]["guess_pattern"] == "reward"
    assert entry["signals"]["loss"]["guessed"] is False
    assert entry["ambiguous"] == {}


# ---------------------------------------------------------------- the names seen in the wild


def test_name_list_meets_the_targets_and_agrees_with_every_alias():
    rows = name_inference.read_names()
    assert len(rows) >= 150
    assert len({r.name for r in rows}) == len(rows)
    result = name_inference.score(rows)
    assert result.disagreements == ()
    assert result.precision >= name_inference.PRECISION_TARGET
    assert result.guess_precision >= name_inference.PRECISION_TARGET
    assert result.recall >= name_inference.RECALL_TARGET


# ---------------------------------------------------------------- the two runs


def _benign_jsonl(path: Path) -> Path:
    """120 steps of a healthy GRPO run: the held-out oracle reward rises with the training reward."""
    rng = np.random.default_rng(7)
    with path.open("w") as f:
        for step in range(1, 121):
            x = step / 120
            f.write(json.dumps({"step": step, "train_reward": 0.30 + 0.30 * x + rng.normal(0, 0.03),
                                "oracle_reward": 0.25 + 0.27 * x + rng.normal(0, 0.03),
                                "kl_mean": 0.002 + 0.03 * x + abs(rng.normal(0, 0.002)),
                                "entropy_mean": 0.85 - 0.15 * x + rng.normal(0, 0.01),
                                "gen_len_mean": 320 + 40 * x + rng.normal(0, 12),
                                "ngram_diversity": 0.78 + rng.normal(0, 0.01)}) + "\n")
    return path


def _hacked_csv(path: Path) -> Path:
    """240 steps: reward 0.3 -> 0.8 and responses 400 -> 1200 tokens while val_acc (every 10 steps) stays flat."""
    rng = np.random.default_rng(11)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "avg_reward", "val_acc", "kl_div", "policy_entropy", "mean_response_len",
                         "total_loss", "gradnorm"])
        for step in range(1, 241):
            x = step / 240
            writer.writerow([step, 0.30 + 0.50 * x + rng.normal(0, 0.02),
                             f"{0.42 + rng.normal(0, 0.005):.4f}" if step % 10 == 0 else "",
                             0.01 + 0.08 * x + abs(rng.normal(0, 0.003)), 0.80 - 0.20 * x + rng.normal(0, 0.01),
                             400 + 800 * x + rng.normal(0, 20), 0.05 * np.sin(step / 7) + rng.normal(0, 0.02),
                             0.3 + rng.normal(0, 0.03)])
    return path


def test_benign_grpo_run_is_read_by_guesses_and_not_failed(tmp_path):
    (run,) = load(_benign_jsonl(tmp_path / "benign_grpo.jsonl"))
    diag = diagnose(run)
    assert len(diag.guessed) >= 5
    assert diag.guessed == {"reward": "train_reward", "eval:oracle_reward": "oracle_reward", "kl": "kl_mean",
                            "entropy": "entropy_mean", "response_length": "gen_len_mean"}
    assert diag.verdict != "fail"
    assert {layer.layer: layer.status.value for layer in diag.layers}[1] != "unknown"
    assert {layer.layer: layer.status.value for layer in diag.layers}[2] != "unknown"
    assert any(n.startswith("guessed from names: reward <- train_reward") for n in diag.notes)
    assert diagnose(run, guess=False).verdict == "unknown"      # the run the issue saw: nothing read


def test_hacked_run_fails_at_layer_1_through_guesses(tmp_path):
    (run,) = load(_hacked_csv(tmp_path / "hacked.csv"))
    diag = diagnose(run)
    assert set(diag.guessed) == {"reward", "eval:val_acc", "kl", "entropy", "response_length", "loss", "grad_norm"}
    assert diag.verdict == "fail" and diag.root_layer == 1
    assert "L1.reward-eval-divergence" in {f.rule for f in diag.findings}
    assert diag.to_dict()["guessed"]["reward"] == "avg_reward"


# ---------------------------------------------------------------- the command line


def test_cli_shows_guesses_and_no_guess_turns_them_off(tmp_path):
    path = _hacked_csv(tmp_path / "hacked.csv")
    shown = runner.invoke(app, ["signals", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "guessed by" in shown.stdout and "guessed from names" in shown.stdout
    doc = json.loads(runner.invoke(app, ["signals", str(path), "--format", "json"]).stdout)
    assert doc["runs"][0]["signals"]["reward"]["guessed"] is True
    off = json.loads(runner.invoke(app, ["signals", str(path), "--format", "json", "--no-guess"]).stdout)
    assert off["runs"][0]["signals"] == {}
    checked = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert json.loads(checked.stdout)["runs"][0]["guessed"]["eval:val_acc"] == "val_acc"
    unguessed = runner.invoke(app, ["check", str(path), "--format", "json", "--no-guess", "--allow-unknown"])
    run = json.loads(unguessed.stdout)["runs"][0]
    assert run["guessed"] == {} and run["verdict"] == "unknown"


def test_config_key_no_guess(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)             # the project's config is found from the working directory up
    path = _hacked_csv(tmp_path / "hacked.csv")
    (tmp_path / "stabdiag.toml").write_text("no-guess = true\nallow-unknown = true\n")
    checked = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert json.loads(checked.stdout)["runs"][0]["guessed"] == {}
    shown = runner.invoke(app, ["check", str(path), "--show-settings"])
    assert "no-guess" in shown.stdout and "True" in shown.stdout
    listed = json.loads(runner.invoke(app, ["signals", str(path), "--format", "json"]).stdout)
    assert listed["runs"][0]["signals"] == {}
    (tmp_path / "stabdiag.toml").write_text('no-guess = "yes"\n')
    bad = runner.invoke(app, ["check", str(path)])
    assert bad.exit_code == 2 and "no-guess: expected true or false" in bad.stderr


# ---------------------------------------------------------------- abbreviations (issue 45 item 6)


@pytest.mark.parametrize("key, signal", [
    ("nll", "loss"), ("train/nll", "loss"), ("dev/nll", "eval_loss"), ("held_out/nll", "eval_loss"),
    ("heldout_nll", "eval_loss"), ("val_NLL", "eval_loss"),
    ("grad_norm_l2", "grad_norm"), ("gnorm_l2", "grad_norm"), ("global_grad_norm_l2", "grad_norm"),
    ("param_norm_l2", "params_norm"),
    ("rollout_vs_actor_logprob_diff", "logprob_delta"), ("vllm_vs_fsdp_logprob_gap", "logprob_delta"),
    ("sampler_trainer_logp_diff", "logprob_delta"), ("infer_train_logp_gap", "logprob_delta"),
    ("is_weight_mean", "is_ratio_mean"), ("is_ratio", "is_ratio_mean"), ("importance_weight", "is_ratio_mean"),
])
def test_abbreviations_read_as_their_signal(key, signal):
    sig = resolve(make_run([key]))
    assert sig.get(signal) is not None and sig.get(signal).key == key, sig.mapping()
    assert signal in sig.guessed                 # a guess: shown, and --map corrects it


@pytest.mark.parametrize("key", [
    "replay/is_weight_mean",     # prioritized replay's weights, not the rollout's
    "is_weight_std",             # a spread
    "val/logprob_gap", "logp_gap_pi",            # DPO chosen-vs-rejected gaps
    "importance_ratio",          # PPO's pi_new / pi_old: the update ratio, as before
    "tis_clip_frac", "rollout_corr/training_ppl",
])
def test_look_alikes_are_not_read_as_the_layer_4_signals(key):
    mapped = resolve(make_run([key])).mapping()
    assert not {"is_ratio_mean", "logprob_delta", "loss", "eval_loss"} & {s for s, k in mapped.items() if k == key}


def test_a_perplexity_is_read_as_the_ln_of_its_loss():
    ppl = np.exp(np.linspace(3.0, 1.5, 30))
    run = Run("run", {"val_ppl": Series.from_points("val_ppl", np.arange(1, 31), ppl),
                      "train_ppl": Series.from_points("train_ppl", np.arange(1, 31), ppl * 0.9)})
    sig = resolve(run)
    assert np.allclose(sig.get("eval_loss").values, np.linspace(3.0, 1.5, 30))
    assert np.allclose(sig.get("loss").values, np.log(ppl * 0.9))
    [note] = [n for n in sig.notes if n.startswith("guessed from names")]
    assert "eval_loss <- ln val_ppl" in note and "loss <- ln train_ppl" in note
    # a logged loss wins over its perplexity, which then stays unmapped
    both = resolve(make_run(["val_loss", "val_ppl"]))
    assert both.get("eval_loss").key == "val_loss" and "val_ppl" in both.unmapped
