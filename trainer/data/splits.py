"""Cut one :class:`MarketData` into named, chronological, non-overlapping date ranges.

Daily data splits on days. Intraday data (bar-end stamps) splits on timestamps: a bound is a day
(the whole day) or an exchange-time moment ``YYYY-MM-DD HH:MM`` (:func:`trainer.util.dates.parse_moment`),
so a split may start or end inside a session. Minimum sizes are trading days
(:data:`MIN_SPLIT_DAYS`); for bars they are also stated in bars, ``days x bars per session``
(20 days of 5-minute bars = 1,560 bars), and a split must hold that many bars.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from trainer.data.market import MarketData
from trainer.errors import ConfigError, DataError

#: Fewest trading days each split of a task must hold. Train: two of the env's 63-day
#: (one-quarter) random-start episodes, so starts can vary; validation and test: about one
#: month, the least over which a Sharpe ratio of daily returns means anything.
MIN_SPLIT_DAYS = {"train": 126, "validation": 20, "test": 20}
#: Fewest trading days a backtest or an ``evaluate --start/--end`` range must hold: a test
#: split's (:data:`MIN_SPLIT_DAYS`), for the same reason. A 2-day range gave a Sharpe ratio of
#: one return. Checked by :func:`check_range_days`.
MIN_RANGE_DAYS = MIN_SPLIT_DAYS["test"]

EDGE_TOLERANCE_DAYS = 4
"""Calendar days a range may reach past a file's first/last day (a weekend plus a holiday).

