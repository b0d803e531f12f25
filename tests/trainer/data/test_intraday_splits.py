"""Splits of intraday data by timestamp, with minimum sizes in bars and in days (real 5-minute bars)."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.data.loading import load_panel
from trainer.data.pipeline import build_market_data
from trainer.data.splits import check_split_bars, check_split_days, split_market_data
from trainer.errors import ConfigError, DataError
from trainer.task import TaskSpec
from trainer.util.dates import parse_moment


@pytest.fixture(scope="module")
def bars(intraday_5min_path):
    panel = load_panel(intraday_5min_path, tickers=["AAPL", "MSFT"])
    return build_market_data(panel, start="2024-03-11", end="2024-06-28", turbulence=False)


def test_the_end_day_keeps_all_its_bars(bars):
    assert str(bars.dates[0]) == "2024-03-11T09:35:00" and str(bars.dates[-1]) == "2024-06-28T16:00:00"


def test_splits_may_start_and_end_inside_a_session(bars):
    parts = split_market_data(
        bars,
        {
            "train": ("2024-03-11", "2024-05-15 12:00"),
            "validation": ("2024-05-15 12:05", "2024-06-03"),
            "test": ("2024-06-04", None),
        },
    )
    train, validation, test = parts.values()
    assert str(train.dates[-1]) == "2024-05-15T12:00:00"  # the 11:55-12:00 bar, inclusive
    assert str(validation.dates[0]) == "2024-05-15T12:05:00"
    assert str(validation.dates[-1]) == "2024-06-03T16:00:00" and str(test.dates[0]) == "2024-06-04T09:35:00"
    assert len(train.dates) + len(validation.dates) + len(test.dates) == len(bars.dates)
    np.testing.assert_array_equal(
        validation.close, bars.close[len(train.dates) : len(train.dates) + len(validation.dates)]
    )
    # 2024-05-15 09:35 .. 12:00 is 30 bars of that day in train, the other 48 in validation
    assert int((train.dates.astype("datetime64[D]") == np.datetime64("2024-05-15")).sum()) == 30
    with pytest.raises(DataError, match="validation starts 2024-05-15T12:00:00, not after train ends"):
        split_market_data(bars, {"train": ("2024-03-11", "2024-05-15 12:00"), "validation": ("2024-05-15 12:00", None)})
    with pytest.raises(DataError, match="test: no bars between 2024-06-29 and None"):
        bars.slice("2024-06-29", None, name="test")


def test_minimum_sizes_are_stated_in_bars_and_days(bars):
    sizes = check_split_bars({"validation": ("2024-05-15 12:05", "2024-06-13")}, bars.dates)
    # 48 bars left on 2024-05-15, then 20 full sessions (2024-05-27 was Memorial Day) of 78
    assert sizes == {"validation": {"bars": 48 + 20 * 78, "days": 21}}
    with pytest.raises(ConfigError) as err:
        check_split_days({"validation": ("2024-05-15 12:05", "2024-06-11")}, bars.dates)
    assert err.value.details["field"] == "validation.end"
    assert "holds 1,452 bars on 19 trading day(s); it needs at least 20 trading day(s) = 1,560 bars (78 a day)" in str(
        err.value
    )
    with pytest.raises(
        ConfigError, match=r"test.start: 2024-07-01 is after the last bar of the data \(the data covers"
    ):
        check_split_days({"test": ("2024-07-01", "2024-08-01")}, bars.dates)


def test_daily_data_refuses_a_time_of_day(dow30_data):
    with pytest.raises(ConfigError, match="train.end: 2015-06-30 12:00 has a time of day, but the data is daily"):
        check_split_days({"train": ("2010-01-04", "2015-06-30 12:00")}, dow30_data.dates)
    # the web checks an intraday dataset's days before loading bars: moments count their day
    counts = check_split_days({"train": ("2010-01-04 12:00", "2010-07-02 10:00")}, dow30_data.dates, intraday=True)
    assert counts == {"train": 126}


def test_task_splits_accept_date_times():
    base = {"data": {"paths": ["intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"]}}
    spec = TaskSpec.from_dict(
        {
            **base,
            "train": {"start": "2024-03-11", "end": "2025-06-30 12:00"},
            "validation": {"start": "2025-06-30T12:05", "end": "2025-12-31"},
            "test": {"start": "2026-01-02", "end": "2026-08-21 16:00"},
        }
    )
    assert spec.train == ("2024-03-11", "2025-06-30 12:00") and spec.validation[0] == "2025-06-30 12:05"
    assert (spec.data.start, spec.data.end) == ("2024-03-11", "2026-08-21")
    with pytest.raises(
        ConfigError, match="validation.start: 2025-06-30 11:00 must be after train.end 2025-06-30 12:00"
    ):
        TaskSpec.from_dict(
            {
                **base,
                "train": ["2024-03-11", "2025-06-30 12:00"],
                "validation": ["2025-06-30 11:00", "2025-12-31"],
                "test": ["2026-01-02", "2026-08-21"],
            }
        )
    # a day as the end covers the whole day: a moment later that day overlaps it
    with pytest.raises(ConfigError, match="validation.start: 2025-06-30 13:00 must be after train.end 2025-06-30"):
        TaskSpec.from_dict(
            {
                **base,
                "train": ["2024-03-11", "2025-06-30"],
                "validation": ["2025-06-30 13:00", "2025-12-31"],
                "test": ["2026-01-02", "2026-08-21"],
            }
        )


def test_moment_parsing():
    assert parse_moment("2025-07-01T09:35", "x") == "2025-07-01 09:35"
    assert parse_moment("2025-07-01 00:00", "x") == "2025-07-01"
    with pytest.raises(ConfigError, match="train.end: '2025-07-01 25:00' is not a calendar date and time"):
        parse_moment("2025-07-01 25:00", "train.end")
    with pytest.raises(ConfigError, match="is not a YYYY-MM-DD date or a YYYY-MM-DD HH:MM date-time"):
        parse_moment("July 1st", "train.end")
    with pytest.raises(ConfigError, match="is not a calendar date"):
        parse_moment("2021-02-30", "train.end")


def test_zero_volume_bars_are_noted_as_bars_with_their_time(intraday_5min_path):
    panel = load_panel(intraday_5min_path, tickers=["AAPL"])
    zero = panel[(panel["tic"] == "AAPL") & (panel["volume"] == 0) & (panel["date"] >= "2026-08-01")]
    assert len(zero), "the file's last weeks hold zero-volume AAPL bars"
    data = build_market_data(panel, start="2026-08-01", end="2026-08-21", turbulence=False)
    note = next(n for n in data.notes if "zero-volume" in n)
    first = str(zero["date"].iloc[0])[:16]
    assert note.startswith(f"AAPL: {len(zero)} zero-volume bar(s) kept: {first}"), note
