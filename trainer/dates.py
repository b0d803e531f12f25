"""The one parser of the ``YYYY-MM-DD`` days that tasks, data specs, backtests and the web take.

The trainer raises :class:`~trainer.errors.ConfigError`; callers that report bad data (the
backtest) or answer HTTP requests (``webapp.engine.parse_day``) wrap it in their own type.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import numpy as np

from trainer.errors import ConfigError

__all__ = ["parse_day"]

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


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
