"""A Jupyter notebook on its own is one run, read from the stored outputs of its code cells: the HF
progress table (its HTML stored as a list of lines, as Jupyter saves it), else the printed text (the
Trainer's dicts, a loop's step lines), and the TrainOutput the training cell returned.  The published
notebooks are read from shared/real_healthy (skipped when that folder is absent), never copied here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stabdiag.errors import InputError
from stabdiag.read import assemble
from stabdiag.read import formats as loaders
from stabdiag.read.formats.text import notebook

HEALTHY = Path(__file__).resolve().parents[2] / "shared" / "real_healthy"
real = pytest.mark.skipif(not HEALTHY.is_dir(), reason="shared/real_healthy not present")

TABLE = """<div>
  <progress value='3' max='3' style='width:300px; height:20px; vertical-align: middle;'></progress>
  [3/3 00:30, Epoch 1/1]
</div>
<table border="1" class="dataframe">
  <thead>
 <tr style="text-align: left;">
      <th>Step</th>
      <th>Training Loss</th>
      <th>reward</th>
    </tr>
  </thead>
  <tbody>
    <tr><td>1</td><td>0.000000</td><td>0.125000</td></tr>
    <tr><td>2</td><td>0.001200</td><td>0.250000</td></tr>
    <tr><td>3</td><td>0.001500</td><td>0.500000</td></tr>
  </tbody>
