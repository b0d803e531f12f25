"""Fixtures of the market-data tests: one thread, and real panels loaded once per session."""

from __future__ import annotations

import os

# Small LAPACK calls (turbulence) get slower, not faster, with many BLAS threads on a shared
# 2-core machine; this only takes effect if numpy is not imported yet.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from trainer.data.loading import load_panel
from trainer.data.pipeline import build_market_data


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def dow30_panel(dow30_path):
    return load_panel(dow30_path)


@pytest.fixture(scope="session")
def dow30_data(dow30_panel):
    """Dow 30, 2010-01-04 to 2022-11-15, default indicators, missing_policy="drop"."""
    return build_market_data(dow30_panel)


@pytest.fixture(scope="session")
def nasdaq100_panel(nasdaq100_path):
    return load_panel(nasdaq100_path)
