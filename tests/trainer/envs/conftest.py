"""Real Dow-30 market panels for the env tests, loaded through ``trainer.data`` once per session."""

from __future__ import annotations

import os

# The turbulence index's small LAPACK calls get much slower with many BLAS threads on a shared
# 2-core machine; this only takes effect when numpy is not imported yet.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.conftest import DOW30_FILE  # noqa: E402
from trainer.data.market import MarketData
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """The test machine's cores are shared by several processes."""
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def dow30_market(data_dir) -> MarketData:
    """The 29 Dow tickers with full history (DOW, listed in 2019, is dropped), 2010-2019,
    FinRL's 8 default indicators and turbulence index."""
    return load_market_data(DataSpec(paths=[DOW30_FILE], start="2010-01-01", end="2019-12-31"), data_dir=data_dir)


@pytest.fixture(scope="session")
def two_stocks(data_dir) -> MarketData:
    """AAPL and MSFT, the first quarter of 2019 (adjusted close about 34-57 and 93-119 USD)."""
    spec = DataSpec(paths=[DOW30_FILE], tickers=["AAPL", "MSFT"], start="2019-01-01", end="2019-03-31")
    return load_market_data(spec, data_dir=data_dir)
