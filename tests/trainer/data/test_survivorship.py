"""The survivorship rule: known membership snapshots by file name, and universes whose every
ticker survives to the end; a point-in-time universe gets no note."""

from __future__ import annotations

from trainer.data.survivorship import survivorship_note


def test_the_shared_dow_and_nasdaq_files_are_named_as_later_membership_lists():
    dow = survivorship_note(["/data/dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"], "2010-01-04", "2022-11-15")
    assert dow.startswith("Survivorship bias: the universe is the Dow 30 as of 2022")
    assert "(2010-01-04)" in dow and "before 2022" in dow
    nasdaq = survivorship_note(["nasdaq100_daily_eodhd_2010-01-04_2022-11-15.csv.gz"], "2010-01-04", "2022-11-15")
    assert "Nasdaq-100 as of 2023" in nasdaq
    # data that starts in the snapshot's year is not flattered by it
    assert survivorship_note(["dow30_x.csv"], "2022-01-03", "2022-11-15") is None


def test_a_universe_where_no_ticker_ever_leaves_is_flagged_and_one_with_a_leaver_is_not():
    survivors = {"AAA": "2022-11-15", "BBB": "2022-11-14", "CCC": "2022-11-11"}
    note = survivorship_note(["mine.csv"], "2015-01-02", "2022-11-15", survivors)
    assert note.startswith("Survivorship bias likely: all 3 tickers trade until the data's last day (2022-11-15)")
    with_leaver = {**survivors, "DDD": "2018-06-29"}  # delisted in 2018: a point-in-time list
    assert survivorship_note(["mine.csv"], "2015-01-02", "2022-11-15", with_leaver) is None
    assert survivorship_note(["mine.csv"], "2022-01-03", "2022-11-15", survivors) is None  # under a year
