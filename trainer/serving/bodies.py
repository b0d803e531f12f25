"""Checking the parts of an act request body; every error is a ``DataError`` naming its field
(``observations``, ``holdings.MSFT``, ``cash``, ``weights.KO``, ``bars.AAPL[3].close``, ``date``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from itertools import chain
from typing import Any

import numpy as np

from trainer.errors import DataError
from trainer.util.bounds import format_number

#: Most observations in one request (a 256-row batch is the benchmarked size).
MAX_BATCH = 4_096
#: Most bars per ticker in one request (about 8 years of trading days).
MAX_BARS = 2_048


#: The largest magnitude a JSON number may have as a float (about 1.8e308).
FLOAT_MAX = float(np.finfo(np.float64).max)
#: The largest magnitude an observation value may have: the policy reads float32 (about 3.4e38).
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Deepest nesting of lists and objects in a request body (the web app's ``PADDOCK_JSON_MAX_DEPTH``).
MAX_JSON_DEPTH = 32


def number(value: Any, field: str) -> float:
    """``value`` as a float. Raises ``DataError`` naming ``field`` unless it is a finite JSON
    number: not a boolean, not an integer beyond the largest float."""
    if isinstance(value, bool):
        raise DataError(f"{field} must be a number, got the boolean {str(value).lower()}", field=field)
    try:
        out = float(value) if isinstance(value, int | float) else math.nan
    except OverflowError:  # an integer of hundreds of digits: no float holds it
        out = math.nan
    if not math.isfinite(out):
        shown = format_number(value) if isinstance(value, int) else repr(value)[:60]
        raise DataError(f"{field} must be a finite number, got {shown}", field=field)
    return out


def nesting_depth(value: Any, *, stop_at: int) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0, ``[]`` 1, ``[[1]]`` 2),
    found without recursion; the walk stops once it passes ``stop_at`` (the web app's parser
    does the same, ``webapp/core/parsers.py``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, list | dict) else []
    while stack and deepest <= stop_at:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, list | dict))
    return deepest


def parse_observations(value: Any, obs_dim: int) -> np.ndarray:
    """``observations`` of a request as a (B, obs_dim) float32 array.

    Raises:
        DataError: not a non-empty list of rows, more than :data:`MAX_BATCH` rows or a row of
            the wrong length (``field`` is ``observations``, the message names the row); a value
            that is not a finite number (a boolean, a string...) or is beyond float32's range,
            which the policy reads (``field`` is ``observations[i][j]``).
    """
    if not isinstance(value, list) or not value:
        raise DataError("observations must be a non-empty list of rows (batch, obs_dim)", field="observations")
    if len(value) > MAX_BATCH:
        raise DataError(f"observations has {len(value)} rows, at most {MAX_BATCH} per request", field="observations")
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != obs_dim:
            got = f"{len(row)} values" if isinstance(row, list) else type(row).__name__
            raise DataError(
                f"observations[{i}] has {got}; the agent's observation layout needs {obs_dim}",
                field="observations",
                row=i,
            )
    if set(map(type, chain.from_iterable(value))) <= {float, int}:  # no bool, str, None, list...
        try:
            raw = np.asarray(value, dtype=np.float64)
        except OverflowError:  # an integer beyond the largest float
            raw = None
        if raw is not None and bool((np.abs(raw) <= FLOAT32_MAX).all()):  # False for NaN too
            return raw.astype(np.float32)
    for i, row in enumerate(value):  # name the first bad value
        for j, x in enumerate(row):
            where = f"observations[{i}][{j}]"
            if abs(number(x, where)) > FLOAT32_MAX:
                raise DataError(
                    f"{where} is {float(x):.3g}, beyond the range of the float32 values the policy reads "
                    f"(+-{FLOAT32_MAX:.2g}); observations are built as the bundle's observation_layout says",
                    field=where,
                )
    return np.asarray(value, dtype=np.float64).astype(np.float32)  # float subclasses (NumPy scalars)


def portfolio_value(cash: float, holdings: np.ndarray, close: np.ndarray, tickers: list[str]) -> float:
    """``cash + holdings @ close`` in USD.

    Raises:
        DataError: a position worth more than the largest float (``holdings.<ticker>``), or
            cash and holdings together (``cash``).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        positions = holdings * close
        value = cash + float(positions.sum())
    if math.isfinite(value):
        return value
    for t, shares, price, worth in zip(tickers, holdings, close, positions):
        if not math.isfinite(worth):
            raise DataError(
                f"holdings.{t}: {shares:.3g} shares at {price:.6g} USD are worth more than the largest float "
                f"(about {FLOAT_MAX:.1e} USD)",
                field=f"holdings.{t}",
            )
    raise DataError(
        f"cash: cash and holdings value the portfolio beyond the largest float (about {FLOAT_MAX:.1e} USD); "
        "send smaller amounts",
        field="cash",
    )


