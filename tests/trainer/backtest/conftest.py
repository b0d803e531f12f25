"""Small real-data market panels for backtest tests, built straight from the CSV with pandas.

Kept independent of the data pipeline on purpose: the engine is checked against numbers
computed here from the raw file, not against another part of Paddock.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from trainer.data.market import MarketData

TICKERS = ("AAPL", "JPM", "KO", "MSFT", "WMT")
START, END = "2021-01-04", "2021-12-31"


@pytest.fixture(autouse=True)
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def dow_close(dow30_path) -> pd.DataFrame:
    """Adjusted close of five Dow tickers in 2021 from the raw file: dates x tickers (float64)."""
    frame = pd.read_csv(dow30_path, usecols=["date", "tic", "adj_close"], parse_dates=["date"])
    frame = frame[frame["tic"].isin(TICKERS) & frame["date"].between(START, END)]
    return frame.pivot(index="date", columns="tic", values="adj_close")[list(TICKERS)].astype("float64")


@pytest.fixture(scope="session")
def qqq_close(benchmark_path) -> pd.Series:
    """QQQ adjusted close 2020-2022 from the raw benchmark file, indexed by date."""
    frame = pd.read_csv(benchmark_path, usecols=["date", "tic", "adj_close"], parse_dates=["date"])
    frame = frame[(frame["tic"] == "QQQ") & frame["date"].between("2020-01-01", "2022-12-31")]
    return frame.set_index("date")["adj_close"].astype("float64").rename("QQQ")


def market_from_close(close: pd.DataFrame) -> MarketData:
    """MarketData with one past-only feature (5-day moving average of the close)."""
    sma = close.rolling(5, min_periods=1).mean()
    return MarketData(
        dates=close.index.to_numpy().astype("datetime64[D]"),
        tickers=tuple(close.columns),
        close=close.to_numpy(dtype=np.float64),
        features=sma.to_numpy(dtype=np.float32)[:, :, None],
        feature_names=("close_5_sma",),
        turbulence=np.zeros(len(close)),
        source="dow30 test panel",
    )


@pytest.fixture(scope="session")
def dow_market(dow_close) -> MarketData:
    return market_from_close(dow_close)
