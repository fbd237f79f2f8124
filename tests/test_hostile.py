"""Hostile names and hostile files (issue 29): nothing from the data reaches a terminal, a CI log or a report
unescaped, small files cannot exhaust memory or time, one torn line never loses a log, cached runs cannot
answer for each other, colliding keys stay apart, config files never change a verdict unseen, and exit
codes hold on every path.  Every input is made here, minimal, by the test."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.report import _escape

runner = CliRunner()
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
FORGED_RUN = "run\n::error file=a.py::forged\x1b]8;;http:x\x07"
FORGED_KEY = "loss\n::stop-commands::tok\x1b[2J`|![i](http:x)<img src=x>"
OURS = re.compile(r"^::(error|warning|notice) ")


def jsonl_run(folder: Path, loss_key: str = "loss", steps: int = 120) -> Path:
    """A run whose loss (under `loss_key`) turns NaN at step 100: a layer-3 finding that names the key."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(folder / "metrics.jsonl", "w") as fh:
        for s in range(1, steps + 1):
            loss = float("nan") if s >= 100 else 2.0 - s / 200 + rng.normal() * 0.01
            fh.write(json.dumps({"step": s, loss_key: loss, "grad_norm": 1.0 + rng.normal() * 0.05}) + "\n")
    return folder


def raw_in(text: str, fmt: str, stream: str) -> str | None:
    """What shows data raw in one output stream, or None."""
    hit = CONTROL.search(text.replace("\t", " "))
    if hit:
        return f"control character {hit.group()!r}"
    for line in text.splitlines():
        if line.lstrip().startswith("::") and not (fmt == "github" and stream == "stdout" and OURS.match(line)):
            return f"a line starting with '::': {line!r}"
    return None


# --- 1. one escaping policy ---------------------------------------------------------------------

def test_visible_shows_every_control_character_and_leaves_ordinary_text_alone():
    assert _escape.visible("reward 0.37 -> 0.76 (13 noise sds), eval:math500") == \
        "reward 0.37 -> 0.76 (13 noise sds), eval:math500"
    assert _escape.visible("a\nb\r\t\x1b[31m\x9b\x7f\u202e") == "a\\nb\\r\\t\\x1b[31m\\x9b\\x7f\\u202e"
    assert _escape.visible("x::stop-commands::y") == "x:\\x3astop-commands:\\x3ay"


def test_markdown_code_span_cannot_be_closed_early_and_cells_cannot_split():
    assert _escape.markdown_code("a`b") == "``a`b``"
    assert _escape.markdown_code("`a``") == "``` `a`` ```"
    assert _escape.markdown_code("a|b", in_table=True) == "`a\\|b`"
    text = _escape.markdown_text("![i](http://x) <img src=x> a|b \\")
    assert "<" not in text and "![" not in text and "\\|" in text and text.endswith("\\\\")


