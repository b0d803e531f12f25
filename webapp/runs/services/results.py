"""What a finished generation attempt leaves behind: the agent, the leaderboard, the budget's
usage and the pod's next generation (:func:`generation_complete`), a diverged generation
(:func:`generation_diverged`) or a failed attempt (:func:`generation_fail`); the runs that
stop or pause themselves because of their generations' outcomes.

Lock order (see :mod:`webapp.runs.services.common`): the budget row first; run, generation
and pod rows change by conditional updates after it.
"""

from __future__ import annotations

import logging

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from webapp import engine
from webapp.runs import events
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run
from webapp.runs.selectors.budgets import budget_running_generations, reserved_steps
from webapp.runs.selectors.payloads import leaderboard_with_verdict
from webapp.runs.services import telemetry
from webapp.runs.services.budgets import budget_dispatch, budget_verdict
from webapp.runs.services.common import (
    MAX_ATTEMPTS,
    PAUSE_AFTER_FAILURES,
    lock_budget,
    publish_budget_usage,
    publish_pod,
    publish_run,
    setting,
)
from webapp.runs.services.generations import Claim, checkpoint_name
from webapp.runs.services.lifecycle import (
    cancel_waiting,
    generation_fail_locked,
    new_generation,
    run_begin_finishing,
    run_maybe_finish,
    run_set_paused,
)
from webapp.runs.services.trials import trial_record

logger = logging.getLogger(__name__)


def generation_complete(
    *, claim: Claim, result: engine.TrainedGeneration, local_checkpoint: str | None
) -> Agent | None:
    """Store a generation's result: its agent, the leaderboard, usage, the pod's next one.

    The checkpoint is copied to the default storage first; then one transaction stores the
    agent (unless the generation was cancelled), prunes the leaderboard to K, adds the real
    duration to the budget's GPU-seconds and the trained env steps to its env-step count,
    queues the pod's next generation when run and budget allow, and dispatches waiting
    generations into the freed slot. A late copy (the row was reaped and claimed again) is
    discarded.

    Args:
        claim: the claim this worker holds.
        result: ``engine.train_generation``'s output.
        local_checkpoint: the file the trainer wrote (``None`` if cancelled before writing).

    Returns:
        The new agent, or ``None`` (cancelled or late copy).
    """
    stored = None
    if not result.cancelled and local_checkpoint:
        with open(local_checkpoint, "rb") as fh:
            stored = default_storage.save(checkpoint_name(claim), File(fh))
    try:
        with transaction.atomic():
            agent = _generation_complete_locked(claim, result, stored)
    except IntegrityError:
        # Agent.generation is unique: another attempt already stored this generation's agent.
        agent = None
    if agent is None and stored:
        default_storage.delete(stored)
    return agent


def _generation_complete_locked(claim: Claim, result: engine.TrainedGeneration, stored: str | None) -> Agent | None:
    run = Run.objects.select_related("budget").get(pk=claim.run_id)
    budget = lock_budget(run.budget_id)  # lock order: budget row first, then conditional updates
    gen = Generation.objects.select_related("pod").get(pk=claim.generation_id)
    if gen.status != Generation.Status.RUNNING or gen.attempt != claim.attempt:
        logger.info("late result of generation %s attempt %s discarded", gen.pk, claim.attempt, extra={"run": run.pk})
        return None
    run.refresh_from_db()
    now = timezone.now()
    duration = max(0.0, (now - gen.started_at).total_seconds())
    trained = int(result.env_steps)
    ClusterBudget.objects.filter(pk=budget.pk).update(
        gpu_seconds_used=F("gpu_seconds_used") + duration, env_steps_used=F("env_steps_used") + trained
    )
    budget.refresh_from_db()
    # A generation of a run stopped by its user (or failed) while it trained is cancelled,
    # even when its training ended before it saw the signal: it does not enter the leaderboard.
    cancelled = result.cancelled or stored is None or run.stop_requested
    Generation.objects.filter(pk=gen.pk).update(
        status=Generation.Status.CANCELLED if cancelled else Generation.Status.DONE,
        env_steps=trained,
        finished_at=now,
        heartbeat_at=now,
        hyperparameters=result.hyperparameters or gen.hyperparameters,
        error="cancelled" if cancelled else "",
    )
    telemetry.points_store(run_id=run.pk, generation_id=gen.pk, attempt=claim.attempt, points=result.telemetry or [])
    gen.refresh_from_db()
    pod = gen.pod
    agent = None
    if not cancelled:
        seq = (Agent.objects.filter(run=run).aggregate(m=Max("created_seq"))["m"] or 0) + 1
        parent = gen.parent
        agent = Agent.objects.create(
            run=run,
            generation=gen,
            pod=pod,
            parent_id=gen.parent_id,
            score=result.score,
            score_se=(result.metrics or {}).get("score_se"),
            metrics=result.metrics or {},
            provenance=dict(result.provenance or {}),
            hyperparameters=gen.hyperparameters,
            checkpoint=stored,
            sha256=result.sha256,
            created_seq=seq,
            tickers=list(result.tickers or []),
            algorithm=gen.algorithm or run.task.algorithm,
            # the lineage as the database knows it (the trainer's checkpoint counts the same)
            depth=parent.depth + 1 if parent is not None else 1,
            total_env_steps=(parent.total_env_steps if parent is not None else 0) + trained,
            lineage_id=(parent.lineage_id or parent.pk) if parent is not None else None,
        )
        if parent is None:
            Agent.objects.filter(pk=agent.pk).update(lineage=agent)
            agent.lineage_id = agent.pk
        trial_record(agent=agent)
        _leaderboard_submit(run, agent)
        Pod.objects.filter(pk=pod.pk).update(current_agent=agent, generations_done=F("generations_done") + 1)
        _run_stop_if_all_zero(run)
    pod.refresh_from_db()
    _pod_continue(run, budget, pod, gen)
    run_maybe_finish(run)
    budget_dispatch(budget)
    publish_budget_usage(budget.id, run)
    return agent


