"""Writes of the reports app: create backtests, run them, store their results.

Backtest protocol (one Celery task per backtest, ids only, see ``tasks.py``):

1. :func:`backtest_get_or_create` validates the request (dates inside the dataset, at least 20
   trading days, a held-out range unless overlap is allowed, the agent's tickers) and creates a
   ``queued`` row, unless the user asked for a backtest that exists (it answers that one); the
   task message is sent after commit.
2. :func:`backtest_claim` moves the row ``queued`` -> ``running`` with a conditional update;
   zero rows means another delivery has it (or it is finished): a no-op.
3. :func:`backtest_execute` copies the agent's checkpoint to a local file, runs
   ``engine.backtest_agent`` and stores the metrics in the row and the daily series as a CSV
   in the default storage; :func:`backtest_fail` records a failure the user can read.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone

from webapp import engine
from webapp.config.celery import app as celery_app
from webapp.core.errors import AppError
from webapp.reports import checks, selectors
from webapp.reports.charts import is_intraday
from webapp.reports.models import Backtest
from webapp.runs.models import Agent, Run
from webapp.runs.selectors.runs import task_spec
from webapp.runs.services.storage import local_copy_of_checkpoint

logger = logging.getLogger(__name__)

#: The Celery task that runs one backtest (``webapp.reports.tasks.run_backtest``).
RUN_BACKTEST_TASK = "webapp.reports.tasks.run_backtest"

#: Agents of a finished run backtested automatically when the run has no own setting.
DEFAULT_TOP_AGENTS = 3
#: How long after a run finished the reaper still creates end-of-run backtests it lacks.
END_OF_RUN_TRIGGER_WINDOW = dt.timedelta(days=1)


def backtest_get_or_create(
    *,
    user,
    agent: Agent,
    start: Any,
    end: Any,
    tickers: list[str] | None = None,
    allow_overlap: bool = False,
    source: str = Backtest.Source.USER,
) -> tuple[Backtest, bool]:
    """Queue a backtest of one of ``user``'s agents over ``[start, end]``, unless the user
    asks for one that exists: a request repeating a backtest queued, running or done
    (:func:`~webapp.reports.selectors.backtest_same`: same agent, dataset, tickers, window and
    ``allow_overlap``) gets that one, whoever asked for it first. End-of-run backtests are
    made once per agent and window by their own rule (:func:`backtests_for_run`).

    Args:
        user: the owner; must own the agent's run.
        agent: the agent to backtest.
        start, end: inclusive bounds, as the task's splits take them: ``YYYY-MM-DD`` days (or
            dates), and on an intraday dataset also ``YYYY-MM-DD HH:MM`` exchange-time moments
            (bar end), so a backtest may start or end inside a session.
        tickers: optional; must be the agent's tickers (an agent trades a fixed universe),
            each one in the task's dataset.
        allow_overlap: accept a range overlapping the task's train/validation dates (the
            result is then not a held-out test, and the report says so).
        source: ``"user"`` or ``"end_of_run"``.

    Returns:
        ``(backtest, created)``: ``created`` is false when an existing backtest answers.

    Raises:
        AppError: 404 for another user's agent; 400 naming ``start``, ``end`` or ``tickers``
            for a bad range (not a date, end before start, outside the data, fewer than 20
            trading days: ``engine.check_backtest_days``, overlapping the train/validation
            dates) or unknown tickers.
    """
    run = agent.run
    if run.owner_id != user.id:
        raise AppError("agent not found", fields={"agent": "not found"}, status=404)
    if not agent.checkpoint:
        raise AppError("the agent has no checkpoint to backtest", fields={"agent": "no checkpoint"})
    task = run.task
    dataset = task.dataset
    intraday = dataset.intraday
    start_day = checks.parse_bound(start, "start", intraday=intraday)
    end_day = checks.parse_bound(end, "end", intraday=intraday)
    checks.check_range(task=task, dataset=dataset, start=start_day, end=end_day, allow_overlap=bool(allow_overlap))
    # the agent's own universe (its checkpoint's tickers), not the task's list
    chosen = checks.check_tickers(list(agent.tickers or task.tickers), dataset, tickers)
    engine.check_backtest_days(start_day, end_day, paths=dataset.source_paths(), tickers=chosen, intraday=intraday)
    engine.check_benchmark_coverage(
        {"": (str(start_day), str(end_day))},
        benchmark_path=engine.benchmark_path_for(dataset.source_paths(), default=settings.PADDOCK_BENCHMARK_FILE),
    )
    with transaction.atomic():
        if source == Backtest.Source.USER:
            # the agent row serialises two requests at once (PostgreSQL), so they get one backtest
            Agent.objects.select_for_update().filter(pk=agent.pk).first()
            same = selectors.backtest_same(
                agent=agent, dataset=dataset, tickers=chosen, start=start_day, end=end_day, allow_overlap=allow_overlap
            )
            if same is not None:
                return same, False
        backtest = Backtest.objects.create(
            owner=user,
            agent=agent,
            run=run,
            dataset=dataset,
            tickers=chosen,
            start=start_day,
            end=end_day,
            allow_overlap=bool(allow_overlap),
            source=source,
        )
        backtest_id = backtest.id
        transaction.on_commit(lambda: _send(backtest_id))
    logger.info("backtest %s queued for agent %s", backtest.id, agent.id, extra={"run": run.id})
    return backtest, True


def backtest_create(*, user, agent: Agent, **request: Any) -> Backtest:
    """The backtest :func:`backtest_get_or_create` answers (same arguments), new or not."""
    return backtest_get_or_create(user=user, agent=agent, **request)[0]


def _send(backtest_id: int) -> None:
    # By task name: ``webapp.reports.tasks`` imports this module, so this one does not import it.
    try:
        celery_app.send_task(RUN_BACKTEST_TASK, args=[backtest_id])
    except Exception:  # broker down: the row stays queued and can be sent again
        logger.warning("could not send backtest %s", backtest_id, exc_info=True)


def _end_of_run_ensemble(run: Run) -> Agent | None:
    """The run's deliverable ensemble: every leaderboard agent within one standard error of the
    best (``webapp.runs.services.ensembles.ensemble_one_se_get_or_create``, built once per member
    set); ``None`` when only the best is within one SE (it is the deliverable, backtested already)
    or when the trainer refuses the ensemble, which is logged."""
    from webapp.runs.services import ensembles

    try:
        return ensembles.ensemble_one_se_get_or_create(run=run)[0]
    except AppError as exc:
        logger.warning("end-of-run ensemble of run %s refused: %s", run.id, exc.message, extra={"run": run.id})
        return None


def backtests_for_run(*, run_id: int, top: int | None = None) -> list[Backtest]:
    """Queue end-of-run backtests of a run's best agents, and of its deliverable: the ensemble
    of the leaderboard agents within one SE of the best (:mod:`webapp.runs.services.ensembles`,
    built here once), on its task's test split.

    Idempotent: an agent already backtested on that window by the end-of-run trigger is not
    queued again.

    Args:
        run_id: the run.
        top: how many leaderboard agents (best validation score first); default the run's
            ``backtest_top`` when it has one, else :data:`DEFAULT_TOP_AGENTS`.

    Returns:
        The backtests created now (empty when the run is unknown, has no agents or no test
        split, or they exist already).
    """
    run = Run.objects.select_related("task__dataset", "owner").filter(pk=run_id).first()
    if run is None:
        return []
    ensemble = _end_of_run_ensemble(run)  # the deliverable, with or without a test split
    test = checks.task_split(run.task, "test")
    if test is None:
        _refused(run, "the task has no test split")
        return []
    count = top if top is not None else getattr(run, "backtest_top", None) or DEFAULT_TOP_AGENTS
    agents = list(run.agents.filter(on_leaderboard=True).exclude(checkpoint="")[: max(0, int(count))])
    if not agents:
        _refused(run, "the run has no agent with a checkpoint on its leaderboard")
    if ensemble is not None:
        agents.append(ensemble)
    created = []
    for agent in agents:
        if Backtest.objects.filter(agent=agent, start=test[0], end=test[1], source=Backtest.Source.END_OF_RUN).exists():
            continue
        try:
            created.append(
                backtest_create(
                    user=run.owner,
                    agent=agent,
                    start=test[0],
                    end=test[1],
                    source=Backtest.Source.END_OF_RUN,
                )
            )
        except IntegrityError:  # a concurrent trigger created it first
            continue
        except AppError as exc:  # e.g. a test split the benchmark file does not cover
            logger.warning("end-of-run backtest of agent %s refused: %s", agent.id, exc.message, extra={"run": run.id})
            _refused(run, f"agent #{agent.id}: {exc.message}")
    return created


def _refused(run: Run, reason: str) -> None:
    """Record on the run why its end-of-run backtests cannot run: its page (the reports
    section, which ``static/js/run_reports.js`` refreshes) and API show it instead of
    "being backtested"."""
    Run.objects.filter(pk=run.pk).update(backtest_error=f"End-of-run backtests could not run: {reason}"[:2000])


def backtest_claim(*, backtest_id: int) -> bool:
    """Take a queued backtest for this worker; ``False`` when it is not queued any more."""
    claimed = Backtest.objects.filter(pk=backtest_id, status=Backtest.Status.QUEUED).update(
        status=Backtest.Status.RUNNING, started_at=timezone.now(), error=""
    )
    return bool(claimed)


def backtest_reap(*, stale_after_s: float | None = None, redispatch_after_s: float | None = None) -> dict[str, int]:
    """Recover backtests whose worker died or whose message was lost (run by the beat reaper).

    A backtest still ``running`` ``stale_after_s`` after it started (its worker died: a
    backtest takes seconds) goes back to ``queued``; every backtest ``queued`` for longer than
    ``redispatch_after_s`` is sent again. Sending twice is harmless: the claim is a
    conditional update, so the second delivery is a no-op. A run finished more than
    ``redispatch_after_s`` ago (within :data:`END_OF_RUN_TRIGGER_WINDOW`) with leaderboard
    agents but no end-of-run backtest lost its trigger message: they are created now.

    Returns:
        ``{"requeued": n, "resent": m}``.
    """
    stale_after_s = settings.PADDOCK_BACKTEST_STALE_AFTER_S if stale_after_s is None else stale_after_s
    redispatch_after_s = settings.PADDOCK_REDISPATCH_AFTER_S if redispatch_after_s is None else redispatch_after_s
    now = timezone.now()
    stale = list(
        Backtest.objects.filter(
            status=Backtest.Status.RUNNING, started_at__lt=now - dt.timedelta(seconds=stale_after_s)
        ).values_list("id", flat=True)[:500]
    )
    requeued = Backtest.objects.filter(pk__in=stale, status=Backtest.Status.RUNNING).update(
        status=Backtest.Status.QUEUED, started_at=None
    )
    waiting = set(stale) | set(
        Backtest.objects.filter(
            status=Backtest.Status.QUEUED, created_at__lt=now - dt.timedelta(seconds=redispatch_after_s)
        ).values_list("id", flat=True)[:500]
    )
    for backtest_id in sorted(waiting):
        _send(backtest_id)
    # A run that finished while Redis was down (or restarted) lost the message that starts its
    # end-of-run backtests: create them here for runs finished recently without any.
    # ``backtests_for_run`` is idempotent, so a trigger that was only late is harmless.
    untriggered = list(
        Run.objects.filter(
            status=Run.Status.FINISHED,
            finished_at__lt=now - dt.timedelta(seconds=redispatch_after_s),
            finished_at__gte=now - END_OF_RUN_TRIGGER_WINDOW,
            agents__on_leaderboard=True,
        )
        .exclude(backtests__source=Backtest.Source.END_OF_RUN)
        .values_list("id", flat=True)
        .distinct()[:100]
    )
    created = sum(len(backtests_for_run(run_id=run_id)) for run_id in untriggered)
    if requeued or waiting or created:
        logger.warning(
            "backtest reaper: %d stale re-queued, %d sent again, %d end-of-run backtests of %d runs created",
            requeued,
            len(waiting),
            created,
            len(untriggered),
        )
    return {"requeued": requeued, "resent": len(waiting)}


def daily_csv_name(backtest: Backtest) -> str:
    """Storage name of a backtest's daily series."""
    return f"backtests/{backtest.owner_id}/backtest-{backtest.id}-daily.csv"


