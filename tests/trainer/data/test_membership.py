"""Point-in-time membership files: parsing, the errors a user sees, and the (T, N) mask."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from tests.membership_files import MEMBERSHIP, write_membership, write_prices
from trainer.data.cache import cache_path
from trainer.data.membership import membership_mask, parse_membership, read_membership
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.data.survivorship import survivorship_note
from trainer.errors import ConfigError, DataError
from trainer.limits import InputLimits
from trainer.selection import equal_weight_returns

DAYS = np.array(["2019-02-27", "2019-02-28", "2019-03-01", "2019-05-31", "2019-06-03", "2019-07-01"], "datetime64[D]")


def test_the_mask_holds_each_ticker_from_its_first_to_its_last_day_inclusive_with_reentries():
    members, notes = membership_mask(parse_membership(MEMBERSHIP, name="m.csv"), DAYS, ("AAPL", "JPM", "MSFT"))
    assert members.dtype == np.bool_ and members.shape == (6, 3)
    assert members[:, 0].all(), "an empty 'to' is a member to the end"
    assert members[:, 2].tolist() == [True, True, False, False, True, True], "MSFT leaves after 02-28, back 06-01"
    assert members[:, 1].tolist() == [False] * 5 + [True], "JPM joins on 07-01"
    assert notes[0].startswith("point-in-time universe from m.csv: 3 of 3 tickers")


def test_a_ticker_of_the_data_without_a_row_is_never_a_member_and_said_so():
    members, notes = membership_mask(parse_membership("ticker,from,to\nAAPL,2019-01-01,\n"), DAYS, ("AAPL", "KO"))
    assert members[:, 1].sum() == 0
    assert any("never a member in the range, so never traded: KO" in n for n in notes)


def test_tickers_that_are_never_members_are_refused_instead_of_holding_cash_all_along():
    """Trading only non-members would hold cash every day and report that as a strategy."""
    membership = parse_membership("ticker,from,to\nAAPL,2019-01-01,\n", name="m.csv")
    with pytest.raises(DataError) as info:
        membership_mask(membership, DAYS, ("JPM", "KO"), chosen=("JPM", "KO"))
    assert info.value.details["field"] == "data.membership"
    assert "none of the 2 tickers (JPM, KO) is a member on any day" in info.value.message


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("MSFT,2019-13-01,", "row 2 (MSFT): from '2019-13-01' is not a YYYY-MM-DD date"),
        ("MSFT,2019/01/01,", "row 2 (MSFT): from '2019/01/01' is not a YYYY-MM-DD date"),
        ("MSFT,2019-01-01,soon", "row 2 (MSFT): to 'soon' is not a YYYY-MM-DD date"),
        ("MSFT,2019-05-01,2019-04-30", "row 2 (MSFT): from 2019-05-01 is after to 2019-04-30"),
        ("MSFT,2019-01-01", "row 2: expected 3 cells (ticker,from,to), got 2"),
        ("MS FT,2019-01-01,", "row 2: ticker 'MS FT' is not a ticker symbol"),
    ],
)
def test_a_bad_row_is_refused_naming_the_field_the_row_and_the_ticker(row, expected):
    with pytest.raises(DataError) as exc:
        parse_membership(f"ticker,from,to\nAAPL,2019-01-01,\n{row}\n")
    assert exc.value.message.startswith(f"data.membership {expected}")
    assert exc.value.details["field"] == "data.membership" and exc.value.details["row"] == 2


def test_overlapping_rows_of_one_ticker_are_refused_naming_the_later_row():
    text = "ticker,from,to\nMSFT,2010-01-01,2015-12-31\nAAPL,2010-01-01,\nMSFT,2015-12-31,\n"
    with pytest.raises(DataError) as exc:
        parse_membership(text)
    assert exc.value.message.startswith("data.membership row 3 (MSFT): overlaps row 1")
    assert exc.value.details["ticker"] == "MSFT" and exc.value.details["row"] == 3
    parse_membership(text.replace("MSFT,2015-12-31,", "MSFT,2016-01-01,"))  # the next day is fine


@pytest.mark.parametrize("header", ["tic,from,to", "ticker,from", "ticker,from,to,weight", ""])
def test_a_file_without_the_ticker_from_to_header_is_refused(header):
    with pytest.raises(DataError, match="the header must be ticker,from,to"):
        parse_membership(f"{header}\nAAPL,2019-01-01,\n")


def test_a_ticker_in_range_that_the_data_lacks_is_refused_unless_the_task_left_it_out():
    text = "ticker,from,to\nAAPL,2019-01-01,\nXOM,1928-10-01,2020-08-28\nGE,1907-11-07,2018-06-25\n"
    membership = parse_membership(text)
    with pytest.raises(DataError) as exc:
        membership_mask(membership, DAYS, ("AAPL", "MSFT"))
    assert exc.value.message.startswith("data.membership row 2 (XOM): a member from 1928-10-01 to 2020-08-28")
    assert exc.value.details == {"field": "data.membership", "row": 2, "ticker": "XOM"}
    # GE left before the range: its row is ignored; XOM is left out by the task's own list
    members, notes = membership_mask(membership, DAYS, ("AAPL", "MSFT"), chosen=["AAPL", "MSFT"])
    assert members[:, 0].all() and not members[:, 1].any()
    assert any("task left out ignored: XOM" in n for n in notes)


def test_a_membership_file_past_the_size_limit_is_refused_before_it_is_parsed(tmp_path):
    path = write_membership(tmp_path, "ticker,from,to\n" + "AAPL,2019-01-01,2019-01-01\n" * 20)
    with pytest.raises(DataError) as exc:
        read_membership(path, limits=InputLimits(file_bytes=100))
    assert exc.value.details["field"] == "data.membership" and "100 bytes" in exc.value.message
    with pytest.raises(DataError, match="does not exist"):
        read_membership(tmp_path / "nope.csv")


def test_the_spec_takes_a_membership_path_and_writes_it_back():
    spec = DataSpec.from_dict({"paths": ["x.csv"], "membership": "m.csv"}, prefix="data")
    assert spec.membership == "m.csv" and spec.to_dict()["membership"] == "m.csv"
    assert "membership" not in DataSpec(paths=["x.csv"]).to_dict(), "specs without one are unchanged"
    with pytest.raises(ConfigError) as exc:
        DataSpec.from_dict({"paths": ["x.csv"], "membership": 3}, prefix="data")
    assert exc.value.details["field"] == "data.membership"


def test_load_market_data_masks_the_panel_and_shares_its_cache_with_the_unmasked_panel(data_dir, tmp_path):
    prices, members_file = write_prices(data_dir, tmp_path), write_membership(tmp_path)
    spec = DataSpec(paths=[str(prices)], start="2019-01-01", membership=members_file.name)
    plain = DataSpec(paths=[str(prices)], start="2019-01-01")
    cache = tmp_path / "cache"
    masked = load_market_data(spec, data_dir=tmp_path, cache_dir=cache)
    assert cache_path(spec, cache_dir=cache) == cache_path(plain, cache_dir=cache)
    again = load_market_data(spec, data_dir=tmp_path, cache_dir=cache)  # from the cache
    unmasked = load_market_data(plain, data_dir=tmp_path, cache_dir=cache)
    assert unmasked.members is None and masked.members is not None
    np.testing.assert_array_equal(again.members, masked.members)
    assert masked.content_hash() != unmasked.content_hash()
    days = masked.dates
    msft = masked.members[:, masked.tickers.index("MSFT")]
    assert not msft[(days >= np.datetime64("2019-03-01")) & (days <= np.datetime64("2019-05-31"))].any()
    assert msft[days == np.datetime64("2019-06-03")].all()
    window = masked.slice("2019-07-01", "2019-07-31")
    assert window.members.shape == window.close.shape and window.members.all()


def test_one_over_n_averages_only_the_members_of_each_day():
    close = np.array([[10.0, 20.0, 30.0], [11.0, 22.0, 27.0], [11.0, 44.0, 27.0]])
    members = np.array([[True, True, False], [False, True, False], [True, True, True]])
    r = equal_weight_returns(close, members)
    np.testing.assert_allclose(r, [(1.1 + 1.1) / 2 - 1, 2.0 - 1])
    np.testing.assert_allclose(equal_weight_returns(close, np.zeros_like(members)), [0.0, 0.0])  # all cash
    np.testing.assert_allclose(equal_weight_returns(close), np.mean(close[1:] / close[:-1], axis=1) - 1)


def test_the_survivorship_note_names_the_point_in_time_universe_instead_of_warning():
    paths = ["dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"]
    assert survivorship_note(paths, "2010-01-04", "2022-11-15").startswith("Survivorship bias: the universe is")
    note = survivorship_note(paths, dt.date(2010, 1, 4), "2022-11-15", membership="/x/dow30_members.csv")
    assert note.startswith("Point-in-time universe") and "dow30_members.csv" in note and "/x/" not in note