def _pod_continue(run: Run, budget: ClusterBudget, pod: Pod, gen: Generation) -> None:
    """Queue the pod's next generation after ``gen`` ended, if run, pod count and budget allow;
    else idle, retire or stop the pod (the run begins to finish when the budget is spent)."""
    next_gen = None
    if run.status == Run.Status.RUNNING and pod.index < run.num_pods:
        running = budget_running_generations(budget.id)
        verdict = budget_verdict(budget, run, reserved_steps=reserved_steps(running))
        if verdict.state == verdict.SPENT:
            run_begin_finishing(run, verdict.reason)
        else:  # ok, or held: the new generation waits for the steps running ones hold
            next_gen = new_generation(run, pod)
    if next_gen is None:
        state = Pod.State.RETIRED if pod.index >= run.num_pods else Pod.State.IDLE
        if run.status in (Run.Status.FINISHING, *Run.TERMINAL):
            state = Pod.State.STOPPED
        Pod.objects.filter(pk=pod.pk).update(state=state)
        pod.state = state
        publish_pod(pod, gen)


def _run_stop_if_all_zero(run: Run) -> None:
    """Fail ``run`` when its last ``PADDOCK_ZERO_SCORE_GENERATIONS`` agents all scored exactly
    0: such agents never trade (or their score is undefined), and a run that only makes them
    would spend its whole budget on them (e.g. an initial cash so large that no trade of hmax
    shares moves the value). Running generations are cancelled; the reason says what to check."""
    n = int(setting("PADDOCK_ZERO_SCORE_GENERATIONS", 8))
    last = list(
        Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED)
        .order_by("-created_seq")
        .values_list("score", flat=True)[:n]
    )
    if len(last) < n or any(score != 0.0 for score in last):
        return
    reason = (
        f"stopped: the last {n} agents all scored exactly 0 (they never traded, or their score was undefined); "
        "check initial cash, max shares per trade, costs and the reward scaling"
    )
    stopped = (
        Run.objects.filter(pk=run.pk)
        .exclude(status__in=Run.TERMINAL)
        .update(status=Run.Status.FAILED, status_reason=reason, finished_at=timezone.now(), stop_requested=True)
    )
    if stopped:
        logger.warning("run stopped: %d zero-score agents in a row", n, extra={"run": run.pk})
        run.refresh_from_db()
        cancel_waiting(run)
        Pod.objects.filter(run=run).exclude(state=Pod.State.RETIRED).update(state=Pod.State.STOPPED)
        publish_run(run)


def _leaderboard_submit(run: Run, agent: Agent) -> None:
    """Add ``agent`` to the run's leaderboard and prune it to K (sends ``leaderboard.update``
    when the board changed)."""
    board = list(Agent.objects.filter(Q(run=run, on_leaderboard=True) | Q(pk=agent.pk)))
    entries = [(a.id, a.score, a.created_seq) for a in board]
    keep, drop = engine.prune_leaderboard(entries, run.leaderboard_size)
    Agent.objects.filter(pk__in=keep).update(on_leaderboard=True)
    Agent.objects.filter(pk__in=drop).update(on_leaderboard=False)
    agent.on_leaderboard = agent.id in keep
    scores = [a.score for a in board if a.id in keep and a.score is not None]
    best = max(scores) if scores else None
    Run.objects.filter(pk=run.pk).update(best_score=best)
    if agent.id in keep:
        added, dropped = [agent.id], [a for a in drop if a != agent.id]
        # the board's payload reads every leaderboard agent: built after commit, not under the locks
        events.publish(
            run.id,
            events.LEADERBOARD_UPDATE,
            lambda: {**leaderboard_with_verdict(run), "added": added, "dropped": dropped},
        )


