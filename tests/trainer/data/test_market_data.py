"""Calendar alignment, missing-data policies, indicators, turbulence and look-ahead safety."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.data.indicators import DEFAULT_INDICATORS, compute_indicators, turbulence_index, validate_indicators
from trainer.data.pipeline import build_market_data
from trainer.data.splits import split_market_data
from trainer.errors import ConfigError, DataError


def _day(data, day):
    return int(np.flatnonzero(data.dates == np.datetime64(day))[0])


def test_drop_policy_drops_late_listed_dow_with_a_note_and_keeps_29_tickers_on_3241_days(dow30_data):
    assert dow30_data.num_stocks == 29
    assert "DOW" not in dow30_data.tickers
    assert dow30_data.num_days == 3_241
    assert str(dow30_data.dates[0]) == "2010-01-04" and str(dow30_data.dates[-1]) == "2022-11-15"
    assert any(n.startswith("DOW: dropped") and "2019-03-20" in n for n in dow30_data.notes)
    assert dow30_data.close.dtype == np.float64 and dow30_data.features.dtype == np.float32
    assert dow30_data.feature_names == DEFAULT_INDICATORS
    assert np.isfinite(dow30_data.features).all() and np.isfinite(dow30_data.turbulence).all()
    assert np.all(np.diff(dow30_data.dates.astype(np.int64)) > 0)


def test_start_later_policy_keeps_dow_and_starts_on_its_listing_day(dow30_panel):
    data = build_market_data(dow30_panel, missing_policy="start_later")
    assert data.num_stocks == 30 and "DOW" in data.tickers
    assert str(data.dates[0]) == "2019-03-20"
    assert any("start_later" in n and "DOW 2019-03-20" in n for n in data.notes)
    # the history before the start is warm-up, so indicators are not in warm-up on day one
    aapl = data.tickers.index("AAPL")
    sma60 = data.feature_names.index("close_60_sma")
    assert abs(data.features[0, aapl, sma60] / data.close[0, aapl] - 1) < 0.2
    assert data.turbulence[0] > 0


def test_close_is_the_adjusted_close_of_the_file(dow30_data, dow30_path):
    raw = pd.read_csv(dow30_path, parse_dates=["date"])
    wide = raw.pivot(index="date", columns="tic", values="adj_close")[list(dow30_data.tickers)]
    assert np.array_equal(wide.to_numpy(), dow30_data.close)
    # README: AAPL close 2019-12-31 = 293.65 raw; no split between then and the file's end but
    # the 4:1 split of 2020-08-31, so adjusted is about a quarter of it, less dividends
    ratio = dow30_data.close[_day(dow30_data, "2019-12-31"), dow30_data.tickers.index("AAPL")] / (293.65 / 4)
    assert 0.95 < ratio < 1.0


def test_tickers_and_range_are_selected_inclusively_in_the_requested_order(dow30_panel):
    data = build_market_data(dow30_panel, tickers=["msft", "AAPL", "KO"], start="2015-01-02", end="2015-12-31")
    assert data.tickers == ("MSFT", "AAPL", "KO")
    assert str(data.dates[0]) == "2015-01-02" and str(data.dates[-1]) == "2015-12-31"
    assert data.num_days == 252


def test_a_later_start_equals_slicing_the_full_range(dow30_data, dow30_panel):
    later = build_market_data(dow30_panel, start="2016-06-01", end="2018-12-31")
    cut = dow30_data.slice("2016-06-01", "2018-12-31")
    assert later.tickers == cut.tickers
    assert np.array_equal(later.dates, cut.dates)
    assert np.array_equal(later.close, cut.close)
    assert np.array_equal(later.features, cut.features)
    assert np.array_equal(later.turbulence, cut.turbulence)


def test_no_row_depends_on_later_data(dow30_data, dow30_panel):
    """Computing on data that ends in 2016 gives exactly the rows of the full computation."""
    short = build_market_data(dow30_panel, end="2016-12-30")
    t = short.num_days
    assert str(short.dates[-1]) == "2016-12-30"
    assert short.tickers == dow30_data.tickers
    assert np.array_equal(short.dates, dow30_data.dates[:t])
    assert np.array_equal(short.close, dow30_data.close[:t])
    assert np.array_equal(short.features, dow30_data.features[:t])
    assert np.array_equal(short.turbulence, dow30_data.turbulence[:t])


@pytest.mark.parametrize("name", ["adxr", "kdjj", "stochrsi", "atr_14", "wr_10", "mfi", "close_-1_r", "vwma"])
def test_every_allowed_indicator_family_is_causal(dow30_panel, name):
    bars = dow30_panel[dow30_panel["tic"] == "CAT"][["open", "high", "low", "close", "volume"]]
    full = compute_indicators(bars, [name])
    short = compute_indicators(bars.iloc[:900], [name])
    assert np.array_equal(full[:900], short)
    assert np.isfinite(full).all()


@pytest.mark.parametrize("name", ["close_2_s", "cr", "close_-1_p", "not_an_indicator", "rsi_x"])
def test_future_looking_or_unknown_indicators_are_rejected(name):
    with pytest.raises(ConfigError) as err:
        validate_indicators(["macd", name])
    assert err.value.details["field"] == "indicators[1]"


def test_indicators_match_their_textbook_definitions_on_real_closes(dow30_data):
    ko = dow30_data.tickers.index("KO")
    close = dow30_data.close[:, ko]
    f = {name: dow30_data.features[:, ko, i].astype(np.float64) for i, name in enumerate(dow30_data.feature_names)}
    t = 1_000
    assert f["close_30_sma"][t] == pytest.approx(close[t - 29 : t + 1].mean(), rel=1e-6)
    assert f["close_60_sma"][t] == pytest.approx(close[t - 59 : t + 1].mean(), rel=1e-6)
    # Bollinger: 20-day mean +- 2 sample standard deviations
    mid, sd = close[t - 19 : t + 1].mean(), close[t - 19 : t + 1].std(ddof=1)
    assert f["boll_ub"][t] == pytest.approx(mid + 2 * sd, rel=1e-5)
    assert f["boll_lb"][t] == pytest.approx(mid - 2 * sd, rel=1e-5)
    # MACD: EMA12 - EMA26 of the close (pandas-style adjusted EWM from the first day)
    s = pd.Series(close)
    macd = s.ewm(span=12, adjust=True).mean() - s.ewm(span=26, adjust=True).mean()
    assert f["macd"][t] == pytest.approx(macd.iloc[t], rel=1e-4)
    assert 0 <= f["rsi_30"].min() and f["rsi_30"].max() <= 100
    assert 0 <= f["dx_30"].min() and f["dx_30"].max() <= 100


def test_turbulence_matches_a_direct_mahalanobis_computation(dow30_data):
    close = dow30_data.close
    returns = close[1:] / close[:-1] - 1  # returns[k] is the return of day k + 1
    for t in (400, 1_545, 2_560, 3_240):  # 2_560 is in the March-2020 crash
        window = returns[t - 253 : t - 1]  # the 252 returns of days t-252 .. t-1
        mu = window.mean(axis=0)
        cov = np.cov(window, rowvar=False)
        diff = returns[t - 1] - mu
        expected = diff @ np.linalg.solve(cov, diff)
        assert dow30_data.turbulence[t] == pytest.approx(expected, rel=1e-7)
    crash = dow30_data.turbulence[_day(dow30_data, "2020-03-16")]
    assert crash > 10 * np.median(dow30_data.turbulence[253:])


def test_turbulence_is_zero_for_the_first_year_and_the_first_two_positive_values(dow30_data):
    turb = dow30_data.turbulence
    assert np.all(turb[:254] == 0)  # days 0..251: warm-up; days 252 and 253: FinRL's count <= 2
    assert np.all(turb[254:] > 0)


def test_turbulence_leaves_out_tickers_until_they_have_a_full_window():
    rng = np.random.default_rng(0)
    prices = 100 * np.cumprod(1 + 0.01 * rng.standard_normal((400, 3)), axis=0)
    late = prices.copy()
    late[:100, 2] = np.nan  # the third ticker lists on day 100
    with_late = turbulence_index(late, window=50)
    two_only = turbulence_index(prices[:, :2], window=50)
    # until the third ticker has 50 returns (days 100..150), it is left out of the window
    assert np.array_equal(with_late[:151], two_only[:151])
    assert not np.allclose(with_late[152:], two_only[152:])


def test_nasdaq100_drop_policy_fills_single_missing_days_and_drops_late_listings(nasdaq100_panel):
    data = build_market_data(nasdaq100_panel, end="2016-12-30")
    late = {"TSLA", "NXPI", "ENPH", "META", "KHC", "FANG", "GOOG", "PYPL", "MRNA", "CEG"}
    assert not late & set(data.tickers)
    assert data.num_stocks == 81 - len(late)
    notes = "\n".join(data.notes)
    assert "REGN: forward-filled 1 missing day(s)" in notes and "2015-06-09" in notes
    assert "VRTX: forward-filled 2 missing day(s)" in notes
    regn = data.tickers.index("REGN")
    day = _day(data, "2015-06-09")
    assert data.close[day, regn] == data.close[day - 1, regn]
    assert "CHTR: 18 zero-volume day(s) kept" in notes
    assert np.isfinite(data.features).all()


def test_nasdaq100_start_later_starts_when_the_last_ticker_lists(nasdaq100_panel):
    data = build_market_data(nasdaq100_panel, tickers=["AAPL", "META", "PYPL", "NVDA"], missing_policy="start_later")
    assert str(data.dates[0]) == "2015-07-06"  # PYPL's first day (README)
    assert data.tickers == ("AAPL", "META", "PYPL", "NVDA")


def test_ticker_that_stops_before_the_range_end_is_dropped_with_a_note(dow30_panel):
    cut = dow30_panel[~((dow30_panel["tic"] == "KO") & (dow30_panel["date"] > "2021-06-30"))]
    cut = cut[cut["tic"].isin(["AAPL", "KO", "MSFT"])].reset_index(drop=True)
    for policy in ("drop", "start_later"):
        data = build_market_data(cut, start="2021-01-04", missing_policy=policy)
        assert data.tickers == ("AAPL", "MSFT")
        assert any(n.startswith("KO: dropped, its last row 2021-06-30") for n in data.notes)


def test_a_named_ticker_that_does_not_cover_the_range_is_an_error_naming_its_days_and_the_range(dow30_panel):
    cut = dow30_panel[~((dow30_panel["tic"] == "KO") & (dow30_panel["date"] > "2021-06-30"))].reset_index(drop=True)
    with pytest.raises(DataError) as err:
        build_market_data(cut, tickers=["AAPL", "KO"], start="2021-01-04", end="2022-11-15")
    assert err.value.details["ticker"] == "KO"
    message = str(err.value)
    assert "2010-01-04 to 2021-06-30" in message and "range 2021-01-04 to 2022-11-15" in message
    # DOW lists 2019-03-20: named for a range from 2018 it is refused, from 2020 it is kept
    with pytest.raises(DataError, match="DOW does not cover the range 2018-01-02 to 2020-12-31"):
        build_market_data(dow30_panel, tickers=["DOW", "KO"], start="2018-01-02", end="2020-12-31")
    assert build_market_data(dow30_panel, tickers=["DOW", "KO"], start="2020-01-02", end="2020-12-31").tickers == (
        "DOW",
        "KO",
    )


def test_late_listing_is_judged_against_the_range_start_not_the_files_first_row(dow30_panel):
    # AAPL's first row one trading day after MSFT's: irrelevant for a range starting months later
    two = dow30_panel[dow30_panel["tic"].isin(["AAPL", "MSFT"])]
    two = two[~((two["tic"] == "AAPL") & (two["date"] == two["date"].min()))].reset_index(drop=True)
    for tickers in (None, ["AAPL", "MSFT"]):
        data = build_market_data(two, tickers=tickers, start="2010-06-01", end="2012-12-31")
        assert data.tickers == ("AAPL", "MSFT")
        assert not any("dropped" in n for n in data.notes)
    # from the file's first day AAPL is late: dropped with a note when not named, an error when named
    data = build_market_data(two, start="2010-01-04", end="2012-12-31")
    assert data.tickers == ("MSFT",) and any(
        n.startswith("AAPL: dropped, its first row 2010-01-05") for n in data.notes
    )
    with pytest.raises(DataError, match="AAPL does not cover"):
        build_market_data(two, tickers=["AAPL", "MSFT"], start="2010-01-04", end="2012-12-31")


def test_long_gap_drops_the_ticker_but_short_gap_is_filled(dow30_panel):
    def without(tic, first, last):
        gone = (dow30_panel["tic"] == tic) & dow30_panel["date"].between(first, last)
        panel = dow30_panel[~gone]
        return panel[panel["tic"].isin(["IBM", "KO"])].reset_index(drop=True)

    long_gap = build_market_data(without("IBM", "2012-03-01", "2012-03-31"))
    assert long_gap.tickers == ("KO",)
    assert any(n.startswith("IBM: dropped, 22 consecutive trading days missing") for n in long_gap.notes)
    with pytest.raises(DataError, match="IBM does not cover"):
        build_market_data(without("IBM", "2012-03-01", "2012-03-31"), tickers=["IBM", "KO"])
    # a long gap before the range is warm-up history, not a reason to drop
    later = build_market_data(without("IBM", "2012-03-01", "2012-03-31"), tickers=["IBM", "KO"], start="2013-01-02")
    assert later.tickers == ("IBM", "KO")
    short_gap = build_market_data(without("IBM", "2012-03-05", "2012-03-07"), tickers=["IBM", "KO"])
    assert short_gap.tickers == ("IBM", "KO")
    ibm, day = 0, _day(short_gap, "2012-03-07")
    assert short_gap.close[day, ibm] == short_gap.close[_day(short_gap, "2012-03-02"), ibm]
    assert any("IBM: forward-filled 3 missing day(s)" in n for n in short_gap.notes)


def test_range_starting_before_the_data_notes_the_real_first_day(dow30_panel):
    data = build_market_data(dow30_panel, tickers=["DOW"], start="2018-01-01", end="2019-12-31")
    assert str(data.dates[0]) == "2019-03-20"
    assert any("starts 2019-03-20, after the requested start 2018-01-01" in n for n in data.notes)
    holiday = build_market_data(dow30_panel, tickers=["KO"], start="2010-01-01", end="2010-12-31")
    assert not any("requested start" in n for n in holiday.notes)  # 2010-01-04 is the first trading day


def test_tickers_without_rows_in_range_are_dropped_with_a_note_when_none_were_named(dow30_panel):
    data = build_market_data(dow30_panel, end="2015-12-31")
    assert "DOW" not in data.tickers and data.num_stocks == 29
    assert any(n.startswith("DOW: dropped, has no rows between the start and 2015-12-31") for n in data.notes)


def test_no_ticker_left_is_an_error(dow30_panel):
    # each ticker misses a month the other one has, so both have a gap too long to fill
    gone = ((dow30_panel["tic"] == "IBM") & dow30_panel["date"].between("2012-03-01", "2012-03-31")) | (
        (dow30_panel["tic"] == "KO") & dow30_panel["date"].between("2012-05-01", "2012-05-31")
    )
    both = dow30_panel[~gone]
    with pytest.raises(DataError, match="no ticker is left"):
        build_market_data(both[both["tic"].isin(["IBM", "KO"])].reset_index(drop=True))


def test_split_helper_cuts_chronological_ranges_and_rejects_overlap(dow30_data):
    parts = split_market_data(
        dow30_data,
        {
            "train": ("2010-01-01", "2019-12-31"),
            "validation": ("2020-01-01", "2020-12-31"),
            "test": ("2021-01-01", None),
        },
    )
    assert [p.num_days for p in parts.values()] == [2_516, 253, 472]
    assert sum(p.num_days for p in parts.values()) == dow30_data.num_days
    with pytest.raises(DataError, match="must not overlap") as err:
        split_market_data(dow30_data, {"train": ("2010-01-01", "2015-12-31"), "test": ("2015-06-01", "2016-12-31")})
    assert err.value.details["field"] == "test"
