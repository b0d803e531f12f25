"""Trading sessions of intraday panels and the features that know them.

Convention (the panel's ``date`` column, see :func:`trainer.data.load_panel`): intraday stamps
are naive America/New_York exchange time labelling the bar's **end** (the 09:30-09:35 bar is
``09:35``); daily panels hold midnight dates. A **session** is one exchange date: every bar
whose end stamp falls on that calendar date (bar ends run 09:35-16:00 for 5-minute bars of the
regular session, 13:00 on half days).

Features added to intraday panels only (daily panels keep exactly their indicators), per bar
``t`` of ticker ``n``, all known at the end of bar ``t``:

* ``bar_of_day_sin``, ``bar_of_day_cos``: ``sin(2 pi m / 1440)`` and ``cos(2 pi m / 1440)``
  where ``m`` is the minute of the day of the bar's end (09:35 is 575); the same for every
  ticker. A 24-hour cycle, so extended-hours bars get their own values and nothing wraps
  inside a session.
* ``overnight_gap``: ``open[f, n] / close[l, n] - 1`` where ``f`` is the first bar of ``t``'s
  session and ``l`` the last bar of the previous session in the panel: the return from the
  previous session's close to this session's open, held for every bar of the session (it is
  known from the session's first bar on). 0 in the panel's first session.

Indicators (stockstats) run over the bar sequence of each ticker across sessions: every value
of bar ``t`` uses bars ``<= t`` only, so a session's first bars see the previous sessions'
bars (the past) and never the next session's (``tests/trainer/data/test_sessions.py`` perturbs
every later bar and checks nothing at or before ``t`` moves).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SESSION_FEATURES: tuple[str, ...] = ("bar_of_day_sin", "bar_of_day_cos", "overnight_gap")
"""Names of the session features appended to an intraday panel's indicators, in this order."""

MINUTES_PER_DAY = 24 * 60


def panel_feature_names(indicators, *, intraday: bool) -> tuple[str, ...]:
    """The feature names (``MarketData.feature_names``) of a panel built with ``indicators``:
    the indicators, then :data:`SESSION_FEATURES` on intraday bars. The one rule the pipeline
    builds panels with and a task's observation size is estimated with before loading."""
    return tuple(indicators) + (SESSION_FEATURES if intraday else ())


def is_intraday(dates) -> bool:
    """True when any stamp of ``dates`` has a time of day (daily panels hold midnight dates).

    Args:
        dates: anything :class:`pandas.DatetimeIndex` accepts (naive stamps).
    """
    index = pd.DatetimeIndex(dates)
    return bool(len(index)) and bool((index != index.normalize()).any())


def bar_dates(dates) -> np.ndarray:
    """Dates as :class:`MarketData` stores them: ``datetime64[D]`` for a daily calendar,
    ``datetime64[s]`` (naive exchange time, bar end) when any stamp has a time of day."""
    index = pd.DatetimeIndex(dates)
    unit = "datetime64[s]" if is_intraday(index) else "datetime64[D]"
    return index.to_numpy().astype(unit)


def stamp_text(value) -> str:
    """``YYYY-MM-DD`` for a midnight stamp (a daily row), ``YYYY-MM-DD HH:MM`` otherwise."""
    stamp = pd.Timestamp(value)
    return str(stamp.date()) if stamp == stamp.normalize() else stamp.strftime("%Y-%m-%d %H:%M")


def session_index(dates) -> np.ndarray:
    """(T,) int64 session number of each bar: 0 for the panel's first exchange date, +1 per date.

    Args:
        dates: (T,) sorted naive exchange-time bar-end stamps.
    """
    days = pd.DatetimeIndex(dates).normalize().to_numpy()
    change = np.ones(len(days), dtype=bool)
    change[1:] = days[1:] != days[:-1]
    change[0] = False
    return np.cumsum(change).astype(np.int64)


def session_close_mask(dates) -> np.ndarray:
    """(T,) bool, True on the last bar of each session (its close), including the panel's last bar."""
    session = session_index(dates)
    last = np.ones(len(session), dtype=bool)
    last[:-1] = session[1:] != session[:-1]
    return last


def session_features(dates, open_: np.ndarray, close: np.ndarray) -> np.ndarray:
    """The :data:`SESSION_FEATURES` of an intraday panel (module docstring for the formulas).

    Args:
        dates: (T,) sorted naive America/New_York bar-end stamps.
        open_: (T, N) float64 open of each bar in USD (adjusted like ``close``).
        close: (T, N) float64 close of each bar in USD.

    Returns:
        (T, N, 3) float64: bar-of-day sine and cosine (unitless, in [-1, 1]) and the overnight
        gap as a simple return (0.01 is +1 %).
    """
    index = pd.DatetimeIndex(dates)
    t, n = close.shape
    minute = (index.hour * 60 + index.minute + index.second / 60.0).to_numpy(dtype=np.float64)
    angle = 2.0 * np.pi * minute / MINUTES_PER_DAY
    out = np.zeros((t, n, len(SESSION_FEATURES)), dtype=np.float64)
    out[:, :, 0] = np.sin(angle)[:, None]
    out[:, :, 1] = np.cos(angle)[:, None]
    session = session_index(index)
    first = np.flatnonzero(np.r_[True, session[1:] != session[:-1]])  # first bar of each session
    gap = np.zeros((len(first), n), dtype=np.float64)
    if len(first) > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            gap[1:] = open_[first[1:]] / close[first[1:] - 1] - 1.0
        gap[~np.isfinite(gap)] = 0.0
    out[:, :, 2] = gap[session]
    return out
