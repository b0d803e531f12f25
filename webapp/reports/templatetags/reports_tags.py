"""Template filters of backtest lists (``/reports/`` and the run page's "Backtest reports"):
the same short-window rule and in-sample test as the report page.

- ``{{ b|sharpe:"agent" }}``: a series' Sharpe ratio (``"agent"``, ``"QQQ"``,
  ``"equal_weight"``) with 3 decimals, ``"n/a"`` when the window is shorter than the rule's
  minimum (``engine.withheld_metrics``: an annualised figure of a few days means nothing), ``–``
  when undefined or not done;
- ``{{ b|short_window_note }}``: why it is n/a (``"n/a (window shorter than 63 days)"``) or "";
- ``{{ b|in_sample }}``: the train-to-validation span its range overlaps (``"2010-01-01 to
  2020-12-31"``), or "" for a held-out backtest;
- ``{% agent_backtests agent as rows %}``: the agent's own backtests, newest first (the agent
  page lists them).
"""

from __future__ import annotations

from django import template

from webapp import engine
from webapp.core import formatting
from webapp.core.errors import AppError
from webapp.reports import checks
from webapp.reports.models import Backtest

register = template.Library()


@register.filter
def sharpe(backtest: Backtest, series: str = "agent") -> str:
    """The series' Sharpe ratio as lists show it: 3 decimals, ``"n/a"`` for a short window."""
    metrics = (backtest.metrics or {}).get(series) or {}
    if backtest.status != Backtest.Status.DONE or not metrics:
        return formatting.MISSING
    if "sharpe_ratio" in engine.withheld_metrics(metrics):
        return "n/a"
    return formatting.format_number(metrics.get("sharpe_ratio"), 3)


@register.filter
def short_window_note(backtest: Backtest) -> str:
    """``"n/a (window shorter than 63 days)"`` when the lists withhold its Sharpe ratios, else ""."""
    return engine.withheld_metrics((backtest.metrics or {}).get("agent") or {}).get("sharpe_ratio", "")


@register.filter
def in_sample(backtest: Backtest) -> str:
    """The train-to-validation span the backtest's range overlaps, or "" when it is held out
    (only a backtest allowed to overlap can be in sample)."""
    if not backtest.allow_overlap:
        return ""
    try:
        seen = checks.seen_overlap(backtest.run.task, backtest.start, backtest.end)
    except AppError:
        return ""
    return "" if seen is None else f"{seen[0]} to {seen[1]}"


@register.simple_tag
def agent_backtests(agent) -> list[Backtest]:
    """The agent's backtests, newest first (its owner's: an agent page is only its owner's)."""
    return list(Backtest.objects.filter(agent=agent).order_by("-created_at", "-id"))