def test_xml_and_github_escapes():
    assert _escape.xml("a\x01b\x1b") == "a\\x01b\\x1b"
    assert _escape.xml("line 1\nline 2", lines=True) == "line 1\nline 2"
    assert _escape.github_data("x\n::error::y%") == "x\\n:\\x3aerror:\\x3ay%25"
    assert _escape.github_data("ours\nnext", lines=True) == "ours%0Anext"
    assert _escape.github_property("a:b,c\nd") == "a%3Ab%2Cc\\nd"


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "github", "junit", "json"])
def test_no_reporter_and_no_stderr_note_shows_a_hostile_name_raw(tmp_path, monkeypatch, fmt):
    jsonl_run(tmp_path / FORGED_RUN, FORGED_KEY)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", FORGED_RUN, "--format", fmt, "--map", f"loss={FORGED_KEY}"])
    assert result.exit_code == 1, result.output
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        assert raw_in(text, fmt, stream) is None, (stream, text)
    if fmt == "junit":
        suite = ET.fromstring(result.stdout).find("testsuite")
        assert suite.get("name") == _escape.visible(FORGED_RUN)
    if fmt == "json":                       # JSON escapes itself: names stay exact for programs
        doc = json.loads(result.stdout)
        assert doc["runs"][0]["run"] == FORGED_RUN and doc["runs"][0]["signals"]["loss"] == FORGED_KEY
    if fmt in ("terminal", "github"):
        assert "run\\n:\\x3aerror file=a.py:\\x3aforged\\x1b]8;;http:x\\x07" in result.stdout
    if fmt == "markdown":
        assert "<img" not in result.stdout and "![i]" not in result.stdout
        assert f"### `{_escape.visible(FORGED_RUN)}`" in result.stdout


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "github", "junit", "json", "html"])
def test_a_hostile_folder_that_was_not_read_is_named_escaped_in_every_format(tmp_path, monkeypatch, fmt):
    jsonl_run(tmp_path / "tree" / "good")
    (tmp_path / "tree" / FORGED_RUN).mkdir()                  # nothing in it: listed under "not read"
    (tmp_path / "tree" / FORGED_RUN / "notes.txt").write_text("hello\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", "tree", "--format", fmt])
    assert result.exit_code == 1, result.output
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        assert raw_in(text, fmt, stream) is None, (stream, text)
    if fmt == "junit":
        (case,) = ET.fromstring(result.stdout).find("testsuite[@name='not read']")
        assert case.get("name") == _escape.visible(f"tree/{FORGED_RUN}")
    if fmt == "markdown":
        assert f"- {_escape.markdown_code(f'tree/{FORGED_RUN}')}: " in result.stdout
    if fmt == "json":
        assert json.loads(result.stdout)["not_read"][0]["path"] == f"tree/{FORGED_RUN}"


def test_signals_escapes_names_and_never_reads_them_as_markup(tmp_path, monkeypatch):
    folder = jsonl_run(tmp_path / "[bold]run[blink]", "[red]loss\x1b[2J:thumbs_up:")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["signals", folder.name])
    assert result.exit_code == 0, result.output
    assert raw_in(result.stdout, "text", "stdout") is None
    assert "[bold]run[blink]" in result.stdout and "[red]loss\\x1b[2J:thumbs_up:" in result.stdout


BASELINE_NAME = "run\n::error::forged\x1b[31m\x1b]8;;http:x\x07`|tick"
FORGED_VALUE = "on\n::warning::x\x1b[2J`|<img src=x>"


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "github", "junit", "json"])
def test_the_baseline_comparison_shows_no_hostile_name_or_config_value_raw(tmp_path, monkeypatch, fmt):
    jsonl_run(tmp_path / ("before" + BASELINE_NAME))                 # layer 3 fails at step 100
    after = jsonl_run(tmp_path / ("after" + BASELINE_NAME), steps=90)  # no NaN: the fix worked
    (after / "config.json").write_text(json.dumps({"router_replay": {"mode": FORGED_VALUE}}))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", after.name, "--baseline", "before" + BASELINE_NAME, "-f", fmt])
    assert result.exit_code == 0, result.output
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        assert raw_in(text, fmt, stream) is None, (stream, text)
    shown = _escape.visible(BASELINE_NAME)
    if fmt == "terminal":
        assert f"Baseline before{shown} -> after{shown}: fail -> pass" in result.stdout
        assert f"config: routing-replay mode={_escape.visible(FORGED_VALUE)} (layer 4) switched on" in result.stdout
    if fmt == "markdown":
        assert f"### Baseline {_escape.markdown_code('before' + BASELINE_NAME)} -> " in result.stdout
        assert "``before" in result.stdout and "<img" not in result.stdout
    if fmt == "github":
        notice = [line for line in result.stdout.splitlines() if "title=stabdiag baseline" in line]
        assert len(notice) == 1 and "::the fix acted on the root layer 3" in notice[0], result.stdout
    if fmt == "junit":
        ET.fromstring(result.stdout)
        assert "baseline: the fix acted on the root layer 3" in result.stderr
    if fmt == "json":                       # JSON escapes itself: names stay exact for programs
        (comparison,) = json.loads(result.stdout)["comparisons"]
        assert comparison["baseline"] == "before" + BASELINE_NAME and comparison["run"] == after.name


