"""Fixtures shared by every test package.

Real market data is read from ``PADDOCK_DATA_DIR`` (default: ``../shared/data`` beside the
checkout); it is never copied into the repository.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("PADDOCK_DATA_DIR") or REPO_ROOT.parent / "shared" / "data").resolve()
DOW30_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
NASDAQ100_FILE = "nasdaq100_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
BENCHMARK_FILE = "benchmark_etfs_daily_eodhd.csv.gz"
INTRADAY_5MIN_FILE = "intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"  # UTC, bar-start stamps
INTRADAY_1MIN_FILE = "intraday_1min_2019-02-11_2019-02-15.csv"  # US/Eastern, bar-end stamps


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder holding the real market data files (``../shared/data``)."""
    if not (DATA_DIR / DOW30_FILE).exists():
        pytest.fail(f"real market data not found in {DATA_DIR}; set PADDOCK_DATA_DIR")
    return DATA_DIR


@pytest.fixture(scope="session")
def dow30_path(data_dir: Path) -> Path:
    return data_dir / DOW30_FILE


@pytest.fixture(scope="session")
def nasdaq100_path(data_dir: Path) -> Path:
    return data_dir / NASDAQ100_FILE


@pytest.fixture(scope="session")
def benchmark_path(data_dir: Path) -> Path:
    return data_dir / BENCHMARK_FILE


@pytest.fixture(scope="session")
def intraday_5min_path(data_dir: Path) -> Path:
    """5-minute bars of AAPL, MSFT, NVDA, QQQ, SPY (2024-03-11..2026-08-21), UTC bar starts."""
    return data_dir / INTRADAY_5MIN_FILE


@pytest.fixture(scope="session")
def intraday_1min_path(data_dir: Path) -> Path:
    """One week of 1-minute bars of six tickers, US/Eastern bar ends, a few minutes missing."""
    return data_dir / INTRADAY_1MIN_FILE


def pytest_collection_modifyitems(config, items):
    """Give every test a node id of its own, then run the browser tests last.

    Schemathesis names each API operation's test ``test_x[GET /api/agents/]`` but gives all of
    them the function's node id (under pytest 9); pytest-xdist's ``--dist loadfile``
    (``./paddock test``) keys its work by node id, so 43 of the 44 operations never ran and the
    run still passed. Such a test's node id becomes its module's id plus its name; a node id
    still shared is a usage error.

    The browser tests' session fixtures (a Celery worker consuming the tests' Redis database, and
    Playwright's event loop in the main thread) stay alive until the session ends; a worker
    left running would claim generations other tests create, and the running loop would break
    ``async_to_sync`` in later tests.
    """
    _unique_node_ids(items)
    items.sort(key=lambda item: item.nodeid.startswith("tests/e2e/"))


def _unique_node_ids(items) -> None:
    """Rename tests whose node id another test shares (see :func:`pytest_collection_modifyitems`).

    Raises:
        pytest.UsageError: two tests still share a node id after renaming.
    """
    counts = collections.Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1:
            # pytest 9 keeps a node's id structured (``Node._id``, a ``NodeId``); it has no public setter
            item._id = item._id.parse(f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}")
    shared = [nodeid for nodeid, n in collections.Counter(item.nodeid for item in items).items() if n > 1]
    if shared:
        raise pytest.UsageError(f"{len(shared)} node id(s) name more than one test, e.g. {shared[0]}")
