"""Housekeeping sweeps (periodic, through beat): reap generations whose worker died, re-send
messages lost with the broker, give idle pods work and end runs whose budget is spent.

Lock order (see :mod:`webapp.runs.services.common`): one budget row at a time, first.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from webapp.core.workers import HEARTBEAT_TTL_S, live_worker_names
from webapp.runs import broker
from webapp.runs.models import Generation, Pod, Run
from webapp.runs.selectors.budgets import budget_running_generations, reserved_steps
from webapp.runs.services import budgets
from webapp.runs.services.budgets import budget_dispatch, budget_verdict
from webapp.runs.services.common import lock_budget, publish_pod, redispatch_after_s, stale_after_s
from webapp.runs.services.generations import generation_drop
from webapp.runs.services.lifecycle import ensure_pods, run_begin_finishing, run_maybe_finish

logger = logging.getLogger(__name__)


def generations_reap_stale(*, stale_after: float | None = None) -> list[int]:
    """Mark running generations without a heartbeat for ``stale_after`` seconds ``stale`` and
    send them again (a new attempt); generations of runs that no longer run are cancelled.
    Generations of workers known to be gone are reaped at once (:func:`generations_reap_orphaned`).

    Returns:
        Ids of the generations reaped.
    """
    stale_after = stale_after_s() if stale_after is None else stale_after
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    reaped = generations_reap_orphaned()
    candidates = Generation.objects.filter(status=Generation.Status.RUNNING, heartbeat_at__lt=cutoff)
    for gen in candidates.select_related("run", "pod"):
        if _reap(gen, cutoff, f"no heartbeat from {gen.worker} for {stale_after:g} s"):
            reaped.append(gen.pk)
    return reaped


def generations_reap_orphaned() -> list[int]:
    """Reap the running generations of workers known to be gone, without waiting for
    ``PADDOCK_STALE_AFTER_S``: the worker's heartbeat key in Redis expired (10 s after its last
    beat, ``webapp.core.workers``) AND the generation itself sent no heartbeat for as long.

    A slow generation is never reaped here: its worker is alive and keeps its key, whatever
    the generation does (loading data, a long update). Right after a Redis restart, when no
    key can be trusted yet, nothing is reaped (``live_worker_names`` answers ``None``).
    Cheap (one Redis scan, one indexed query): beat runs it every 5 s.

    Returns:
        Ids of the generations reaped; their budget shares are free for the next generation.
    """
    from webapp.config.celery import app  # the broker this process sends to (as /healthz reads)

    live = live_worker_names(app.conf.broker_url)
    if live is None:
        return []
    cutoff = timezone.now() - timedelta(seconds=HEARTBEAT_TTL_S)
    candidates = (
        Generation.objects.filter(status=Generation.Status.RUNNING, heartbeat_at__lt=cutoff)
        .exclude(worker="")
        .exclude(worker__in=live)
    )
    reaped = []
    for gen in candidates.select_related("run", "pod"):
        if _reap(gen, cutoff, f"worker {gen.worker} is gone (its heartbeat expired)"):
            reaped.append(gen.pk)
    return reaped


def _reap(gen: Generation, cutoff, error: str) -> bool:
    """Mark ``gen`` stale if it is still the same running attempt with no heartbeat since
    ``cutoff`` (a conditional update: 0 rows means it beat meanwhile or was reaped), then send
    it again or drop it with its run. Returns whether this call reaped it."""
    with transaction.atomic():
        budget = lock_budget(gen.run.budget_id)  # lock order: budget row first
        run = Run.objects.get(pk=gen.run_id)
        n = Generation.objects.filter(
            pk=gen.pk, status=Generation.Status.RUNNING, attempt=gen.attempt, heartbeat_at__lt=cutoff
        ).update(status=Generation.Status.STALE, error=error)
        if not n:
            return False
        logger.warning("generation %s of worker %s is stale: %s", gen.pk, gen.worker, error, extra={"run": run.pk})
        if run.status == Run.Status.RUNNING and gen.pod.index < run.num_pods:
            Generation.objects.filter(pk=gen.pk).update(dispatched_at=timezone.now())
            Pod.objects.filter(pk=gen.pod_id).update(state=Pod.State.QUEUED)
            gen_id = gen.pk
            transaction.on_commit(lambda gen_id=gen_id: budgets.send_generation_tasks([gen_id]))
        else:
            generation_drop(gen, run, "worker lost while the run was not running")
        gen.refresh_from_db()
        pod = Pod.objects.get(pk=gen.pod_id)
        publish_pod(pod, gen)
        budget_dispatch(budget)
    return True


def runs_ensure_work(*, redispatch_after: float | None = None) -> int:
    """Sweep of active runs: re-send generations whose message was lost (Redis restart),
    give idle pods a generation, end runs whose budget ran out of time, finish finishing runs
    with nothing left running.

    Returns:
        The number of generation messages sent.
    """
    redispatch_after = redispatch_after_s() if redispatch_after is None else redispatch_after
    # Read the broker before the database: a generation dispatched before ``cutoff`` and still
    # claimable now had its message in the broker when it was read, unless it was lost.
    in_broker = broker.generations_in_broker(delivered_within_s=stale_after_s())
    cutoff = timezone.now() - timedelta(seconds=redispatch_after)
    sent = 0
    budget_ids = set(Run.objects.filter(status__in=Run.ACTIVE).values_list("budget_id", flat=True))
    for budget_id in budget_ids:
        with transaction.atomic():
            budget = lock_budget(budget_id)  # lock order: budget row first, then its runs' rows
            for run in Run.objects.filter(budget=budget, status__in=Run.ACTIVE):
                if run.status == Run.Status.RUNNING:
                    running = budget_running_generations(budget.id)
                    verdict = budget_verdict(budget, run, reserved_steps=reserved_steps(running))
                    if verdict.state == verdict.SPENT:
                        run_begin_finishing(run, verdict.reason)  # running generations still complete
                        continue
                    ensure_pods(run)  # ok, or held: new generations wait for a slot
                elif run.status == Run.Status.FINISHING:
                    run_maybe_finish(run)
            dispatched = Generation.objects.filter(
                run__budget=budget,
                run__status=Run.Status.RUNNING,
                status__in=Generation.CLAIMABLE,
                dispatched_at__lt=cutoff,
            ).values_list("id", flat=True)
            lost = [] if in_broker is None else [gen_id for gen_id in dispatched if gen_id not in in_broker]
            if lost:
                logger.warning("generations %s lost their task message; sending them again", lost)
                Generation.objects.filter(id__in=lost).update(dispatched_at=timezone.now())
                transaction.on_commit(lambda ids=lost: budgets.send_generation_tasks(ids))
                sent += len(lost)
            lost_stale = list(
                Generation.objects.filter(
                    run__budget=budget,
                    run__status=Run.Status.RUNNING,
                    status=Generation.Status.STALE,
                    dispatched_at__isnull=True,
                ).values_list("id", flat=True)
            )
            if lost_stale:
                Generation.objects.filter(id__in=lost_stale).update(dispatched_at=timezone.now())
                transaction.on_commit(lambda ids=lost_stale: budgets.send_generation_tasks(ids))
                sent += len(lost_stale)
            sent += budget_dispatch(budget)
    return sent
