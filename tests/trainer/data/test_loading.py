"""Loading real daily files in every supported layout, with adjusted prices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.data.loading import load_panel
from trainer.errors import DataError

QQQ_FILE = "QQQ_daily_eodhd_1999-03-10_2024-04-19.csv"


def _raw(path, tickers):
    df = pd.read_csv(path)
    return df[df["tic"].isin(tickers)].reset_index(drop=True)


def _close(panel, tic, day):
    row = panel[(panel["tic"] == tic) & (panel["date"] == pd.Timestamp(day))]
    assert len(row) == 1
    return float(row["close"].iloc[0])


def test_dow30_panel_has_every_ticker_in_long_layout_sorted_by_date_then_ticker(dow30_panel):
    assert list(dow30_panel.columns) == ["date", "tic", "open", "high", "low", "close", "volume"]
    assert len(dow30_panel) == 94_913  # README row count
    assert dow30_panel["tic"].nunique() == 30
    keys = list(zip(dow30_panel["date"], dow30_panel["tic"]))
    assert keys == sorted(keys)
    assert dow30_panel["date"].min() == pd.Timestamp("2010-01-04")
    assert dow30_panel["date"].max() == pd.Timestamp("2022-11-15")


@pytest.mark.parametrize(
    ("before", "after", "raw_before", "raw_after", "split"),
    [
        # raw closes from the data README; AAPL split 7:1 on 2014-06-09 and 4:1 on 2020-08-31
        ("2014-06-06", "2014-06-09", 645.57, 93.70, 7.0),
        ("2020-08-28", "2020-08-31", 499.23, 129.04, 4.0),
    ],
)
def test_aapl_split_day_is_an_ordinary_return_in_adjusted_prices(
    dow30_panel, before, after, raw_before, raw_after, split
):
    adjusted_return = _close(dow30_panel, "AAPL", after) / _close(dow30_panel, "AAPL", before) - 1
    true_return = raw_after / (raw_before / split) - 1
    assert abs(adjusted_return - true_return) < 1e-3
    assert abs(raw_after / raw_before - 1) > 0.5  # the raw series really does jump


def test_adjusted_open_high_low_bracket_the_adjusted_close(dow30_panel):
    p = dow30_panel
    assert (p["high"] >= p["low"]).all()
    # derived adj_* columns are rounded to 4 decimals, so allow that much slack
    assert (p["close"] <= p["high"] + 1e-3).all() and (p["close"] >= p["low"] - 1e-3).all()


def test_aliased_column_names_with_only_adj_close_are_adjusted_by_the_daily_factor(dow30_path, tmp_path):
    raw = _raw(dow30_path, ["AAPL", "MSFT"])
    renamed = raw[["date", "tic", "open", "high", "low", "close", "adj_close", "volume"]].rename(
        columns={
            "date": "Date",
            "tic": "Symbol",
            "open": "Open",
            "high": "HIGH",
            "low": "Low",
            "close": "Close",
            "adj_close": "Adj Close",
            "volume": "Volume",
        }
    )
    path = tmp_path / "two.csv"
    renamed.to_csv(path, index=False)
    panel = load_panel(path)
    merged = panel.merge(raw.assign(date=pd.to_datetime(raw["date"])), on=["date", "tic"], suffixes=("", "_file"))
    assert len(merged) == len(raw)
    assert np.array_equal(merged["close"].to_numpy(), merged["adj_close"].to_numpy())
    # the file's adj_open is open * adj_close / close rounded to 4 decimals
    assert np.allclose(merged["open"], merged["adj_open"], atol=6e-5, rtol=0)
    assert any("adj_close/close" in n for n in panel.attrs["notes"])


def test_adjusted_close_is_spelled_adjusted_close_in_eodhd_exports(dow30_path, tmp_path):
    raw = _raw(dow30_path, ["KO"]).head(50)
    raw = raw.rename(columns={"adj_close": "Adjusted_close"}).drop(columns=["adj_open", "adj_high", "adj_low"])
    path = tmp_path / "ko.csv"
    raw.to_csv(path, index=False)
    panel = load_panel(path)
    assert np.array_equal(panel["close"].to_numpy(), raw["Adjusted_close"].to_numpy())


def test_one_file_per_ticker_folder_takes_tickers_from_file_names(dow30_path, dow30_panel, tmp_path):
    folder = tmp_path / "bars"
    folder.mkdir()
    raw = _raw(dow30_path, ["AAPL", "MSFT"])
    raw[raw["tic"] == "AAPL"].drop(columns="tic").to_csv(folder / "AAPL.csv", index=False)
    raw[raw["tic"] == "MSFT"].drop(columns="tic").to_csv(folder / "msft.csv.gz", index=False)
    (folder / "notes.txt").write_text("not a data file")
    panel = load_panel(folder)
    expected = dow30_panel[dow30_panel["tic"].isin(["AAPL", "MSFT"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(panel, expected)
    assert panel.attrs["files"] == {"AAPL": "AAPL.csv", "MSFT": "msft.csv.gz"}


def test_parquet_files_load_like_csv(dow30_path, dow30_panel, tmp_path):
    raw = _raw(dow30_path, ["JNJ", "PG"])
    raw.to_parquet(tmp_path / "two.parquet")
    panel = load_panel(tmp_path / "two.parquet")
    expected = dow30_panel[dow30_panel["tic"].isin(["JNJ", "PG"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(panel, expected)


def test_file_without_ticker_column_takes_the_ticker_from_its_name_or_the_argument(data_dir):
    qqq = load_panel(data_dir / QQQ_FILE)
    assert set(qqq["tic"]) == {"QQQ"}
    assert len(qqq) == 6_320
    assert qqq["date"].iloc[0] == pd.Timestamp("1999-03-10")
    named = load_panel(data_dir / QQQ_FILE, ticker="nasdaq")
    assert set(named["tic"]) == {"NASDAQ"}
    assert np.array_equal(named["close"].to_numpy(), qqq["close"].to_numpy())


def test_qqq_adjusted_returns_match_the_raw_closes_named_in_the_readme(data_dir):
    qqq = load_panel(data_dir / QQQ_FILE).set_index("date")["close"]
    raw = pd.read_csv(data_dir / QQQ_FILE, parse_dates=["date"]).set_index("date")["close"]
    assert raw[pd.Timestamp("2023-12-29")] == 409.52
    # no split between these two days, so adjusted and raw returns agree up to dividends (< 1 %)
    adj_ret = qqq[pd.Timestamp("2023-12-29")] / qqq[pd.Timestamp("2022-12-30")]
    raw_ret = 409.52 / 266.28
    assert 0 < adj_ret - raw_ret < 0.01 * raw_ret


def test_tickers_argument_keeps_only_those_tickers_in_any_case(dow30_path):
    panel = load_panel(dow30_path, tickers=["msft", "AAPL"])
    assert sorted(panel["tic"].unique()) == ["AAPL", "MSFT"]
    assert len(panel) == 2 * 3_241


def test_tickers_present_in_two_files_with_identical_rows_are_kept_once_with_a_note(dow30_path, nasdaq100_path):
    panel = load_panel([dow30_path, nasdaq100_path], tickers=["AAPL", "MSFT", "NVDA", "KO"])
    assert sorted(panel["tic"].unique()) == ["AAPL", "KO", "MSFT", "NVDA"]
    assert not panel.duplicated(["date", "tic"]).any()
    notes = " ".join(panel.attrs["notes"])
    assert "AAPL: identical rows" in notes and "MSFT: identical rows" in notes


def test_ticker_in_two_files_with_different_rows_is_an_error_naming_both_files(dow30_path, tmp_path):
    raw = _raw(dow30_path, ["AAPL"]).head(20)
    raw.to_csv(tmp_path / "a.csv", index=False)
    scaled = {c: raw[c] * 1.01 for c in ("adj_open", "adj_high", "adj_low", "adj_close")}
    raw.assign(**scaled).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(DataError, match=r"AAPL is in both a\.csv and b\.csv") as err:
        load_panel([tmp_path / "a.csv", tmp_path / "b.csv"])
    assert err.value.details["ticker"] == "AAPL"


def test_raw_prices_are_used_with_a_note_when_the_file_has_no_adjusted_column(dow30_path, tmp_path):
    raw = _raw(dow30_path, ["IBM"]).head(30)[["date", "tic", "open", "high", "low", "close", "volume"]]
    raw.to_csv(tmp_path / "ibm.csv", index=False)
    panel = load_panel(tmp_path / "ibm.csv")
    assert np.array_equal(panel["close"].to_numpy(), raw["close"].to_numpy())
    assert any("raw prices used" in n for n in panel.attrs["notes"])


def test_adj_close_without_close_is_refused_naming_close(dow30_path, tmp_path):
    raw = pd.read_csv(dow30_path, nrows=60)
    raw[["date", "tic", "open", "high", "low", "adj_close", "volume"]].to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(DataError, match="adj_close cannot stand in for close") as err:
        load_panel(tmp_path / "p.csv")
    assert err.value.details["field"] == "close"


def test_a_file_without_any_close_column_is_refused_naming_close(dow30_path, tmp_path):
    raw = pd.read_csv(dow30_path, nrows=60)
    raw[["date", "tic", "open", "high", "low", "volume"]].to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(DataError, match="missing column") as err:
        load_panel(tmp_path / "p.csv")
    assert err.value.details["field"] == "close"


def test_all_four_adjusted_columns_need_no_raw_prices(dow30_path, tmp_path):
    raw = pd.read_csv(dow30_path, nrows=60)
    adjusted = raw[["date", "tic", "adj_open", "adj_high", "adj_low", "adj_close", "volume"]]
    adjusted.to_csv(tmp_path / "p.csv", index=False)
    panel = load_panel(tmp_path / "p.csv")
    assert np.allclose(panel["close"].to_numpy(), adjusted.sort_values(["date", "tic"])["adj_close"].to_numpy())


def test_trading_dates_reads_the_calendar_of_the_chosen_tickers(dow30_path):
    from trainer.data.files import trading_dates

    days = trading_dates(dow30_path, tickers=["aapl"])
    assert str(days[0]) == "2010-01-04" and str(days[-1]) == "2022-11-15"
    assert len(days) == len(np.unique(days)) and (np.diff(days.astype("int64")) > 0).all()
    dow = trading_dates(dow30_path, tickers=["DOW"])
    assert str(dow[0]) == "2019-03-20"
