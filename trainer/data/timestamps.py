"""Timestamps of price bars: read them in the common forms and put them on one convention.

**Convention.** The panel's ``date`` column is the key of every row.

* Daily data: midnight exchange dates, ``datetime64[ns]`` (unchanged from the daily loader).
* Intraday data: naive ``America/New_York`` exchange time (no offset stored) labelled at the
  bar's **end**, the moment its close is known: the 5-minute bar that trades 09:30-09:35 ET is
  ``09:35``, the last bar of a regular session is ``16:00`` (``13:00`` on a half day). An env
  that acts on the row stamped ``t`` therefore uses only prices known at ``t``.

Accepted inputs (the loader's ``date`` column, also named ``datetime``, ``timestamp``,
``datetime_utc``, ``datetime_et``...):

* ISO strings with an offset (``2024-03-11T09:30:00-04:00``, ``...Z``, mixed offsets too):
  the offset says the zone;
* naive ISO strings or ``datetime64`` values: their zone is the ``timezone`` option, else the
  column name (``..._utc`` -> UTC, ``..._et``/``_est``/``_ny`` -> exchange time), else a
  guess (whichever reading puts more bars inside 09:30-16:00 ET), always reported;
* integers: Unix epoch seconds (or milliseconds / nanoseconds, told apart by size), UTC.

Constants here are the US equity session in minutes after midnight ET.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from trainer.errors import ConfigError, DataError

EXCHANGE_TZ = "America/New_York"
SESSION_OPEN = 9 * 60 + 30
"""Regular session open, minutes after midnight ET (09:30)."""
SESSION_CLOSE = 16 * 60
"""Regular session close (16:00 ET)."""
HALF_DAY_CLOSE = 13 * 60
"""Close of an early-close day (13:00 ET: the day after Thanksgiving, Christmas Eve, 3 July...)."""
EXTENDED_OPEN = 4 * 60
"""Pre-market open (04:00 ET) for ``session="extended"``."""
EXTENDED_CLOSE = 20 * 60
"""After-hours close (20:00 ET) for ``session="extended"``."""
TRADING_DAYS_PER_YEAR = 252
"""Sessions per year used for every annualisation (the usual US equity convention)."""

INTERVALS = {"1m": 1, "5m": 5, "15m": 15, "30m": 30, "1h": 60}
"""Supported intraday bar intervals -> minutes (daily data is ``"1d"``)."""
TIMEZONES = ("auto", "UTC", EXCHANGE_TZ)
"""Values of the ``timezone`` option (naive stamps only; stamps with offsets need none)."""
_TZ_ALIASES = {
    "auto": "auto",
    "utc": "UTC",
    "z": "UTC",
    "et": EXCHANGE_TZ,
    "exchange": EXCHANGE_TZ,
    "america/new_york": EXCHANGE_TZ,
    "us/eastern": EXCHANGE_TZ,
}
BAR_LABELS = ("auto", "start", "end")
"""Values of the ``bar_label`` option: what a file's stamp marks (``auto`` = detect)."""
SESSIONS = ("regular", "extended")
"""Values of the ``session`` option: ``regular`` refuses bars outside 09:30-16:00 ET."""

_OFFSET = re.compile(r"(?:[zZ]|[+-]\d{2}:?\d{2})$")
_UTC_NAME = re.compile(r"(^|_)(utc|gmt|z)$")
_ET_NAME = re.compile(r"(^|_)(et|est|edt|ny|nyc|eastern|exchange|local)$")


def bars_per_session(minutes: int, *, session: str = "regular") -> int:
    """Bars of a full session: ``ceil(390 / minutes)`` (78 for 5-minute bars, 7 for hourly bars,
    whose last bar is 30 minutes long); the extended session has ``ceil(960 / minutes)``."""
    length = (EXTENDED_CLOSE - EXTENDED_OPEN) if session == "extended" else (SESSION_CLOSE - SESSION_OPEN)
    return math.ceil(length / minutes)


