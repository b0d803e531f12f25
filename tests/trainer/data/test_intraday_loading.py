"""Intraday files: timestamp conventions, interval/label detection, session checks, missing bars.

Every expected value is read by hand from the real files in ``../shared/data`` (their README
describes the conventions): the 5-minute file holds UTC bar-start stamps, the 1-minute file
US/Eastern bar-end stamps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.data.bars import DAILY, BarInfo, bar_info
from trainer.data.loading import load_panel
from trainer.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def five_min(intraday_5min_path):
    return load_panel(intraday_5min_path)


@pytest.fixture(scope="module")
def one_min(intraday_1min_path):
    return load_panel(intraday_1min_path)


@pytest.fixture(scope="module")
def raw_5min(intraday_5min_path):
    return pd.read_csv(intraday_5min_path)


def _bar(panel, tic, stamp):
    rows = panel[(panel["tic"] == tic) & (panel["date"] == pd.Timestamp(stamp))]
    assert len(rows) == 1, f"{tic} {stamp}: {len(rows)} rows"
    return rows.iloc[0]


def test_5min_utc_bar_starts_become_et_bar_ends(five_min):
    # file row "2024-03-11 13:30:00,AAPL,172.98,173.77,172.74,173.58": 13:30 UTC is 09:30 EDT
    # (DST began 2024-03-10), the bar 09:30-09:35 ET, so its end label is 09:35.
    bar = _bar(five_min, "AAPL", "2024-03-11 09:35")
    assert (bar["open"], bar["high"], bar["low"], bar["close"]) == (172.98, 173.77, 172.74, 173.58)
    # file row "2024-12-02 14:30:00,AAPL,237.27,...,239.3": 14:30 UTC is 09:30 EST (DST ended 2024-11-03)
    bar = _bar(five_min, "AAPL", "2024-12-02 09:35")
    assert (bar["open"], bar["close"]) == (237.27, 239.3)
    # half day 2024-11-29: file row "2024-11-29 17:55:00,AAPL,...,237.35" is the last bar, 12:55-13:00 EST
    bar = _bar(five_min, "AAPL", "2024-11-29 13:00")
    assert bar["close"] == 237.35
    day = five_min[(five_min["tic"] == "AAPL") & (five_min["date"].dt.normalize() == pd.Timestamp("2024-11-29"))]
    assert len(day) == 42 and day["date"].max() == pd.Timestamp("2024-11-29 13:00")
    # no stamp at 09:30 (a bar's end is never the open), every full day ends at 16:00
    minutes = five_min["date"].dt.hour * 60 + five_min["date"].dt.minute
    assert minutes.min() == 9 * 60 + 35 and minutes.max() == 16 * 60
    assert five_min["date"].dt.tz is None and str(five_min["date"].dtype) == "datetime64[ns]"


def test_5min_bar_info(five_min, raw_5min):
    info = bar_info(five_min)
    assert info.intraday and info.interval == "5m" and info.minutes == 5
    assert info.session == "regular" and info.bars_per_session == 78 and info.periods_per_year == 78 * 252
    assert info.bar_label == "start" and info.bar_label_detected == "start"
    assert info.timezone.startswith("UTC")
    # the data README: 615 days, 6 of them half days, regular session only, no gap
    assert info.sessions == 615 and len(info.half_days) == 6 and "2024-11-29" in info.half_days
    assert info.missing == () and len(five_min) == len(raw_5min)
    assert BarInfo.from_dict(info.to_dict()) == info
    assert any("stamps read as bar starts" in n for n in five_min.attrs["notes"])


def test_1min_et_bar_ends_kept_and_missing_minutes_filled_from_the_past(one_min, intraday_1min_path):
    raw = pd.read_csv(intraday_1min_path, parse_dates=["datetime_et"])
    # file row "2019-02-11 09:31:00,AAPL,171.14,171.2,170.7,170.97,619925": already a bar end in ET
    bar = _bar(one_min, "AAPL", "2019-02-11 09:31")
    assert (bar["open"], bar["close"], bar["volume"]) == (171.14, 170.97, 619925)
    info = bar_info(one_min)
    assert info.interval == "1m" and info.bars_per_session == 390 and info.periods_per_year == 390 * 252
    assert info.bar_label == "end" and info.bar_label_detected == "end"
    # every ticker ends with the full 390 bars on each of the 5 days
    assert (one_min.groupby(["tic", one_min["date"].dt.date]).size() == 390).all()
    # the added rows are exactly the minutes the file lacks, each a flat zero-volume bar at the
    # close of the ticker's previous minute in the file
    have = set(zip(raw["tic"], raw["datetime_et"]))
    added = one_min[[(t, d) not in have for t, d in zip(one_min["tic"], one_min["date"])]]
    assert len(added) == len(one_min) - len(raw) == info.missing_bars > 0
    for _, row in added.iterrows():
        before = raw[(raw["tic"] == row["tic"]) & (raw["datetime_et"] < row["date"])]
        previous = before.sort_values("datetime_et")["close"].iloc[-1]
        assert row["volume"] == 0
        assert row["open"] == row["high"] == row["low"] == row["close"] == previous
    by_ticker = {m.ticker: m.count for m in info.missing}
    assert by_ticker == added.groupby("tic").size().to_dict()
    assert any("filled with the previous close" in n for n in one_min.attrs["notes"])


def _sample(raw_5min, n_days=3, tickers=("AAPL", "MSFT")) -> pd.DataFrame:
    """The first ``n_days`` sessions of the real 5-minute file (UTC bar starts)."""
    days = sorted(raw_5min["datetime_utc"].str.slice(0, 10).unique())[:n_days]
    keep = raw_5min["tic"].isin(tickers) & raw_5min["datetime_utc"].str.slice(0, 10).isin(days)
    return raw_5min[keep].reset_index(drop=True)


def _same_bars(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)


def test_every_timestamp_form_gives_the_same_panel(raw_5min, tmp_path):
    sample = _sample(raw_5min)
    base_path = tmp_path / "utc_start.csv"
    sample.to_csv(base_path, index=False)
    base = load_panel(base_path)

    utc = pd.to_datetime(sample["datetime_utc"]).dt.tz_localize("UTC")
    et_end = (utc.dt.tz_convert("America/New_York") + pd.Timedelta(minutes=5)).dt.tz_localize(None)
    forms = {
        # naive exchange time, bar ends, in a "datetime_et" column
        "et_end.csv": sample.drop(columns="datetime_utc").assign(datetime_et=et_end.dt.strftime("%Y-%m-%d %H:%M:%S")),
        # ISO with offsets, exchange-time offsets (-04:00): bar starts
        "offsets.csv": sample.drop(columns="datetime_utc").assign(
            datetime=utc.dt.tz_convert("America/New_York").map(lambda t: t.isoformat())
        ),
        # Unix seconds in a "timestamp" column
        "epoch.csv": sample.drop(columns="datetime_utc").assign(
            timestamp=(utc - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(seconds=1)
        ),
        # a plain "datetime" column of naive UTC bar starts: the zone is guessed from the times
        "guess.csv": sample.rename(columns={"datetime_utc": "datetime"}),
    }
    for name, frame in forms.items():
        frame.to_csv(tmp_path / name, index=False)
        panel = load_panel(tmp_path / name)
        _same_bars(panel, base)
        assert bar_info(panel).interval == "5m", name
    guessed = load_panel(tmp_path / "guess.csv")
    assert any("guessed" in n for n in guessed.attrs["notes"])
    # mixed offsets (the source of the 5-minute file had both +00:00 and -04:00)
    mixed = sample.drop(columns="datetime_utc").assign(
        datetime=[(t.isoformat() if i % 2 else t.tz_convert("America/New_York").isoformat()) for i, t in enumerate(utc)]
    )
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    _same_bars(load_panel(tmp_path / "mixed.csv"), base)
    # Parquet with a tz-aware column
    sample.drop(columns="datetime_utc").assign(datetime=utc).to_parquet(tmp_path / "aware.parquet")
    _same_bars(load_panel(tmp_path / "aware.parquet"), base)


def test_options_override_the_detection(raw_5min, tmp_path):
    sample = _sample(raw_5min, n_days=2, tickers=("AAPL",))
    sample.rename(columns={"datetime_utc": "datetime"}).to_csv(tmp_path / "s.csv", index=False)
    # read as exchange time the stamps 13:30-19:55 would put most bars after 16:00: an error naming a row
    with pytest.raises(DataError, match=r"s\.csv, row \d+ \(line \d+\) \(AAPL 2024-03-11 1[6-9]:.*outside the regular"):
        load_panel(tmp_path / "s.csv", timezone="America/New_York")
    # bar_label="end" against stamps that start at 09:30: the first bar would end at the open
    with pytest.raises(DataError, match=r"row 1 .*09:25-09:30 ET is outside the regular session"):
        load_panel(tmp_path / "s.csv", bar_label="end", timezone="UTC")
    with pytest.raises(ConfigError, match="bar_label must be one of auto, start, end"):
        load_panel(tmp_path / "s.csv", bar_label="middle")
    with pytest.raises(ConfigError, match="session must be one of"):
        load_panel(tmp_path / "s.csv", session="overnight")


def _write(tmp_path, frame, name="bad.csv"):
    frame.to_csv(tmp_path / name, index=False)
    return tmp_path / name


def test_bad_intraday_rows_are_named(raw_5min, tmp_path):
    sample = _sample(raw_5min, n_days=2, tickers=("AAPL", "MSFT"))
    row_of = {(t, d): i + 1 for i, (t, d) in enumerate(zip(sample["tic"], sample["datetime_utc"]))}

    dup = pd.concat([sample, sample.iloc[[5]]], ignore_index=True)
    with pytest.raises(DataError, match=rf"row {len(dup)} .*AAPL .*duplicate timestamp: row 6 has the same bar") as e:
        load_panel(_write(tmp_path, dup))
    assert e.value.details["ticker"] == "AAPL" and e.value.details["row"] == len(dup)

    swapped = sample.copy()
    swapped.iloc[[10, 11]] = swapped.iloc[[11, 10]].to_numpy()
    with pytest.raises(
        DataError, match=r"row 12 .*AAPL 2024-03-11 14:20:00.*not in time order: this bar is earlier than row 11"
    ):
        load_panel(_write(tmp_path, swapped))

    early = sample.copy()
    early.loc[0, "datetime_utc"] = "2024-03-11 12:00:00"  # 08:00 EDT, pre-market
    with pytest.raises(DataError, match=r"row 1 .*08:00-08:05 ET is outside the regular session.*session='extended'"):
        load_panel(_write(tmp_path, early))
    extended = load_panel(_write(tmp_path, early, "ext.csv"), session="extended")
    assert _bar(extended, "AAPL", "2024-03-11 08:05")["close"] == sample.loc[0, "close"]
    assert bar_info(extended).session == "extended"

    off = sample.copy()
    off.loc[3, "datetime_utc"] = "2024-03-11 13:47:00"
    with pytest.raises(DataError, match=r"row 4 .*off the 5m grid"):
        load_panel(_write(tmp_path, off))

    seconds = sample.copy()
    seconds.loc[3, "datetime_utc"] = "2024-03-11 13:45:30"
    with pytest.raises(DataError, match=r"row 4 .*13:45:30.*not on a whole minute"):
        load_panel(_write(tmp_path, seconds))

    weekend = sample.copy()
    weekend.loc[row_of[("AAPL", "2024-03-12 19:55:00")] - 1, "datetime_utc"] = "2024-03-16 19:55:00"
    with pytest.raises(DataError, match="falls on a Saturday"):
        load_panel(_write(tmp_path, weekend))

    garbage = sample.copy()
    garbage.loc[7, "datetime_utc"] = "2024-03-11 soon"
    with pytest.raises(DataError, match=r"row 8 .*datetime_utc '2024-03-11 soon' is not a date-time"):
        load_panel(_write(tmp_path, garbage))


def test_newest_first_file_is_sorted_with_a_note(raw_5min, tmp_path):
    sample = _sample(raw_5min, n_days=2)
    base = load_panel(_write(tmp_path, sample, "a.csv"))
    flipped = load_panel(_write(tmp_path, sample.iloc[::-1], "b.csv"))
    _same_bars(flipped, base)
    assert any("newest-first" in n for n in flipped.attrs["notes"])


def test_missing_bar_filled_only_from_the_past(raw_5min, tmp_path):
    sample = _sample(raw_5min, n_days=3, tickers=("AAPL", "MSFT"))
    aapl = sample.index[sample["tic"] == "AAPL"]
    drop = [aapl[0], aapl[100], aapl[101], aapl[78 + 77]]  # first bar ever, two mid-day bars, a day's last bar
    panel = load_panel(_write(tmp_path, sample.drop(index=drop), "gap.csv"))
    info = bar_info(panel)
    # the very first bar has no past to fill from: AAPL starts one bar later; the other 3 are filled
    assert info.missing[0].ticker == "AAPL" and info.missing[0].count == 3
    first = panel[panel["tic"] == "AAPL"]["date"].min()
    assert first == pd.Timestamp("2024-03-11 09:40")
    for i in drop[1:]:
        stamp = pd.Timestamp(sample.loc[i, "datetime_utc"], tz="UTC").tz_convert("America/New_York")
        bar = _bar(panel, "AAPL", (stamp + pd.Timedelta(minutes=5)).tz_localize(None))
        previous = sample.loc[max(j for j in aapl if j < i and j not in drop), "close"]
        assert bar["volume"] == 0 and bar["open"] == bar["high"] == bar["low"] == bar["close"] == previous
    assert dict(info.missing[0].worst) == {"2024-03-12": 3}
    assert np.isclose(panel["volume"].eq(0).sum(), 3)


def test_daily_files_unchanged(dow30_panel):
    assert bar_info(dow30_panel) is DAILY
    assert DAILY.periods_per_year == 252 and not DAILY.intraday
    assert (dow30_panel["date"] == dow30_panel["date"].dt.normalize()).all()


def test_daily_and_intraday_files_do_not_mix(intraday_1min_path, benchmark_path):
    with pytest.raises(DataError, match="holds daily bars but .*intraday"):
        load_panel([intraday_1min_path, benchmark_path])


def test_hourly_bars_end_at_the_close_and_on_half_days(raw_5min, tmp_path):
    """Hourly bars built from the real 5-minute bars (09:30, 10:30, ... 15:30 starts, UTC): the
    last bar of a session is 30 minutes long and ends 16:00 ET (13:00 on a half day)."""
    aapl = raw_5min[raw_5min["tic"] == "AAPL"].copy()
    stamps = pd.to_datetime(aapl["datetime_utc"]).dt.tz_localize("UTC").dt.tz_convert("America/New_York")
    aapl = aapl[stamps.dt.date.astype(str).isin(["2024-11-26", "2024-11-27", "2024-11-29"])]
    stamps = stamps[aapl.index]
    start = (
        stamps.dt.floor("D")
        + pd.Timedelta(minutes=570)
        + ((stamps - stamps.dt.floor("D") - pd.Timedelta(minutes=570)) // pd.Timedelta(hours=1)) * pd.Timedelta(hours=1)
    )
    hourly = (
        aapl.assign(start=start)
        .groupby("start")
        .agg(
            open=("open", "first"),
            high=("high", "max"),
            low=("low", "min"),
            close=("close", "last"),
            volume=("volume", "sum"),
        )
    )
    hourly = hourly.reset_index().assign(
        tic="AAPL", datetime_utc=lambda f: f["start"].dt.tz_convert("UTC").dt.strftime("%Y-%m-%d %H:%M:%S")
    )
    path = tmp_path / "hourly.csv"
    hourly.drop(columns="start").to_csv(path, index=False)
    panel = load_panel(path)
    info = bar_info(panel)
    assert info.interval == "1h" and info.bars_per_session == 7 and info.periods_per_year == 7 * 252
    assert info.half_days == ("2024-11-29",) and info.missing == ()
    ends = panel["date"].dt.strftime("%m-%d %H:%M").tolist()
    assert ends[:7] == [
        "11-26 10:30",
        "11-26 11:30",
        "11-26 12:30",
        "11-26 13:30",
        "11-26 14:30",
        "11-26 15:30",
        "11-26 16:00",
    ]
    assert ends[-4:] == ["11-29 10:30", "11-29 11:30", "11-29 12:30", "11-29 13:00"]
    # the 16:00 bar's close is the 5-minute file's last close of the day (15:55 EST start = 20:55 UTC)
    last = raw_5min[(raw_5min["tic"] == "AAPL") & (raw_5min["datetime_utc"] == "2024-11-26 20:55:00")]["close"].iloc[0]
    assert _bar(panel, "AAPL", "2024-11-26 16:00")["close"] == last
