"""The run lifecycle: create, start, pause, resume, stop and scale a run; the pods and open
generations a running run has; finishing or failing a run.

Lock order (see :mod:`webapp.runs.services.common`): the budget row, then the run row.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.runs import algorithms, bounds, signals
from webapp.runs.models import ClusterBudget, Generation, Pod, Run, Task
from webapp.runs.selectors.runs import task_spec
from webapp.runs.services.budgets import budget_dispatch, budget_refusal, budget_verdict
from webapp.runs.services.common import (
    default_generation_steps,
    fewest_trained_steps,
    lock_budget,
    lock_budget_and_run,
    publish_budget_usage,
    publish_pod,
    publish_run,
)

logger = logging.getLogger(__name__)


@transaction.atomic
def run_create(
    *,
    owner,
    task: Task,
    budget: ClusterBudget,
    name: str = "",
    num_pods: int = 2,
    generation_steps: int | None = None,
    leaderboard_size: int = 5,
    fresh_probability: float = 0.1,
    mutation: dict[str, Any] | None = None,
    score_metric: str = "sharpe",
    seed: int = 0,
    device: str = "auto",
) -> Run:
    """Create a run (status ``queued``; :func:`run_start` starts it).

    Args:
        num_pods: size of the training pool (generations wanted at once).
        generation_steps: env steps each generation trains, at least one PPO rollout
            (``num_envs x rollout_steps``) or one SAC vector step (``num_envs``); ``None``: the
            default of the task's algorithm (:func:`default_generation_steps`: 16,384, or 2M
            in whole gradient steps for ``direct``).
        leaderboard_size: K, the agents kept on the leaderboard.
        fresh_probability: chance in [0, 1] a generation starts from a new random agent.
        mutation: ``{"bounds": {hyperparameter: [low, high]}, "factors": [0.8, 1.25],
            "probability": 1.0}``; the hyperparameters named in ``bounds`` are perturbed when
            an agent is copied from the leaderboard.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``; the worker that trains a generation picks
            the GPU (``cuda:1`` is refused).

    Raises:
        AppError: a bad setting (400 naming it), a task/budget the user may not use (404), or a
            budget that is spent (:func:`budget_verdict`): 409 as :func:`run_start` answers it,
            naming the limit and what to do (under ``budget`` with the others in a 400 when
            settings are wrong too).
    """
    if task.owner_id != owner.id:
        raise AppError("task not found", fields={"task": "not found"}, status=404)
    if budget.owner_id != owner.id and not owner.is_staff:
        raise AppError("budget not found", fields={"budget": "not found"}, status=404)
    mutation = dict(mutation or {})
    if generation_steps is None:
        generation_steps = default_generation_steps(task.algorithm, task.hyperparameters)
    fields = run_settings_errors(
        num_pods=num_pods,
        generation_steps=generation_steps,
        leaderboard_size=leaderboard_size,
        fresh_probability=fresh_probability,
        score_metric=score_metric,
        seed=seed,
        device=device,
    )
    every = {a: algorithms.algorithm_hyperparameters(task, a) for a in algorithms.task_algorithms(task)}
    for algorithm, hyperparameters in every.items():
        if "generation_steps" not in fields:
            bounds.collect(fields, engine.check_generation_steps, algorithm, hyperparameters, generation_steps)
    if "generation_steps" not in fields and budget.env_step_cap is not None:
        fewest = fewest_trained_steps(task, generation_steps)
        if fewest > budget.env_step_cap:
            fields["generation_steps"] = (
                f"a generation of {int(generation_steps):,} trains {fewest:,} env steps (whole rollouts), more "
                f"than budget {budget.name!r}'s whole env-step cap of {budget.env_step_cap:,}"
            )
    for hyperparameters in every.values():
        if len(every) == 1:
            bounds.collect(fields, engine.check_mutation, mutation, hyperparameters)
        elif isinstance(mutation.get("bounds") or {}, dict):
            bounds.collect(
                fields, engine.check_mutation, algorithms.mutation_for(mutation, hyperparameters), hyperparameters
            )
    for algorithm, hyperparameters in every.items():  # well formed: can every value it reaches train?
        if any(k.startswith("mutation") for k in fields):
            break
        restricted = algorithms.mutation_for(mutation, hyperparameters)
        spec = task_spec(task, algorithm)
        bounds.collect(fields, engine.check_mutation_range, spec, restricted, intraday=task.dataset.intraday)
    named = mutation.get("bounds") or {}
    if len(every) > 1 and isinstance(named, dict):
        stray = [k for k in named if not any(k in hp for hp in every.values())]
        if stray:
            fields[f"mutation.bounds.{stray[0]}"] = f"no allowed algorithm ({', '.join(every)}) has {stray[0]!r}"
    if "generation_steps" not in fields:
        # a run on a spent budget could never start: refused now (409), or beside the other errors;
        # judged on the budget's usage now, not on the counters of the object passed in
        current = ClusterBudget.objects.get(pk=budget.pk)
        verdict = budget_verdict(current, Run(task=task, generation_steps=int(generation_steps)))
        if verdict.state == verdict.SPENT:
            refusal = budget_refusal(current, verdict, verb="create a run", user=owner)
            if not fields:
                raise refusal
            fields["budget"] = refusal.fields["budget"]
    bounds.raise_all(fields)
    return Run.objects.create(
        owner=owner,
        name=name or f"{task.name} run",
        task=task,
        budget=budget,
        num_pods=int(num_pods),
        generation_steps=int(generation_steps),
        leaderboard_size=int(leaderboard_size),
        fresh_probability=float(fresh_probability),
        mutation=mutation,
        score_metric=score_metric,
        seed=int(seed),
        device=device,
        provenance=engine.provenance(task.dataset.source_paths(), seed=int(seed)),
    )


def run_settings_errors(
    *,
    num_pods: Any,
    generation_steps: Any,
    leaderboard_size: Any,
    fresh_probability: Any,
    seed: Any = 0,
    score_metric: str = "sharpe",
    device: str = "auto",
) -> dict[str, str]:
    """Every error of a run's own settings at once (``bounds.RUN``, score metric, device),
    without its task: the new-run page shows them with the task's errors in one answer."""
    fields = bounds.errors(
        {
            "num_pods": num_pods,
            "generation_steps": generation_steps,
            "leaderboard_size": leaderboard_size,
            "fresh_probability": fresh_probability,
            "seed": seed,
        },
        bounds.RUN,
    )
    if score_metric != "sharpe":
        fields["score_metric"] = "only 'sharpe' (validation Sharpe ratio) is supported"
    bounds.collect(fields, engine.check_run_device, device)
    return fields


