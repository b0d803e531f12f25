"""How the reports app reacts to other apps' signals (connected in ``ReportsConfig.ready``)."""

from __future__ import annotations

import logging

from webapp.reports.models import Backtest
from webapp.reports.tasks import backtest_top_agents

logger = logging.getLogger(__name__)


def queue_end_of_run_backtests(sender, *, run_id: int, backtest: bool, **kwargs) -> None:
    """On ``webapp.runs.signals.run_ended`` with ``backtest``: queue ``backtest_top_agents`` for
    the run (its best agents on the task's test split). A broker outage is logged; the backtest
    reaper re-sends the trigger of recently finished runs."""
    if not backtest:
        return
    try:
        backtest_top_agents.delay(run_id)
    except Exception:
        logger.warning("could not queue end-of-run backtests", extra={"run": run_id}, exc_info=True)


def test_metrics_for_model_card(sender, *, agent, **kwargs) -> dict | None:
    """On ``webapp.runs.signals.agent_test_metrics``: the agent's latest finished backtest over
    its task's whole test split (``None`` when there is none)."""
    test = (agent.run.task.splits or {}).get("test") or {}
    found = (
        Backtest.objects.filter(
            agent=agent,
            status=Backtest.Status.DONE,
            start__gte=test.get("start", ""),
            end__lte=f"{test.get('end', '')}~",
        )
        .order_by("-id")
        .first()
    )
    if found is None:
        return None
    metrics = found.metrics or {}
    keep = ("sharpe_ratio", "total_return", "max_drawdown")
    return {
        "backtest_id": found.pk,
        "start": found.start,
        "end": found.end,
        **{name: {k: (metrics.get(name) or {}).get(k) for k in keep} for name in ("agent", "QQQ", "equal_weight")},
    }
