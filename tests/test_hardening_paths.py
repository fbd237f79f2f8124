"""What a path is and what may be written (issue 15): FIFOs and devices named as such, unreadable files and
folders said to be unreadable (a warning when the rest can be read), `--output` never over an input, and
the W&B cache private with no URI part able to leave it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from stabdiag.errors import InputError
from stabdiag.read.assemble import load
from tests.clihelp import assert_one_error, cli, one

# --- what a path is: FIFOs, devices, unreadable files and folders ----------------------------------------

def test_a_fifo_is_named_as_one(tmp_path):
    pipe = tmp_path / "metrics.csv"
    os.mkfifo(pipe)
    assert_one_error(cli("check", str(pipe)), str(pipe), "a named pipe (FIFO), not a regular file")


def test_a_device_is_named_as_one():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    assert_one_error(cli("check", "/dev/zero"), "/dev/zero: a character device, not a regular file")


def test_a_fifo_beside_a_readable_log_is_a_warning(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "m.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    os.mkfifo(tmp_path / "run" / "pipe.log")
    run = one(tmp_path / "run")
    assert "pipe.log: not read: a named pipe (FIFO), not a regular file" in run.warnings
    result = cli("check", str(tmp_path / "run"), "-f", "json")
    assert result.exit_code in (0, 1, 3) and "pipe.log: not read: a named pipe" in result.stderr


def _deny(monkeypatch, locked: Path) -> None:
    """Make `locked` (a file or a folder) unreadable the way a permission error shows (tests run as root)."""
    import stabdiag.read._paths as paths

    real_open, real_scandir = open, os.scandir

    def fake_open(path, *args, **kwargs):
        if os.path.abspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def fake_scandir(path="."):
        if os.path.abspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(paths, "open", fake_open, raising=False)
    monkeypatch.setattr(os, "scandir", fake_scandir)
    monkeypatch.setattr(os, "access", lambda path, mode: os.path.abspath(path) != str(locked))


def test_a_permission_error_on_a_log_is_said_as_one(tmp_path, monkeypatch):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"loss": 1.0, "step": 1}]}))
    _deny(monkeypatch, path)
    assert_one_error(cli("check", str(path)), str(path), "permission denied")


def test_an_unreadable_folder_in_a_tree_is_a_warning_and_exit_2_only_when_nothing_is_read(tmp_path, monkeypatch):
    for name in ("a", "locked"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "m.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    _deny(monkeypatch, tmp_path / "runs" / "locked")
    runs = load(tmp_path / "runs")
    assert [r.name for r in runs] == ["a"]
    assert any("locked: not read: cannot list this folder (Permission denied)" in w for w in runs[0].warnings)
    result = cli("check", str(tmp_path / "runs"), "-f", "json")
    assert result.exit_code in (0, 1, 3) and "cannot list this folder" in result.stderr
    _deny(monkeypatch, tmp_path / "runs")
    assert_one_error(cli("check", str(tmp_path / "runs")), "permission denied")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads everything")
def test_real_permissions(tmp_path):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "m.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    locked = tmp_path / "runs" / "b"
    locked.mkdir()
    (locked / "m.csv").write_text("step,loss\n1,1.0\n")
    log = tmp_path / "trainer_state.json"
    log.write_text(json.dumps({"log_history": [{"loss": 1.0, "step": 1}]}))
    try:
        locked.chmod(0)
        log.chmod(0)
        assert_one_error(cli("check", str(log)), "permission denied")
        runs = load(tmp_path / "runs")
        assert [r.name for r in runs] == ["a"] and runs[0].warnings
    finally:
        locked.chmod(stat.S_IRWXU)
        log.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_tree_with_one_unreadable_run_reports_the_others(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.csv").write_text("step,loss\n1,1.0\n2,0.9\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "m.csv").write_text("step,loss\n1,zzz\n2,abc\n")
    runs = load(tmp_path)
    assert [r.name for r in runs] == ["a"] and any("run b not read" in w for w in runs[0].warnings)


# --- --output never overwrites an input ------------------------------------------------------------------

def test_output_refuses_to_overwrite_an_input(tmp_path):
    victim = tmp_path / "victim.csv"
    victim.write_text("step,loss\n1,1.0\n2,0.9\n")
    before = victim.read_bytes()
    (tmp_path / "link.out").symlink_to(victim)
    os.link(victim, tmp_path / "hard.out")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "m.csv").write_text("step,loss\n1,1.0\n")
    (tmp_path / "dir" / "notes.md").write_text("notes\n")
    cases = [(str(victim), str(victim)), (str(victim), str(tmp_path / "link.out")),
             (str(victim), str(tmp_path / "hard.out")), (str(tmp_path / "dir"), str(tmp_path / "dir" / "m.csv")),
             (str(tmp_path / "dir"), str(tmp_path / "dir" / "notes.md"))]
    for given, output in cases:
        assert_one_error(cli("check", given, "-o", output), f"--output {output}: would overwrite the input")
    assert victim.read_bytes() == before and (tmp_path / "dir" / "notes.md").read_text() == "notes\n"
    assert cli("check", str(victim), "-o", str(tmp_path / "report.txt")).exit_code in (0, 1, 3)
    assert (tmp_path / "report.txt").read_text()


# --- the W&B cache: private, and no URI part escapes it ---------------------------------------------------

def test_cache_folders_are_0700_and_files_0600(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    from stabdiag.read.formats.wandb._cache import run_cache_dir, to_table, write_cache

    monkeypatch.setenv("STABDIAG_CACHE_DIR", str(tmp_path / "cache"))
    folder = run_cache_dir("ent", "proj", "run1")
    assert write_cache(folder / "history-step3.parquet", to_table({"loss": ([1], [1.0], [0.0])}, {"state": "x"}))
    for made in (tmp_path / "cache", tmp_path / "cache" / "wandb", folder):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made
    assert stat.S_IMODE((folder / "history-step3.parquet").stat().st_mode) == 0o600


@pytest.mark.parametrize("uri", ["wandb://../../..", "wandb://ent/../run", "wandb://./proj/run",
                                 "wandb://ent/proj/..", "wandb://ent/%2e%2e/run", "wandb://ent/p\\q/run",
                                 "https://wandb.ai/ent/../runs/abc"])
def test_uri_parts_that_are_not_names_are_refused(uri):
    from stabdiag.read.formats.wandb._cache import run_cache_dir
    from stabdiag.read.formats.wandb._online import parse_uri

    with pytest.raises(InputError, match="is not a W&B name"):
        parse_uri(uri)
    with pytest.raises(ValueError):
        run_cache_dir("..", "proj", "run")
    assert_one_error(cli("check", uri), "is not a W&B name")