def new_generation(run: Run, pod: Pod) -> Generation:
    last = pod.generations.aggregate(n=Max("number"))["n"] or 0
    gen = Generation.objects.create(run=run, pod=pod, number=last + 1, env_steps=run.generation_steps)
    Pod.objects.filter(pk=pod.pk).update(state=Pod.State.QUEUED, env_steps=0, steps_per_s=0.0)
    pod.state = Pod.State.QUEUED
    publish_pod(pod, gen)
    return gen


def ensure_pods(run: Run) -> list[Generation]:
    """Give every wanted pod of a running run an open generation; retire pods beyond
    ``num_pods`` that have none. Returns the generations created."""
    created = []
    existing = {p.index: p for p in run.pods.all()}
    for index in range(run.num_pods):
        pod = existing.get(index) or Pod.objects.create(run=run, index=index)
        if pod.state == Pod.State.RETIRED:
            Pod.objects.filter(pk=pod.pk).update(state=Pod.State.IDLE)
            pod.state = Pod.State.IDLE
        if not pod.generations.filter(status__in=Generation.OPEN).exists():
            created.append(new_generation(run, pod))
    for index, pod in existing.items():
        if index >= run.num_pods and pod.state != Pod.State.RETIRED:
            Generation.objects.filter(pod=pod, status__in=Generation.CLAIMABLE).update(
                status=Generation.Status.CANCELLED, finished_at=timezone.now(), error="pod scaled away"
            )
            if not pod.generations.filter(status=Generation.Status.RUNNING).exists():
                Pod.objects.filter(pk=pod.pk).update(state=Pod.State.RETIRED)
                pod.state = Pod.State.RETIRED
                publish_pod(pod)
    return created