def _config(backtest: Backtest, output: engine.AgentBacktest) -> dict[str, Any]:
    agent, run, task = backtest.agent, backtest.run, backtest.run.task
    env = output.env_config
    basis = output.price_basis or {}
    return {
        "agent": {
            "id": agent.id,
            "kind": agent.kind,
            "members": list(agent.members or []),
            "created_seq": agent.created_seq,
            "validation_score": agent.score,
            "sha256": agent.sha256,
            # the agent's own (a mixed run's tasks say "mixed"; an older agent has none stored)
            "algorithm": agent.algorithm or task.algorithm,
            "hyperparameters": agent.hyperparameters,
        },
        "run": {"id": run.id, "name": run.name},
        "task": {"id": task.id, "name": task.name, "splits": task.splits},
        "data": {
            "dataset": backtest.dataset.name,
            "tickers": output.tickers,
            "requested": [str(backtest.start), str(backtest.end)],
            "window": [output.start, output.end],
            "trading_days": output.num_days,
            "held_out": not backtest.allow_overlap,
        },
        "kind": task.kind,
        "costs": {
            "cost_pct": env.get("cost_pct"),
            "reward": env.get("reward"),
            "rebalance_band": env.get("rebalance_band"),
            "band_mode": env.get("band_mode"),
            "trade_rate": env.get("trade_rate"),
            "execution_lag": env.get("execution_lag"),
            "initial_cash": env.get("initial_cash"),
            "buy_cost_pct": env.get("buy_cost_pct"),
            "sell_cost_pct": env.get("sell_cost_pct"),
            "hmax": env.get("hmax"),
            "turbulence_threshold": env.get("turbulence_threshold"),
        },
        "benchmark": {
            "ticker": engine.BENCHMARK_TICKER,
            "file": (output.benchmark or {}).get("file") or Path(settings.PADDOCK_BENCHMARK_FILE).name,
            # "daily", "bars" (QQQ's intraday bars) or "session_closes" (an intraday agent
            # against daily QQQ), with the sentence saying so
            "basis": (output.benchmark or {}).get("basis", ""),
            "basis_note": (output.benchmark or {}).get("note", ""),
            # read from the file actually used, not assumed
            "price": basis.get("benchmark", "unknown"),
            "agent_price": basis.get("agent", "unknown"),
            "same_basis": basis.get("benchmark") == basis.get("agent"),
        },
        "policy": output.policy,
        "notes": output.notes,
        "metric_contract": output.metric_contract,
    }


