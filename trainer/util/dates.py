"""The one parser of the ``YYYY-MM-DD`` days that tasks, data specs, backtests and the web take,
and of the ``YYYY-MM-DD HH:MM`` moments a split of intraday data may start or end at.

Moments are naive America/New_York exchange time and compare with the bar-end stamps of
intraday data (``trainer.data.timestamps``). As a range bound, a day means the whole day: a
start day starts at 00:00, an end day ends at 24:00; a moment is the instant itself, and a bar
belongs to ``[start, end]`` when its end stamp does (``09:35`` is the 09:30-09:35 bar).

The trainer raises :class:`~trainer.errors.ConfigError`; callers that report bad data (the
backtest) or answer HTTP requests (``webapp.engine.parse_day``) wrap it in their own type.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import numpy as np

from trainer.errors import ConfigError

__all__ = ["parse_day", "parse_moment", "range_bound"]

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MOMENT = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$")


def parse_day(value: Any, field: str) -> str:
    """A calendar day as ``YYYY-MM-DD``.

    Args:
        value: a ``YYYY-MM-DD`` string (surrounding spaces allowed), a ``datetime.date`` or
            ``datetime.datetime`` (a ``pandas.Timestamp`` too; the time is dropped) or a
            ``numpy.datetime64``.
        field: the (dotted) field name the error names, e.g. ``"validation.start"``.

    Returns:
        The day, ``YYYY-MM-DD``.

    Raises:
        ConfigError: ``value`` is not such a day (``2021-02-30``, ``2021/02/01``, ``21-2-1``...),
            ``field`` set to ``field``.
    """
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, np.datetime64):
        value = str(value.astype("datetime64[D]"))
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _DAY.match(text):
        raise ConfigError(f"{field}: {value!r} is not a YYYY-MM-DD date", field=field)
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError as exc:
        raise ConfigError(f"{field}: {value!r} is not a calendar date", field=field) from exc


def parse_moment(value: Any, field: str) -> str:
    """A range bound: a day ``YYYY-MM-DD``, or an exchange-time moment ``YYYY-MM-DD HH:MM`` (for
    splits of intraday data, which may start or end inside a day).

    Args:
        value: a day as :func:`parse_day` takes it, or ``YYYY-MM-DD HH:MM[:SS]`` (``T`` also
            separates), a ``datetime``/``Timestamp``/``datetime64`` with a time of day. A
            midnight time stands for the day.
        field: the (dotted) field name the error names.

    Returns:
        ``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM`` (``:SS`` kept when not zero).

    Raises:
        ConfigError: neither form, or an impossible date or time, ``field`` set to ``field``.
    """
    if isinstance(value, np.datetime64):
        value = dt.datetime.fromisoformat(str(value.astype("datetime64[s]")))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise ConfigError(f"{field}: {value!r} has a time zone; give naive exchange time", field=field)
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="minutes" if value.second == 0 else "seconds")
    text = value.strip() if isinstance(value, str) else None
    match = _MOMENT.match(text) if text is not None else None
    if match is None:
        if isinstance(value, dt.date) or (text is not None and _DAY.match(text)):
            return parse_day(value, field)  # its own errors ("not a calendar date")
        raise ConfigError(f"{field}: {value!r} is not a YYYY-MM-DD date or a YYYY-MM-DD HH:MM date-time", field=field)
    day, hour, minute, second = match.groups()
    try:
        moment = dt.datetime.fromisoformat(f"{day}T{hour}:{minute}:{second or '00'}")
    except ValueError as exc:
        raise ConfigError(f"{field}: {value!r} is not a calendar date and time", field=field) from exc
    return parse_moment(moment, field)


def range_bound(value: Any, *, end: bool) -> np.datetime64:
    """A range bound (a day or a moment, see :func:`parse_moment`) as the instant it stands for:
    ``datetime64[s]``; a start day is its 00:00, an end day the last second before the next day's
    00:00, a moment itself. Inclusive comparisons with bar-end stamps then select whole days.

    Raises:
        ConfigError: ``value`` is neither a day nor a moment (``field`` ``"start"``/``"end"``).
    """
    text = parse_moment(value, "end" if end else "start")
    if len(text) == 10:
        day = np.datetime64(text, "s")
        return day + np.timedelta64(86_399, "s") if end else day
    return np.datetime64(text.replace(" ", "T"), "s")
