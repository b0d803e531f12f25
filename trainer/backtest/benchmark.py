"""The backtest benchmark (QQQ) on a backtest's own rows: daily, intraday bars or session closes.

Three bases, chosen from the stamps of the backtest window and of the benchmark series
(:func:`align_benchmark`):

* ``"daily"``: a daily window and a daily benchmark: the benchmark's close on every trading day
  of the window (as before intraday data existed);
* ``"bars"``: an intraday window and intraday benchmark bars (QQQ's bars from the same file as
  the agent's data): the benchmark's close on exactly every bar of the window (same bar-end
  stamps); a missing bar is an error, never a fill;
* ``"session_closes"``: an intraday window and a daily benchmark (no intraday QQQ in the data):
  agent and benchmark are compared on **session closes** only, the benchmark's daily close
  against the agent's value on each session's last bar. The benchmark line of the report is a
  step that moves at each session close (flat at the capital until the first one).

Which basis a report used is stated in its notes (:attr:`AlignedBenchmark.note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.data.sessions import is_intraday, session_close_mask
from trainer.errors import DataError

BASES = ("daily", "bars", "session_closes")


@dataclass(frozen=True)
class AlignedBenchmark:
    """A benchmark's close valued on every row of a backtest window.

    Attributes:
        close: (T,) float64 benchmark close in USD on each row of the window (on the
            ``"session_closes"`` basis: the close of the latest session close at or before the
            row, the first session's close before it).
        basis: one of :data:`BASES`.
        rows: (K,) int64 indices of the window rows where agent and benchmark are compared
            (every row, or the session-close rows).
        note: one sentence for the report naming the basis.
    """

    close: np.ndarray
    basis: str
    rows: np.ndarray
    note: str


def _check_prices(name: str, values: np.ndarray, stamps: pd.DatetimeIndex) -> None:
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        when = stamps[np.flatnonzero(bad)[0]]
        raise DataError(f"{name} close on {when} is not a positive price", field="benchmark_close", date=str(when))


def _reindexed(series: pd.Series, index: pd.DatetimeIndex, wanted: pd.DatetimeIndex, what: str) -> np.ndarray:
    name = str(series.name or "benchmark")
    if not index.is_unique:
        dup = index[index.duplicated()][0]
        raise DataError(f"{name} close has {dup} twice", field="benchmark_close", date=str(dup))
    missing = wanted.difference(index)
    if len(missing):
        text = (lambda d: str(d.date())) if what == "trading day" else str
        shown = ", ".join(text(d) for d in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        raise DataError(
            f"{name} close lacks {len(missing)} {what}(s) of the backtest: {shown}{more}",
            field="benchmark_close",
            date=text(missing[0]),
        )
    values = pd.Series(series.to_numpy(dtype=np.float64), index=index).reindex(wanted).to_numpy()
    _check_prices(name, values, wanted)
    return values


def load_benchmark_close(path: str | Path, ticker: str = "QQQ") -> pd.Series:
    """Read one benchmark's adjusted close from a daily price file.

    Uses :func:`trainer.data.loading.load_panel`, so any layout it accepts works: a panel with
    a ``tic`` column (``benchmark_etfs_daily_eodhd.csv.gz``) or a one-ticker file
    (``QQQ_daily_eodhd_1999-03-10_2024-04-19.csv``). The close is split/dividend-adjusted when
    the file has an adjusted column.

    Args:
        path: the price file.
        ticker: the benchmark's ticker (case-insensitive).

    Returns:
        (D,) float64 adjusted close in USD indexed by a ``DatetimeIndex`` named ``date``,
        increasing; the series is named after the ticker.

    Raises:
        DataError: the file is missing or malformed, or does not hold ``ticker``.
    """
    from trainer.data.loading import load_panel

    ticker = str(ticker).strip().upper()
    panel = load_panel(path, tickers=[ticker])
    close = panel.loc[panel["tic"] == ticker, ["date", "close"]]
    series = pd.Series(
        close["close"].to_numpy(dtype=np.float64), index=pd.DatetimeIndex(close["date"], name="date"), name=ticker
    )
    return series.sort_index()


def align_benchmark(benchmark_close: pd.Series, dates: np.ndarray) -> AlignedBenchmark:
    """Value ``benchmark_close`` on the rows ``dates`` of a backtest window (module doc).

    Args:
        benchmark_close: (D,) float64 close in USD indexed by midnight dates (daily) or naive
            America/New_York bar-end stamps (intraday), e.g. from
            :func:`load_benchmark_close`; extra rows are ignored.
        dates: (T,) the window's ``MarketData.dates`` (``datetime64[D]`` or ``[s]``).

    Returns:
        :class:`AlignedBenchmark`.

    Raises:
        DataError: not a Series; a duplicated stamp; a day (daily, session closes) or bar
            (bars) of the window the benchmark lacks, listed; a non-positive price.
    """
    if not isinstance(benchmark_close, pd.Series):
        raise DataError("benchmark_close must be a pandas Series of prices indexed by date", field="benchmark_close")
    name = str(benchmark_close.name or "benchmark")
    index = pd.DatetimeIndex(benchmark_close.index)
    wanted = pd.DatetimeIndex(np.asarray(dates).astype("datetime64[ns]"))
    every = np.arange(len(wanted), dtype=np.int64)
    if not is_intraday(wanted):
        close = _reindexed(benchmark_close, index.normalize(), wanted, "trading day")
        return AlignedBenchmark(close, "daily", every, f"{name}: daily closes on every trading day of the backtest")
    if is_intraday(index):
        close = _reindexed(benchmark_close, index, wanted, "bar")
        return AlignedBenchmark(
            close, "bars", every, f"{name}: intraday bars from the same file as the data, compared bar by bar"
        )
    closes = np.flatnonzero(session_close_mask(wanted))
    daily = _reindexed(benchmark_close, index.normalize(), wanted[closes].normalize(), "trading day")
    # row t carries the close of the latest session that has closed at or before t
    closed = np.searchsorted(closes, np.arange(len(wanted)), side="right") - 1
    close = np.where(closed >= 0, daily[np.clip(closed, 0, None)], daily[0])
    return AlignedBenchmark(
        close.astype(np.float64),
        "session_closes",
        closes.astype(np.int64),
        f"{name}: no intraday {name} bars in the data, so its daily closes are compared with the agent's "
        "value at each session close (daily returns, from the first session's close)",
    )


def intraday_benchmark_close(paths, ticker: str = "QQQ") -> tuple[pd.Series, Path] | None:
    """``ticker``'s intraday close from the first of ``paths`` that holds intraday bars of it.

    Args:
        paths: the task's data files (paths or folders, as ``load_panel`` takes them).
        ticker: the benchmark's ticker.

    Returns:
        ``(close, path)`` as :func:`load_benchmark_close` reads it
        (indexed by bar-end stamps), or None when no file holds intraday rows of ``ticker``.

    Raises:
        DataError: a file holding ``ticker`` cannot be read or is malformed.
    """
    from trainer.data.files import expand_paths, ticker_days

    for path in expand_paths(paths):
        if not len(ticker_days([path], tickers=[ticker])):
            continue
        close = load_benchmark_close(path, ticker=ticker)
        if is_intraday(close.index):
            return close, path
    return None
