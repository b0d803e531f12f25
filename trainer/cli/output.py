"""What the ``python -m trainer`` commands print: the data pipeline's decisions, scores and the
metrics table of ``evaluate``."""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "baseline_rows",
    "data_summary",
    "fmt_score",
    "format_data_summary",
    "format_metrics",
    "format_train_baselines",
    "score_text",
    "sharpe_text",
]


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
    days)" (``--json`` keeps their values, flagged ``short_window``), and so does every other
    Sharpe-based figure (the baselines' Sharpe ratios and differences, the score). For intraday
    metrics the per-period rows say "bar", and the figures on session closes
    (``metrics["daily"]``) follow. The baselines follow the agent's figures
    (:func:`baseline_rows`), then the score."""
    from trainer.backtest.contract import ANNUALISED_KEYS, short_window_text

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
    rows.extend(baseline_rows(metrics))
    if metrics.get("selection"):
        rows.append(("score", score_text(metrics)))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{label.ljust(width)}  {text}" for label, text in rows)


BASELINES = (
    ("vs_equal_weight", "equal weight (1/N)"),
    ("vs_equal_weight_with_costs", "1/N with costs"),
    ("vs_QQQ", "QQQ"),
)


def verdict_text(rel: dict[str, Any], short: str | None = None) -> str | None:
    """One line of a ``vs_equal_weight`` object's verdict, e.g. ``"beats: Sharpe difference
    +0.412 (95 % CI +0.101 to +0.723), p = 0.004; IR 1.21"``; ``None`` without a verdict. On a
    short window (``short``: its text) the annualised figures read as the Sharpe rows do."""
    if not rel.get("verdict"):
        return rel.get("note")
    if short:
        return f"{rel['verdict']}: p = {rel['p_value']:.3f}; Sharpe difference, its CI and IR {short}"
    low, high = rel["ci95"]
    ir = rel.get("information_ratio")
    ir_text = f"; IR {ir:.2f}" if ir is not None else ""
    return (
        f"{rel['verdict']}: Sharpe difference {rel['sharpe_difference']:+.3f} "
        f"(95 % CI {low:+.3f} to {high:+.3f}), p = {rel['p_value']:.3f}{ir_text}"
    )


def _short(metrics: dict[str, Any]) -> str | None:
    """The short-window text when ``metrics`` cover fewer than 63 days, else None."""
    from trainer.backtest.contract import short_window_text

    if metrics.get("short_window"):
        return short_window_text(int(metrics.get("min_annualised_days") or 63))
    return None


def _pct(x: Any, sign: bool = False) -> str:
    return "n/a" if x is None else (f"{100 * x:+.2f} %" if sign else f"{100 * x:.2f} %")


def sharpe_text(value: float | None, metrics: dict[str, Any], *, sign: bool = False) -> str:
    """An annualised Sharpe figure of ``metrics``' window: "n/a (window shorter than 63 days)"
    on a short window, "n/a" when undefined, else 3 decimals (signed with ``sign``)."""
    short = _short(metrics)
    if short:
        return short
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def score_text(metrics: dict[str, Any]) -> str:
    """The score with its rule, or "n/a (reason)": too few returns for the sub-windows, or a
    window shorter than 63 days (the sub-windows' Sharpe ratios are annualised)."""
    rule = (metrics.get("selection") or {}).get("description", "")
    if metrics.get("score") is None:
        text = metrics.get("score_note") or "n/a"
    else:
        text = _short(metrics) or fmt_score(metrics.get("score"))
    return f"{text} ({rule})" if rule else text


def baseline_rows(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the baselines on the same days: equal weight and QQQ (their total return and
    Sharpe ratio, the agent's excess return and Sharpe difference), then the untrained policy
    (``metrics["untrained"]``) or why it is not available (``metrics["untrained_note"]``)."""
    rows: list[tuple[str, str]] = []
    for key, name in BASELINES:
        rel = metrics.get(key)
        if rel:
            rows.append((f"vs {name}, same days", ""))
            rows.append((f"  {name} total return", _pct(rel.get("baseline_total_return"))))
            rows.append((f"  {name} Sharpe ratio", sharpe_text(rel.get("baseline_sharpe"), metrics)))
            rows.append(("  excess total return", _pct(rel.get("excess_return"), sign=True)))
            rows.append(("  Sharpe difference", sharpe_text(rel.get("sharpe_difference"), metrics, sign=True)))
            if key != "vs_QQQ" and verdict_text(rel):
                rows.append(("  verdict", verdict_text(rel, _short(metrics))))
    untrained = metrics.get("untrained")
    if untrained:
        who = f"fresh {str(untrained['algorithm']).upper()} agent, seed {untrained.get('seed')}"
        rows.append(("untrained policy, same days", who if untrained.get("algorithm") else ""))
        rows.append(("  total return", _pct(untrained.get("total_return"))))
        rows.append(("  Sharpe ratio", sharpe_text(untrained.get("sharpe_ratio"), metrics)))
        rows.append(("  score", score_text({**untrained, "selection": None, **_window(metrics)})))
    elif metrics.get("untrained_note"):
        rows.append(("untrained policy", metrics["untrained_note"]))
    return rows


def _window(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: metrics.get(k) for k in ("short_window", "min_annualised_days")}


def format_train_baselines(metrics: dict[str, Any], dsr: dict[str, Any]) -> list[str]:
    """``train``'s lines under its validation line: equal weight and QQQ on the validation
    days, the untrained policy's validation figures and the best agent's Deflated Sharpe Ratio."""
    lines = []
    for key, name in BASELINES:
        rel = metrics.get(key)
        if rel:
            lines.append(
                f"vs {name} on the same days: total return {_pct(rel.get('baseline_total_return'))}, Sharpe ratio "
                f"{sharpe_text(rel.get('baseline_sharpe'), metrics)} (agent {_pct(rel.get('excess_return'), True)}, "
                f"Sharpe difference {sharpe_text(rel.get('sharpe_difference'), metrics, sign=True)})"
            )
    untrained = metrics.get("untrained")
    if untrained:
        lines.append(
            f"untrained policy on the same days: total return {_pct(untrained.get('total_return'))}, Sharpe ratio "
            f"{sharpe_text(untrained.get('sharpe_ratio'), metrics)}, score "
            f"{score_text({**untrained, 'selection': None, **_window(metrics)})}"
        )
    else:
        lines.append("untrained policy: n/a (not recorded in the checkpoint)")
    value = dsr.get("value")
    text = dsr.get("note") if value is None else f"{value:.3f}"
    lines.append(
        f"DSR:        {text} (Deflated Sharpe Ratio of the best of N = {dsr.get('trials')} generation(s) evaluated)"
    )
    return lines
