"""yfinance results (built offline from real rows) go through the same validation as files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.data.loading import load_panel
from trainer.data.pipeline import build_market_data
from trainer.data.yahoo import download_yfinance, panel_from_yfinance, yfinance_to_long
from trainer.errors import ConfigError, DataError

TICKERS = ["AAPL", "MSFT", "DOW"]
FIELDS = {"Adj Close": "adj_close", "Close": "close", "High": "high", "Low": "low", "Open": "open", "Volume": "volume"}


@pytest.fixture(scope="module")
def yf_frame(dow30_path):
    """What ``yf.download(TICKERS, auto_adjust=False)`` returns for 2019-01-02..2019-06-28:
    columns (Price, Ticker), a Date index, and NaN rows for DOW before it listed (2019-03-20)."""
    raw = pd.read_csv(dow30_path, parse_dates=["date"])
    raw = raw[raw["tic"].isin(TICKERS) & raw["date"].between("2019-01-02", "2019-06-28")]
    parts = {}
    for name, column in FIELDS.items():
        wide = raw.pivot(index="date", columns="tic", values=column)[TICKERS]
        for tic in TICKERS:
            parts[(name, tic)] = wide[tic]
    frame = pd.DataFrame(parts)
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["Price", "Ticker"])
    frame.index.name = "Date"
    assert frame[("Close", "DOW")].isna().sum() > 40  # the padding yfinance produces
    return frame


@pytest.fixture(scope="module")
def expected(dow30_path):
    panel = load_panel(dow30_path, tickers=TICKERS)
    return panel[panel["date"].between("2019-01-02", "2019-06-28")].reset_index(drop=True)


def _check_matches_file(panel, expected):
    assert list(panel.columns) == list(expected.columns)
    assert list(zip(panel["date"], panel["tic"])) == list(zip(expected["date"], expected["tic"]))
    assert np.array_equal(panel["close"].to_numpy(), expected["close"].to_numpy())
    assert np.array_equal(panel["volume"].to_numpy(), expected["volume"].to_numpy())
    # the file's adj_open/high/low are the same factor product rounded to 4 decimals
    for c in ("open", "high", "low"):
        assert np.allclose(panel[c], expected[c], atol=6e-5, rtol=0)


def test_column_major_yfinance_frame_becomes_the_same_panel_as_the_file(yf_frame, expected):
    panel = panel_from_yfinance(yf_frame, TICKERS)
    _check_matches_file(panel, expected)
    assert panel.attrs["source"] == "yfinance AAPL,DOW,MSFT"
    assert any("adj_close/close" in n for n in panel.attrs["notes"])


def test_ticker_major_yfinance_frame_with_tz_aware_dates_gives_the_same_panel(yf_frame, expected):
    by_ticker = yf_frame.swaplevel(axis=1).sort_index(axis=1)
    by_ticker.index = by_ticker.index.tz_localize("America/New_York")
    _check_matches_file(panel_from_yfinance(by_ticker, TICKERS), expected)


def test_yfinance_panel_feeds_build_market_data_and_its_policies(yf_frame):
    panel = panel_from_yfinance(yf_frame, TICKERS)
    dropped = build_market_data(panel)
    assert dropped.tickers == ("AAPL", "MSFT") and any(n.startswith("DOW: dropped") for n in dropped.notes)
    later = build_market_data(panel, missing_policy="start_later")
    assert str(later.dates[0]) == "2019-03-20" and later.num_stocks == 3


def test_single_ticker_flat_columns_need_the_ticker(yf_frame, expected):
    flat = yf_frame.xs("MSFT", axis=1, level="Ticker")
    long = yfinance_to_long(flat, ["msft"])
    assert set(long["tic"]) == {"msft"}
    panel = panel_from_yfinance(flat, ["MSFT"])
    _check_matches_file(panel, expected[expected["tic"] == "MSFT"].reset_index(drop=True))
    with pytest.raises(DataError, match="flat columns"):
        yfinance_to_long(flat)


def test_broken_yfinance_row_is_rejected_by_the_shared_validation(yf_frame):
    broken = yf_frame.copy()
    day = pd.Timestamp("2019-02-04")
    broken.loc[day, ("High", "MSFT")] = broken.loc[day, ("Low", "MSFT")] * 0.9
    with pytest.raises(DataError, match="high .* is below low") as err:
        panel_from_yfinance(broken, TICKERS)
    assert (err.value.details["ticker"], err.value.details["date"], err.value.details["file"]) == (
        "MSFT",
        "2019-02-04",
        "yfinance",
    )


def test_ticker_missing_from_the_yfinance_result_is_named(yf_frame):
    with pytest.raises(DataError, match="no rows for KO") as err:
        panel_from_yfinance(yf_frame, [*TICKERS, "KO"])
    assert err.value.details["ticker"] == "KO"


def test_empty_yfinance_result_is_a_data_error():
    with pytest.raises(DataError, match="no rows"):
        panel_from_yfinance(pd.DataFrame(), ["AAPL"])


def test_download_rejects_bad_arguments_before_any_network_call():
    with pytest.raises(ConfigError) as err:
        download_yfinance([], "2020-01-01", "2020-12-31")
    assert err.value.details["field"] == "tickers"
    with pytest.raises(ConfigError):
        download_yfinance(["AAPL"], "last year", "2020-12-31")
