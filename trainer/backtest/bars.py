"""Intraday bar series seen per session: the aggregation behind the "daily" metrics of bars.

A session is one exchange date: every bar whose (naive America/New_York, bar-end) stamp falls
on it. Labels of the results are the session dates at midnight, like daily data.
"""

from __future__ import annotations

import pandas as pd


def session_days(index) -> pd.DatetimeIndex:
    """(T,) the session date (midnight) of each naive bar-end stamp."""
    return pd.DatetimeIndex(index).normalize()


def session_count(index) -> int:
    """Number of distinct sessions among the stamps."""
    return int(session_days(index).nunique())


def session_returns(r: pd.Series) -> pd.Series:
    """Bar returns compounded to one return per session (exchange date), labelled by the date."""
    growth = (1.0 + r.fillna(0.0)).groupby(session_days(r.index)).prod() - 1.0
    growth.index.name = r.index.name
    return growth.rename(r.name)


def session_sums(t: pd.Series) -> pd.Series:
    """Per-bar amounts (turnover) summed per session."""
    return t.groupby(session_days(t.index)).sum()


def sessions_between(index, peak: str | None, recovery: str | None) -> int | None:
    """Sessions from a drawdown's peak to its recovery (or the last bar): dates after the peak's."""
    days = session_days(index).unique()
    last = pd.Timestamp(recovery).normalize() if recovery is not None else days[-1]
    if peak is None:  # the peak is the unlabelled anchor before the first bar
        return int((days <= last).sum())
    return int(((days > pd.Timestamp(peak).normalize()) & (days <= last)).sum())