def test_the_comparison_block_of_the_api_is_escaped_too(tmp_path):
    from stabdiag.advise.baseline import compare
    from stabdiag.judge.engine import diagnose
    from stabdiag.read import assemble
    from stabdiag.report import comparison

    before, after = (diagnose(assemble.load(str(jsonl_run(tmp_path / (side + BASELINE_NAME), steps=n)))[0])
                     for side, n in (("before", 120), ("after", 90)))
    c = compare(before, after)
    assert CONTROL.search(comparison.text(c)) is None and CONTROL.search(comparison.markdown(c)) is None
    assert comparison.text(c).startswith(f"Baseline before{_escape.visible(BASELINE_NAME)} -> ")


def probe_rollouts(path: Path, record_id: str) -> Path:
    """Six rollout records with trainer logprobs beside them (no model needed), one of them drifting."""
    from stabdiag.probe.adapters import write_jsonl

    records = []
    for i in range(6):
        shift = 0.4 if i == 0 else 0.0
        records.append({"id": record_id + str(i), "step": i, "prompt_token_ids": [1, 5, 6],
                        "response_token_ids": [7, 8, 2], "response_logprobs": [-0.5 - shift, -1.0, -2.0],
                        "train_logprobs": [-0.5, -1.0, -2.0], "meta": {"logprobs_mode": "raw"}})
    write_jsonl(records, path)
    return path


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_probe_output_shows_no_hostile_record_or_file_name_raw(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    rollouts = probe_rollouts(tmp_path / "roll.jsonl", BASELINE_NAME)
    result = runner.invoke(app, ["probe", str(rollouts), "--format", fmt, "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        assert raw_in(text, fmt, stream) is None, (stream, text)
    if fmt == "text":                       # the worst tokens name their record, visibly escaped
        assert _escape.visible(BASELINE_NAME + "0")[:24] in result.stdout
    else:
        doc = json.loads(result.stdout)
        assert doc["worst_tokens"][0]["record_id"] == BASELINE_NAME + "0"
    bad = tmp_path / ("bad" + BASELINE_NAME + ".jsonl")
    bad.write_text("{not json\n")
    failed = runner.invoke(app, ["probe", bad.name, "--format", fmt])
    assert failed.exit_code == 2 and raw_in(failed.stderr, fmt, "stderr") is None, failed.stderr
    (line,) = failed.stderr.strip().splitlines()
    assert line.startswith(f"error: bad{_escape.visible(BASELINE_NAME)}.jsonl"), line


def test_probe_text_report_escapes_every_text_it_quotes():
    from stabdiag.probe.report import render_text

    doc = {"inputs": {"n_records": 1, "model": "m\x1b]0;t\x07", "primary": "bf16", "reference": None},
           "counts": {}, "metrics": {}, "thresholds": {}, "aliases": {}, "buckets": {"by_prob": []},
           "per_dtype": {"bf16": {}}, "worst_tokens": [], "hints": [{"id": "x", "text": "see\n::error::y"}],
           "verdict": {"level": "inconclusive", "reasons": [{"problem": "file a\nb\x1b[2J unreadable"}]}}
    text = render_text(doc)
    assert CONTROL.search(text) is None and not any(line.startswith("::") for line in text.splitlines())
    assert "model m\\x1b]0;t\\x07" in text and "a\\nb\\x1b[2J unreadable" in text
    assert "see\\n:\\x3aerror:\\x3ay" in text


def test_each_not_read_warning_is_said_once_with_format_json(tmp_path, monkeypatch):
    jsonl_run(tmp_path / "r")
    (tmp_path / "r" / "broken.csv").write_bytes(b"step,loss\n1,\xff\n")
    result = runner.invoke(app, ["check", str(tmp_path / "r"), "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    said = [line for line in result.stderr.splitlines() if "broken.csv" in line]
    assert len(said) == 1, result.stderr


# --- 2. budgets on input: bounded memory, a note naming the file, the rest judged ------------------

LIMITED = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[1]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from stabdiag.cli import main
    sys.argv = ["stabdiag", *sys.argv[2:]]
    main()
""")


def limited_check(args: list[str], cwd: Path, memory_mb: int = 3072, timeout: int = 120):
    """`stabdiag check ARGS` in a child process under an address-space limit (RLIMIT_AS)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([sys.executable, "-c", LIMITED, str(memory_mb), "check", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def gzip_bomb_jsonl(path: Path) -> None:
    line = b'{"step": 1, "loss": 2.0}\n'
    path.write_bytes(gzip.compress(line * ((80 << 20) // len(line)), 6))       # 80 MiB in ~0.2 MiB


def gzip_bomb_csv(path: Path) -> None:
    path.write_bytes(gzip.compress(b"step,loss\n" + b"1,2\n" * (30 << 20), 6))


def many_keys(path: Path) -> None:
    with open(path, "w") as fh:
        for s in range(150):
            fh.write(json.dumps({"step": s, **{f"k{s}_{i}": 1.0 for i in range(800)}}) + "\n")


def long_line(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.write(b'{"step": 1, "loss": 2}\n')
        fh.write(b"1" * (65 << 20))


def zero_events(path: Path) -> None:
    path.write_bytes(b"\0" * (32 << 20))


HOSTILE_FILES = {
    "bomb.jsonl.gz": (gzip_bomb_jsonl, "decompresses to more than"),
    "bomb.csv.gz": (gzip_bomb_csv, "decompresses to more than"),
    "keys.jsonl": (many_keys, "more than 100,000 distinct metric keys"),
    "long.jsonl": (long_line, "a line longer than 64 MiB"),
    "events.out.tfevents.1.zero": (zero_events, "not a TensorBoard event file"),
}


@pytest.mark.parametrize("name", list(HOSTILE_FILES))
def test_a_hostile_file_alone_is_one_error_naming_it_within_memory(tmp_path, name):
    make, problem = HOSTILE_FILES[name]
    make(tmp_path / name)
    done = limited_check([name, "--format", "json"], tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {name}") and problem in lines[0], done.stderr
    assert "MemoryError" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.parametrize("name", ["bomb.jsonl.gz", "keys.jsonl"])
def test_a_hostile_file_beside_a_good_log_loses_only_itself(tmp_path, name):
    make, problem = HOSTILE_FILES[name]
    run = jsonl_run(tmp_path / "run")
    make(run / name)
    good = jsonl_run(tmp_path / "tree" / "good")
    (tmp_path / "tree" / "bad").mkdir()
    make(tmp_path / "tree" / "bad" / name)              # a tree: the bad run is lost, the good one judged
    for target in ("run", "tree"):
        done = limited_check([target, "--format", "json"], tmp_path)
        assert done.returncode == 1, done.stderr[-2000:]            # the good log judged: layer 3 fails
        doc = json.loads(done.stdout)
        assert [r["verdict"] for r in doc["runs"]] == ["fail"]
        assert problem in done.stderr and name in done.stderr and "internal error" not in done.stderr
    assert good.is_dir()


def test_a_yaml_alias_bomb_config_is_a_note_and_the_run_is_judged(tmp_path):
    run = jsonl_run(tmp_path / "run")
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(8):
        prev, cur = chr(97 + i), chr(98 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    (run / "config.yaml").write_text("\n".join(lines) + "\n")        # ~300 bytes for 9**9 values
    done = limited_check(["run", "--format", "json"], tmp_path, memory_mb=2048, timeout=60)
    assert done.returncode == 1, done.stderr[-2000:]
    notes = json.loads(done.stdout)["runs"][0]["notes"]
    assert any("config.yaml" in n and "alias" in n for n in notes), notes


# --- hostile values (bench/fuzz.py, seed 20261208: 39 internal errors in 30,000 cases) -----------------

def check_in_process(target: Path) -> dict:
    """`stabdiag check TARGET --format json`: judged (exit 0 or 1), no error line, the JSON document."""
    result = runner.invoke(app, ["check", str(target), "--format", "json"])
    assert result.exit_code in (0, 1) and "error" not in result.stderr, (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def test_values_at_the_float_limits_are_judged_never_an_internal_error(tmp_path):
    """An eval logged at 1e200 (its noise's variance has no float), a loss at 1e200, a grad norm with one
    1e308 point, a KL at 1e-300: the variogram fit overflowed (OverflowError: Numerical result out of range)."""
    rng = np.random.default_rng(1)
    with open(tmp_path / "metrics.jsonl", "w") as fh:
        for s in range(1, 121):
            record = {"step": s, "loss": 1e200 * (2.0 - s / 100 + rng.normal(0, 0.01)),
                      "grad_norm": 1e308 if s == 60 else 1.0 + rng.normal(0, 0.05),
                      "reward": 0.3 + s / 300 + rng.normal(0, 0.02), "kl": 1e-300 * (1 + s / 100)}
            if s % 10 == 0:
                record["eval/accuracy"] = 1e200 * (0.4 + rng.normal(0, 0.01))
            fh.write(json.dumps(record) + "\n")
    run = check_in_process(tmp_path)["runs"][0]
    assert {"loss", "grad_norm", "reward", "kl", "eval:accuracy"} <= set(run["signals"])


def test_a_parquet_date_past_year_9999_leaves_that_cell_unread_and_the_file_read(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    steps = np.arange(1, 61)
    when = pa.array([10 ** 15 if s == 30 else 1_700_000_000 + 60 * s for s in steps.tolist()], pa.timestamp("s"))
    pq.write_table(pa.table({"step": steps, "loss": 2.0 - steps / 100, "logged_at": when}), tmp_path / "m.parquet")
    run = check_in_process(tmp_path / "m.parquet")["runs"][0]
    assert run["signals"]["loss"] == "loss"


def test_a_json_array_nested_past_the_recursion_limit_is_no_metric_log(tmp_path):
    run = jsonl_run(tmp_path / "run")
    (run / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    result = runner.invoke(app, ["check", str(run), "--format", "json"])
    assert result.exit_code == 1 and "internal error" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["runs"][0]["verdict"] == "fail"       # the JSONL log, judged


# --- 3. torn lines ---------------------------------------------------------------------------------

def test_a_glued_jsonl_line_in_the_middle_is_skipped_with_a_note_and_every_other_row_read(tmp_path):
    lines = [json.dumps({"step": s, "loss": 1.0 / s}) for s in range(1, 61)]
    lines[29] = lines[29][:15] + lines[30]                # killed mid-line at step 30, resumed at 31
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    from stabdiag.read.formats import tabular

    run = tabular.load(str(path))
    assert run.series["loss"].steps.tolist() == [s for s in range(1, 61) if s != 30]
    assert any(n.startswith("m.jsonl:30: not valid JSON") and "skipped" in n for n in run.notes), run.notes


def test_a_csv_row_with_too_few_or_too_many_cells_is_refused_never_read_as_a_value(tmp_path):
    rows = ["step,loss,reward"] + [f"{s},{1.0 / s},{s / 100}" for s in range(1, 41)]
    rows[20] = "20,0.05"                                  # torn: the reward cell never written
    rows[25] = "25,0.04,0.2526,0.27,0.01"                 # glued
    path = tmp_path / "m.csv"
    path.write_text("\n".join(rows) + "\n")
    from stabdiag.read.formats import tabular

    run = tabular.load(str(path))
    assert 20 not in run.series["loss"].steps.tolist() and 25 not in run.series["reward"].steps.tolist()
    assert 20 not in run.series["reward"].steps.tolist()
    assert any(n.startswith("m.csv:21: 2 cells") for n in run.notes), run.notes
    assert any(n.startswith("m.csv:26: 5 cells") for n in run.notes), run.notes


def test_a_file_of_mostly_malformed_lines_is_still_refused(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 1}\n{"step": 2, \n{"step": 3, \n')
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2 and "m.jsonl:2: not valid JSON" in result.stderr


# --- 4. cache identity -----------------------------------------------------------------------------

def test_cache_folders_never_collide_and_a_file_of_another_run_is_not_served(tmp_path, monkeypatch):
    from stabdiag.read.formats.wandb import _cache

    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path))
    pairs = [(("e", "p", "a b"), ("e", "p", "a_b")), (("e", "p", "Run"), ("e", "p", "run")),
             (("a_b", "p", "r"), ("a b", "p", "r"))]
    for one, other in pairs:
        assert _cache.run_cache_dir(*one) != _cache.run_cache_dir(*other)
        assert str(_cache.run_cache_dir(*one)).lower() != str(_cache.run_cache_dir(*other)).lower()
    folder = _cache.run_cache_dir("e", "p", "r1")
    meta = {"entity": "e", "project": "p", "run_id": "r2", "state": "finished"}     # another run's file
    table = _cache.to_table({"loss": ([1, 2], [1.0, 0.5], [0.0, 1.0])}, meta)
    assert _cache.write_cache(folder / "history-step2.parquet", table)
    assert _cache.finished_cache(folder, ("e", "p", "r1")) is None
    assert _cache.finished_cache(folder, ("e", "p", "r2")) == folder / "history-step2.parquet"


# --- 5. key collisions -----------------------------------------------------------------------------

def test_add_scalar_and_add_scalars_of_one_name_stay_two_series_and_no_resume(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for s in range(30):
        writer.add_scalar("loss/train", 1.0, s)
        writer.add_scalars("loss", {"train": 2.0}, s)
    writer.close()
    from stabdiag.read.assemble import load

    (run,) = load([str(tmp_path / "run")])
    apart = [k for k in run.series if k.startswith("loss/train")]
    assert len(apart) == 2, list(run.series)
    assert sorted(run.series[k].values[0] for k in apart) == [1.0, 2.0]
    assert not run.resumed
    assert any("two series are both named loss/train" in n for n in run.notes), run.notes


def test_wandb_key_written_flat_and_nested_in_one_row_is_noted(tmp_path):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from fuzz_records import wandb_frame

    records = []
    for s in range(20):
        rec = pb.Record()
        for parts, value in ((("_step",), s), (("train/reward",), 1.0), (("train", "reward"), 2.0)):
            item = rec.history.item.add()
            if len(parts) == 1:
                item.key = parts[0]                       # flat: one key holding a slash
            else:
                item.nested_key.extend(parts)             # nested: {"train": {"reward": ...}}
            item.value_json = json.dumps(value)
        rec.history.step.num = s
        records.append(rec.SerializeToString())
    path = tmp_path / "run-x.wandb"
    path.write_bytes(wandb_frame(records))
    from stabdiag.read.formats import wandb as wr

    run = wr.load(str(path))
    reward = run.series["train/reward"]
    assert reward.steps.tolist() == list(range(20)) and not run.resumed
    assert any("train/reward: written both as one key and as nested parts" in n for n in run.notes), run.notes


def test_jsonl_key_written_flat_and_nested_in_one_line_is_noted_and_never_a_resume(tmp_path):
    from stabdiag.read.formats import tabular

    lines = []
    for s in range(1, 41):
        row = {"step": s, "loss": 1.0 / s}
        if s % 2:
            row.update({"train/reward": 1.0, "train": {"reward": 2.0, "kl": 0.1}})     # flat met first
        else:
            row.update({"train": {"reward": 3.0, "kl": 0.1}, "train/reward": 4.0})     # nested met first
        lines.append(json.dumps(row))
    lines += [json.dumps({"step": 41, "train/reward": None, "train": {"reward": 5.0}}),   # null: not written
              json.dumps({"step": 42, "train": {"reward": 6.0}})]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = tabular.load(str(path))
    reward = run.series["train/reward"]
    assert reward.steps.tolist() == list(range(1, 43)) and not run.resumed
    assert reward.values.tolist() == [1.0 if s % 2 else 3.0 for s in range(1, 41)] + [5.0, 6.0]
    assert run.series["train/kl"].steps.tolist() == list(range(1, 41))
    assert "m.jsonl: train/reward: written both as one key and as nested parts in 40 line(s); the value of " \
           "the form met first in the line was kept" in run.notes, run.notes


# --- 6. config trust -------------------------------------------------------------------------------

def test_a_config_above_a_downloaded_tree_is_announced_and_isolated_ignores_it(tmp_path, monkeypatch):
    jsonl_run(tmp_path / "tree" / "run")
    (tmp_path / "tree" / "stabdiag.toml").write_text('ignore = ["L3"]\nallow-unknown = true\n')
    monkeypatch.chdir(tmp_path / "tree" / "run")
    for fmt in ("json", "github", "junit", "terminal", "markdown"):
        switched = runner.invoke(app, ["check", ".", "-f", fmt])
        assert switched.exit_code == 0, switched.output
        assert "note: config" in switched.stderr and "ignore L3" in switched.stderr, (fmt, switched.stderr)
    isolated = runner.invoke(app, ["check", ".", "-f", "json", "--isolated"])
    assert isolated.exit_code == 1 and "note: config" not in isolated.stderr
    assert json.loads(isolated.stdout)["settings"]["config"] is None
    both = runner.invoke(app, ["check", ".", "--isolated", "--config", "../stabdiag.toml"])
    assert both.exit_code == 2 and both.stderr.startswith("error: --isolated")


# --- 7. exit codes ---------------------------------------------------------------------------------

def test_debug_keeps_exit_2_for_an_input_error(tmp_path):
    result = runner.invoke(app, ["check", str(tmp_path / "missing"), "--debug"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


def test_a_deleted_working_directory_is_a_clear_error(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); from stabdiag.cli import main; "
            "sys.argv = ['stabdiag', 'check', '.']; main()")
    done = subprocess.run([sys.executable, "-c", code, str(gone)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: the working directory no longer exists (deleted?); cd to one that " \
                                  "does and rerun"


# --- notes -------------------------------------------------------------------------------------------

def test_a_device_inside_a_run_dir_is_said_whatever_its_name(tmp_path):
    run = jsonl_run(tmp_path / "run")
    try:
        os.mknod(run / "weird", 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device needs root")
    result = runner.invoke(app, ["check", str(run), "-f", "json"])
    assert result.exit_code == 1
    assert [line for line in result.stderr.splitlines() if "weird" in line] == \
        ["warning: run: weird: not read: a character device, not a regular file"]


def test_pipes_and_links_out_of_the_tree_are_never_opened_and_each_is_a_note(tmp_path):
    run = jsonl_run(tmp_path / "tree" / "run")
    os.mkfifo(run / "pipe")                            # no log's name: still said (opening it would block)
    os.mkfifo(run / "live.jsonl")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.jsonl").write_text("".join(json.dumps({"step": s, "secret_metric": 1.0}) + "\n"
                                                  for s in range(1, 50)))
    (run / "linked.jsonl").symlink_to(outside / "secret.jsonl")
    (run / "linked_dir").symlink_to(outside)
    (run / "inside.jsonl").symlink_to("metrics.jsonl")  # into the tree: read where it lies, nothing said
    (outside / "train.py").write_text("print(1)\n")
    (run / "train.py").symlink_to(outside / "train.py")  # no log (W&B links files saved live): not said
    expected = {"pipe": "a named pipe (FIFO), not a regular file",
                "live.jsonl": "a named pipe (FIFO), not a regular file",
                "linked.jsonl": f"a symbolic link to {outside / 'secret.jsonl'}, outside the checked folder; "
                                "not followed (check that path itself)",
                "linked_dir": f"a symbolic link to {outside}, outside the checked folder; not followed (check "
                              "that path itself)"}
    for fmt in ("json", "terminal"):
        done = limited_check(["tree", "--format", fmt], tmp_path, timeout=60)   # a pipe opened: the timeout
        assert done.returncode == 1, done.stderr[-2000:]
        warned = [line for line in done.stderr.splitlines() if "not read" in line]
        assert sorted(warned) == [f"warning: run: {name}: not read: {why}" for name, why in sorted(expected.items())]
        assert "secret_metric" not in done.stdout
        assert "inside.jsonl" not in done.stdout + done.stderr and "train.py" not in done.stdout + done.stderr
        if fmt == "json":
            (doc,) = json.loads(done.stdout)["runs"]
            assert sorted(n for n in doc["notes"] if "not read" in n) == \
                [f"{name}: not read: {why}" for name, why in sorted(expected.items())]
            assert "secret_metric" not in json.dumps(doc["signals"])
        else:
            assert "note: pipe: not read: a named pipe (FIFO), not a regular file" in done.stdout
            assert "note: linked.jsonl: not read: a symbolic link to" in done.stdout


def test_a_pipe_or_a_link_inside_an_mlflow_file_store_is_never_opened(tmp_path):
    import shutil

    store = shutil.copytree(Path(__file__).parent / "fixtures" / "mlflow" / "mlruns", tmp_path / "mlruns")
    metrics = next(store.glob("*/*/metrics"))
    os.mkfifo(metrics / "stuck")
    (metrics / "linked").symlink_to(tmp_path / "nowhere")
    done = limited_check(["mlruns", "--format", "json"], tmp_path, timeout=60)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "stuck: not read: a named pipe (FIFO), not a regular file" in done.stderr
    assert "linked: not read: a symbolic link to" in done.stderr
    assert len(json.loads(done.stdout)["runs"]) == 5


def test_a_pipe_in_place_of_an_old_wandb_runs_summary_or_config_is_never_opened(tmp_path):
    files = tmp_path / "wandb" / "run-20200101_000000-abc" / "files"
    files.mkdir(parents=True)
    (files / "wandb-history.jsonl").write_text("".join(json.dumps({"_step": s, "loss": 1.0 / (s + 1)}) + "\n"
                                                       for s in range(60)))
    os.mkfifo(files / "wandb-summary.json")
    os.mkfifo(files / "config.yaml")
    done = limited_check(["wandb", "--format", "json"], tmp_path, timeout=60)   # opened: the timeout
    assert done.returncode in (0, 1, 3), done.stderr[-2000:]
    (doc,) = json.loads(done.stdout)["runs"]
    assert "loss" in json.dumps(doc["signals"])


def test_a_zeroed_block_in_the_middle_of_a_wandb_log_says_its_records_are_lost(tmp_path):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from fuzz_records import wandb_frame

    records = []
    for s in range(3000):
        rec = pb.Record()
        for key, value in (("_step", s), ("loss", 1.0)):
            item = rec.history.item.add()
            item.key, item.value_json = key, json.dumps(value)
        rec.history.step.num = s
        records.append(rec.SerializeToString())
    data = bytearray(wandb_frame(records))
    data[32768:65536] = bytes(32768)                      # one block zeroed (a disk or copy fault)
    path = tmp_path / "run-z.wandb"
    path.write_bytes(bytes(data))
    from stabdiag.read.formats import wandb as wr

    run = wr.load(str(path))
    assert 0 < len(run.series["loss"]) < 3000
    assert any("zeroed bytes; the records in them are lost" in n for n in run.notes), run.notes


def test_a_run_config_linked_out_of_the_run_folder_is_not_read(tmp_path):
    """A downloaded tree's config.yaml may be a link to anywhere on the machine: never read, said why."""
    from stabdiag.read.runconfig import read_run_config

    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("actor:\n  kl_loss_coef: 0.001\n")
    run = tmp_path / "tree" / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").symlink_to(outside)
    config, used, notes = read_run_config(str(run))
    assert config == {} and used == []
    assert any("config.yaml: a symbolic link out of the run folder" in n for n in notes), notes
    (run / "real.yaml").write_text("actor:\n  kl_loss_coef: 0.002\n")
    (run / "config.yaml").unlink()
    (run / "config.yaml").symlink_to(run / "real.yaml")            # a link inside the run folder is read
    config, used, _ = read_run_config(str(run))
    assert config == {"actor": {"kl_loss_coef": 0.002}} and used == ["config.yaml"]