The one rule of every door (task splits on the web and the command line, ``evaluate --start/
--end``, backtests): a range may end up to this many calendar days after the data's last day
(the days in between hold no bar, so nothing is lost); one that ends later is refused, never
silently clipped. See :func:`check_window`."""


def check_window(
    name: str, start: object, end: object, *, first: object, last: object, strict_start: bool = True
) -> str | None:
    """Check that the range ``[start, end]`` lies inside the data's days ``[first, last]``,
    give or take :data:`EDGE_TOLERANCE_DAYS` calendar days.

    Args:
        name: the range's name in messages and fields (``"test"`` gives ``test.end``; ``""``
            gives ``start`` and ``end``).
        start, end: inclusive bounds: ``YYYY-MM-DD`` days or ``YYYY-MM-DD HH:MM`` moments (the
            day part is compared).
        first, last: the data's first and last day (``YYYY-MM-DD`` or ``datetime64``).
        strict_start: a start more than the tolerance before ``first`` is an error; else it
            is a note (a task's train split then starts on the data's first day).

    Returns:
        A note for an early start (``strict_start=False``), else ``None``.

    Raises:
        ConfigError: a bound that is not a day or moment, or a range that ends before it
            starts (:func:`check_order`); ``<name>.start`` when the whole range lies more than the tolerance after
            ``last``; ``<name>.end`` more than the tolerance after ``last`` (``"test.end:
        2023-01-01 is after the data, which ends on 2022-11-15 (a range may end at most 4
        calendar days later)"``), or ``<name>.start`` before ``first`` likewise.
    """
    start, end = check_order(name, start, end)
    lo, hi = np.datetime64(start[:10], "D"), np.datetime64(end[:10], "D")
    first_day, last_day = np.datetime64(str(first)[:10], "D"), np.datetime64(str(last)[:10], "D")
    slack = np.timedelta64(EDGE_TOLERANCE_DAYS, "D")
    start_field, end_field, _ = _names(name)
    if lo > last_day + slack:
        # The whole range lies after the data: its start is the first thing wrong.
        raise ConfigError(
            f"{start_field}: {start} is after the data, which ends on {last_day} (a range may end at most "
            f"{EDGE_TOLERANCE_DAYS} calendar days later)",
            field=start_field,
        )
    if hi > last_day + slack:
        raise ConfigError(
            f"{end_field}: {end} is after the data, which ends on {last_day} (a range may end at most "
            f"{EDGE_TOLERANCE_DAYS} calendar days later)",
            field=end_field,
        )
    if lo < first_day - slack:
        message = f"{start_field}: {start} is before the data, which starts on {first_day}"
        if strict_start:
            raise ConfigError(
                f"{message} (a range may start at most {EDGE_TOLERANCE_DAYS} calendar days earlier)", field=start_field
            )
        return f"{message}; the {name or 'range'} starts {first_day}"
    return None


def check_order(
    name: str, start: object, end: object, *, start_from: str | None = None, end_from: str | None = None
) -> tuple[str, str]:
    """Check that ``start`` and ``end`` are days or moments (:func:`trainer.util.dates.parse_moment`)
    and that the range ends after it starts: a later moment, or a later day when both are days
    (the web's backtest rule).

    Args:
        name: the range's name (``"test"`` gives ``test.start`` and ``test.end``; ``""`` gives
            ``start`` and ``end``).
        start_from, end_from: where a bound the user did not give came from, said beside it in
            the error, e.g. ``"the test split's start; pass --start to choose another"``. An
            inverted range is then blamed on the bound the user gave: ``start`` when the end
            came from elsewhere.

    Returns:
        ``(start, end)`` as :func:`~trainer.util.dates.parse_moment` writes them.

    Raises:
        ConfigError: the bound that is not a day or moment (``"start: '2021-02-30' is not a
            calendar date"``), or ``end`` for an inverted range (``"end: 2021-01-04 must be after
            start 2021-06-01"``; with ``start_from``: ``"end: 2014-01-01 must be after start
            2020-01-02 (the test split's start; pass --start to choose another)"``), or
            ``start`` when only the end came from elsewhere (``"start: 2023-01-02 must be before
            end 2022-11-15 (the test split's end; ...)"``).
    """
    from trainer.util.dates import parse_moment, range_bound

    start_field, end_field, _ = _names(name)
    lo_text, hi_text = parse_moment(start, start_field), parse_moment(end, end_field)
    lo, hi = range_bound(lo_text, end=False), range_bound(hi_text, end=True)
    if hi <= lo or (len(lo_text) == len(hi_text) == 10 and hi_text <= lo_text):
        if end_from and not start_from:
            raise ConfigError(
                f"{start_field}: {lo_text} must be before {end_field} {hi_text} ({end_from})", field=start_field
            )
        origin = f" ({start_from})" if start_from else ""
        raise ConfigError(f"{end_field}: {hi_text} must be after {start_field} {lo_text}{origin}", field=end_field)
    return lo_text, hi_text


def split_market_data(data: MarketData, ranges: Mapping[str, tuple]) -> dict[str, MarketData]:
    """Slice ``data`` into e.g. ``{"train": (s, e), "validation": (s, e), "test": (s, e)}``.

    Args:
        data: the full panel.
        ranges: name -> inclusive ``(start, end)`` (``YYYY-MM-DD`` or ``None`` for open ends),
            in chronological order.

    Returns:
        name -> ``data.slice(start, end, name=name)``, same order as ``ranges``.

    Raises:
        DataError: a range is empty or inverted (``field`` is its name), or a range's first
            trading day is not after the previous range's last one (overlap leaks test data
            into training).
    """
    out: dict[str, MarketData] = {}
    previous = None
    for name, bounds in ranges.items():
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise DataError(f"{name}: expected a (start, end) pair, got {bounds!r}", field=name)
        part = data.slice(bounds[0], bounds[1], name=name)
        if previous is not None and part.dates[0] <= out[previous].dates[-1]:
            raise DataError(
                f"{name} starts {part.dates[0]}, not after {previous} ends {out[previous].dates[-1]}; "
                "ranges must be chronological and must not overlap",
                field=name,
            )
        out[name] = part
        previous = name
    return out


def check_split_days(
    ranges: Mapping[str, tuple[str, str]],
    dates: np.ndarray,
    *,
    minimum: Mapping[str, int] = MIN_SPLIT_DAYS,
    intraday: bool | None = None,
) -> dict[str, int]:
    """Check that every split holds data and at least ``minimum[name]`` trading days.

    Args:
        ranges: name -> inclusive ``(start, end)`` ``YYYY-MM-DD``, e.g. a task's train,
            validation and test splits.
        dates: (T,) sorted trading days of the data (``datetime64[D]`` or anything NumPy turns
            into it), e.g. ``MarketData.dates``.
        minimum: name -> fewest trading days (names not in it need 1).
        intraday: whether the data is intraday, which allows ``YYYY-MM-DD HH:MM`` bounds;
            ``None`` = it is when ``dates`` hold times of day (bar-end stamps, which are then
            checked bar by bar: :func:`check_split_bars`). Pass ``True`` to check the days of
            an intraday dataset (the web does, before any bar is loaded).

    Returns:
        name -> number of trading days in the split.

    Raises:
        ConfigError: a split lies outside the data (``field`` is ``"<name>.start"`` when it
            starts after the last day, ``"<name>.end"`` when it ends before the first or more
            than :data:`EDGE_TOLERANCE_DAYS` after the last, :func:`check_window`) or is
            shorter than its minimum (``"<name>.end"``); the message gives the data's range.
            A range named ``""`` is a lone range (fields ``start`` and ``end``).
    """
    from trainer.data.timestamps import has_time_of_day

    stamps = np.asarray(dates)
    if stamps.size and has_time_of_day(stamps):
        return {name: sizes["days"] for name, sizes in check_split_bars(ranges, stamps, minimum=minimum).items()}
    if not intraday:
        for name, (start, end) in ranges.items():
            for key, value in (("start", start), ("end", end)):
                if len(str(value).strip()) > 10 and str(value)[10:].strip() not in ("", "00:00", "00:00:00"):
                    field = _names(name)[0 if key == "start" else 1]
                    raise ConfigError(
                        f"{field}: {value} has a time of day, but the data is daily; give YYYY-MM-DD", field=field
                    )
    days = np.asarray(dates, dtype="datetime64[D]")
    if days.size == 0:
        raise ConfigError("the data holds no trading day", field="data")
    first, last = days[0], days[-1]
    covers = f"the data covers {first} to {last}"
    counts: dict[str, int] = {}
    for name, (start, end) in ranges.items():
        lo, hi = np.datetime64(str(start)[:10], "D"), np.datetime64(str(end)[:10], "D")
        start_field, end_field, what = _names(name)
        if lo > last:
            raise ConfigError(f"{start_field}: {lo} is after the last day of the data ({covers})", field=start_field)
        if hi < first:
            raise ConfigError(f"{end_field}: {hi} is before the first day of the data ({covers})", field=end_field)
        check_window(name, start, end, first=first, last=last, strict_start=False)
        count = int(np.searchsorted(days, hi, side="right") - np.searchsorted(days, lo, side="left"))
        need = int(minimum.get(name, 1))
        if count < need:
            raise ConfigError(
                f"{end_field}: {what} {lo} to {hi} holds {count} trading day(s); it needs at least {need} ({covers})",
                field=end_field,
            )
        counts[name] = count
    return counts


def check_splits_in_data(
    ranges: Mapping[str, tuple[str, str]], days: np.ndarray, *, file: str, intraday: bool | None = None
) -> dict[str, int]:
    """The rule every door applies to a task's splits when the task is made (the New run form
    and ``POST /api/tasks/`` through ``webapp.engine``, ``python -m trainer train``): each split
    lies inside the dataset's days, give or take :data:`EDGE_TOLERANCE_DAYS` at either edge
    (:func:`check_coverage`, strict at the start too: a train split from 1990 on data from 2010
    is refused, not cut to 2010 silently), and holds its :data:`MIN_SPLIT_DAYS`
    (:func:`check_split_days`).

    Args:
        ranges: name -> inclusive ``(start, end)``, e.g. ``{"train": ..., "validation": ...,
            "test": ...}``.
        days: (D,) sorted trading days the dataset's files hold for the traded tickers: the whole
            files (:func:`trainer.data.pipeline.data_days`), not a range cut from them, so a
            message gives the data's real first and last day.
        file: the data file(s) as the user knows them, named in the messages.
        intraday: as :func:`check_split_days`.

    Returns:
        name -> number of trading days in the split.

    Raises:
        ConfigError: ``<name>.start`` before the data's first day (``"train.start: 1990-01-01 is
            before the first data day 2010-01-04 in dow30.csv.gz"``) or after its last,
            ``<name>.end`` after its last day or a split too short, each naming the data's days.
    """
    check_coverage(ranges, days, what="data", file=file)
    return check_split_days(ranges, days, intraday=intraday)


def _names(name: str) -> tuple[str, str, str]:
    """``(start field, end field, what it is in words)`` of range ``name``; ``""`` is a lone
    range (a backtest's): ``("start", "end", "the range")``."""
    if not name:
        return "start", "end", "the range"
    return f"{name}.start", f"{name}.end", f"the {name} split"


def check_range_days(start: object, end: object, dates: np.ndarray, *, intraday: bool | None = None) -> int:
    """Check that a backtest's or ``evaluate``'s range ``[start, end]`` lies in the data and
    holds at least :data:`MIN_RANGE_DAYS` trading days (:func:`check_split_days`, bar by bar
    for intraday stamps).

    Args:
        start, end: inclusive bounds, days or ``YYYY-MM-DD HH:MM`` moments.
        dates: (T,) sorted trading days or bar-end stamps of the data.
        intraday: as :func:`check_split_days`.

    Returns:
        The trading days in the range.

    Raises:
        ConfigError: ``end`` for a range too short (``"end: the range 2021-01-04 to 2021-01-05
            holds 2 trading day(s); it needs at least 20 (...)"``), ``start``/``end`` for one
            outside the data.
    """
    return check_split_days({"": (start, end)}, dates, minimum={"": MIN_RANGE_DAYS}, intraday=intraday)[""]


def check_coverage(
    ranges: Mapping[str, tuple[str, str]],
    dates: np.ndarray,
    *,
    what: str,
    file: str,
    strict_start: bool = True,
) -> list[str]:
    """Check that date ranges lie inside the days a file covers, naming the file and its edge.

    A range may start or end up to :data:`EDGE_TOLERANCE_DAYS` calendar days beyond the file
    (a range from 2010-01-01 in a file starting 2010-01-04 is fine).

    Args:
        ranges: name -> inclusive ``(start, end)`` ``YYYY-MM-DD`` (``"test"``; ``""`` for a lone
            range, whose fields are then ``start`` and ``end``).
        dates: (T,) sorted trading days the file holds for ``what``.
        what: what the days are of, for messages (``"QQQ"``, ``"data"``).
        file: the file's name as the user knows it.
        strict_start: a start before the first day is an error; else it gives a note.

    Returns:
        Notes for starts before the file's first day (``strict_start=False`` only).

    Raises:
        ConfigError: ``<name>.start`` when the whole range lies after the last day,
            ``<name>.end`` after the last day (``test.end: 2026-08-31 is after the last QQQ day
            2024-04-19 in benchmark_etfs_daily_eodhd.csv.gz``), or ``<name>.start`` before the
            first day when ``strict_start``; also a file without days.
    """
    days = np.asarray(dates, dtype="datetime64[D]")
    if days.size == 0:
        raise ConfigError(f"{file} holds no {what} day", field="data", file=file)
    first, last = days[0], days[-1]
    slack = np.timedelta64(EDGE_TOLERANCE_DAYS, "D")
    notes = []
    for name, (start, end) in ranges.items():
        lo, hi = np.datetime64(str(start)[:10], "D"), np.datetime64(str(end)[:10], "D")
        start_field, end_field = (f"{name}.start", f"{name}.end") if name else ("start", "end")
        if lo > last + slack:  # the whole range lies after the file's days: its start is what is wrong
            raise ConfigError(
                f"{start_field}: {lo} is after the last {what} day {last} in {file}", field=start_field, file=file
            )
        if hi > last + slack:
            raise ConfigError(
                f"{end_field}: {hi} is after the last {what} day {last} in {file}", field=end_field, file=file
            )
        if lo < first - slack:
            message = f"{start_field}: {lo} is before the first {what} day {first} in {file}"
            if strict_start:
                raise ConfigError(message, field=start_field, file=file)
            notes.append(f"{message}; the {name} split starts {first}")
    return notes


def check_split_bars(
    ranges: Mapping[str, tuple[str, str]],
    stamps: np.ndarray,
    *,
    minimum: Mapping[str, int] = MIN_SPLIT_DAYS,
) -> dict[str, dict[str, int]]:
    """Check intraday splits bar by bar: each must hold ``minimum[name]`` trading days' worth of
    bars (``days x bars per session``, bars per session read from the stamps).

    Args:
        ranges: name -> inclusive ``(start, end)``, days or ``YYYY-MM-DD HH:MM`` moments.
        stamps: (T,) sorted naive exchange-time bar-end stamps (``MarketData.dates``).
        minimum: name -> fewest trading days.

    Returns:
        name -> ``{"bars": n, "days": d}``: bars in the split and days with at least one.

    Raises:
        ConfigError: as :func:`check_split_days`; a split too short names both sizes, e.g.
            ``validation.end: the validation split 2025-07-01 to 2025-07-10 holds 546 bars on 7
            trading day(s); it needs at least 20 trading days = 1,560 bars (78 a day) (...)``.
    """
    from trainer.data.timestamps import TRADING_DAYS_PER_YEAR, infer_periods_per_year
    from trainer.util.dates import range_bound

    bars = np.asarray(stamps).astype("datetime64[s]")
    per_day = infer_periods_per_year(bars) // TRADING_DAYS_PER_YEAR
    first, last = bars[0], bars[-1]
    shown_first, shown_last = (str(x)[:16].replace("T", " ") for x in (first, last))
    covers = f"the data covers {shown_first} to {shown_last}"
    sizes: dict[str, dict[str, int]] = {}
    for name, (start, end) in ranges.items():
        lo, hi = range_bound(start, end=False), range_bound(end, end=True)
        start_field, end_field, what = _names(name)
        if lo > last:
            raise ConfigError(f"{start_field}: {start} is after the last bar of the data ({covers})", field=start_field)
        if hi < first:
            raise ConfigError(f"{end_field}: {end} is before the first bar of the data ({covers})", field=end_field)
        check_window(name, start, end, first=first, last=last, strict_start=False)
        inside = bars[np.searchsorted(bars, lo, side="left") : np.searchsorted(bars, hi, side="right")]
        count = int(inside.size)
        days = int(np.unique(inside.astype("datetime64[D]")).size)
        need = int(minimum.get(name, 1))
        if count < need * per_day:
            raise ConfigError(
                f"{end_field}: {what} {start} to {end} holds {count:,} bars on {days} trading day(s); "
                f"it needs at least {need} trading day(s) = {need * per_day:,} bars ({per_day} a day) ({covers})",
                field=end_field,
            )
        sizes[name] = {"bars": count, "days": days}
    return sizes
