"""Fixtures of the API tests."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture
def no_tracebacks(caplog):
    """The log of the test: no record carries a traceback, none is an error."""
    caplog.set_level(logging.INFO)
    yield caplog
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert bad == [], [f"{r.name}: {r.getMessage()}" for r in bad]
