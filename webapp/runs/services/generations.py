"""The generation protocol, worker side: claim a generation, heartbeats and the ``should_stop``
signal, progress events. What a finished attempt leaves behind is :mod:`.results`; the steps
are described in :mod:`webapp.runs.services`.

Lock order (see :mod:`webapp.runs.services.common`): the budget row first; run, generation
and pod rows change by conditional updates after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from webapp import engine
from webapp.core.formatting import finite_or_none
from webapp.runs import algorithms, events
from webapp.runs.models import Agent, Generation, Pod, Run
from webapp.runs.selectors.budgets import budget_running_generations, reserved_steps
from webapp.runs.selectors.runs import task_spec
from webapp.runs.services.budgets import budget_dispatch, budget_verdict
from webapp.runs.services.common import (
    MAX_ATTEMPTS,
    lock_budget,
    publish_budget_usage,
    publish_pod,
    trained_env_steps,
)
from webapp.runs.services.lifecycle import generation_fail_locked, run_begin_finishing, run_maybe_finish

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """What a worker needs to train a claimed generation (plain data, no model instances).

    ``parent_checkpoint`` is a name in the default storage (``None`` for a fresh agent) and
    ``parent_sha256`` its recorded digest, checked when the worker copies it.
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
    parent_sha256: str | None = None


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
        # The parent and hyperparameters first (reads only): the env steps the generation will
        # train, whole rollouts of its num_envs x rollout_steps, are what the env-step cap checks.
        rng = np.random.default_rng([run.seed, gen.pod.index, gen.number])
        pod = Pod.objects.select_related("current_agent").get(pk=gen.pod_id)
        board = list(
            Agent.objects.filter(run=run, on_leaderboard=True).values_list(
                "id", "score", "created_seq", "score_se", "metrics__sub_windows"
            )
        )
        own = pod.current_agent
        current = None if own is None else (own.id, own.score, own.score_se, (own.metrics or {}).get("sub_windows"))
        decision = engine.choose_parent(board, current=current, fresh_probability=run.fresh_probability, rng=rng)
        parent = None if decision.agent_id is None else Agent.objects.get(pk=decision.agent_id)
        mutations: dict[str, list[Any]] = {}
        if parent is None:
            algorithm = algorithms.fresh_algorithm(run.task, pod.index)
            hyperparameters = algorithms.algorithm_hyperparameters(run.task, algorithm)
        elif decision.action == "parent":
            algorithm = parent.algorithm or run.task.algorithm
            hyperparameters, mutations = engine.mutate_hyperparameters(
                parent.hyperparameters, mutation=algorithms.mutation_for(run.mutation, parent.hyperparameters), rng=rng
            )
        else:
            algorithm = parent.algorithm or run.task.algorithm
            hyperparameters = dict(parent.hyperparameters)
        others = budget_running_generations(budget.id).exclude(pk=gen.pk)
        # whole rollouts; the trainer applies these values to the parent's (a full dict) or the task's
        full = {**algorithms.algorithm_hyperparameters(run.task, algorithm), **hyperparameters}
        needed = trained_env_steps(algorithm, full, run.generation_steps)
        verdict = budget_verdict(budget, run, reserved_steps=reserved_steps(others), needed=needed)
        if verdict.state == verdict.SPENT:
            generation_drop(gen, run, verdict.reason)
            run_begin_finishing(run, verdict.reason)
            return None
        if verdict.state == verdict.HELD or others.count() >= budget.max_concurrent_pods:
            # No slot (or the env steps left are held by running generations): wait to be
            # dispatched again when a running generation of this budget ends.
            Generation.objects.filter(pk=gen.pk).update(dispatched_at=None)
            return None

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
            algorithm=algorithm,
            env_steps=needed,
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
            task=task_spec(run.task, algorithm),
            env_steps=gen.env_steps,
            parent_id=None if parent is None else parent.pk,
            parent_checkpoint=None if parent is None else parent.checkpoint,
            hyperparameters=hyperparameters,
            seed=_generation_seed(run, pod.index, gen.number),
            device=run.device,
            parent_sha256=None if parent is None else (parent.sha256 or None),
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