</table><p>"""
TRAIN_OUTPUT = ("TrainOutput(global_step=3, training_loss=0.0009, metrics={'train_runtime': 30.5, "
                "'train_samples_per_second': 0.8, 'train_steps_per_second': 0.1, 'total_flos': 0.0, "
                "'train_loss': 0.0009, 'epoch': 1.0})")


def _lines(text: str) -> list[str]:
    return text.splitlines(True)          # Jupyter stores every multi-line text as a list of lines


def _nb(*cells) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}, indent=1)


def _code(*outputs, source="trainer.train()"):
    return {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": _lines(source),
            "outputs": list(outputs)}


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": _lines(text)}


def _html(html):
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/html": _lines(html), "text/plain": ["<IPython.core.display.HTML object>"]}}


def _result(text):
    return {"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": _lines(text)}}


def _write(tmp_path, name, text):
    folder = tmp_path / "nb"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_notebook_alone_is_read_from_its_stored_table_and_train_output(tmp_path):
    path = _write(tmp_path, "grpo.ipynb", _nb(
        {"cell_type": "markdown", "metadata": {}, "source": ["| Step | Training Loss |\n", "| 9 | 9.9 |\n"]},
        _code(_stream("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1\n"), _html(TABLE),
              _result(TRAIN_OUTPUT))))
    assert loaders.loader_for(path) is notebook
    [run] = assemble.load(str(Path(path).parent))
    assert run.series["loss"].steps.tolist() == [1, 2, 3]
    assert run.series["reward"].values.tolist() == [0.125, 0.25, 0.5]
    assert run.meta["global_step"] == 3 and run.meta["summary"]["train_runtime"] == 30.5


@pytest.mark.parametrize("html,simple", [
    (TABLE, True),
    (TABLE.upper().replace("<TD>0.001200</TD>", "<td/>"), True),           # tag case, a self-closed cell
    (TABLE.replace("<th>reward</th>", "<th>re<b>ward</b></th>").replace("0.250000", "0.25<br/>"), True),
    (TABLE.replace("reward", "reward &amp; kl"), False),                     # an entity
    (TABLE.replace("<tbody>", "<tbody><!-- rows -->"), False),               # a comment
    (TABLE.replace("<td>0.500000</td>", "<td>0.5 < 1</td>"), False),        # a stray `<`
    (TABLE.replace('class="dataframe"', "class=dataframe"), False),          # an unquoted attribute
    (TABLE + "<script>var t = '<table><tr><td>Step</td><td>Training Loss</td></tr></table>';</script>", False),
])
def test_the_trainers_table_split_by_regex_reads_as_htmlparser_reads_it(tmp_path, monkeypatch, html, simple):
    # plain HTML as the Trainer writes it is split by one regex and fed to the table builder; anything
    # else goes through HTMLParser: both give the same table
    assert notebook._feed_simple(notebook._Tables(), html) is simple
    path = _write(tmp_path, "grpo.ipynb", _nb(_code(_html("<pre>no table</pre>"), _html(html))))
    fast = notebook.load(path)
    monkeypatch.setattr(notebook, "_feed_simple", lambda parser, html: False)
    parsed = notebook.load(path)
    assert list(fast.series) == list(parsed.series) and fast.notes == parsed.notes
    for key, series in fast.series.items():
        assert series.steps.tolist() == parsed.series[key].steps.tolist()
        assert series.values.tolist() == parsed.series[key].values.tolist()
    reward = next(key for key in fast.series if key != "loss")      # `REWARD`, `reward & kl`: as printed
    assert fast.series[reward].steps.tolist()[:2] == [1, 2]


def test_printed_trainer_dicts_are_read_when_there_is_no_table(tmp_path):
    printed = "".join(f"{{'loss': {2.0 - s / 10:.4f}, 'grad_norm': 1.5, 'learning_rate': 1e-05, "
                      f"'epoch': {s / 10:.2f}}}\n" for s in range(1, 6))
    path = _write(tmp_path, "sft.ipynb", _nb(
        _code(_stream("Some weights of the model checkpoint were not used\n"), source="model = load()"),
        _code(_stream(printed), _result(TRAIN_OUTPUT.replace("global_step=3", "global_step=5")))))
    assert loaders.loader_for(path) is notebook
    [run] = assemble.load(path)
    assert len(run.series["loss"]) == 5 and run.series["loss"].values[0] == pytest.approx(1.9)
    assert run.meta["notebook"] == "printed output"
    assert any("read the printed output of its code cells" in n for n in run.notes)
    assert run.meta["global_step"] == 5


def test_a_loop_printed_over_several_cells_is_one_run(tmp_path):
    first = "".join(f"Step {s}/6 | loss: {1.0 / s:.4f} | reward: {0.1 * s:.2f}\n" for s in range(1, 4))
    second = "".join(f"Step {s}/6 | loss: {1.0 / s:.4f} | reward: {0.1 * s:.2f}\n" for s in range(4, 7))
    path = _write(tmp_path, "grpo_from_scratch.ipynb", _nb(_code(_stream(first)), _code(_stream(second))))
    [run] = assemble.load(str(Path(path).parent))
    assert run.series["reward"].steps.tolist() == [1, 2, 3, 4, 5, 6]


def test_a_notebook_without_training_output_is_not_claimed(tmp_path):
    path = _write(tmp_path, "eda.ipynb", _nb(
        _code(_stream("Dataset({\n    features: ['image', 'problem'],\n    num_rows: 307\n})\n")),
        _code(_result("'<think>The angle AOB is 120 degrees. Step 1: 8 hours - 4 hours = 4 hours</think>'"))))
    assert not notebook.can_load(path)
    with pytest.raises(InputError):
        notebook.load(path)


def test_a_broken_notebook_is_not_claimed_and_loading_it_is_one_error(tmp_path):
    path = _write(tmp_path, "cut.ipynb", _nb(_code(_html(TABLE)))[:300])
    assert not notebook.can_load(path)
    with pytest.raises(InputError, match="not a valid notebook"):
        notebook.load(path)


@real
def test_every_published_notebook_alone_reads_as_its_html_copy():
    folders = [p for fam in ("unsloth_notebooks", "trl_notebooks", "hf_cookbook_trl")
               for p in sorted((HEALTHY / fam).iterdir()) if p.is_dir()]
    assert len(folders) >= 10
    for folder in folders:
        [ipynb] = folder.glob("*.ipynb")
        [alone] = assemble.load(str(ipynb))
        [copy] = assemble.load(str(folder / "training_output_cell.html"))
        assert set(alone.series) == set(copy.series), folder.name
        for key, series in copy.series.items():
            assert alone.series[key].steps.tolist() == series.steps.tolist(), (folder.name, key)
        [both] = assemble.load(str(folder))
        assert any("same table" in n for n in both.notes), folder.name