def check_option(value: object, allowed: tuple[str, ...], field: str) -> str:
    """``value`` as one of ``allowed`` (case-insensitive), or a ConfigError naming ``field``."""
    text = str(value).strip()
    if field == "timezone":
        found = _TZ_ALIASES.get(text.lower())
    else:
        found = next((a for a in allowed if a == text.lower()), None)
    if found is None:
        raise ConfigError(f"{field} must be one of {', '.join(allowed)}, not {value!r}", field=field)
    return found


@dataclass(frozen=True)
class Stamps:
    """Parsed timestamps of one file's rows.

    Attributes:
        values: (R,) ``datetime64[ns]``, naive, in the zone ``zone`` names (not yet converted).
        zone: ``"UTC"``, ``"America/New_York"`` or ``"offsets"`` (already converted to ET).
        how: how ``zone`` was decided, for the report (``"column name datetime_utc"``...).
        guessed: True when ``zone`` is a guess from the times of day.
    """

    values: np.ndarray
    zone: str
    how: str
    guessed: bool = False

    def exchange_time(self) -> np.ndarray:
        """(R,) ``datetime64[ns]``, naive exchange time (America/New_York)."""
        if self.zone in (EXCHANGE_TZ, "offsets"):
            return self.values
        return to_exchange_time(self.values)


def to_exchange_time(utc: np.ndarray) -> np.ndarray:
    """Naive UTC ``datetime64`` -> naive America/New_York ``datetime64[ns]`` (DST-aware)."""
    index = pd.DatetimeIndex(utc).tz_localize("UTC").tz_convert(EXCHANGE_TZ).tz_localize(None)
    return index.to_numpy().astype("datetime64[ns]")


def minutes_of_day(values: np.ndarray) -> np.ndarray:
    """(R,) int64 minutes after midnight of naive ``datetime64`` values."""
    ns = values.astype("datetime64[ns]").astype(np.int64)
    return (ns % (86_400 * 10**9)) // (60 * 10**9)


def _fail(message: str, *, i: int, column: str, where, file: str | None, rows: np.ndarray | None) -> DataError:
    row = int(rows[i]) if rows is not None else i + 1
    return DataError(f"{where(row)}: {message}", file=file, row=row, field=column)


def read_stamps(
    values: pd.Series,
    *,
    column: str,
    timezone: str = "auto",
    file: str | None = None,
    rows: np.ndarray | None = None,
    where=None,
) -> Stamps:
    """Parse a file's timestamp column (see the module doc for the accepted forms).

    Args:
        values: the raw column, row ``i`` being data row ``rows[i]``.
        column: the column's name in the file (its suffix may tell the zone).
        timezone: ``"auto"``, ``"UTC"`` or ``"America/New_York"`` for naive stamps.
        file: path for error details; rows: 1-based data rows; where: ``row -> "file, row N"``.

    Returns:
        :class:`Stamps`.

    Raises:
        DataError: a value that is not a date-time, or a column mixing stamps with and
            without an offset (the first row that differs is named).
    """
    where = where or (lambda row: f"row {row}")
    timezone = check_option(timezone, TIMEZONES, "timezone")

    def fail(message: str, i: int) -> DataError:
        return _fail(message, i=i, column=column, where=where, file=file, rows=rows)

    if pd.api.types.is_datetime64_any_dtype(values):
        if getattr(values.dt, "tz", None) is not None:
            local = values.dt.tz_convert(EXCHANGE_TZ).dt.tz_localize(None)
            return Stamps(local.to_numpy().astype("datetime64[ns]"), "offsets", "time zone stored in the file")
        parsed = values.to_numpy().astype("datetime64[ns]")
    elif pd.api.types.is_integer_dtype(values) or pd.api.types.is_float_dtype(values):
        numbers = values.to_numpy(dtype="float64")
        bad = ~np.isfinite(numbers)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise fail(f"{column} {values.iloc[i]!r} is not a Unix time", i)
        biggest = float(np.abs(numbers).max()) if numbers.size else 0.0
        unit = "s" if biggest < 1e11 else "ms" if biggest < 1e14 else "ns"
        parsed = pd.to_datetime(numbers, unit=unit).to_numpy().astype("datetime64[ns]")
        return Stamps(parsed, "UTC", f"Unix times in {unit} (UTC)")
    else:
        text = values.astype("string").str.strip()
        offset = text.str.contains(_OFFSET, na=False).to_numpy(dtype=bool)
        if offset.any() and not offset.all():
            i = int(np.flatnonzero(offset != offset[0])[0])
            kind = "has" if offset[i] else "has no"
            raise fail(
                f"{column} {shown_value(values.iloc[i])} {kind} UTC offset while row "
                f"{int(rows[0]) if rows is not None else 1} {'has' if offset[0] else 'has none'}; "
                "give every stamp an offset or none",
                i,
            )
        if offset.all():
            stamped = pd.to_datetime(text, utc=True, format="ISO8601", errors="coerce")
            _check_parsed(stamped, values, column, fail)
            local = stamped.dt.tz_convert(EXCHANGE_TZ).dt.tz_localize(None)
            return Stamps(local.to_numpy().astype("datetime64[ns]"), "offsets", "UTC offsets in the file")
        parsed_series = pd.to_datetime(text, format="ISO8601", errors="coerce")
        _check_parsed(parsed_series, values, column, fail)
        parsed = parsed_series.to_numpy().astype("datetime64[ns]")

    if timezone != "auto":
        return Stamps(parsed, timezone, "the timezone option")
    name = str(column).strip().lower().replace(" ", "_")
    if _UTC_NAME.search(name):
        return Stamps(parsed, "UTC", f"column name {column}")
    if _ET_NAME.search(name):
        return Stamps(parsed, EXCHANGE_TZ, f"column name {column}")
    as_et = _share_in_session(parsed)
    as_utc = _share_in_session(to_exchange_time(parsed))
    zone = "UTC" if as_utc > as_et else EXCHANGE_TZ
    share = max(as_et, as_utc)
    return Stamps(
        parsed,
        zone,
        f"guessed: {share:.0%} of the bars fall in 09:30-16:00 ET when read as {zone} "
        f"({min(as_et, as_utc):.0%} the other way); set the timezone option if that is wrong",
        guessed=True,
    )