def generation_diverged(*, claim: Claim, error: str, env_steps: int) -> None:
    """Record a generation whose training diverged (``engine.Diverged``: a NaN or infinite
    loss, gradient norm, parameter or action).

    A permanent failure of this generation alone (the same hyperparameters would diverge
    again): it is not retried and leaves no agent, checkpoint or leaderboard entry; its time
    and ``env_steps`` count against the budget. The run goes on: the pod gets its next
    generation (a child of a healthy leaderboard agent, with mutated hyperparameters, may try
    again), unless the last :data:`PAUSE_AFTER_FAILURES` finished generations of every pod
    failed so, which pauses the run with the reason (:func:`_run_pause_if_failing`).

    Args:
        claim: the claim this worker holds (a late attempt's report is ignored).
        error: the trainer's one line, e.g. "PPO diverged at update 37: policy loss is NaN;
            learning_rate=1000".
        env_steps: env steps trained before the divergence.
    """
    with transaction.atomic():
        run = Run.objects.get(pk=claim.run_id)
        budget = lock_budget(run.budget_id)  # lock order: budget row first, then conditional updates
        gen = Generation.objects.select_related("pod").get(pk=claim.generation_id)
        if gen.status != Generation.Status.RUNNING or gen.attempt != claim.attempt:
            return
        run.refresh_from_db()
        now = timezone.now()
        duration = max(0.0, (now - gen.started_at).total_seconds())
        ClusterBudget.objects.filter(pk=budget.pk).update(
            gpu_seconds_used=F("gpu_seconds_used") + duration, env_steps_used=F("env_steps_used") + int(env_steps)
        )
        budget.refresh_from_db()
        Generation.objects.filter(pk=gen.pk).update(
            status=Generation.Status.FAILED,
            failure=Generation.Failure.DIVERGED,
            env_steps=int(env_steps),
            finished_at=now,
            heartbeat_at=now,
            error=error[:2000],
        )
        gen.refresh_from_db()
        _pod_continue(run, budget, gen.pod, gen)
        _run_pause_if_failing(run, gen)
        run_maybe_finish(run)
        budget_dispatch(budget)
        publish_budget_usage(budget.id, run)


def _run_pause_if_failing(run: Run, gen: Generation) -> None:
    """Pause a running run when the last :data:`PAUSE_AFTER_FAILURES` finished (done or
    failed) generations of every one of its pods failed with ``gen``'s ``failure``; the
    reason, with ``gen``'s error, goes to ``status_reason`` (run page and API)."""
    if run.status != Run.Status.RUNNING or not gen.failure:
        return
    for index in range(run.num_pods):
        last = list(
            Generation.objects.filter(
                run_id=run.pk, pod__index=index, status__in=(Generation.Status.DONE, Generation.Status.FAILED)
            )
            .order_by("-number")
            .values_list("status", "failure")[:PAUSE_AFTER_FAILURES]
        )
        if len(last) < PAUSE_AFTER_FAILURES or any(row != (Generation.Status.FAILED, gen.failure) for row in last):
            return
    reason = (
        f"paused: the last {PAUSE_AFTER_FAILURES} generations of every pod {gen.get_failure_display()} "
        f"(latest: {gen.error.strip().splitlines()[-1] if gen.error.strip() else 'no reason given'})"
    )
    if run_set_paused(run, reason=reason):
        logger.warning("run paused itself: %s", reason, extra={"run": run.pk})


def generation_fail(*, claim: Claim, error: str, retry: bool, count_attempt: bool = True) -> None:
    """Record a failed attempt. A transient failure (``retry``) queues the generation again
    while attempts remain; a permanent one (bad data or config) fails the generation and the
    run, whose other generations would fail the same way. With ``count_attempt=False`` (the
    worker lost its database connection: nothing is wrong with the generation) the attempt is
    given back, so the next claim has the same number and the generation keeps all its tries."""
    with transaction.atomic():
        run = Run.objects.get(pk=claim.run_id)
        budget = lock_budget(run.budget_id)  # lock order: budget row first, then conditional updates
        gen = Generation.objects.get(pk=claim.generation_id)
        if gen.status != Generation.Status.RUNNING or gen.attempt != claim.attempt:
            return
        now = timezone.now()
        duration = max(0.0, (now - gen.started_at).total_seconds())
        ClusterBudget.objects.filter(pk=budget.pk).update(gpu_seconds_used=F("gpu_seconds_used") + duration)
        if retry and (gen.attempt < MAX_ATTEMPTS or not count_attempt):
            Generation.objects.filter(pk=gen.pk).update(
                status=Generation.Status.QUEUED,
                dispatched_at=None,
                error=error[:2000],
                attempt=F("attempt") - (0 if count_attempt else 1),
            )
            budget_dispatch(budget)
            publish_budget_usage(budget.id, run)
            return
        generation_fail_locked(gen, run, budget, error)