def run_start(*, run: Run) -> Run:
    """Start a queued run: create its pods and queue one generation per pod; the budget's free
    slots get theirs dispatched at once, the rest wait for a slot.

    Raises:
        AppError: the run is not queued (409) or the budget is spent (409, saying which cap).
    """
    with transaction.atomic():
        budget, run = lock_budget_and_run(run)  # lock order: budget row, then run row
        if run.status != Run.Status.QUEUED:
            raise AppError(f"run is {run.status}; only a queued run can be started", status=409)
        _begin_running(budget, run, "start", started=True)
    logger.info("run started", extra={"run": run.id})
    return run


def _begin_running(budget: ClusterBudget, run: Run, verb: str, *, started: bool) -> None:
    """Set a locked run running if its budget allows (:func:`budget_verdict`): pods and their
    generations, dispatch into free slots, the ``run.update`` event."""
    verdict = budget_verdict(budget, run)  # the fewest steps a generation trains (whole rollouts)
    if verdict.state != verdict.OK:
        raise budget_refusal(budget, verdict, verb=verb, user=run.owner)
    run.status, run.status_reason = Run.Status.RUNNING, ""
    changed = ["status", "status_reason"]
    if started:
        run.started_at = timezone.now()
        changed.append("started_at")
    run.save(update_fields=changed)
    ensure_pods(run)
    budget_dispatch(budget)
    publish_run(run)


def run_pause(*, run: Run) -> Run:
    """Pause a running run: generations running now finish and submit their agent; no new
    generation starts until :func:`run_resume`.

    Raises:
        AppError: the run is not running (409).
    """
    with transaction.atomic():
        lock_budget(run.budget_id)  # lock order: budget row first; the run changes by a conditional update
        if not run_set_paused(run, reason=""):
            run.refresh_from_db()
            raise AppError(f"run is {run.status}; only a running run can be paused", status=409)
    return run


def run_set_paused(run: Run, *, reason: str) -> bool:
    """Pause ``run`` if it is running (call with its budget row locked): queued generations
    wait, running ones finish. Returns whether it was paused."""
    updated = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.PAUSED, status_reason=reason[:300]
    )
    if not updated:
        return False
    run.status, run.status_reason = Run.Status.PAUSED, reason[:300]
    Generation.objects.filter(run_id=run.pk, status=Generation.Status.QUEUED).update(dispatched_at=None)
    publish_run(run)
    return True


def run_resume(*, run: Run) -> Run:
    """Resume a paused run: every pod gets a generation again, within the budget's slots.

    Raises:
        AppError: the run is not paused (409), or the budget is spent (409).
    """
    with transaction.atomic():
        budget, run = lock_budget_and_run(run)  # lock order: budget row, then run row
        if run.status != Run.Status.PAUSED:
            raise AppError(f"run is {run.status}; only a paused run can be resumed", status=409)
        _begin_running(budget, run, "resume", started=False)
    return run


def run_stop(*, run: Run, backtest: bool = False) -> Run:
    """Stop a run at once: it ends ``cancelled`` (a user's stop is never ``finished``, which
    means the budget or its limits ended the run). Queued generations are cancelled now and
    running ones through the trainer's ``should_stop`` signal (within about a second); a
    generation still running at stop time never enters the leaderboard, even if it completes
    (see ``_generation_complete_locked``).

    Args:
        backtest: also queue the end-of-run backtests of the best agents the run has (the
            user's choice on the Stop form; default no).

    Raises:
        AppError: the run has already ended (409).
    """
    with transaction.atomic():
        budget, run = lock_budget_and_run(run)  # lock order: budget row, then run row
        if run.status in Run.TERMINAL:
            raise AppError(f"run is already {run.status}", status=409)
        run.stop_requested = True
        run.status_reason = "cancelled by user" + (" (best agents backtested)" if backtest else "")
        run.status = Run.Status.CANCELLED
        run.finished_at = timezone.now()
        run.save(update_fields=["stop_requested", "status_reason", "status", "finished_at"])
        cancel_waiting(run)
        Pod.objects.filter(run=run).exclude(state=Pod.State.RETIRED).update(state=Pod.State.STOPPED)
        budget_dispatch(budget)
        publish_run(run)
        run_id = run.pk
        transaction.on_commit(lambda: _announce_ended(run_id, backtest=backtest))
    return run


