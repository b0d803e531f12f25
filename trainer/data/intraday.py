"""Intraday bars: interval and label detection, session checks, missing bars, :class:`BarInfo`.

The loader (:func:`trainer.data.load_panel`) calls :func:`prepare_intraday` on each file whose
tickers have several rows per day, then :func:`complete_sessions` on the merged panel. The
result's ``panel.attrs["bars"]`` is a :class:`BarInfo` (read it with :func:`bar_info`, which
gives :data:`DAILY` for daily panels): the one place the rest of Paddock learns the interval,
the session, the periods per year used to annualise metrics and the missing-bar report.

Conventions (see :mod:`trainer.data.timestamps`): ``date`` holds naive America/New_York time
labelled at the bar **end**; a file's stamps may be bar starts or ends (``bar_label``,
detected when ``"auto"``), in UTC or exchange time, with or without offsets.

Missing bars. The expected bars of a day are the regular session's: bar ends every interval
from 09:30 + interval to 16:00 ET (the last one shorter for hourly bars), or to 13:00 ET on a
half day (a day whose latest bar in the data ends in (12:00, 13:00]: half days are normal, not
errors). Each ticker is expected to have every bar from its first bar to the end of its last
day, on every day any loaded ticker trades. A missing bar is **filled by carrying the previous
close forward**: ``open = high = low = close =`` the ticker's last known close, ``volume = 0``
(past-only: nothing after the bar is used; bars before a ticker's first bar are never made
up). Every fill is reported in :attr:`BarInfo.missing` and in ``attrs["notes"]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trainer.data.bars import BarInfo, MissingBars
from trainer.data.files import listed
from trainer.data.timestamps import (
    BAR_LABELS,
    EXTENDED_CLOSE,
    EXTENDED_OPEN,
    HALF_DAY_CLOSE,
    INTERVALS,
    SESSION_CLOSE,
    SESSION_OPEN,
    SESSIONS,
    TIMEZONES,
    TRADING_DAYS_PER_YEAR,
    Stamps,
    bars_per_session,
    check_option,
    minutes_of_day,
    read_stamps,
    stamp_text,
)
from trainer.errors import DataError

_DAY_NS = 86_400 * 10**9
_MIN_NS = 60 * 10**9


@dataclass(frozen=True)
class FileBars:
    """What :func:`prepare_intraday` found in one file."""

    minutes: int
    bar_label: str
    bar_label_detected: str
    timezone: str
    notes: tuple[str, ...]


def looks_intraday(stamps: Stamps, tics: pd.Series) -> bool:
    """True when a ticker has several rows on a typical day (median rows per ticker-day > 1)."""
    days = stamps.values.astype("datetime64[ns]").astype(np.int64) // _DAY_NS
    codes = pd.factorize(tics.astype("string").str.strip().str.upper())[0].astype(np.int64)
    pairs = codes * 1_000_000 + (days - days.min() if days.size else days)
    _, counts = np.unique(pairs, return_counts=True)
    return bool(counts.size) and float(np.median(counts)) > 1


def _mode(values: np.ndarray) -> int:
    uniq, counts = np.unique(values, return_counts=True)
    return int(uniq[np.argmax(counts)])


def _day_closes(days: np.ndarray, minutes: np.ndarray, *, label: str, session: str) -> dict[int, int]:
    """Close (minutes after midnight ET) of each day: 13:00 on half days, else 16:00 (20:00
    for the extended session, which has no half-day rule)."""
    frame = pd.DataFrame({"day": days, "m": minutes}).groupby("day")["m"].max()
    if session == "extended":
        return dict.fromkeys(frame.index.tolist(), EXTENDED_CLOSE)
    if label == "start":
        half = (frame < HALF_DAY_CLOSE) & (frame >= HALF_DAY_CLOSE - 60)
    else:
        half = (frame <= HALF_DAY_CLOSE) & (frame > HALF_DAY_CLOSE - 60)
    return {int(d): (HALF_DAY_CLOSE if h else SESSION_CLOSE) for d, h in half.items()}


def prepare_intraday(
    frame: pd.DataFrame,
    stamps: Stamps,
    *,
    bar_label: str = "auto",
    session: str = "regular",
    origin: str,
    file: str | None,
    where,
) -> tuple[pd.DataFrame, FileBars]:
    """Check one file's intraday rows and put their ``date`` on the bar-end ET convention.

    Args:
        frame: normalized rows (``tic``, prices, ``_row``) in file order; ``date`` is replaced.
        stamps: the file's parsed ``date`` column (:func:`trainer.data.timestamps.read_stamps`).
        bar_label: ``"auto"``, ``"start"`` or ``"end"``: what the file's stamps mark.
        session: ``"regular"`` (bars outside 09:30-16:00 ET are errors) or ``"extended"``.
        origin: file name for messages; file: path for details; where: ``row -> "file, row N"``.

    Returns:
        ``(frame, FileBars)``: ``date`` as ``datetime64[ns]`` naive ET bar ends.

    Raises:
        DataError: naming file, row, ticker and stamp: a ticker's rows out of time order or
            repeated; bars not on a supported interval (1m, 5m, 15m, 30m, 1h) or off its grid;
            a bar outside the session; a bar on a weekend.
        ConfigError: an unknown ``bar_label`` or ``session``.
    """
    bar_label = check_option(bar_label, BAR_LABELS, "bar_label")
    session = check_option(session, SESSIONS, "session")
    local = stamps.exchange_time()
    ns = local.astype(np.int64)
    tics = frame["tic"].astype("string").str.strip().str.upper().fillna("").to_numpy(dtype=object)
    codes, names = pd.factorize(tics)
    fail = _RowError(frame["_row"].to_numpy(), tics, frame["date"], where, file)
    notes: list[str] = []
    reversed_tics = _check_time_order(ns, local, codes, names, fail)
    if reversed_tics:
        notes.append(f"{origin}: rows of {listed(reversed_tics)} are newest-first; sorted by time")
    minutes, interval = _bar_interval(ns, codes, fail, origin=origin, file=file)
    mod = minutes_of_day(local)
    used, detected, note = _bar_label(
        mod, ns, codes, minutes, bar_label, interval=interval, origin=origin, stamps=stamps
    )
    notes.append(note)
    days_all = ns // _DAY_NS
    ends = _bar_ends(days_all, mod, minutes, used, session, interval, fail)
    out_ns = days_all * _DAY_NS + ends * _MIN_NS
    frame = frame.assign(date=out_ns.astype("datetime64[ns]"))
    return frame, FileBars(minutes, used, detected, f"{stamps.zone} ({stamps.how})", tuple(notes))


@dataclass(frozen=True)
class _RowError:
    """The DataError of row position ``i`` of one file, naming its row, ticker and stamp."""

    rows: np.ndarray
    tics: np.ndarray
    raw: pd.Series
    where: Any
    file: str | None

    def __call__(self, i: int, what: str, field: str = "date") -> DataError:
        row = int(self.rows[i])
        return DataError(
            f"{self.where(row)} ({self.tics[i]} {self.raw.iloc[i]}): {what}",
            file=self.file,
            row=row,
            ticker=str(self.tics[i]),
            date=str(self.raw.iloc[i]),
            field=field,
        )


def _check_time_order(ns: np.ndarray, local: np.ndarray, codes: np.ndarray, names: Any, fail: _RowError) -> list:
    """Per ticker: no repeated stamp, and stamps strictly increasing in file order or strictly
    decreasing (those tickers are returned, newest-first); else raise."""
    rows = fail.rows
    order = np.lexsort((rows, ns, codes))
    repeat = np.flatnonzero((np.diff(ns[order]) == 0) & (np.diff(codes[order]) == 0))
    if repeat.size:
        first, again = order[repeat[0]], order[repeat[0] + 1]
        raise fail(again, f"duplicate timestamp: row {int(rows[first])} has the same bar of {fail.tics[again]}")
    by_tic = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_tic], np.arange(len(names) + 1))
    reversed_tics = []
    for code in range(len(names)):
        idx = by_tic[bounds[code] : bounds[code + 1]]
        if idx.size < 2:
            continue
        step = np.diff(ns[idx])
        if (step > 0).all():
            continue
        if (step < 0).all():
            reversed_tics.append(names[code])
            continue
        rising = step[0] > 0
        j = int(np.flatnonzero((step > 0) != rising)[0])
        raise fail(
            idx[j + 1],
            f"not in time order: this bar is {'earlier' if rising else 'later'} than row {int(rows[idx[j]])} "
            f"({stamp_text(local[idx[j]])} ET), which comes before it in the file; sort each ticker's rows by time",
        )
    return reversed_tics


def _bar_interval(ns: np.ndarray, codes: np.ndarray, fail: _RowError, *, origin: str, file: str | None) -> tuple:
    """``(minutes, interval name)``: the most common step between a ticker's bars of one day,
    which must be a supported interval; every stamp must be on a whole minute."""
    order = np.lexsort((ns, codes))
    s_ns, s_codes = ns[order], codes[order]
    day = s_ns // _DAY_NS
    step = np.diff(s_ns) // _MIN_NS
    inside = (s_codes[1:] == s_codes[:-1]) & (day[1:] == day[:-1])
    steps = step[inside]
    if steps.size == 0:
        raise fail(0, "no ticker has two bars on one day; cannot tell the bar interval")
    minutes = _mode(steps)
    if minutes not in INTERVALS.values():
        raise DataError(
            f"{origin}: bars are most often {minutes} minute(s) apart; supported intervals are "
            f"{', '.join(INTERVALS)} (and daily bars)",
            file=file,
            field="date",
        )
    interval = next(k for k, v in INTERVALS.items() if v == minutes)
    # every bar of a supported interval starts and ends on a whole minute: a stamp with seconds
    # would otherwise be cut to its minute without a word
    sub_minute = ns % _MIN_NS != 0
    if sub_minute.any():
        i = int(np.flatnonzero(sub_minute)[0])
        raise fail(i, f"the stamp is not on a whole minute; {interval} bars start and end on whole minutes")
    return minutes, interval


def _bar_label(
    mod: np.ndarray,
    ns: np.ndarray,
    codes: np.ndarray,
    minutes: int,
    bar_label: str,
    *,
    interval: str,
    origin: str,
    stamps: Stamps,
) -> tuple[str, str, str]:
    """``(used, detected, note)``: what the stamps mark (start stamps run 09:30 ..
    close-interval, end stamps 09:30+interval .. close), as detected and as used (the option,
    or the detection with ``"auto"``; bar starts when unclear), and the note saying so."""
    order = np.lexsort((ns, codes))
    s_codes, day = codes[order], ns[order] // _DAY_NS
    has_open, has_close = bool((mod == SESSION_OPEN).any()), bool((mod == SESSION_CLOSE).any())
    firsts = pd.Series(mod[order]).groupby([s_codes, day]).min().to_numpy()
    if has_open != has_close:
        detected, why = ("start", "bars at 09:30 ET") if has_open else ("end", "bars at 16:00 ET")
    elif _mode(firsts) in (SESSION_OPEN, EXTENDED_OPEN):
        detected, why = "start", f"days most often start at {_mode(firsts) // 60:02d}:{_mode(firsts) % 60:02d} ET"
    elif _mode(firsts) in (SESSION_OPEN + minutes, EXTENDED_OPEN + minutes):
        detected, why = "end", f"days most often start at {_mode(firsts) // 60:02d}:{_mode(firsts) % 60:02d} ET"
    else:
        detected, why = "unclear", "the first bars of the days match neither convention"
    used = bar_label if bar_label != "auto" else ("start" if detected == "unclear" else detected)
    if bar_label == "auto":
        note = (
            f"{origin}: {interval} bars; stamps read as bar {used}s ({why}"
            + ("; assumed bar starts: set bar_label if that is wrong" if detected == "unclear" else "")
            + f"); time zone: {stamps.zone} ({stamps.how})"
        )
    else:
        clash = detected not in ("unclear", bar_label)
        note = (
            f"{origin}: {interval} bars; stamps read as bar {used}s (bar_label option"
            + (f"; they look like bar {detected}s: {why}" if clash else "")
            + f"); time zone: {stamps.zone} ({stamps.how})"
        )
    return used, detected, note


def _bar_ends(
    days_all: np.ndarray, mod: np.ndarray, minutes: int, used: str, session: str, interval: str, fail: _RowError
) -> np.ndarray:
    """Each bar's end, minutes after midnight ET (a start stamp plus the interval, cut at the
    day's close); raises for a bar outside the session, off the interval's grid or on a weekend."""
    closes = _day_closes(days_all, mod, label=used, session=session)
    unique_days, day_pos = np.unique(days_all, return_inverse=True)
    close_of = np.array([closes[int(d)] for d in unique_days], dtype=np.int64)[day_pos]
    ends = mod + minutes if used == "start" else mod.copy()
    ends = np.minimum(ends, close_of) if used == "start" else ends
    lo, hi = (SESSION_OPEN, SESSION_CLOSE) if session == "regular" else (EXTENDED_OPEN, EXTENDED_CLOSE)
    outside = (ends <= lo) | (ends > hi)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        start_m = ends[i] - minutes
        hint = " (choose session='extended' to keep pre- and after-market bars)" if session == "regular" else ""
        raise fail(
            i,
            f"the bar {start_m // 60:02d}:{start_m % 60:02d}-{ends[i] // 60:02d}:{ends[i] % 60:02d} ET is outside "
            f"the {session} session {lo // 60:02d}:{lo % 60:02d}-{hi // 60:02d}:{hi % 60:02d} ET{hint}",
        )
    off_grid = ((ends - SESSION_OPEN) % minutes != 0) & (ends != close_of)
    if minutes == 60 and session == "extended":
        off_grid &= (ends - EXTENDED_OPEN) % minutes != 0
    if off_grid.any():
        i = int(np.flatnonzero(off_grid)[0])
        raise fail(i, f"the bar ending {ends[i] // 60:02d}:{ends[i] % 60:02d} ET is off the {interval} grid from 09:30")
    weekday = (days_all + 3) % 7  # 1970-01-01 was a Thursday: 0 = Monday
    weekend = weekday >= 5
    if weekend.any():
        i = int(np.flatnonzero(weekend)[0])
        raise fail(i, f"the bar falls on a {'Saturday' if weekday[i] == 5 else 'Sunday'} (exchange time)")
    return ends


def intraday_file(
    frame: pd.DataFrame,
    *,
    column: str,
    origin: str,
    file: str,
    where,
    timezone: str = "auto",
    bar_label: str = "auto",
    session: str = "regular",
) -> tuple[pd.DataFrame, FileBars | None]:
    """``(frame, FileBars)`` with ``date`` on the intraday convention when the file holds
    intraday bars, else ``(frame, None)`` untouched (the daily path, exactly as before).

    Args:
        frame: one file's normalized rows (``date`` raw, ``tic``, prices, ``_row``).
        column: the date column's name in the file; origin/file/where: for messages.
        timezone, bar_label, session: the loader's options (see :func:`prepare_intraday`).

    Raises:
        DataError: see :func:`prepare_intraday` and :func:`~trainer.data.timestamps.read_stamps`.
    """
    values = frame["date"]
    if pd.api.types.is_datetime64_any_dtype(values):
        naive = values.dt.tz_localize(None) if getattr(values.dt, "tz", None) is not None else values
        if (naive.dropna() == naive.dropna().dt.normalize()).all():
            return frame, None
    elif pd.api.types.is_numeric_dtype(values):
        pass  # Unix times (read_stamps), else the daily path refuses them as before
    elif not (values.astype("string").str.strip().str.len() > 10).any():
        return frame, None  # plain YYYY-MM-DD days
    rows = frame["_row"].to_numpy()
    try:
        stamps = read_stamps(values, column=column, timezone=timezone, file=file, rows=rows, where=where)
    except DataError:
        stamped = float((values.astype("string").str.strip().str.len() > 10).mean())
        if stamped < 0.5 and timezone == "auto" and bar_label == "auto":
            return frame, None  # mostly days: the daily path names the bad row as before
        raise
    if not looks_intraday(stamps, frame["tic"]):
        return frame, None
    return prepare_intraday(frame, stamps, bar_label=bar_label, session=session, origin=origin, file=file, where=where)


def _grid(days: np.ndarray, closes: np.ndarray, minutes: int) -> np.ndarray:
    """(B,) int64 ns bar ends of the regular session of each day (``days`` in epoch days)."""
    counts = -(-(closes - SESSION_OPEN) // minutes)
    k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + 1
    end = np.minimum(SESSION_OPEN + k * minutes, np.repeat(closes, counts))
    return np.repeat(days, counts) * _DAY_NS + end * _MIN_NS


def complete_sessions(panel: pd.DataFrame, files: list[FileBars], *, session: str = "regular") -> pd.DataFrame:
    """Fill missing bars (past-only rule of the module doc) and attach :class:`BarInfo`.

    Args:
        panel: validated intraday rows of every file, ``date`` on the bar-end ET convention.
        files: what :func:`prepare_intraday` found in each file.
        session: ``"regular"`` or ``"extended"`` (extended bars are kept, never filled).

    Returns:
        The panel with filled bars added, sorted by ``date, tic``; ``attrs["bars"]`` set and
        notes on every fill appended to ``attrs["notes"]``.

    Raises:
        DataError: files with different intervals.
    """
    intervals = {f.minutes for f in files}
    if len(intervals) > 1:
        raise DataError(
            "the files hold bars of different intervals ("
            + ", ".join(f"{m} min" for m in sorted(intervals))
            + "); use files of one interval",
            field="paths",
        )
    minutes = files[0].minutes
    interval = next(k for k, v in INTERVALS.items() if v == minutes)
    attrs = dict(panel.attrs)
    panel = panel.copy(deep=False)
    panel.attrs = {}  # pandas deep-copies attrs on every operation: none while filling per ticker
    ns = panel["date"].to_numpy().astype("datetime64[ns]").astype(np.int64)
    mod = (ns % _DAY_NS) // _MIN_NS
    regular = (mod > SESSION_OPEN) & (mod <= SESSION_CLOSE)  # half days are judged on regular-hours bars
    closes_by_day = _day_closes(ns[regular] // _DAY_NS, mod[regular], label="end", session="regular")
    days = np.array(sorted(closes_by_day), dtype=np.int64)
    closes = np.array([closes_by_day[int(d)] for d in days], dtype=np.int64)
    grid = _grid(days, closes, minutes)
    grid_end_of_day = dict(zip(days.tolist(), (days * _DAY_NS + closes * _MIN_NS).tolist()))

    close_all = panel["close"].to_numpy(dtype="float64")
    parts, reports = [], []
    for tic, pos in sorted(panel.groupby("tic", sort=True).indices.items()):
        t_ns = ns[pos]  # the panel is sorted by date: each ticker's stamps increase
        first, last = t_ns[0], grid_end_of_day[int(t_ns[-1] // _DAY_NS)]
        expected = grid[(grid >= first) & (grid <= last)]
        if expected.size == t_ns.size and np.array_equal(expected, t_ns):
            continue  # nothing missing (the usual case): no copy
        index = np.union1d(expected, t_ns)  # extended-hours bars (session="extended") are kept as they are
        gap_ns = index[~np.isin(index, t_ns, assume_unique=True)]
        if gap_ns.size == 0:
            continue
        # past-only: the close of the ticker's last bar before the missing one (never a later bar)
        previous = close_all[pos][np.searchsorted(t_ns, gap_ns, side="right") - 1]
        parts.append(
            pd.DataFrame(
                {
                    "date": gap_ns.astype("datetime64[ns]"),
                    "tic": tic,
                    "open": previous,
                    "high": previous,
                    "low": previous,
                    "close": previous,
                    "volume": 0.0,
                }
            )
        )
        per_day = pd.Series(gap_ns // _DAY_NS).value_counts()
        per_day = per_day.sort_index().sort_values(ascending=False, kind="stable")
        worst = tuple((str(np.datetime64(int(d), "D")), int(n)) for d, n in per_day.head(5).items())
        reports.append(MissingBars(str(tic), int(gap_ns.size), int(per_day.size), worst))

    out = panel
    if parts:
        filled = pd.concat(parts, ignore_index=True).astype({"tic": panel["tic"].dtype})
        out = pd.concat([panel, filled[list(panel.columns)]], ignore_index=True)
        out = out.sort_values(["date", "tic"], kind="stable").reset_index(drop=True)
    notes = list(attrs.get("notes", []))
    for f in files:
        notes.extend(n for n in f.notes if n not in notes)
    for m in reports:
        worst = ", ".join(f"{d} ({n})" for d, n in m.worst)
        notes.append(
            f"{m.ticker}: {m.count} missing {interval} bar(s) on {m.days} day(s) filled with the previous close "
            f"(flat bar, volume 0); worst days: {worst}"
        )
    half = [str(np.datetime64(int(d), "D")) for d, c in zip(days, closes) if c == HALF_DAY_CLOSE]
    unusual = [d for d in half if not _usual_half_day(pd.Timestamp(d))]
    if half:
        notes.append(
            f"{len(half)} half day(s) (close 13:00 ET): {', '.join(half[:8])}{' ...' if len(half) > 8 else ''}"
        )
    if unusual:
        notes.append(
            f"the data ends at 13:00 ET on {listed(unusual)}, which is not a usual early-close day; "
            "check that the afternoon bars are not missing"
        )
    label, detected = files[0].bar_label, files[0].bar_label_detected
    info = BarInfo(
        interval=interval,
        minutes=minutes,
        session=session,
        bars_per_session=bars_per_session(minutes),
        periods_per_year=bars_per_session(minutes) * TRADING_DAYS_PER_YEAR,
        timezone="; ".join(dict.fromkeys(f.timezone for f in files)),
        bar_label=label if all(f.bar_label == label for f in files) else "mixed",
        bar_label_detected=detected if all(f.bar_label_detected == detected for f in files) else "mixed",
        sessions=int(days.size),
        half_days=tuple(half),
        missing=tuple(reports),
    )
    out.attrs = {**attrs, "notes": notes, "bars": info}
    return out


def _usual_half_day(day: pd.Timestamp) -> bool:
    if (day.month, day.day) in ((7, 3), (12, 24)):
        return True
    # the day after Thanksgiving (the fourth Thursday of November)
    return day.month == 11 and day.weekday() == 4 and 23 <= day.day <= 29


def check_options(*, timezone: str = "auto", bar_label: str = "auto", session: str = "regular") -> dict[str, str]:
    """The loader's intraday options, checked and canonical.

    Raises:
        ConfigError: an unknown value, naming the option.
    """
    return {
        "timezone": check_option(timezone, TIMEZONES, "timezone"),
        "bar_label": check_option(bar_label, BAR_LABELS, "bar_label"),
        "session": check_option(session, SESSIONS, "session"),
    }