def holdings_of(body: Mapping[str, Any], tickers: list[str], *, whole: bool = True) -> np.ndarray:
    """``body["holdings"]`` (``{ticker: shares}``, default none) as (N,) float64 shares in the
    order of ``tickers``.

    Args:
        whole: shares must be whole numbers (the stock-trading env); ``False`` accepts
            fractional shares (the portfolio env holds them).

    Raises:
        DataError: not an object, an unknown ticker (``holdings``), or a negative (or, with
            ``whole``, fractional) share count (``holdings.<ticker>``).
    """
    value = body.get("holdings", {})
    if not isinstance(value, Mapping):
        raise DataError("holdings must be an object {ticker: shares}", field="holdings")
    unknown = [t for t in value if t not in tickers]
    if unknown:
        raise DataError(
            f"holdings names {', '.join(map(str, unknown))}, not among the agent's tickers {', '.join(tickers)}",
            field="holdings",
            ticker=str(unknown[0]),
        )
    out = np.zeros(len(tickers))
    for i, t in enumerate(tickers):
        if t in value:
            shares = number(value[t], f"holdings.{t}")
            if shares < 0 or (whole and shares != int(shares)):
                what = "a whole number of shares" if whole else "a number of shares"
                raise DataError(f"holdings.{t} must be {what} >= 0, got {value[t]!r}", field=f"holdings.{t}")
            out[i] = shares
    return out


#: How far a request's weights may sum from 1 (rounded weights are accepted, then normalised).
WEIGHTS_TOLERANCE = 1e-3


def weights_of(value: Any, tickers: list[str]) -> np.ndarray:
    """A portfolio's current weights ``{ticker: w, ..., "cash": w}`` as (N+1,) float64 fractions
    of its value, tickers in the order of ``tickers``, then cash.

    A ticker left out weighs 0; without ``"cash"`` the cash weight is the rest, ``1 - sum``.
    The weights must be >= 0 and sum to 1 within :data:`WEIGHTS_TOLERANCE`; they are then
    divided by their sum.

    Raises:
        DataError: not an object or the sum is off (``weights``), an unknown ticker
            (``weights``, naming it), a negative or non-number weight (``weights.<ticker>``).
    """
    if not isinstance(value, Mapping):
        raise DataError('weights must be an object {ticker: weight, ..., "cash": weight}', field="weights")
    unknown = [str(k) for k in value if k not in tickers and k != "cash"]
    if unknown:
        raise DataError(
            f"weights names {', '.join(unknown)}, not among the agent's tickers {', '.join(tickers)} (or cash)",
            field="weights",
            ticker=unknown[0],
        )
    out = np.zeros(len(tickers) + 1)
    for i, name in enumerate([*tickers, "cash"]):
        if name in value:
            out[i] = number(value[name], f"weights.{name}")
            if out[i] < 0:
                raise DataError(
                    f"weights.{name} must be >= 0 (the portfolio is long only), got {value[name]!r}",
                    field=f"weights.{name}",
                )
    if "cash" not in value:
        out[-1] = max(1.0 - out[:-1].sum(), 0.0)
    total = out.sum()
    if abs(total - 1.0) > WEIGHTS_TOLERANCE:
        raise DataError(
            f"weights sum to {total:.6g}; they are fractions of the portfolio's value and must sum to 1",
            field="weights",
        )
    return out / total


def cash_of(body: Mapping[str, Any], default: float) -> float:
    """``body["cash"]`` in USD, or ``default`` when absent. Raises ``DataError`` (``cash``) unless a finite number >= 0."""
    if "cash" not in body:
        return float(default)
    cash = number(body["cash"], "cash")
    if cash < 0:
        raise DataError(f"cash must be >= 0 USD, got {cash}", field="cash")
    return cash


_WINDOW = re.compile(r"_(\d+)(?:_|$)")
# indicators whose window is not in the name, in days (stockstats defaults)
_IMPLIED_WINDOW = {"macd": 35, "macds": 35, "macdh": 35, "boll": 20, "boll_ub": 20, "boll_lb": 20, "rsi": 14, "cci": 14}


