"""Real Dow-30 market panels for the env tests (read from ``../shared/data``, never copied)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from trainer.data.market import MarketData

FEATURES = ("close_30_sma", "close_60_sma")


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """The test machine's cores are shared by several processes."""
    torch.set_num_threads(1)


def market_from_frame(frame: pd.DataFrame, tickers: list[str], start: str, end: str) -> MarketData:
    """Build a MarketData of ``tickers`` (adjusted close, two SMAs) between two dates, inclusive.

    Turbulence is a diagonal stand-in for FinRL's index: the sum over tickers of squared daily
    returns, each divided by that ticker's return variance over the window.
    """
    rows = frame[frame.tic.isin(tickers)]
    close = rows.pivot(index="date", columns="tic", values="adj_close")[tickers]
    sma30 = close.rolling(30, min_periods=1).mean()
    sma60 = close.rolling(60, min_periods=1).mean()
    window = (close.index >= pd.Timestamp(start)) & (close.index <= pd.Timestamp(end))
    close, sma30, sma60 = close[window], sma30[window], sma60[window]
    if close.isna().any().any():
        raise ValueError("test panel has gaps")
    returns = close.pct_change().fillna(0.0)
    turbulence = ((returns**2) / returns.var()).sum(axis=1)
    return MarketData(
        dates=close.index.values.astype("datetime64[D]"),
        tickers=tuple(tickers),
        close=close.to_numpy(np.float64),
        features=np.stack([sma30.to_numpy(), sma60.to_numpy()], axis=-1).astype(np.float32),
        feature_names=FEATURES,
        turbulence=turbulence.to_numpy(np.float64),
        source="dow30 adj_close (test helper)",
    )


@pytest.fixture(scope="session")
def dow30_frame(dow30_path) -> pd.DataFrame:
    return pd.read_csv(dow30_path, parse_dates=["date"], usecols=["date", "tic", "adj_close"])


@pytest.fixture(scope="session")
def dow30_market(dow30_frame) -> MarketData:
    """29 Dow tickers with full history (DOW listed in 2019 is left out), 2010-2019."""
    tickers = sorted(t for t in dow30_frame.tic.unique() if t != "DOW")
    return market_from_frame(dow30_frame, tickers, "2010-01-01", "2019-12-31")


@pytest.fixture(scope="session")
def two_stocks(dow30_frame) -> MarketData:
    """AAPL and MSFT, the first quarter of 2019 (adjusted close about 36-57 and 97-119 USD)."""
    return market_from_frame(dow30_frame, ["AAPL", "MSFT"], "2019-01-01", "2019-03-31")
