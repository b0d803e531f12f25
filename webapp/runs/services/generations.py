"""The generation protocol: claim a generation, heartbeats and the ``should_stop`` signal,
progress events, storing the result (agent, leaderboard, usage, the pod's next generation)
and failures. The steps are described in :mod:`webapp.runs.services`.

Lock order (see :mod:`webapp.runs.services.common`): the budget row first; run, generation
and pod rows change by conditional updates after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from webapp import engine
from webapp.core.formatting import finite_or_none
from webapp.runs import events, selectors, telemetry
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run
from webapp.runs.services.budgets import budget_dispatch, budget_verdict
from webapp.runs.services.common import MAX_ATTEMPTS, lock_budget, publish_budget_usage, publish_pod
from webapp.runs.services.lifecycle import cancel_waiting, new_generation, run_begin_finishing, run_maybe_finish

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """What a worker needs to train a claimed generation (plain data, no model instances).

    ``parent_checkpoint`` is a name in the default storage (``None`` for a fresh agent).
    """

    generation_id: int
    attempt: int
    run_id: int
    pod_index: int
    number: int
    task: dict[str, Any]
    env_steps: int
    parent_id: int | None
    parent_checkpoint: str | None
    hyperparameters: dict[str, Any]
    seed: int
    device: str


def _generation_seed(run: Run, pod_index: int, number: int) -> int:
    return (run.seed * 1_000_003 + pod_index * 10_007 + number) % (2**31 - 1)


def generation_claim(*, generation_id: int, worker: str = "", device: str = "") -> Claim | None:
    """Claim a queued (or reaped, ``stale``) generation for this worker.

    Returns ``None``, changing nothing the caller must undo, when: another delivery already
    has it; its run is paused (it waits for resume) or ended (it is cancelled); the budget has
    no free slot (it waits to be dispatched again when one frees) or is spent (the run begins
    to finish).
    """
    with transaction.atomic():
        gen = Generation.objects.filter(pk=generation_id).select_related("run", "pod").first()
        if gen is None or gen.status not in Generation.CLAIMABLE:
            return None
        budget = lock_budget(gen.run.budget_id)  # lock order: budget row first
        run = Run.objects.get(pk=gen.run_id)
        gen.refresh_from_db()
        if gen.status not in Generation.CLAIMABLE:
            return None
        if run.status == Run.Status.PAUSED:
            Generation.objects.filter(pk=gen.pk).update(dispatched_at=None)
            return None
        if run.status != Run.Status.RUNNING or gen.pod.index >= run.num_pods:
            generation_drop(gen, run, "run is not running" if run.status != Run.Status.RUNNING else "pod scaled away")
            budget_dispatch(budget)
            return None
        if gen.attempt >= MAX_ATTEMPTS:
            last = f" (last: {gen.error})" if gen.error else ""
            generation_fail_locked(gen, run, budget, f"gave up after {gen.attempt} attempts{last}")
            return None
        others = selectors.budget_running_generations(budget.id).exclude(pk=gen.pk)
        verdict = budget_verdict(budget, run, reserved_steps=selectors.reserved_steps(others))
        if verdict.state == verdict.SPENT:
            generation_drop(gen, run, verdict.reason)
            run_begin_finishing(run, verdict.reason)
            return None
        if verdict.state == verdict.HELD or others.count() >= budget.max_concurrent_pods:
            # No slot (or the env steps left are held by running generations): wait to be
            # dispatched again when a running generation of this budget ends.
            Generation.objects.filter(pk=gen.pk).update(dispatched_at=None)
            return None

        rng = np.random.default_rng([run.seed, gen.pod.index, gen.number])
        pod = Pod.objects.select_related("current_agent").get(pk=gen.pod_id)
        board = list(Agent.objects.filter(run=run, on_leaderboard=True).values_list("id", "score", "created_seq"))
        current = None if pod.current_agent is None else (pod.current_agent.id, pod.current_agent.score)
        decision = engine.choose_parent(board, current=current, fresh_probability=run.fresh_probability, rng=rng)
        parent = None if decision.agent_id is None else Agent.objects.get(pk=decision.agent_id)
        mutations: dict[str, list[Any]] = {}
        if parent is None:
            hyperparameters = dict(run.task.hyperparameters)
        elif decision.action == "parent":
            hyperparameters, mutations = engine.mutate_hyperparameters(
                parent.hyperparameters, mutation=run.mutation, rng=rng
            )
        else:
            hyperparameters = dict(parent.hyperparameters)
        now = timezone.now()
        n = Generation.objects.filter(pk=gen.pk, status__in=Generation.CLAIMABLE).update(
            status=Generation.Status.RUNNING,
            attempt=F("attempt") + 1,
            worker=worker[:200],
            device=device[:40],
            parent=parent,
            hyperparameters=hyperparameters,
            mutations=mutations,
            started_at=now,
            heartbeat_at=now,
            finished_at=None,
            error="",
        )
        if not n:
            return None
        gen.refresh_from_db()
        Pod.objects.filter(pk=pod.pk).update(state=Pod.State.TRAINING, env_steps=0, steps_per_s=0.0)
        pod.state, pod.env_steps, pod.steps_per_s = Pod.State.TRAINING, 0, 0.0
        publish_pod(pod, gen)
        publish_budget_usage(budget.id, run)  # one more pod running on the budget
        return Claim(
            generation_id=gen.pk,
            attempt=gen.attempt,
            run_id=run.pk,
            pod_index=pod.index,
            number=gen.number,
            task=selectors.task_spec(run.task),
            env_steps=gen.env_steps,
            parent_id=None if parent is None else parent.pk,
            parent_checkpoint=None if parent is None else parent.checkpoint,
            hyperparameters=hyperparameters,
            seed=_generation_seed(run, pod.index, gen.number),
            device=run.device,
        )


def generation_drop(gen: Generation, run: Run, reason: str) -> None:
    n = Generation.objects.filter(pk=gen.pk, status__in=Generation.CLAIMABLE).update(
        status=Generation.Status.CANCELLED, finished_at=timezone.now(), error=reason
    )
    if n:
        pod = Pod.objects.get(pk=gen.pod_id)
        state = Pod.State.RETIRED if pod.index >= run.num_pods else Pod.State.STOPPED
        if run.status == Run.Status.PAUSED:
            state = Pod.State.IDLE
        Pod.objects.filter(pk=pod.pk).update(state=state)
        pod.state = state
        gen.status = Generation.Status.CANCELLED
        publish_pod(pod, gen)
    run_maybe_finish(run)


def generation_still_mine(*, generation_id: int, attempt: int) -> bool:
    """Whether this attempt still holds the generation and its run wants it to go on (the
    ``should_stop`` signal is the negation)."""
    row = (
        Generation.objects.filter(pk=generation_id)
        .values_list("status", "attempt", "run__status", "run__stop_requested")
        .first()
    )
    if row is None:
        return False
    status, current_attempt, run_status, stop_requested = row
    if status != Generation.Status.RUNNING or current_attempt != attempt:
        return False
    return not stop_requested and run_status not in (Run.Status.CANCELLED, Run.Status.FAILED)


def generation_superseded(*, generation_id: int, attempt: int) -> bool:
    """Whether ``attempt`` lost the generation: reaped for a missing heartbeat (``stale``) or
    claimed again by a later attempt. A result of such an attempt is discarded."""
    row = Generation.objects.filter(pk=generation_id).values_list("status", "attempt").first()
    return row is None or row[1] != attempt or row[0] == Generation.Status.STALE


def generation_heartbeat(
    *,
    generation_id: int,
    attempt: int,
    env_steps: int | None = None,
    steps_per_s: float | None = None,
    device: str | None = None,
) -> bool:
    """Record that the attempt is alive (and the pod's progress, or the device it trains on).
    Returns ``False`` when the attempt no longer holds the generation."""
    now = timezone.now()
    changes: dict[str, Any] = {"heartbeat_at": now}
    if device is not None:
        changes["device"] = device[:40]
    n = Generation.objects.filter(pk=generation_id, attempt=attempt, status=Generation.Status.RUNNING).update(**changes)
    if n and env_steps is not None:
        Pod.objects.filter(generations__pk=generation_id).update(
            env_steps=int(env_steps), steps_per_s=float(steps_per_s or 0.0)
        )
    return bool(n)


def generation_progress_event(*, claim: Claim, info: dict[str, Any]) -> None:
    """Publish one ``progress`` event of a running generation."""
    events.publish(
        claim.run_id,
        events.PROGRESS,
        {
            "pod": claim.pod_index,
            "generation": claim.number,
            "env_steps": int(info.get("env_steps", 0)),
            "env_steps_total": claim.env_steps,
            "steps_per_s": float(info.get("steps_per_s", 0.0) or 0.0),
            "episode_return_mean": finite_or_none(info.get("episode_return_mean")),
        },
    )


def checkpoint_name(claim: Claim) -> str:
    """Storage name of a generation attempt's checkpoint."""
    return f"runs/{claim.run_id}/pod{claim.pod_index}/gen{claim.number}-a{claim.attempt}-{claim.generation_id}.pt"


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
    cancelled = result.cancelled or stored is None
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
            metrics=result.metrics or {},
            hyperparameters=gen.hyperparameters,
            checkpoint=stored,
            sha256=result.sha256,
            created_seq=seq,
            # the lineage as the database knows it (the trainer's checkpoint counts the same)
            depth=parent.depth + 1 if parent is not None else 1,
            total_env_steps=(parent.total_env_steps if parent is not None else 0) + trained,
            lineage_id=(parent.lineage_id or parent.pk) if parent is not None else None,
        )
        if parent is None:
            Agent.objects.filter(pk=agent.pk).update(lineage=agent)
            agent.lineage_id = agent.pk
        _leaderboard_submit(run, agent)
        Pod.objects.filter(pk=pod.pk).update(current_agent=agent, generations_done=F("generations_done") + 1)
    pod.refresh_from_db()

    # The pod's next generation, if run, pod count and budget allow.
    next_gen = None
    if run.status == Run.Status.RUNNING and pod.index < run.num_pods:
        running = selectors.budget_running_generations(budget.id)
        verdict = budget_verdict(budget, run, reserved_steps=selectors.reserved_steps(running))
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
    run_maybe_finish(run)
    budget_dispatch(budget)
    publish_budget_usage(budget.id, run)
    return agent


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
        events.publish(
            run.id,
            events.LEADERBOARD_UPDATE,
            {
                "leaderboard": selectors.leaderboard_payload(run),
                "added": [agent.id],
                "dropped": [a for a in drop if a != agent.id],
            },
        )


