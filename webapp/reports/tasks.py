"""Celery entry points of the reports app (ids in, services do the work). Both run on the
``cpu`` queue, the project's default queue (``CELERY_TASK_DEFAULT_QUEUE``).

``run_backtest`` claims and runs one backtest; ``backtest_top_agents`` is sent by the runs app
when a run finishes and queues backtests of its best agents on the task's test split.
"""

from __future__ import annotations

import logging
import traceback

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from webapp import engine
from webapp.core.errors import AppError
from webapp.reports import services

logger = logging.getLogger(__name__)


@shared_task(name="webapp.reports.tasks.run_backtest", acks_late=True, reject_on_worker_lost=True)
def run_backtest(backtest_id: int) -> str:
    """Claim backtest ``backtest_id`` and run it; a no-op when it is not queued.

    Bad data or an unusable agent file fail the backtest with the trainer's message (a
    permanent failure: running again would fail the same way); anything unexpected fails it
    with a short note and is logged with its traceback.

    Returns:
        The backtest's final status (``"skipped"`` when it was not claimable).
    """
    if not services.backtest_claim(backtest_id=backtest_id):
        return "skipped"
    try:
        backtest = services.backtest_execute(backtest_id=backtest_id)
    except (engine.TrainerError, AppError) as exc:
        logger.warning("backtest %s failed: %s", backtest_id, exc.message)
        services.backtest_fail(backtest_id=backtest_id, error=exc.message)
        return "failed"
    except SoftTimeLimitExceeded:
        services.backtest_fail(backtest_id=backtest_id, error="time limit exceeded")
        return "failed"
    except Exception:
        logger.exception("backtest %s crashed", backtest_id)
        services.backtest_fail(
            backtest_id=backtest_id, error="internal error (logged): " + traceback.format_exc(limit=1).splitlines()[-1]
        )
        return "failed"
    logger.info("backtest %s done over %s days", backtest_id, backtest.num_days)
    return backtest.status


@shared_task(name="webapp.reports.tasks.backtest_top_agents")
def backtest_top_agents(run_id: int, top: int | None = None) -> list[int]:
    """Queue end-of-run backtests of run ``run_id``'s ``top`` best agents (default: the run's
    setting, else 3) on its task's test split. Returns the ids of the backtests created."""
    return [b.id for b in services.backtests_for_run(run_id=run_id, top=top)]


@shared_task(name="webapp.reports.tasks.reap_stale_backtests", ignore_result=True)
def reap_stale_backtests() -> dict[str, int]:
    """Periodic (beat): re-queue backtests whose worker died and re-send lost messages."""
    return services.backtest_reap()
