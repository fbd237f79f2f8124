"""HF Trainer / TRL: trainer_state.json log_history, and the notebook progress table (.ipynb output,
.html, or pasted as a `|` table).  Real logs are read from shared/real_logs when that folder exists."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stabdiag.errors import InputError
from stabdiag.judge.engine import diagnose
from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats import trainer_state as hf_trainer_state
from stabdiag.read.formats.text import notebook
from stabdiag.signals.resolve import resolve

REAL = Path(__file__).resolve().parents[2] / "shared" / "real_logs"
real = pytest.mark.skipif(not REAL.is_dir(), reason="shared/real_logs not present")

# the Trainer writes json.dumps(..., allow_nan=True): bare NaN / Infinity tokens
STATE = """{
  "best_metric": null,
  "global_step": 30,
  "log_history": [
    {"epoch": 0.1, "grad_norm": 1.0, "learning_rate": 1e-05, "loss": 2.0, "step": 10},
    {"epoch": 0.2, "grad_norm": NaN, "learning_rate": 1e-05, "loss": 0.0, "step": 20},
    {"epoch": 0.2, "eval_loss": 1.9, "eval_accuracy": 61.5, "eval_runtime": 3.0, "step": 20},
    {"epoch": 0.3, "grad_norm": Infinity, "learning_rate": 1e-05, "loss": 1.5, "step": 30},
    {"epoch": 0.3, "predict_loss": 1.0},
    {"epoch": 0.3, "step": 30, "total_flos": 1.0, "train_loss": 1.2, "train_runtime": 10.0}
  ]
}"""

GRPO_STATE = {"log_history": [
    {"step": s, "loss": 0.0001 * s, "grad_norm": 0.5, "learning_rate": 5e-6, "reward": 0.1 * s,
     "reward_std": 0.3, "kl": 0.001 * s, "completions/mean_length": 200.0, "frac_reward_zero_std": 0.2,
     "clip_ratio/region_mean": 0.0, "entropy": 0.6} for s in range(1, 21)]}

HTML_TABLE = """<div><progress value='3' max='3'></progress> [3/3 00:10, Epoch 0/1]</div>
<table border="1" class="dataframe"><thead><tr style="text-align: left;">
<th>Step</th><th>Training Loss</th><th>Validation Loss</th><th>reward</th><th>kl</th>
<th>rewards / correctness_reward_func</th></tr></thead><tbody>
<tr><td>1</td><td>0.000000</td><td>No log</td><td>0.125</td><td>0.000000</td><td>0.0</td></tr>
<tr><td>2</td><td>0.000100</td><td>No log</td><td>0.250</td><td>0.000010</td><td>0.5</td></tr>
<tr><td>3</td><td>nan</td><td>1.5</td><td>0.500</td><td>0.000020</td><td>1.0</td></tr>
</tbody></table>"""

PIPE_TABLE = """Training output pasted from the notebook:
| Step | Training Loss | reward    | reward_std | completion_length | kl       |
|------|---------------|-----------|------------|-------------------|----------|
| 1    | 0.000000      | 0.125000  | 0.000000   | 200.000000        | 0.000000 |
| 2    | 0.000000      | 0.072375  | 0.248112   | 200.000000        | 0.000000 |
| 3    | 0.000000      | -0.079000 | 0.163776   | 182.500000        | 0.000005 |
"""


def notebook_json(html: str, markdown_table: str = "") -> str:
    return json.dumps({"nbformat": 4, "cells": [
        {"cell_type": "markdown", "source": [markdown_table]},
        {"cell_type": "code", "source": ["trainer.train()"], "outputs": [
            {"output_type": "display_data", "data": {"text/html": html.splitlines(True),
                                                     "text/plain": ["<IPython.core.display.HTML object>"]}}]}]})


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_trainer_state_reads_train_and_eval_records(tmp_path):
    path = write(tmp_path, "trainer_state.json", STATE)
    assert loaders.loader_for(path) is hf_trainer_state
    run = hf_trainer_state.load(path)
    assert list(run.series["loss"].steps) == [10, 20, 30]
    assert math.isinf(run.series["grad_norm"].values[2])
    assert list(run.series["eval_loss"].steps) == [20]
    assert "train_loss" not in run.series and run.meta["summary"]["train_runtime"] == 10.0
    assert not run.resumed                                   # the eval record repeats the epoch, nothing more
    assert any("without a step" in n for n in run.notes)


def test_trainer_state_nan_filter_trap(tmp_path):
    run = hf_trainer_state.load(write(tmp_path, "trainer_state.json", STATE))
    assert math.isnan(run.series["loss"].values[1])          # logged 0.0 beside grad_norm NaN
    assert run.series["loss"].values[2] == 1.5               # a real loss beside inf grad_norm stays
    assert any("logging_nan_inf_filter" in n and "20" in n for n in run.notes)
    diag = diagnose(run)
    assert diag.root_layer == 3 and diag.first_nonfinite_step == 20


def test_trainer_state_signals_and_percent_eval(tmp_path):
    sig = resolve(hf_trainer_state.load(write(tmp_path, "trainer_state.json", STATE)))
    assert sig.framework == "HF Trainer"
    assert sig.mapping()["eval_loss"] == "eval_loss" and sig.mapping()["eval:accuracy"] == "eval_accuracy"
    assert sig.series["eval:accuracy"].values[0] == pytest.approx(0.615)


def test_trl_grpo_trainer_state(tmp_path):
    run = hf_trainer_state.load(write(tmp_path, "trainer_state.json", json.dumps(GRPO_STATE)))
    sig = resolve(run)
    assert sig.framework == "TRL GRPO"
    assert sig.mapping()["zero_std_frac"] == "frac_reward_zero_std"
    assert sig.mapping()["response_length"] == "completions/mean_length"
    assert sig.mapping()["clip_frac"] == "clip_ratio/region_mean"


def test_lowercase_nan_tokens_are_read(tmp_path):
    text = '{"log_history": [{"loss": nan, "step": 1}, {"loss": 1.0, "grad_norm": -inf, "step": 2}]}'
    run = hf_trainer_state.load(write(tmp_path, "trainer_state.json", text))
    assert math.isnan(run.series["loss"].values[0]) and run.series["grad_norm"].values[0] == -math.inf


@pytest.mark.parametrize("name,text", [
    ("all_results.json", '{"epoch": 10.0, "train_loss": 0.5}'),
    ("config.json", '{"hidden_size": 768}'),
    ("trainer_state.txt", STATE),
])
def test_other_json_is_not_claimed(tmp_path, name, text):
    assert not hf_trainer_state.can_load(write(tmp_path, name, text))


def test_broken_json_is_an_input_error(tmp_path):
    path = write(tmp_path, "trainer_state.json", '{"log_history": [ {"loss": 1.0, ')
    with pytest.raises(InputError, match="trainer_state.json"):
        hf_trainer_state.load(path)


def test_checkpoint_copies_join_the_output_dir_as_one_run(tmp_path):
    # a checkpoint's trainer_state.json is a prefix of the final one: one run, read once, not "resumed"
    state = json.loads(STATE)
    state["log_history"] = state["log_history"][:2]
    write(tmp_path, "trainer_state.json", STATE)
    (tmp_path / "checkpoint-20").mkdir()
    write(tmp_path / "checkpoint-20", "trainer_state.json", json.dumps(state))
    [found] = assemble.discover(str(tmp_path))
    assert found.name == tmp_path.name and len(found.files) == 2
    [run] = assemble.load(str(tmp_path))
    assert not run.resumed and list(run.series["loss"].steps) == [10, 20, 30]


def test_notebook_output_table(tmp_path):
    path = write(tmp_path, "grpo.ipynb", notebook_json(HTML_TABLE, markdown_table=PIPE_TABLE))
    assert loaders.loader_for(path) is notebook
    run = notebook.load(path)
    assert set(run.series) == {"loss", "eval_loss", "reward", "kl", "rewards/correctness_reward_func"}
    assert list(run.series["eval_loss"].steps) == [3]         # "No log" cells are absent, not NaN
    assert math.isnan(run.series["loss"].values[2])
    assert list(run.series["reward"].values) == [0.125, 0.25, 0.5]   # markdown example table not read


def test_notebook_and_its_html_copy_are_read_once(tmp_path):
    write(tmp_path, "grpo.ipynb", notebook_json(HTML_TABLE))
    write(tmp_path, "training_output_cell.html", HTML_TABLE)
    [run] = assemble.load(str(tmp_path))
    assert not run.resumed and len(run.series["reward"]) == 3
    assert any("read once" in n for n in run.notes)


def test_pasted_pipe_table(tmp_path):
    path = write(tmp_path, "progress.txt", PIPE_TABLE)
    assert loaders.loader_for(path) is notebook
    sig = resolve(notebook.load(path))
    assert sig.framework == "TRL GRPO"
    assert sig.mapping()["response_length"] == "completion_length" and sig.mapping()["loss"] == "loss"


def test_notebook_without_a_training_table_is_not_claimed(tmp_path):
    assert not notebook.can_load(write(tmp_path, "eda.ipynb", notebook_json("<table><tr><th>a</th></tr></table>")))
    assert not notebook.can_load(write(tmp_path, "page.html", "<html><body>hello</body></html>"))


# ---------------------------------------------------------------- real logs (shared/real_logs)

@real
def test_real_trl_sft_trainer_state_passes():
    [run] = assemble.load(str(REAL / "hf_trl_sft_tinyllama_lora"))
    sig = resolve(run)
    assert sig.framework == "TRL SFT" and len(sig.series["loss"]) == 186 and len(sig.series["eval_loss"]) == 14
    assert not run.resumed
    assert diagnose(run).root_layer is None


@real
def test_real_hf_trainer_cpt_reads_trainer_state_and_console_as_one_run():
    [run] = assemble.load(str(REAL / "hf_trainer_cpt_feedback_gen"))
    assert sorted(Path(s).name for s in run.sources) == ["cmd.txt", "trainer_state.json"]
    assert run.series["loss"].source.startswith("trainer_state.json")
    sig = resolve(run)
    assert sig.framework == "HF Trainer" and sig.mapping()["eval_loss"] == "eval_loss"
    assert {"eval:rouge-1", "eval:rouge-2", "eval:rouge-l"} <= set(sig.evals())
    assert diagnose(run).root_layer is None


@real
def test_real_hf_trainer_console_reads_alone(tmp_path):
    text = (REAL / "hf_trainer_cpt_feedback_gen" / "cmd.txt").read_text(encoding="utf-8", errors="replace")
    run = assemble.load(write(tmp_path, "cmd.txt", text))[0]
    assert list(run.series["loss"].steps)[:3] == [500, 1000, 1500] and len(run.series["eval_loss"]) == 10


@real
@pytest.mark.parametrize("folder,rows", [("unsloth_trl_grpo_llama3.1_8b", 250), ("unsloth_trl_grpo_llama3.2_3b", 500)])
def test_real_unsloth_notebooks(folder, rows):
    [run] = assemble.load(str(REAL / folder))
    sig = resolve(run)
    assert sig.framework == "TRL GRPO" and not run.resumed
    assert len(sig.series["reward"]) == rows and sig.mapping()["kl"] == "kl"
    assert sig.mapping()["response_length"] == "completion_length"


def test_epoch_progress_table(tmp_path):
    html = ("<table><tr><th>Epoch</th><th>Training Loss</th><th>Validation Loss</th><th>Accuracy</th></tr>"
            "<tr><td>1</td><td>0.9</td><td>0.8</td><td>0.61</td></tr>"
            "<tr><td>2</td><td>0.7</td><td>0.75</td><td>0.66</td></tr></table>")
    run = notebook.load(write(tmp_path, "sft.ipynb", notebook_json(html)))
    assert list(run.series["eval_loss"].steps) == [1, 2] and any("step = epoch" in n for n in run.notes)


def test_other_tables_in_a_notebook_are_not_read(tmp_path):
    other = "<table><tr><th>step</th><th>prompt</th></tr><tr><td>1</td><td>5</td></tr></table>"
    path = write(tmp_path, "nb.ipynb", notebook_json(other + HTML_TABLE))
    assert set(notebook.load(path).series) == {"loss", "eval_loss", "reward", "kl", "rewards/correctness_reward_func"}
    assert not notebook.can_load(write(tmp_path, "only.ipynb", notebook_json(other)))