#: Fewest days of ``bars`` a request must send (one trading year). Exponential indicators
#: (MACD's EMAs, RSI's and DX's Wilder smoothing) keep a memory of every earlier day, so an
#: observation built from a short history differs from the one the agent's dataset gives for
#: the same day. Measured on the real Dow-30 data (tiny stock-trading and portfolio agents on
#: AAPL, MSFT, JPM, five days from 2012 to 2022), the largest difference of any observation
#: value (z-scored features) from the ``date`` path's was 0.6 with 64 days, 0.17 with 100,
#: 0.07 with 128, 0.04 with 150, 6e-3 with 200, 4.8e-4 with 252 and 3.6e-4 with 300.
BARS_MIN_DAYS = 252
#: How far an observation built from :data:`BARS_MIN_DAYS` or more days of ``bars`` may differ
#: (absolute, any value) from the ``date`` path's observation of the same day.
BARS_TOLERANCE = 1e-3


def min_history_days(indicators: list[str], *, scale_free: bool = False, risk: bool = False) -> int:
    """Fewest daily rows whose features are all defined: the longest indicator window plus one day.

    The window is read from the stockstats name (``close_30_sma`` -> 30, ``rsi_30`` -> 30) or
    taken from stockstats' defaults (MACD 26 + 9, Bollinger 20, RSI/CCI 14); a scale-free
    observation also needs its longest log-return lookback (63 days), and with the risk
    features (``risk``) the 12-1 momentum's 252 days. The first
    ``min_history_days - 1`` rows of a dataset are its warm-up: their features use shortened
    windows. Exponential indicators (MACD, RSI) still drift with longer history, so ``bars``
    requests need :func:`min_bars_days`.
    """
    from trainer.envs.observations import LOOKBACKS, MOMENTUM_LOOKBACK, RISK_WINDOW, VOL_WINDOW

    longest = max(max(LOOKBACKS), VOL_WINDOW) if scale_free else 1
    if risk:
        longest = max(longest, RISK_WINDOW, MOMENTUM_LOOKBACK)
    for name in indicators:
        match = _WINDOW.search(name)
        window = int(match.group(1)) if match else _IMPLIED_WINDOW.get(name, 1)
        longest = max(longest, window)
    return longest + 1


def min_bars_days(indicators: list[str], *, scale_free: bool = False, risk: bool = False) -> int:
    """Fewest days of ``bars`` per ticker a request must send: :data:`BARS_MIN_DAYS` (or
    :func:`min_history_days` when an indicator window is longer), so that the observation
    matches the ``date`` path's within :data:`BARS_TOLERANCE`."""
    return max(BARS_MIN_DAYS, min_history_days(indicators, scale_free=scale_free, risk=risk))


def bars_panel(value: Any, tickers: list[str], need: int) -> Any:
    """Request bars (``{ticker: [{date, open, high, low, close, volume}, ...]}``) as the long
    panel ``build_market_data`` reads (date, tic, OHLC, volume), sorted by date and ticker.

    Args:
        value: ``body["bars"]``.
        tickers: the agent's tickers; the bars must name exactly these.
        need: fewest days per ticker (:func:`min_bars_days`).

    Raises:
        DataError: naming ``bars``, ``bars.<ticker>`` or ``bars.<ticker>[i].<key>``: missing or
            unknown tickers, too few or too many days, a missing, non-positive or non-finite
            value, high below low, a bad or repeated date.
    """
    import pandas as pd

    if not isinstance(value, Mapping):
        raise DataError("bars must be an object {ticker: [bar, ...]}", field="bars")
    missing = [t for t in tickers if t not in value]
    extra = [str(t) for t in value if t not in tickers]
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else []
        )
        raise DataError(
            f"bars must hold exactly the agent's tickers {', '.join(tickers)}: {'; '.join(parts)}",
            field="bars",
            ticker=(missing or extra)[0],
        )
    rows = []
    for t in tickers:
        bars = value[t]
        if not isinstance(bars, list):
            raise DataError(f"bars.{t} must be a list of daily bars", field=f"bars.{t}", ticker=t)
        if len(bars) < need:
            raise DataError(
                f"bars.{t} has {len(bars)} days; send at least {need} days of history (the agent's indicators "
                f"need them to match the dataset's observation within {BARS_TOLERANCE:g})",
                field=f"bars.{t}",
                ticker=t,
            )
        if len(bars) > MAX_BARS:
            raise DataError(f"bars.{t} has {len(bars)} days, at most {MAX_BARS}", field=f"bars.{t}", ticker=t)
        for i, bar in enumerate(bars):
            where = f"bars.{t}[{i}]"
            if not isinstance(bar, Mapping):
                raise DataError(f"{where} must be an object with date, open, high, low, close, volume", field=where)
            row = {"tic": t}
            for key in ("open", "high", "low", "close", "volume"):
                if key not in bar:
                    raise DataError(f"{where}.{key} is missing", field=f"{where}.{key}", ticker=t)
                row[key] = number(bar[key], f"{where}.{key}")
                if (key != "volume" and row[key] <= 0) or row[key] < 0:
                    raise DataError(
                        f"{where}.{key} must be positive, got {bar[key]!r}", field=f"{where}.{key}", ticker=t
                    )
            if row["high"] < row["low"]:
                raise DataError(f"{where}: high is below low", field=f"{where}.high", ticker=t)
            try:
                row["date"] = pd.Timestamp(checked_date(bar.get("date"), f"{where}.date"))
            except ValueError as exc:
                raise DataError(str(exc), field=f"{where}.date", ticker=t) from None
            rows.append(row)
    frame = pd.DataFrame(rows, columns=["date", "tic", "open", "high", "low", "close", "volume"])
    dup = frame.duplicated(["date", "tic"])
    if dup.any():
        first = frame[dup].iloc[0]
        raise DataError(
            f"bars.{first['tic']} has {first['date'].date()} twice", field=f"bars.{first['tic']}", ticker=first["tic"]
        )
    return frame.sort_values(["date", "tic"]).reset_index(drop=True)


