"""How the reports app reacts to other apps' signals (connected in ``ReportsConfig.ready``)."""

from __future__ import annotations

import logging

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