def shown_value(value: object) -> str:
    from trainer.data.files import shown

    return shown(value)


def _check_parsed(parsed: pd.Series, raw: pd.Series, column: str, fail) -> None:
    bad = (parsed.isna() & raw.notna()).to_numpy() | raw.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise fail(
            f"{column} {shown_value(raw.iloc[i])} is not a date-time (expected YYYY-MM-DD HH:MM[:SS], "
            "optionally with an offset such as -04:00 or Z)",
            i,
        )


def _share_in_session(local: np.ndarray) -> float:
    minutes = minutes_of_day(local)
    return float(np.mean((minutes >= SESSION_OPEN) & (minutes <= SESSION_CLOSE))) if minutes.size else 0.0


def stamp_text(value) -> str:
    """A naive stamp as ``YYYY-MM-DD HH:MM`` for messages."""
    return str(pd.Timestamp(value))[:16]


def has_time_of_day(index) -> bool:
    """True when any stamp of ``index`` (naive ``datetime64``/``Timestamp`` labels) is not at
    midnight, i.e. the labels are intraday bars rather than days."""
    try:
        stamps = pd.DatetimeIndex(index)
    except (TypeError, ValueError):
        return False
    return bool(len(stamps)) and bool((stamps != stamps.normalize()).any())


def infer_periods_per_year(index) -> int:
    """Periods per year of a series labelled by ``index``: 252 for days; for intraday bar-end
    stamps ``bars_per_session(m) * 252`` where ``m`` is the most common gap in minutes between
    consecutive bars of one day (5 -> 78 x 252 = 19,656). 252 when it cannot be told (no two
    bars on one day, or labels that are not dates)."""
    if not has_time_of_day(index):
        return TRADING_DAYS_PER_YEAR
    ns = pd.DatetimeIndex(index).to_numpy().astype("datetime64[ns]").astype(np.int64)
    day = ns // (86_400 * 10**9)
    step = np.diff(ns) // (60 * 10**9)
    step = step[(day[1:] == day[:-1]) & (step > 0)]
    if step.size == 0:
        return TRADING_DAYS_PER_YEAR
    uniq, counts = np.unique(step, return_counts=True)
    return bars_per_session(int(uniq[np.argmax(counts)])) * TRADING_DAYS_PER_YEAR