def generation_fail(*, claim: Claim, error: str, retry: bool) -> None:
    """Record a failed attempt. A transient failure (``retry``) queues the generation again
    while attempts remain; a permanent one (bad data or config) fails the generation and the
    run, whose other generations would fail the same way."""
    with transaction.atomic():
        run = Run.objects.get(pk=claim.run_id)
        budget = lock_budget(run.budget_id)  # lock order: budget row first, then conditional updates
        gen = Generation.objects.get(pk=claim.generation_id)
        if gen.status != Generation.Status.RUNNING or gen.attempt != claim.attempt:
            return
        now = timezone.now()
        duration = max(0.0, (now - gen.started_at).total_seconds())
        ClusterBudget.objects.filter(pk=budget.pk).update(gpu_seconds_used=F("gpu_seconds_used") + duration)
        if retry and gen.attempt < MAX_ATTEMPTS:
            Generation.objects.filter(pk=gen.pk).update(
                status=Generation.Status.QUEUED, dispatched_at=None, error=error[:2000]
            )
            budget_dispatch(budget)
            publish_budget_usage(budget.id, run)
            return
        generation_fail_locked(gen, run, budget, error)


def generation_fail_locked(gen: Generation, run: Run, budget: ClusterBudget, error: str) -> None:
    now = timezone.now()
    Generation.objects.filter(pk=gen.pk).update(status=Generation.Status.FAILED, finished_at=now, error=error[:2000])
    # ``error`` is one line for users (tasks.failure_reason); keep the last line of anything longer.
    lines = [line for line in (error or "").splitlines() if line.strip()]
    reason = f"generation {gen.number} of pod {gen.pod.index} failed: {lines[-1].strip()[:300] if lines else 'no reason given'}"
    n = (
        Run.objects.filter(pk=run.pk)
        .exclude(status__in=Run.TERMINAL)
        .update(status=Run.Status.FAILED, status_reason=reason, finished_at=now, stop_requested=True)
    )
    if n:
        run.refresh_from_db()
        cancel_waiting(run)
        Pod.objects.filter(run=run).update(state=Pod.State.STOPPED)
    budget_dispatch(budget)
    publish_budget_usage(budget.id, run if n else None)
