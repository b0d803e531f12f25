"""Plotly figures of a backtest report, built server-side from its daily series.

Pages embed ``figure_json`` (rendered by ``static/js/report.js`` with the locally served
``plotly.min.js``); the standalone export embeds ``figure_html`` with Plotly inlined once.

Series are USD account values on trading days. Daily returns are simple returns of those
values; the rolling Sharpe ratio uses the same definition as the report's Sharpe ratio
(empyrical: ``mean / std(ddof 1) * sqrt(252)``, risk-free 0) over a trailing window.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from webapp.reports.selectors import AGENT, EQUAL_WEIGHT, QQQ, SERIES_LABELS, series_values

TRADING_DAYS = 252
ROLLING_WINDOW = 63  # one quarter of trading days
COLORS = {AGENT: "#2f6fed", QQQ: "#1d2330", EQUAL_WEIGHT: "#b7791f"}
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}},
        "margin": {"l": 60, "r": 20, "t": 44, "b": 40},
        "height": 360,
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.15},
        "template": "plotly_white",
        **extra,
    }


def is_intraday(index: pd.Index) -> bool:
    """True when the series' stamps carry a time of day (intraday bars, stamped at the bar end)."""
    stamps = pd.DatetimeIndex(index)
    return bool(len(stamps)) and bool((stamps != stamps.normalize()).any())


def time_axis(index: pd.Index) -> dict[str, Any]:
    """The x axis of a chart over ``index``: plain dates for daily series; for intraday bars a
    date axis without the nights, weekends and exchange holidays (Plotly ``rangebreaks``), so a
    session's last bar is drawn next to the next session's first."""
    if not is_intraday(index):
        return {}
    stamps = pd.DatetimeIndex(index)
    days = stamps.normalize().unique()
    weekdays = pd.bdate_range(days[0], days[-1])
    holidays = [d.strftime("%Y-%m-%d") for d in weekdays.difference(days)]
    breaks: list[dict[str, Any]] = [{"bounds": ["sat", "mon"]}, {"bounds": [16, 9.5], "pattern": "hour"}]
    if holidays:
        breaks.append({"values": holidays})
    return {"xaxis": {"type": "date", "rangebreaks": breaks}}


#: Most points per line of an intraday chart; longer series are thinned (:func:`thin`).
MAX_POINTS = 3000


def thin(values, max_points: int = MAX_POINTS):
    """An intraday series (or frame) with at most about ``max_points`` rows for drawing: every
    k-th bar, every session's last bar and the last row (a daily series is returned as it is;
    a 12,480-bar backtest drew 12 MB of report). The CSV downloads keep every bar."""
    if len(values) <= max_points or not is_intraday(values.index):
        return values
    stamps = pd.DatetimeIndex(values.index)
    step = math.ceil(len(values) / max_points)
    keep = np.arange(len(values)) % step == 0
    days = stamps.normalize()
    keep[:-1] |= days[1:] != days[:-1]  # session closes
    keep[-1] = True
    return values.iloc[keep]


def session_closes(values: pd.Series) -> pd.Series:
    """Each session's last value, indexed by its day (a daily series is returned as it is)."""
    if not is_intraday(values.index):
        return values
    stamps = pd.DatetimeIndex(values.index)
    return values.groupby(stamps.normalize()).last()


def stamp_label(value: Any) -> str:
    """``YYYY-MM-DD`` for a daily row, ``YYYY-MM-DD HH:MM`` for an intraday bar."""
    stamp = pd.Timestamp(value)
    return stamp.strftime("%Y-%m-%d") if stamp == stamp.normalize() else stamp.strftime("%Y-%m-%d %H:%M")


def drawdown(values: pd.Series) -> pd.Series:
    """Fall from the running peak of a value series, ``values / cummax(values) - 1``.

    Args:
        values: (T,) positive USD values; the first one is the starting capital (the peak
            a drawdown is measured from on day one).

    Returns:
        (T,) fractions ``<= 0``.
    """
    return values / values.cummax() - 1.0


def monthly_returns(values: pd.Series) -> pd.DataFrame:
    """Compounded return of each calendar month: years x 12 months (NaN where no data).

    The first month's return is measured from the first value (the starting capital), later
    months from the previous month's last close.
    """
    month_end = values.groupby([values.index.year, values.index.month]).last()
    previous = month_end.shift(1)
    previous.iloc[0] = values.iloc[0]
    returns = month_end / previous - 1.0
    table = returns.unstack(level=1)
    return table.reindex(columns=range(1, 13))


def rolling_sharpe(values: pd.Series, window: int = ROLLING_WINDOW) -> pd.Series:
    """Trailing ``window``-day annualised Sharpe ratio of daily returns (NaN before it fills)."""
    returns = values.pct_change()
    mean = returns.rolling(window, min_periods=window).mean()
    std = returns.rolling(window, min_periods=window).std(ddof=1)
    return (mean / std.replace(0.0, np.nan)) * math.sqrt(TRADING_DAYS)


