"""Daily bars from Yahoo Finance through yfinance, converted to the validated long layout.

The network call is isolated in :func:`_request`; everything after it (:func:`yfinance_to_long`
and the shared validation) is plain data handling and is tested offline.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from trainer.data.files import _canonical
from trainer.data.loading import normalize_frame
from trainer.data.rows import PANEL_COLUMNS, validate_rows
from trainer.errors import ConfigError, DataError

_PRICE_FIELDS = {"open", "high", "low", "close", "adj_close", "volume", "adj_open", "adj_high", "adj_low"}


def _request(tickers: list[str], start: str, end_exclusive: str) -> pd.DataFrame:
    """The only network call: ``yfinance.download`` with raw OHLC plus ``Adj Close``."""
    import yfinance

    return yfinance.download(
        tickers,
        start=start,
        end=end_exclusive,
        interval="1d",
        auto_adjust=False,
        actions=False,
        group_by="column",
        multi_level_index=True,
        progress=False,
        threads=False,
    )


def yfinance_to_long(frame: pd.DataFrame, tickers: Sequence[str] | None = None) -> pd.DataFrame:
    """Convert a ``yfinance.download`` result to long rows ``date, tic, <price fields>``.

    Accepts both column layouts yfinance produces: ``(Price, Ticker)`` (``group_by="column"``)
    and ``(Ticker, Price)`` (``group_by="ticker"``), and flat columns for one ticker (then
    ``tickers`` must name it). Rows where every price field is NaN are yfinance's padding for
    days a ticker did not trade and are left out; the calendar step reports such gaps.

    Args:
        frame: index = dates (``DatetimeIndex``, maybe tz-aware); columns as above.
        tickers: expected tickers; required for flat columns.

    Returns:
        DataFrame with ``date``, ``tic`` and the price columns under yfinance's names
        (``Open``, ``Adj Close``, ...), ordered by ticker then date.

    Raises:
        DataError: empty frame, no price level in the columns, or flat columns without a ticker.
    """
    if frame is None or frame.empty:
        raise DataError("yfinance returned no rows", file="yfinance")
    columns = frame.columns
    parts = []
    if isinstance(columns, pd.MultiIndex):
        if columns.nlevels != 2:
            raise DataError(f"yfinance columns have {columns.nlevels} levels, expected 2", file="yfinance")
        scores = [sum(_canonical(v) in _PRICE_FIELDS for v in columns.get_level_values(i).unique()) for i in (0, 1)]
        price_level = 0 if scores[0] >= scores[1] else 1
        if scores[price_level] == 0:
            raise DataError("yfinance columns hold no Open/High/Low/Close/Volume level", file="yfinance")
        ticker_level = 1 - price_level
        for tic in columns.get_level_values(ticker_level).unique():
            part = frame.xs(tic, axis=1, level=ticker_level)
            part = part.assign(tic=str(tic))
            parts.append(part)
    else:
        if not tickers or len(tickers) != 1:
            raise DataError("yfinance returned flat columns; pass the one ticker they belong to", file="yfinance")
        parts.append(frame.assign(tic=str(tickers[0])))
    rows = []
    for part in parts:
        price_cols = [c for c in part.columns if _canonical(c) in _PRICE_FIELDS]
        part = part[part[price_cols].notna().any(axis=1)]
        part = part.rename_axis("date").reset_index()
        rows.append(part[["date", "tic", *price_cols]])
    out = pd.concat(rows, ignore_index=True)
    if out.empty:
        raise DataError("yfinance returned only empty rows", file="yfinance")
    return out


def panel_from_yfinance(frame: pd.DataFrame, tickers: Sequence[str] | None = None) -> pd.DataFrame:
    """Convert and validate a ``yfinance.download`` result exactly like a file.

    Returns:
        The panel of :func:`trainer.data.load_panel` (adjusted prices, ``attrs`` notes/source).
        Error rows count the converted long rows (ticker by ticker, then date), 1-based.

    Raises:
        DataError: see :func:`yfinance_to_long` and :func:`trainer.data.loading.validate_rows`;
            a requested ticker with no rows.
    """
    long = yfinance_to_long(frame, tickers)
    norm, notes = normalize_frame(long, origin="yfinance", file="yfinance")
    panel = validate_rows(norm, origin="yfinance", file="yfinance")
    if tickers:
        got = set(panel["tic"])
        absent = [t.upper() for t in tickers if t.upper() not in got]
        if absent:
            raise DataError(f"yfinance returned no rows for {', '.join(absent)}", ticker=absent[0], file="yfinance")
    panel = panel[list(PANEL_COLUMNS)]
    panel.attrs["notes"] = notes
    panel.attrs["files"] = {t: "yfinance" for t in panel["tic"].unique()}
    panel.attrs["source"] = "yfinance " + ",".join(sorted(panel["tic"].unique()))
    return panel


def download_yfinance(tickers: Sequence[str], start: str, end: str) -> pd.DataFrame:
    """Download daily bars from Yahoo Finance (network) into the validated long layout.

    Args:
        tickers: Yahoo symbols, e.g. ``["AAPL", "MSFT"]``.
        start, end: inclusive ``YYYY-MM-DD`` range (yfinance's ``end`` is exclusive; one day is
            added here).

    Returns:
        Same as :func:`trainer.data.load_panel`: ``date, tic, open, high, low, close, volume``
        with open/high/low/close adjusted by ``Adj Close / Close`` of each day.

    Raises:
        ConfigError: no tickers, or a malformed date.
        DataError: the download is empty or fails validation.
    """
    if isinstance(tickers, str) or not tickers:
        raise ConfigError("tickers must be a non-empty list of symbols", field="tickers")
    symbols = [str(t).strip().upper() for t in tickers]
    try:
        first, last = pd.Timestamp(start), pd.Timestamp(end)
    except ValueError as exc:
        raise ConfigError(f"start/end must be YYYY-MM-DD dates ({exc})", field="start") from exc
    frame = _request(symbols, first.strftime("%Y-%m-%d"), (last + pd.Timedelta(days=1)).strftime("%Y-%m-%d"))
    return panel_from_yfinance(frame, symbols)
