"""`--one-run` / `--split-files` (config keys one-run / split-files) on every command that reads runs from
paths (check, signals, plot, watch; issue 45 item 2): the logs side by side in one folder kept one run or
each read as its own, over what stabdiag.read._peers decides; a flag wins over the file, both at once is
one error line.  Also what --show-settings says of --jobs by default, and --step-col's @row in the help.

The dtype logs are the committed nanoGPT fixtures (tests/fixtures/pasted/nanogpt_dtypes: read as two
runs by default); the resumed JSON Lines (one run by default) are written by the json module here."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from stabdiag.batch import check_many, default_workers
from stabdiag.errors import ConfigError
from stabdiag.judge.config import default_jobs, find_config, resolve_settings
from stabdiag.live.watch.watcher import Watcher, WatchSettings, settings_from_flags
from stabdiag.read.assemble import RunFiles
from tests.clihelp import assert_one_error, cli

DTYPES = Path(__file__).resolve().parent / "fixtures" / "pasted" / "nanogpt_dtypes"


@pytest.fixture()
def resumed(tmp_path):
    """One run resumed into a second file: one run unless --split-files."""
    run = tmp_path / "resumed"
    run.mkdir()
    for name, steps, start in (("train.jsonl", range(1, 101), 2.0), ("train_resumed.jsonl", range(81, 151), 2.01)):
        (run / name).write_text("".join(json.dumps({"step": s, "loss": start - 0.01 * s}) + "\n" for s in steps))
    return run


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """An empty working directory: the project whose stabdiag.toml is read."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def runs_checked(*args) -> list[str]:
    result = cli("check", *args, "--format", "json", "--exit-zero")
    assert result.exit_code == 0, result.output
    return [r["run"] for r in json.loads(result.stdout)["runs"]]


def test_check_one_run_and_split_files_override_the_folders_decision(resumed):
    assert runs_checked(str(DTYPES)) == ["nanogpt_dtypes/bf16", "nanogpt_dtypes/fp16"]
    assert runs_checked(str(DTYPES), "--one-run") == ["nanogpt_dtypes"]
    assert runs_checked(str(resumed)) == ["resumed"]
    assert sorted(runs_checked(str(resumed), "--split-files")) == ["resumed/train", "resumed/train_resumed"]


def test_giving_both_flags_is_one_error_line():
    for command in ("check", "signals", "plot", "watch"):
        assert_one_error(cli(command, str(DTYPES), "--one-run", "--split-files"), "--one-run and --split-files")


def test_the_config_keys_group_as_the_flags_do_and_show_where_they_came_from(project):
    (project / "stabdiag.toml").write_text("one-run = true\n")
    assert runs_checked(str(DTYPES)) == ["nanogpt_dtypes"]
    shown = {line.split()[0]: line for line in cli("check", str(DTYPES), "--show-settings").stdout.splitlines()}
    assert "True  (file stabdiag.toml)" in shown["one-run"] and "False  (default)" in shown["split-files"]
    # a flag for the other choice wins over the file's, and says so
    assert len(runs_checked(str(DTYPES), "--split-files")) == 2
    shown = {line.split()[0]: line for line in
             cli("check", str(DTYPES), "--split-files", "--show-settings").stdout.splitlines()}
    assert "True  (flag --split-files)" in shown["split-files"]
    assert "False  (default (flag --split-files overrides the file's one-run))" in shown["one-run"]


@pytest.mark.parametrize("body, expected", [
    ("one-run = true\nsplit-files = true\n", "one-run (file stabdiag.toml) and split-files (file stabdiag.toml)"),
    ('one-run = "yes"\n', "stabdiag.toml: one-run: expected true or false; got 'yes'"),
    ("one_run = true\n", "unknown key 'one_run' (keys are kebab-case: did you mean 'one-run'?)"),
])
def test_bad_config_values_are_one_error_line(project, body, expected):
    (project / "stabdiag.toml").write_text(body)
    assert_one_error(cli("check", str(DTYPES)), expected)


def test_resolve_settings_refuses_both_from_flags_and_lets_a_flag_beat_the_file(project):
    with pytest.raises(ConfigError, match="--one-run and --split-files"):
        resolve_settings(None, {"one-run": True, "split-files": True})
    (project / "stabdiag.toml").write_text("split-files = true\n")
    settings, _ = resolve_settings(find_config([str(DTYPES)]), {"one-run": True})
    assert settings.one_run and not settings.split_files


def test_signals_and_plot_read_the_runs_as_grouped(tmp_path):
    report = json.loads(cli("signals", str(DTYPES), "--format", "json", "--one-run").stdout)
    assert len(report["runs"]) == 1
    assert len(json.loads(cli("signals", str(DTYPES), "--format", "json").stdout)["runs"]) == 2
    out = tmp_path / "images"
    result = cli("plot", str(DTYPES), "--one-run", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert len(list(out.iterdir())) == 1 and result.stdout.count("wrote ") == 1


def test_watch_follows_the_runs_as_grouped(resumed):
    def runs_seen(settings: WatchSettings) -> list[str]:
        watcher = Watcher([str(resumed)], settings)
        watcher.step(now=1.0)
        return sorted(watcher.finders[0].runs)

    assert runs_seen(WatchSettings()) == ["resumed"]
    assert runs_seen(WatchSettings(split_files=True)) == ["resumed/train", "resumed/train_resumed"]
    settings, rules = resolve_settings(None, {"split-files": True})
    flags = {"interval": 1.0, "format": "text", "exit_on": None, "on_alert": None, "step_col": None,
             "polling": True}
    assert settings_from_flags(settings, rules, **flags).split_files
    with pytest.raises(ConfigError, match="--one-run and --split-files"):
        WatchSettings(one_run=True, split_files=True)


def test_check_many_takes_the_grouping_or_the_settings_not_both():
    assert [r.name for r in check_many([str(DTYPES)], one_run=True, jobs=1).runs] == ["nanogpt_dtypes"]
    assert len(check_many([str(DTYPES)], jobs=1).runs) == 2
    settings, rules = resolve_settings(None, {})
    with pytest.raises(ConfigError, match="one_run or split_files"):
        check_many([str(DTYPES)], settings=settings, rules=rules, one_run=True)


@pytest.mark.parametrize("command", ["check", "signals", "plot", "watch"])
def test_step_col_help_names_row_numbers(command):
    text = " ".join(cli(command, "-h").stdout.replace("│", " ").split())     # the help box's lines joined
    assert "@row numbers the rows" in text


def test_show_settings_says_the_jobs_default_the_check_uses(tmp_path):
    small = [RunFiles(name="a", files=(str(DTYPES / "bf16.log"),))]
    for cores in (1, 2, 3, 16):
        shown, why = default_jobs(cores)
        assert shown.split(" or ")[0] == str(default_workers(cores, small))       # small logs: one process
        if cores > 2:
            assert shown == f"1 or {cores}" and "64 MB" in why
        else:
            assert shown == "1" and "2 cores or fewer" in why
    line = next(x for x in cli("check", str(DTYPES), "--show-settings").stdout.splitlines() if x.startswith("jobs"))
    assert "usable cores" not in line or "64 MB" in line
    assert "(default: one process" in line


def test_config_docs_name_the_keys():
    import stabdiag.judge.config as config

    doc = textwrap.dedent(config.__doc__)
    assert "one-run" in doc and "split-files" in doc
