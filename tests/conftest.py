"""Shared pytest options: `pytest --update-golden` rewrites tests/golden/ from the current output."""

from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* from the current output (review the diff like code)")
