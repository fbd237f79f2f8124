"""The shipped TOML files are kept parsed in __pycache__ beside them (stabdiag/_toml.py): the same data as
tomllib, a stale or broken copy never used, and nothing a user gives ever cached."""

from __future__ import annotations

import pytest

from stabdiag import _toml


@pytest.fixture
def shipped(tmp_path):
    """Where a shipped file would lie (its copy goes into __pycache__ beside it)."""
    folder = tmp_path / "checklist"
    folder.mkdir()
    return lambda name: str(folder / name)


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "checklist" / "__pycache__"


def test_a_shipped_file_parses_to_what_tomllib_reads_and_is_then_read_from_its_copy(cache_dir, shipped, monkeypatch):
    rules = _toml.Path(__file__).parents[1] / "src" / "stabdiag" / "judge" / "checklist"
    text = (rules / "layer1_data_reward.toml").read_text()
    first = _toml.loads(text, shipped("layer1_data_reward.toml"))
    tomllib = _toml._tomllib()
    assert first == tomllib.loads(text)
    [copy] = cache_dir.glob("layer1_data_reward.*.toml.marshal")
    monkeypatch.setattr(tomllib, "loads", lambda _: pytest.fail("parsed again"))
    assert _toml.loads(text, shipped("layer1_data_reward.toml")) == first


def test_an_edited_file_is_parsed_again_and_its_old_copy_dropped(cache_dir, shipped):
    assert _toml.loads('a = 1\n', shipped("x.toml")) == {"a": 1}
    assert _toml.loads('a = 2\n', shipped("x.toml")) == {"a": 2}          # same length, another CRC
    assert len(list(cache_dir.glob("x.*.toml.marshal"))) == 1


def test_a_broken_copy_is_parsed_again(cache_dir, shipped):
    _toml.loads('a = 1\n', shipped("x.toml"))
    [copy] = cache_dir.glob("x.*.toml.marshal")
    copy.write_bytes(b"\x00garbage")
    assert _toml.loads('a = 1\n', shipped("x.toml")) == {"a": 1}


def test_an_unwritable_folder_only_means_parsing_every_time(cache_dir, shipped):
    cache_dir.parent.chmod(0o500)
    try:
        assert _toml.loads('a = 1\n', shipped("x.toml")) == {"a": 1}
    finally:
        cache_dir.parent.chmod(0o700)


def test_what_a_user_gives_is_never_cached(cache_dir):
    assert _toml.loads('a = 1\n') == {"a": 1}
    assert not cache_dir.exists()