def checked_date(value: Any, field: str) -> str:
    """``value`` when it is a ``YYYY-MM-DD`` calendar date; else ``DataError`` naming ``field``."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise DataError(f"{field} must be a YYYY-MM-DD date, got {value!r}", field=field)
    import datetime as _dt

    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise DataError(f"{field} {value!r} is not a calendar date", field=field) from None
    return value


def checked_moment(value: Any, field: str) -> str:
    """A ``date`` request: ``YYYY-MM-DD``, or ``YYYY-MM-DD HH:MM`` exchange time (America/New_York,
    bar end) for agents of intraday data (``trainer.util.dates.parse_moment``, the parser of task
    splits); ``DataError`` naming ``field`` otherwise."""
    from trainer.errors import ConfigError
    from trainer.util.dates import parse_moment

    if not isinstance(value, str):
        raise DataError(f"{field} must be a YYYY-MM-DD date or a YYYY-MM-DD HH:MM bar time, got {value!r}", field=field)
    try:
        return parse_moment(value, field)
    except ConfigError as exc:
        raise DataError(exc.message, field=field) from None


def dataset_row(dates: np.ndarray, requested: str, field: str) -> tuple[int, str]:
    """The row of ``dates`` (``MarketData.dates``) a ``date`` request means, and its label.

    Daily data: the trading day ``YYYY-MM-DD`` (a time of day is refused). Intraday data
    (bar-end stamps): ``YYYY-MM-DD HH:MM`` is the bar ending then (exchange time, e.g.
    ``2026-01-02 09:35`` is the first 5-minute bar); a bare day is that day's **last** bar (the
    session close, 13:00 on a half day).

    Returns:
        ``(t, label)``: ``label`` is ``YYYY-MM-DD`` or the bar's ``YYYY-MM-DD HH:MM``.

    Raises:
        DataError: no such trading day or bar, naming ``field`` and the data's range.
    """
    intraday = np.asarray(dates).dtype != np.dtype("datetime64[D]")
    first, last = (str(dates[0]).replace("T", " ")[:16], str(dates[-1]).replace("T", " ")[:16])
    if not intraday:
        if len(requested) > 10:
            raise DataError(f"{field}: {requested} has a time of day, but the agent's data is daily", field=field)
        first, last = first[:10], last[:10]
    stamps = np.asarray(dates).astype("datetime64[s]")
    if len(requested) == 10:
        day = np.datetime64(requested, "D")
        rows = np.flatnonzero(stamps.astype("datetime64[D]") == day)
        if rows.size == 0:
            raise DataError(
                f"{field} {requested} is not a trading day of the agent's dataset ({first} to {last})", field=field
            )
        t = int(rows[-1])
    else:
        rows = np.flatnonzero(stamps == np.datetime64(requested.replace(" ", "T"), "s"))
        if rows.size == 0:
            raise DataError(
                f"{field} {requested} is not the end of a bar of the agent's dataset ({first} to {last}; "
                f"bars are labelled by their end in exchange time, e.g. 09:35 for the first 5-minute bar)",
                field=field,
            )
        t = int(rows[0])
    label = str(stamps[t]).replace("T", " ")[:16] if intraday else str(stamps[t])[:10]
    return t, label