def equity_figure(daily: pd.DataFrame, extra: dict[str, pd.Series] | None = None) -> go.Figure:
    """Account value of the agent, QQQ and equal weight (USD, same initial capital), and
    ``extra`` benchmarks (SPY, DIA: hidden until their legend entry is clicked)."""
    fig = go.Figure()
    for name, values in (extra or {}).items():
        values = thin(values)
        fig.add_trace(
            go.Scatter(
                x=values.index,
                y=values.to_numpy(),
                name=f"{name} (buy and hold)",
                mode="lines",
                line={"width": 1.2, "dash": "dot"},
                visible="legendonly",
                hovertemplate="%{y:$,.0f}",
            )
        )
    for name, values in series_values(daily).items():
        values = thin(values)
        fig.add_trace(
            go.Scatter(
                x=values.index,
                y=values.to_numpy(),
                name=SERIES_LABELS[name],
                mode="lines",
                line={"color": COLORS[name], "width": 2.2 if name == AGENT else 1.4},
                hovertemplate="%{y:$,.0f}",
            )
        )
    fig.update_layout(
        **_layout(
            "Equity curve", yaxis={"title": "account value (USD)", "tickformat": "$,.0f"}, **time_axis(daily.index)
        )
    )
    return fig


def drawdown_figure(daily: pd.DataFrame) -> go.Figure:
    """Underwater chart: each series' fall from its running peak."""
    fig = go.Figure()
    for name, values in series_values(daily).items():
        under = thin(drawdown(values))  # the fall from the peak over every bar, then thinned
        fig.add_trace(
            go.Scatter(
                x=under.index,
                y=under.to_numpy(),
                name=SERIES_LABELS[name],
                mode="lines",
                fill="tozeroy" if name == AGENT else None,
                line={"color": COLORS[name], "width": 1.6 if name == AGENT else 1.1},
                hovertemplate="%{y:.2%}",
            )
        )
    fig.update_layout(
        **_layout("Drawdown (underwater)", yaxis={"title": "from peak", "tickformat": ".0%"}, **time_axis(daily.index))
    )
    return fig


def monthly_heatmap_figure(daily: pd.DataFrame) -> go.Figure:
    """The agent's monthly returns, years down, months across."""
    table = monthly_returns(daily["account_value"])
    z = table.to_numpy(dtype=float)
    text = [[("" if np.isnan(v) else f"{v:.1%}") for v in row] for row in z]
    limit = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 0.01
    fig = go.Figure(
        go.Heatmap(
            z=[[None if np.isnan(v) else float(v) for v in row] for row in z],
            x=MONTHS,
            y=[str(y) for y in table.index],
            text=text,
            texttemplate="%{text}",
            colorscale="RdYlGn",
            zmid=0.0,
            zmin=-limit,
            zmax=limit,
            colorbar={"tickformat": ".0%"},
            hovertemplate="%{y} %{x}: %{z:.2%}<extra></extra>",
        )
    )
    fig.update_layout(
        **_layout(
            "Monthly returns (agent)",
            height=max(220, 90 + 40 * len(table.index)),
            hovermode="closest",
            yaxis={"autorange": "reversed", "type": "category"},
        )
    )
    return fig


def rolling_sharpe_figure(daily: pd.DataFrame, window: int = ROLLING_WINDOW) -> go.Figure:
    """Trailing Sharpe ratio of the agent and QQQ (intraday series: of their session closes,
    so the window and the annualisation stay in trading days)."""
    fig = go.Figure()
    days = len(session_closes(daily["account_value"]))
    for name, values in series_values(daily).items():
        if name == EQUAL_WEIGHT:
            continue
        values = session_closes(values)
        fig.add_trace(
            go.Scatter(
                x=values.index,
                y=rolling_sharpe(values, window).to_numpy(),
                name=SERIES_LABELS[name],
                mode="lines",
                line={"color": COLORS[name], "width": 1.8 if name == AGENT else 1.2},
                hovertemplate="%{y:.2f}",
                connectgaps=False,
            )
        )
    title = f"Rolling {window}-day Sharpe ratio"
    if days <= window:
        title += f" (needs more than {window} days; this backtest has {days})"
    fig.update_layout(**_layout(title, yaxis={"title": "annualised Sharpe"}))
    return fig