def run_scale(*, run: Run, num_pods: int) -> Run:
    """Change the size of a run's training pool; takes effect at generation boundaries.

    New pods get a generation at once (within the budget's slots); pods beyond the new count
    lose their queued generation now and retire after their running one submits its agent.

    Raises:
        AppError: a bad count (400) or an ended run (409).
    """
    bounds.raise_all(bounds.errors({"num_pods": num_pods}, {"num_pods": bounds.RUN["num_pods"]}))
    with transaction.atomic():
        budget, run = lock_budget_and_run(run)  # lock order: budget row, then run row
        if run.status in Run.TERMINAL or run.status == Run.Status.FINISHING:
            raise AppError(f"run is {run.status}; it cannot be scaled", status=409)
        run.num_pods = int(num_pods)
        run.save(update_fields=["num_pods"])
        if run.status == Run.Status.RUNNING:
            ensure_pods(run)
            budget_dispatch(budget)
        publish_run(run)
    logger.info("run scaled to %d pods", num_pods, extra={"run": run.id})
    return run


def cancel_waiting(run: Run) -> None:
    now = timezone.now()
    for gen in Generation.objects.filter(run=run, status__in=Generation.CLAIMABLE).select_related("pod"):
        n = Generation.objects.filter(pk=gen.pk, status__in=Generation.CLAIMABLE).update(
            status=Generation.Status.CANCELLED, finished_at=now, error=run.status_reason or "run ended"
        )
        if n:
            Pod.objects.filter(pk=gen.pod_id).update(state=Pod.State.STOPPED)
            gen.pod.state = Pod.State.STOPPED
            gen.status = Generation.Status.CANCELLED
            publish_pod(gen.pod, gen)


def run_begin_finishing(run: Run, reason: str) -> None:
    """The budget is spent for ``run``: no new generation; running ones complete."""
    n = Run.objects.filter(pk=run.pk, status__in=(Run.Status.RUNNING, Run.Status.PAUSED)).update(
        status=Run.Status.FINISHING, status_reason=reason
    )
    if n:
        run.status, run.status_reason = Run.Status.FINISHING, reason
        logger.info("run finishing: %s", reason, extra={"run": run.id})
        cancel_waiting(run)
        publish_run(run)
    run_maybe_finish(run)


def run_maybe_finish(run: Run) -> None:
    """A finishing run with no open generation is finished: stamp it and trigger its
    end-of-run backtests after commit."""
    if Generation.objects.filter(run_id=run.pk, status__in=Generation.OPEN).exists():
        return
    n = Run.objects.filter(pk=run.pk, status=Run.Status.FINISHING).update(
        status=Run.Status.FINISHED, finished_at=timezone.now()
    )
    if not n:
        return
    Pod.objects.filter(run_id=run.pk).exclude(state=Pod.State.RETIRED).update(state=Pod.State.STOPPED)
    run.status = Run.Status.FINISHED
    logger.info("run finished", extra={"run": run.pk})
    publish_run(run)
    run_id = run.pk
    transaction.on_commit(lambda: _announce_ended(run_id, backtest=True))


def _announce_ended(run_id: int, *, backtest: bool) -> None:
    """Send :data:`webapp.runs.signals.run_ended` (the reports app queues the end-of-run
    backtests when ``backtest``); a failing receiver is logged, never raised into the
    committed transaction."""
    for receiver, result in signals.run_ended.send_robust(sender=Run, run_id=run_id, backtest=backtest):
        if isinstance(result, Exception):
            logger.warning("run_ended receiver %r failed", receiver, extra={"run": run_id}, exc_info=result)


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