def backtest_execute(*, backtest_id: int) -> Backtest:
    """Run a claimed backtest and store its result (status ``done``).

    Raises:
        trainer.errors.TrainerError: bad data or agent file (a permanent failure).
        AppError: the agent's checkpoint is missing from the storage.
    """
    backtest = Backtest.objects.select_related("agent", "run__task__dataset", "dataset").get(pk=backtest_id)
    agent = backtest.agent
    if not default_storage.exists(agent.checkpoint):
        raise AppError(f"the agent's checkpoint {agent.checkpoint} is missing from the storage")
    spec = task_spec(backtest.run.task)
    spec["data"]["tickers"] = list(backtest.tickers)
    with tempfile.TemporaryDirectory(prefix="paddock-backtest-") as tmp:
        local = local_copy_of_checkpoint(
            agent.checkpoint,
            Path(tmp) / ("agent" + (Path(agent.checkpoint).suffix or ".pt")),
            expected_sha256=agent.sha256 or None,
        )
        output = engine.backtest_agent(
            agent_path=str(local),
            task=spec,
            start=str(backtest.start),
            end=str(backtest.end),
            benchmark_path=str(settings.PADDOCK_BENCHMARK_FILE),
            expected_sha256=agent.sha256 or None,
            data_dir=str(settings.PADDOCK_DATA_DIR),
            cache_dir=str(settings.PADDOCK_CACHE_DIR),
            agent_name=f"agent {agent.pk}",
        )
    buf = io.StringIO()
    stamps = "%Y-%m-%d %H:%M" if is_intraday(output.daily.index) else "%Y-%m-%d"  # bars keep their time
    output.daily.to_csv(buf, index_label="date", date_format=stamps)  # full float precision
    name = default_storage.save(daily_csv_name(backtest), ContentFile(buf.getvalue().encode("utf-8")))
    updated = Backtest.objects.filter(pk=backtest.pk, status=Backtest.Status.RUNNING).update(
        status=Backtest.Status.DONE,
        metrics=output.metrics,
        config=_config(backtest, output),
        num_days=output.num_days,
        daily_csv=name,
        finished_at=timezone.now(),
    )
    if not updated:  # deleted or failed meanwhile: do not leave an orphan file
        default_storage.delete(name)
    backtest.refresh_from_db()
    return backtest


def backtest_fail(*, backtest_id: int, error: str) -> None:
    """Mark a backtest failed with a message for the user."""
    Backtest.objects.filter(pk=backtest_id).exclude(status=Backtest.Status.DONE).update(
        status=Backtest.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


@transaction.atomic
def backtest_delete(*, user, backtest: Backtest) -> None:
    """Delete one of ``user``'s backtests and its daily series file.

    Raises:
        AppError: 404 for another user's backtest.
    """
    if backtest.owner_id != user.id:
        raise AppError("backtest not found", status=404)
    name = backtest.daily_csv
    backtest.delete()
    if name:
        transaction.on_commit(lambda: default_storage.delete(name))