def compare_figure(equity: pd.DataFrame) -> go.Figure:
    """Agents' equity curves on their common dates, each starting at 1.0 (QQQ dashed)."""
    fig = go.Figure()
    equity = thin(equity)
    for column in equity.columns:
        is_qqq = column == QQQ
        fig.add_trace(
            go.Scatter(
                x=equity.index,
                y=equity[column].to_numpy(),
                name=SERIES_LABELS[QQQ] if is_qqq else column,
                mode="lines",
                line={"dash": "dash", "color": COLORS[QQQ], "width": 1.2} if is_qqq else {"width": 1.8},
                hovertemplate="%{y:.3f}",
            )
        )
    fig.update_layout(
        **_layout(
            "Equity curves on common dates (start = 1.0)",
            height=420,
            yaxis={"title": "growth of 1"},
            **time_axis(equity.index),
        )
    )
    return fig


def weights_figure(daily: pd.DataFrame) -> go.Figure | None:
    """The agent's positions over time: each ticker's weight in the account (stacked, cash on
    top), from the ``weight_<T>`` columns; ``None`` for a backtest stored before they existed."""
    columns = [c for c in daily.columns if c.startswith("weight_")]
    if not columns:
        return None
    daily = thin(daily)
    fig = go.Figure()
    for column in columns:
        fig.add_trace(
            go.Scatter(
                x=daily.index,
                y=daily[column].to_numpy(),
                name=column.removeprefix("weight_"),
                stackgroup="weights",
                mode="lines",
                line={"width": 0.5},
                hovertemplate="%{y:.1%}",
            )
        )
    cash = (daily["cash"] / daily["account_value"]).to_numpy()
    fig.add_trace(
        go.Scatter(x=daily.index, y=cash, name="cash", stackgroup="weights", mode="lines", hovertemplate="%{y:.1%}")
    )
    fig.update_layout(
        **_layout(
            "Positions: weight of each ticker", yaxis={"tickformat": ".0%", "range": [0, 1]}, **time_axis(daily.index)
        )
    )
    return fig


#: A trade worth at most this fraction of the account is no trade (as ``TRADE_TOLERANCE`` of
#: ``trainer.backtest.engine``).
_TRADE_TOLERANCE = 1e-9


def trade_rows(daily: pd.DataFrame, *, limit: int = 200) -> tuple[list[dict[str, Any]], int]:
    """The agent's trades, latest first: ``[{date, ticker, shares, value}]`` (value in USD
    when the weights give the price), at most ``limit``, and how many there are in all.

    A row is a day and ticker whose ``trades_<T>`` is not 0. A portfolio agent pays its costs
    out of every position pro rata; daily series stored before the backtest separated that from
    its trades (``trainer.backtest.engine.executed_trades``) show every ticker the no-trade band
    held as a tiny sale (its share of the costs, or floating-point residue): a row whose shares
    differ from ``-holdings x costs / account_value`` by at most 1e-9 of the account is left
    out of the rows and the count.
    """
    rows = []
    value = daily["account_value"]
    cost_share = daily["costs"] / value if "costs" in daily else None
    for column in [c for c in daily.columns if c.startswith("trades_")]:
        ticker = column.removeprefix("trades_")
        traded = daily[column]
        held, weight = daily.get(f"holdings_{ticker}"), daily.get(f"weight_{ticker}")
        price = None
        if held is not None and weight is not None:
            price = weight * value / held.where(held != 0)  # NaN where nothing is held
            if cost_share is not None:
                residue = ((traded + held * cost_share) * price).abs()
                traded = traded.where(~(residue <= _TRADE_TOLERANCE * value), 0.0)
        for date, shares in traded[traded != 0].items():
            at = None if price is None else price.at[date]
            rows.append(
                {
                    "date": stamp_label(date),
                    "ticker": ticker,
                    "shares": float(shares),
                    "value": None if at is None or not math.isfinite(at) else float(shares * at),
                }
            )
    rows.sort(key=lambda r: (r["date"], r["ticker"]), reverse=True)
    return rows[:limit], len(rows)


def report_figures(daily: pd.DataFrame, extra: dict[str, pd.Series] | None = None) -> dict[str, go.Figure]:
    """The report charts keyed by their element id (positions only when the series has weights;
    ``extra`` benchmarks on the equity curve)."""
    figures = {
        "equity-chart": equity_figure(daily, extra),
        "drawdown-chart": drawdown_figure(daily),
        "monthly-heatmap": monthly_heatmap_figure(daily),
        "rolling-sharpe": rolling_sharpe_figure(daily),
    }
    weights = weights_figure(daily)
    if weights is not None:
        figures["weights-chart"] = weights
    return figures


def figure_data(fig: go.Figure) -> dict[str, Any]:
    """A figure as plain JSON data (``{"data": [...], "layout": {...}}``) for ``json_script``."""
    return json.loads(fig.to_json())


def figure_html(fig: go.Figure, div_id: str, *, include_plotlyjs: bool) -> str:
    """A figure as an HTML fragment, Plotly's JS inlined when ``include_plotlyjs`` (offline)."""
    return fig.to_html(
        full_html=False,
        include_plotlyjs=include_plotlyjs,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )
