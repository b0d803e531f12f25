"""What the ``python -m trainer`` commands print: the data pipeline's decisions, scores and the
metrics table of ``evaluate``."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["data_summary", "fmt_score", "format_data_summary", "format_metrics"]


def data_summary(market: Any) -> dict[str, Any]:
    """What the data pipeline decided, for the CLI's output: traded tickers, days and notes."""
    return {
        "tickers": list(market.tickers),
        "num_tickers": len(market.tickers),
        "start": str(market.dates[0]),
        "end": str(market.dates[-1]),
        "notes": list(market.notes),
    }


def format_data_summary(summary: dict[str, Any]) -> str:
    """``data:`` line (the number of tickers actually traded) and one ``note:`` line per decision."""
    lines = [
        f"data:       {summary['num_tickers']} tickers traded ({', '.join(summary['tickers'])}), "
        f"{summary['start']} to {summary['end']}"
    ]
    lines += [f"note:       {note}" for note in summary["notes"]]
    return "\n".join(lines)


def fmt_score(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3f}"


_TABLE = (
    ("start", "first return date", "date"),
    ("end", "last date", "date"),
    ("num_days", "daily returns", "int"),
    ("total_return", "total return", "pct"),
    ("annual_return", "annual return", "pct"),
    ("annual_volatility", "annual volatility", "pct"),
    ("sharpe_ratio", "Sharpe ratio", "num"),
    ("sortino_ratio", "Sortino ratio", "num"),
    ("calmar_ratio", "Calmar ratio", "num"),
    ("max_drawdown", "max drawdown", "pct"),
    ("max_drawdown_peak", "  peak", "date"),
    ("max_drawdown_trough", "  trough", "date"),
    ("win_rate", "daily win rate", "pct"),
    ("daily_mean_return", "mean daily return", "pct"),
    ("daily_sharpe_ratio", "daily Sharpe ratio", "num"),
    ("initial_value", "initial value (USD)", "usd"),
    ("final_value", "final value (USD)", "usd"),
)


# Intraday metrics (they carry ``num_periods``): the per-period rows are per bar, and the figures
# of the bars compounded to session closes (``metrics["daily"]``) follow the table.
_BAR_ROWS = {
    "num_days": ("num_periods", "bar returns", "int"),
    "win_rate": ("win_rate", "win rate per bar", "pct"),
    "daily_mean_return": ("daily_mean_return", "mean bar return", "pct"),
    "daily_sharpe_ratio": ("daily_sharpe_ratio", "Sharpe ratio per bar", "num"),
}
_SESSION_ROWS = (
    ("num_days", "  session returns", "int"),
    ("sharpe_ratio", "  Sharpe ratio", "num"),
    ("annual_volatility", "  annual volatility", "pct"),
    ("win_rate", "  win rate per session", "pct"),
    ("daily_mean_return", "  mean session return", "pct"),
)


def format_metrics(metrics: dict[str, Any]) -> str:
    """A two-column text table of the main metrics (rates in percent on screen); annualised
    figures of a window shorter than ``MIN_ANNUALISED_DAYS`` read "n/a (window shorter than 63
    days)" (``--json`` keeps their values, flagged ``short_window``). For intraday metrics the
    per-period rows say "bar", and the figures on session closes (``metrics["daily"]``) follow."""
    from trainer.backtest.metrics import ANNUALISED_KEYS, short_window_text

    short = bool(metrics.get("short_window"))
    intraday = metrics.get("num_periods") is not None
    table = [(_BAR_ROWS.get(row[0], row) if intraday else row) for row in _TABLE]
    session = metrics.get("daily") if intraday and isinstance(metrics.get("daily"), dict) else None
    if session:
        table.append(("", "on session closes (bars compounded to each day's close)", "header"))
        table.extend((f"daily.{key}", label, kind) for key, label, kind in _SESSION_ROWS)
    rows = []
    for key, label, kind in table:
        if kind == "header":
            rows.append((label, ""))
            continue
        value = session.get(key[6:]) if key.startswith("daily.") and session else metrics.get(key)
        if short and key in ANNUALISED_KEYS:
            text = short_window_text(int(metrics.get("min_annualised_days") or 63))
        elif value is None:
            text = "n/a"
        elif kind == "pct":
            text = f"{100 * value:.2f} %"
        elif kind == "num":
            text = f"{value:.3f}"
        elif kind == "usd":
            text = f"{value:,.2f}"
        else:
            text = str(value)
        rows.append((label, text))
    windows = metrics.get("random_windows") or {}
    if windows.get("count"):
        rows.append((f"{windows['count']} random {windows['days']}-day windows", ""))
        rows.append(("  mean total return", f"{100 * windows['total_return_mean']:.2f} %"))
        rows.append(
            ("  worst / best", f"{100 * windows['total_return_min']:.2f} % / {100 * windows['total_return_max']:.2f} %")
        )
    for key, name in (("vs_equal_weight", "equal weight (1/N)"), ("vs_QQQ", "QQQ")):
        rel = metrics.get(key)
        if rel:
            diff = rel.get("sharpe_difference")
            rows.append((f"vs {name}, same days", ""))
            rows.append(("  excess total return", f"{100 * rel['excess_return']:+.2f} %"))
            rows.append(("  Sharpe difference", "n/a" if diff is None else f"{diff:+.3f}"))
    if metrics.get("selection"):
        rows.append(("score", f"{fmt_score(metrics.get('score'))} ({metrics['selection']['description']})"))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{label.ljust(width)}  {text}" for label, text in rows)
