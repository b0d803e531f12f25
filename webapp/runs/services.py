"""Writes of the runs app: budgets, tasks, the run lifecycle and the generation protocol.

Generation protocol (one Celery task per generation, ids only, see ``tasks.py``):

1. A generation row is created ``queued`` with ``dispatched_at = NULL``.
   :func:`_budget_dispatch` sends task messages for the oldest undispatched queued generations
   of a budget, as many as it has free slots, and stamps ``dispatched_at``.
2. :func:`generation_claim` locks the budget row (``select_for_update``; on SQLite every write
   transaction is ``BEGIN IMMEDIATE``, which serializes them), checks the run, the budget's
   caps and free slots, picks the parent (``trainer.tournament``) and claims the row with a
   conditional update ``filter(id=..., status__in=(queued, stale)).update(status=running,
   attempt=attempt + 1)``. Zero rows updated means another delivery has it: a no-op. A
   generation that must wait for a slot gets ``dispatched_at = NULL`` again, so the next
   finishing generation of the budget dispatches it.
3. :func:`generation_complete` stores the agent, prunes the leaderboard, accounts usage and
   queues the pod's next generation in ONE transaction, and only if the row is still
   ``running`` with the same ``attempt`` (a late copy of a reaped generation is discarded).
4. :func:`generations_reap_stale` marks running generations whose heartbeat is too old
   ``stale`` and sends them again; :func:`runs_ensure_work` re-sends queued generations whose
   message was lost (Redis restart) and gives idle pods of running runs a generation.

Lock order, everywhere two rows are written: budget row first, then run, generations, pods.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q, Sum
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset
from webapp.runs import bounds, broker, events, selectors, telemetry
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run, Task

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
#: A run pauses itself when the last this-many finished generations of every pod failed the
#: same way (e.g. all diverged): more of the same would only spend the budget.
PAUSE_AFTER_FAILURES = 3
#: Env steps per generation when a run does not say (the New run form and the API): one PPO
#: rollout at the default hyperparameters (1 024 envs x 16 steps).
DEFAULT_GENERATION_STEPS = 16_384


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def stale_after_s() -> float:
    """Seconds without a heartbeat after which a running generation is presumed dead."""
    return _setting("PADDOCK_STALE_AFTER_S", 120.0)


#: Seconds after its dispatch from which a queued generation whose message is not in the
#: broker (neither waiting nor delivered to a worker) counts as lost and is sent again. The
#: message goes out milliseconds after the dispatching transaction commits, so a few seconds
#: are plenty; a message that only waits for a worker is never sent twice, however long it waits.
LOST_MESSAGE_AFTER_S = 3.0


def redispatch_after_s() -> float:
    """See :data:`LOST_MESSAGE_AFTER_S`."""
    return LOST_MESSAGE_AFTER_S


# --- budgets -------------------------------------------------------------------------------


@transaction.atomic
def budget_create(
    *,
    actor,
    name: str,
    max_concurrent_pods: int = 1,
    gpu_hours_cap: float | None = None,
    max_wall_clock_s: int | None = None,
    deadline=None,
    env_step_cap: int | None = None,
    owner=None,
) -> ClusterBudget:
    """Create a cluster budget.

    Args:
        actor: the user creating it; owner unless ``owner`` is given.
        owner: the user the budget is for; only staff may give a budget to someone else.
        max_concurrent_pods: generations running at once across all runs (GPUs).
        gpu_hours_cap, max_wall_clock_s, deadline, env_step_cap: limits, ``None`` = none.

    Raises:
        AppError: a bad limit (400, naming the field) or a non-staff user assigning (403).
    """
    owner = owner or actor
    if owner != actor and not actor.is_staff:
        raise AppError("only staff can assign a budget to another user", fields={"owner": "not allowed"}, status=403)
    bounds.raise_all(
        budget_errors(
            owner=owner,
            name=name,
            max_concurrent_pods=max_concurrent_pods,
            gpu_hours_cap=gpu_hours_cap,
            max_wall_clock_s=max_wall_clock_s,
            deadline=deadline,
            env_step_cap=env_step_cap,
        )
    )
    return ClusterBudget.objects.create(
        name=str(name).strip(),
        owner=owner,
        max_concurrent_pods=int(max_concurrent_pods),
        gpu_hours_cap=gpu_hours_cap,
        max_wall_clock_s=max_wall_clock_s,
        deadline=deadline,
        env_step_cap=env_step_cap,
    )


def budget_errors(*, owner, name, deadline=None, exclude_id: int | None = None, **limits: Any) -> dict[str, str]:
    """Every error of a budget's settings at once: a name that is empty or another of the
    owner's budgets has, limits outside ``bounds.BUDGET``, a deadline in the past."""
    fields: dict[str, str] = {}
    if not name or not str(name).strip():
        fields["name"] = "required"
    elif ClusterBudget.objects.filter(owner=owner, name=str(name).strip()).exclude(pk=exclude_id).exists():
        fields["name"] = f"{owner.username} already has a budget named {str(name).strip()!r}"
    fields.update(bounds.errors(limits, bounds.BUDGET))
    if deadline is not None and deadline <= timezone.now():
        fields["deadline"] = f"is in the past ({deadline:%Y-%m-%d %H:%M} UTC)"
    return fields


#: What :func:`budget_update` may change; usage counters are written by the generation protocol.
BUDGET_EDITABLE = (
    "name",
    "owner",
    "max_concurrent_pods",
    "gpu_hours_cap",
    "max_wall_clock_s",
    "deadline",
    "env_step_cap",
)


@transaction.atomic
def budget_update(*, actor, budget: ClusterBudget, **changes: Any) -> ClusterBudget:
    """Change a budget's limits, name or owner (staff only), with ``budget_create``'s checks.

    A raised ``max_concurrent_pods`` takes effect at once: queued generations waiting for a
    slot are dispatched when the transaction commits.

    Args:
        actor: the staff member making the change.
        budget: the budget to change.
        changes: fields of :data:`BUDGET_EDITABLE`; ``None`` clears a limit (except
            ``max_concurrent_pods``, which every budget has).

    Raises:
        AppError: not staff (403), an unknown field or a bad limit (400, naming the field).
    """
    if not actor.is_staff:
        raise AppError("only staff can change budgets", status=403)
    fields: dict[str, str] = {}
    for name in changes:
        if name not in BUDGET_EDITABLE:
            fields[name] = "cannot be changed"
    if "max_concurrent_pods" in changes and changes["max_concurrent_pods"] is None:
        fields["max_concurrent_pods"] = "required"
    owner = changes.get("owner") or budget.owner
    checked = budget_errors(
        owner=owner,
        name=changes.get("name", budget.name),
        deadline=changes.get("deadline") if "deadline" in changes else None,
        exclude_id=budget.pk,
        **{k: v for k, v in changes.items() if k in bounds.BUDGET},
    )
    fields.update({k: v for k, v in checked.items() if k not in fields})
    bounds.raise_all(fields)
    if "name" in changes:
        changes["name"] = str(changes["name"]).strip()
    budget = _lock_budget(budget.pk)
    for name, value in changes.items():
        setattr(budget, name, value)
    budget.save(update_fields=list(changes) or None)
    _budget_dispatch(budget)
    _publish_budget_usage(budget.pk)
    return budget


def _budget_spent_reason(budget: ClusterBudget, run: Run, *, now=None, reserved_steps: int = 0) -> str | None:
    """Why ``run`` may not start another generation on ``budget``, or ``None``.

    ``reserved_steps`` are the env steps of generations running now: a new generation must fit
    in what the env-step cap leaves after them.
    """
    now = now or timezone.now()
    if budget.gpu_hours_cap is not None and budget.gpu_seconds_used >= budget.gpu_hours_cap * 3600.0:
        return f"budget {budget.name!r}: GPU-hours cap of {budget.gpu_hours_cap:g} h is spent"
    if (
        budget.env_step_cap is not None
        and budget.env_steps_used + reserved_steps + run.generation_steps > budget.env_step_cap
    ):
        return (
            f"budget {budget.name!r}: env-step cap of {budget.env_step_cap} is spent "
            f"({budget.env_steps_used} used, a generation needs {run.generation_steps})"
        )
    if budget.deadline is not None and now >= budget.deadline:
        return f"budget {budget.name!r}: deadline {budget.deadline.isoformat()} has passed"
    if budget.max_wall_clock_s is not None and run.started_at is not None:
        if (now - run.started_at).total_seconds() >= budget.max_wall_clock_s:
            return f"budget {budget.name!r}: wall-clock limit of {budget.max_wall_clock_s} s per run is spent"
    return None


def _lock_budget(budget_id: int) -> ClusterBudget:
    return ClusterBudget.objects.select_for_update().get(pk=budget_id)


# --- tasks ---------------------------------------------------------------------------------


@transaction.atomic
def task_create(
    *,
    owner,
    dataset: Dataset,
    name: str,
    tickers: list[str] | None,
    splits: dict[str, list[str]],
    env: dict[str, Any] | None = None,
    algorithm: str = "ppo",
    hyperparameters: dict[str, Any] | None = None,
    kind: str = "stock_trading",
    selection: dict[str, Any] | None = None,
    algorithms: list[str] | None = None,
) -> Task:
    """Create a task after validating it with the trainer's config classes.

    Args:
        dataset: one of ``owner``'s datasets.
        tickers: a non-empty subset of the dataset's tickers (``None`` = all of them).
        splits: ``{"train": [start, end] or {"start", "end"}, "validation": ..., "test": ...}``,
            inclusive ``YYYY-MM-DD`` bounds (stored as ``{"start", "end"}``).
        env: fields of the kind's env config (stock trading: costs, hmax, initial cash...;
            portfolio: cost_pct, reward...), defaults for the rest.
        algorithm: ``"ppo"`` or ``"sac"``.
        hyperparameters: the algorithm's config fields, defaults for the rest.
        kind: ``"stock_trading"`` or ``"portfolio"``.
        selection: the validation scoring rule (``rule``, ``windows``, ``k``); ``{}`` = default.
        algorithms: the algorithms a run's fresh pods may train (a mixed tournament); it
            must contain ``algorithm``; ``None`` or ``[]`` = only ``algorithm``. See
            :func:`algorithm_hyperparameters` for the other algorithms' settings and
            :func:`fresh_algorithm` for which pod trains which.

    Raises:
        AppError: naming the field (``tickers``, ``splits.validation``, ``env.hmax``,
            ``hyperparameters.learning_rate``...).
    """
    if dataset.owner_id != owner.id:
        raise AppError("dataset not found", fields={"dataset": "not found"}, status=404)
    fields: dict[str, str] = {}
    if tickers is not None and not [t for t in tickers if str(t).strip()]:
        fields["tickers"] = "choose at least one ticker, or leave the field out for all of the dataset's tickers"
        tickers = None
    named = tickers is not None
    if named:
        cleaned = bounds.collect(fields, engine.clean_tickers, [t for t in tickers if str(t).strip()])
        tickers = cleaned if cleaned is not None else []
    else:
        tickers = list(dataset.tickers)
    unknown = [t for t in tickers if t not in dataset.tickers]
    if unknown:
        fields["tickers"] = f"{', '.join(unknown)} not in dataset {dataset.name!r}"
    if not isinstance(splits, dict) or any(k not in splits for k in ("train", "validation", "test")):
        raise AppError("splits: train, validation and test ranges are required", fields={"splits": "required"})
    env = env or {}
    hyperparameters = hyperparameters or {}
    spec = {
        "data": {"paths": dataset.source_paths(), "tickers": tickers},
        "train": splits["train"],
        "validation": splits["validation"],
        "test": splits["test"],
        "env": env,
        "algorithm": algorithm,
        "hyperparameters": hyperparameters,
        "kind": kind,
        "selection": selection or {},
    }
    # Every error at once: env bounds, each hyperparameter alone, then data and splits alone.
    if isinstance(env, dict) and kind == "stock_trading":
        fields.update(bounds.errors(env, bounds.ENV, prefix="env."))
    if isinstance(hyperparameters, dict):
        fields.update(bounds.hyperparameter_errors(algorithm, hyperparameters, engine.validate_hyperparameters))
    base = bounds.collect(fields, engine.validate_task, {**spec, "env": {}, "hyperparameters": {}})
    allowed = _allowed_algorithms(fields, algorithms, algorithm, hyperparameters)
    decided = None
    if base is not None and not unknown and not any(k.startswith("tickers") for k in fields):
        # the tickers actually traded over the task's range, and every data decision
        decided = bounds.collect(
            fields,
            engine.check_task_data,
            {k: base[k] for k in ("train", "validation", "test")},
            paths=dataset.source_paths(),
            tickers=tickers,
            named=named,
            file_names=dataset.file_names(),
            benchmark_path=settings.PADDOCK_BENCHMARK_FILE,
        )
    bounds.raise_all(fields)
    normalized = engine.validate_task(spec)  # what depends on several fields at once
    return Task.objects.create(
        owner=owner,
        name=name,
        dataset=dataset,
        tickers=decided["tickers"],  # the tickers actually traded
        data_notes=[*dataset.notes, *decided["notes"]],
        splits={k: dict(normalized[k]) for k in ("train", "validation", "test")},
        env=normalized["env"],
        algorithm=normalized["algorithm"],
        hyperparameters=normalized["hyperparameters"],
        algorithms=allowed,
        kind=normalized["kind"],
        selection=normalized["selection"],
    )


def _allowed_algorithms(fields: dict[str, str], algorithms: Any, algorithm: str, hyperparameters: Any) -> list[str]:
    """The normalized allowed list (``algorithm`` first, no repeats); errors go to ``fields["algorithms"]``."""
    if algorithms is None or algorithms == []:
        return [str(algorithm).strip().lower()]
    if not isinstance(algorithms, list | tuple) or not all(isinstance(a, str) for a in algorithms):
        fields["algorithms"] = "a list of algorithm names"
        return []
    names = list(dict.fromkeys(a.strip().lower() for a in algorithms))
    known = engine.algorithms()
    unknown = [a for a in names if a not in known]
    if unknown:
        fields["algorithms"] = f"{', '.join(map(repr, unknown))} not one of {', '.join(known)}"
        return []
    primary = str(algorithm).strip().lower()
    if primary not in names:
        fields["algorithms"] = f"must include the task's algorithm {primary!r} (its hyperparameters are set)"
        return []
    if isinstance(hyperparameters, dict) and "hyperparameters" not in fields:
        for name in names:
            if name != primary:
                try:
                    _shared_hyperparameters(name, hyperparameters)
                except AppError as exc:
                    fields["algorithms"] = f"{name}: {exc.message}"
                    return []
    return [primary, *(a for a in names if a != primary)]


def _shared_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    own = engine.validate_hyperparameters(algorithm, {})
    return engine.validate_hyperparameters(algorithm, {k: v for k, v in hyperparameters.items() if k in own})


def task_algorithms(task: Task) -> list[str]:
    """The algorithms ``task``'s runs may train, ``task.algorithm`` first."""
    return list(task.algorithms or [task.algorithm])


def algorithm_hyperparameters(task: Task, algorithm: str) -> dict[str, Any]:
    """The hyperparameters ``algorithm`` trains with on ``task``: the task's own for
    ``task.algorithm``; for another allowed algorithm, the task's values of the names the two
    share (``num_envs``, ``hidden_sizes``, ``gamma``...) and that algorithm's defaults for the rest.
    """
    if algorithm == task.algorithm:
        return dict(task.hyperparameters)
    return _shared_hyperparameters(algorithm, task.hyperparameters)


def fresh_algorithm(task: Task, pod_index: int) -> str:
    """The algorithm a fresh agent of pod ``pod_index`` trains: round-robin over the task's
    allowed list by pod index (pod 0 the first, pod 1 the second, ...), so a run with at least
    as many pods as algorithms trains each of them. Children keep their parent's algorithm."""
    allowed = task_algorithms(task)
    return allowed[pod_index % len(allowed)]


def mutation_for(mutation: dict[str, Any], hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """``mutation`` restricted to the bounds of hyperparameters the agent has (a mixed run's
    bounds may name another algorithm's hyperparameters, e.g. SAC's ``actor_learning_rate``)."""
    bounds_ = mutation.get("bounds") or {}
    return {**mutation, "bounds": {k: v for k, v in bounds_.items() if k in hyperparameters}}


def task_spec(task: Task, algorithm: str | None = None) -> dict[str, Any]:
    """The ``trainer.pod.TaskSpec`` dict a generation trains on (with ``algorithm``, one of
    the task's allowed algorithms; ``None`` = ``task.algorithm``)."""
    algorithm = algorithm or task.algorithm
    return {
        "data": {"paths": task.dataset.source_paths(), "tickers": list(task.tickers)},
        "train": task.splits["train"],
        "validation": task.splits["validation"],
        "test": task.splits["test"],
        "env": task.env,
        "algorithm": algorithm,
        "hyperparameters": algorithm_hyperparameters(task, algorithm),
        "kind": task.kind,
        "selection": task.selection or {},
    }


# --- runs ----------------------------------------------------------------------------------


@transaction.atomic
def run_create(
    *,
    owner,
    task: Task,
    budget: ClusterBudget,
    name: str = "",
    num_pods: int = 2,
    generation_steps: int = DEFAULT_GENERATION_STEPS,
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
            (``num_envs x rollout_steps``) or one SAC vector step (``num_envs``).
        leaderboard_size: K, the agents kept on the leaderboard.
        fresh_probability: chance in [0, 1] a generation starts from a new random agent.
        mutation: ``{"bounds": {hyperparameter: [low, high]}, "factors": [0.8, 1.25],
            "probability": 1.0}``; the hyperparameters named in ``bounds`` are perturbed when
            an agent is copied from the leaderboard.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``; the worker that trains a generation picks
            the GPU (``cuda:1`` is refused).

    Raises:
        AppError: a bad setting (naming it), or a task/budget the user may not use (404).
    """
    if task.owner_id != owner.id:
        raise AppError("task not found", fields={"task": "not found"}, status=404)
    if budget.owner_id != owner.id and not owner.is_staff:
        raise AppError("budget not found", fields={"budget": "not found"}, status=404)
    mutation = dict(mutation or {})
    fields = run_settings_errors(
        num_pods=num_pods,
        generation_steps=generation_steps,
        leaderboard_size=leaderboard_size,
        fresh_probability=fresh_probability,
        score_metric=score_metric,
        seed=seed,
        device=device,
    )
    every = {a: algorithm_hyperparameters(task, a) for a in task_algorithms(task)}
    for algorithm, hyperparameters in every.items():
        if "generation_steps" not in fields:
            bounds.collect(fields, engine.check_generation_steps, algorithm, hyperparameters, generation_steps)
        if len(every) == 1:
            bounds.collect(fields, engine.check_mutation, mutation, hyperparameters)
        elif isinstance(mutation.get("bounds") or {}, dict):
            bounds.collect(fields, engine.check_mutation, mutation_for(mutation, hyperparameters), hyperparameters)
    named = mutation.get("bounds") or {}
    if len(every) > 1 and isinstance(named, dict):
        stray = [k for k in named if not any(k in hp for hp in every.values())]
        if stray:
            fields[f"mutation.bounds.{stray[0]}"] = f"no allowed algorithm ({', '.join(every)}) has {stray[0]!r}"
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


def _publish_run(run: Run) -> None:
    run.refresh_from_db()
    events.publish(run.id, events.RUN_UPDATE, {"run": selectors.run_payload(run)})


def _publish_budget_usage(budget_id: int, run: Run | None = None) -> None:
    """Send ``run.update`` to ``run`` and to every other active run on the budget: its usage
    (pods running, env steps, GPU hours) is on each of their pages and has changed."""
    if run is not None:
        _publish_run(run)
    others = Run.objects.filter(budget_id=budget_id).exclude(status__in=Run.TERMINAL)
    if run is not None:
        others = others.exclude(pk=run.pk)
    for other in others.select_related("budget"):
        events.publish(other.id, events.RUN_UPDATE, {"run": selectors.run_payload(other)})


def _publish_pod(pod: Pod, gen: Generation | None = None) -> None:
    events.publish(pod.run_id, events.POD_UPDATE, {"pod": selectors.pod_payload(pod, gen)})


def _new_generation(run: Run, pod: Pod) -> Generation:
    last = pod.generations.aggregate(n=Max("number"))["n"] or 0
    gen = Generation.objects.create(run=run, pod=pod, number=last + 1, env_steps=run.generation_steps)
    Pod.objects.filter(pk=pod.pk).update(state=Pod.State.QUEUED, env_steps=0, steps_per_s=0.0)
    pod.state = Pod.State.QUEUED
    _publish_pod(pod, gen)
    return gen


def _ensure_pods(run: Run) -> list[Generation]:
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
            created.append(_new_generation(run, pod))
    for index, pod in existing.items():
        if index >= run.num_pods and pod.state != Pod.State.RETIRED:
            Generation.objects.filter(pod=pod, status__in=Generation.CLAIMABLE).update(
                status=Generation.Status.CANCELLED, finished_at=timezone.now(), error="pod scaled away"
            )
            if not pod.generations.filter(status=Generation.Status.RUNNING).exists():
                Pod.objects.filter(pk=pod.pk).update(state=Pod.State.RETIRED)
                pod.state = Pod.State.RETIRED
                _publish_pod(pod)
    return created


def _budget_dispatch(budget: ClusterBudget) -> int:
    """Send task messages for the budget's oldest undispatched queued generations, as many as
    it has free slots (call with the budget row locked). Returns how many were sent."""
    free = budget.max_concurrent_pods - selectors.budget_running_generations(budget.id).count()
    if free <= 0:
        return 0
    ids = list(
        Generation.objects.filter(
            run__budget_id=budget.id,
            run__status=Run.Status.RUNNING,
            status=Generation.Status.QUEUED,
            dispatched_at__isnull=True,
        )
        .order_by("created_at", "id")
        .values_list("id", flat=True)[:free]
    )
    if ids:
        Generation.objects.filter(id__in=ids).update(dispatched_at=timezone.now())
        transaction.on_commit(lambda: _send_generation_tasks(ids))
    return len(ids)


def _send_generation_tasks(ids: list[int]) -> None:
    """Send one ``run_generation`` message per id (after the dispatching transaction
    committed). A message that cannot be sent (broker down) leaves its generation undispatched,
    so the next sweep (at the latest when the broker is back) sends it."""
    from webapp.runs.tasks import run_generation

    for gen_id in ids:
        try:
            run_generation.apply_async((gen_id,), task_id=broker.generation_task_id(gen_id))
        except Exception as exc:
            logger.warning("could not send generation %s (%s); the sweep will send it", gen_id, exc)
            Generation.objects.filter(pk=gen_id, status__in=Generation.CLAIMABLE).update(dispatched_at=None)


def run_start(*, run: Run) -> Run:
    """Start a queued run: create its pods and queue one generation per pod; the budget's free
    slots get theirs dispatched at once, the rest wait for a slot.

    Raises:
        AppError: the run is not queued (409) or the budget is spent (409, saying which cap).
    """
    with transaction.atomic():
        budget = _lock_budget(run.budget_id)
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status != Run.Status.QUEUED:
            raise AppError(f"run is {run.status}; only a queued run can be started", status=409)
        reason = _budget_spent_reason(budget, run)
        if reason:
            raise AppError(f"cannot start: {reason}", fields={"budget": reason}, status=409)
        run.status = Run.Status.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at"])
        _ensure_pods(run)
        _budget_dispatch(budget)
        _publish_run(run)
    logger.info("run started", extra={"run": run.id})
    return run


def run_pause(*, run: Run) -> Run:
    """Pause a running run: generations running now finish and submit their agent; no new
    generation starts until :func:`run_resume`.

    Raises:
        AppError: the run is not running (409).
    """
    with transaction.atomic():
        _lock_budget(run.budget_id)
        if not _run_set_paused(run, reason=""):
            run.refresh_from_db()
            raise AppError(f"run is {run.status}; only a running run can be paused", status=409)
    return run


def _run_set_paused(run: Run, *, reason: str) -> bool:
    """Pause ``run`` if it is running (call with its budget row locked): queued generations
    wait, running ones finish. Returns whether it was paused."""
    updated = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.PAUSED, status_reason=reason[:300]
    )
    if not updated:
        return False
    run.status, run.status_reason = Run.Status.PAUSED, reason[:300]
    Generation.objects.filter(run_id=run.pk, status=Generation.Status.QUEUED).update(dispatched_at=None)
    _publish_run(run)
    return True


def run_resume(*, run: Run) -> Run:
    """Resume a paused run: every pod gets a generation again, within the budget's slots.

    Raises:
        AppError: the run is not paused (409), or the budget is spent (409).
    """
    with transaction.atomic():
        budget = _lock_budget(run.budget_id)
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status != Run.Status.PAUSED:
            raise AppError(f"run is {run.status}; only a paused run can be resumed", status=409)
        reason = _budget_spent_reason(budget, run)
        if reason:
            raise AppError(f"cannot resume: {reason}", fields={"budget": reason}, status=409)
        run.status, run.status_reason = Run.Status.RUNNING, ""
        run.save(update_fields=["status", "status_reason"])
        _ensure_pods(run)
        _budget_dispatch(budget)
        _publish_run(run)
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
        budget = _lock_budget(run.budget_id)
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in Run.TERMINAL:
            raise AppError(f"run is already {run.status}", status=409)
        run.stop_requested = True
        run.status_reason = "cancelled by user" + (" (best agents backtested)" if backtest else "")
        run.status = Run.Status.CANCELLED
        run.finished_at = timezone.now()
        run.save(update_fields=["stop_requested", "status_reason", "status", "finished_at"])
        _cancel_waiting(run)
        Pod.objects.filter(run=run).exclude(state=Pod.State.RETIRED).update(state=Pod.State.STOPPED)
        _budget_dispatch(budget)
        _publish_run(run)
        if backtest:
            run_id = run.pk
            transaction.on_commit(lambda: _trigger_backtests(run_id))
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
        budget = _lock_budget(run.budget_id)
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in Run.TERMINAL or run.status == Run.Status.FINISHING:
            raise AppError(f"run is {run.status}; it cannot be scaled", status=409)
        run.num_pods = int(num_pods)
        run.save(update_fields=["num_pods"])
        if run.status == Run.Status.RUNNING:
            _ensure_pods(run)
            _budget_dispatch(budget)
        _publish_run(run)
    logger.info("run scaled to %d pods", num_pods, extra={"run": run.id})
    return run


def _cancel_waiting(run: Run) -> None:
    now = timezone.now()
    for gen in Generation.objects.filter(run=run, status__in=Generation.CLAIMABLE).select_related("pod"):
        n = Generation.objects.filter(pk=gen.pk, status__in=Generation.CLAIMABLE).update(
            status=Generation.Status.CANCELLED, finished_at=now, error=run.status_reason or "run ended"
        )
        if n:
            Pod.objects.filter(pk=gen.pod_id).update(state=Pod.State.STOPPED)
            gen.pod.state = Pod.State.STOPPED
            gen.status = Generation.Status.CANCELLED
            _publish_pod(gen.pod, gen)


def _run_begin_finishing(run: Run, reason: str) -> None:
    """The budget is spent for ``run``: no new generation; running ones complete."""
    n = Run.objects.filter(pk=run.pk, status__in=(Run.Status.RUNNING, Run.Status.PAUSED)).update(
        status=Run.Status.FINISHING, status_reason=reason
    )
    if n:
        run.status, run.status_reason = Run.Status.FINISHING, reason
        logger.info("run finishing: %s", reason, extra={"run": run.id})
        _cancel_waiting(run)
        _publish_run(run)
    _run_maybe_finish(run)


def _run_maybe_finish(run: Run) -> None:
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
    _publish_run(run)
    run_id = run.pk
    transaction.on_commit(lambda: _trigger_backtests(run_id))


def _trigger_backtests(run_id: int) -> None:
    """Queue ``webapp.reports.tasks.backtest_top_agents`` when the reports app provides it."""
    try:
        module = importlib.import_module("webapp.reports.tasks")
    except ModuleNotFoundError as exc:
        if exc.name in ("webapp.reports.tasks", "webapp.reports"):
            logger.info("no reports tasks; skipping end-of-run backtests", extra={"run": run_id})
            return
        raise
    task = getattr(module, "backtest_top_agents", None)
    if task is None:
        return
    try:
        task.delay(run_id)
    except Exception:
        logger.warning("could not queue end-of-run backtests", extra={"run": run_id}, exc_info=True)


# --- generations ---------------------------------------------------------------------------


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
        budget = _lock_budget(gen.run.budget_id)
        run = Run.objects.get(pk=gen.run_id)
        gen.refresh_from_db()
        if gen.status not in Generation.CLAIMABLE:
            return None
        if run.status == Run.Status.PAUSED:
            Generation.objects.filter(pk=gen.pk).update(dispatched_at=None)
            return None
        if run.status != Run.Status.RUNNING or gen.pod.index >= run.num_pods:
            _generation_drop(gen, run, "run is not running" if run.status != Run.Status.RUNNING else "pod scaled away")
            _budget_dispatch(budget)
            return None
        if gen.attempt >= MAX_ATTEMPTS:
            last = f" (last: {gen.error})" if gen.error else ""
            _generation_fail_locked(gen, run, budget, f"gave up after {gen.attempt} attempts{last}")
            return None
        others = selectors.budget_running_generations(budget.id).exclude(pk=gen.pk)
        reserved = others.aggregate(total=Sum("env_steps"))["total"] or 0
        reason = _budget_spent_reason(budget, run, reserved_steps=reserved)
        if reason and not (reserved and _budget_spent_reason(budget, run) is None):
            _generation_drop(gen, run, reason)
            _run_begin_finishing(run, reason)
            return None
        if reason or others.count() >= budget.max_concurrent_pods:
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
            algorithm = fresh_algorithm(run.task, pod.index)
            hyperparameters = algorithm_hyperparameters(run.task, algorithm)
        elif decision.action == "parent":
            algorithm = parent.algorithm or run.task.algorithm
            hyperparameters, mutations = engine.mutate_hyperparameters(
                parent.hyperparameters, mutation=mutation_for(run.mutation, parent.hyperparameters), rng=rng
            )
        else:
            algorithm = parent.algorithm or run.task.algorithm
            hyperparameters = dict(parent.hyperparameters)
        now = timezone.now()
        n = Generation.objects.filter(pk=gen.pk, status__in=Generation.CLAIMABLE).update(
            status=Generation.Status.RUNNING,
            attempt=F("attempt") + 1,
            worker=worker[:200],
            device=device[:40],
            parent=parent,
            algorithm=algorithm,
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
        _publish_pod(pod, gen)
        _publish_budget_usage(budget.id, run)  # one more pod running on the budget
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
        )


def _generation_drop(gen: Generation, run: Run, reason: str) -> None:
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
        _publish_pod(pod, gen)
    _run_maybe_finish(run)


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
            "episode_return_mean": _finite_or_none(info.get("episode_return_mean")),
        },
    )


def _finite_or_none(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) else None


def checkpoint_name(claim: Claim) -> str:
    """Storage name of a generation attempt's checkpoint."""
    return f"runs/{claim.run_id}/pod{claim.pod_index}/gen{claim.number}-a{claim.attempt}-{claim.generation_id}.pt"


def generation_complete(*, claim: Claim, result: dict[str, Any], local_checkpoint: str | None) -> Agent | None:
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
    if not result.get("cancelled") and local_checkpoint:
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


def _generation_complete_locked(claim: Claim, result: dict[str, Any], stored: str | None) -> Agent | None:
    run = Run.objects.select_related("budget").get(pk=claim.run_id)
    budget = _lock_budget(run.budget_id)
    gen = Generation.objects.select_related("pod").get(pk=claim.generation_id)
    if gen.status != Generation.Status.RUNNING or gen.attempt != claim.attempt:
        logger.info("late result of generation %s attempt %s discarded", gen.pk, claim.attempt, extra={"run": run.pk})
        return None
    run.refresh_from_db()
    now = timezone.now()
    duration = max(0.0, (now - gen.started_at).total_seconds())
    trained = int(result.get("env_steps", 0))
    ClusterBudget.objects.filter(pk=budget.pk).update(
        gpu_seconds_used=F("gpu_seconds_used") + duration, env_steps_used=F("env_steps_used") + trained
    )
    budget.refresh_from_db()
    # A generation of a run stopped by its user (or failed) while it trained is cancelled,
    # even when its training ended before it saw the signal: it does not enter the leaderboard.
    cancelled = bool(result.get("cancelled")) or stored is None or run.stop_requested
    Generation.objects.filter(pk=gen.pk).update(
        status=Generation.Status.CANCELLED if cancelled else Generation.Status.DONE,
        env_steps=trained,
        finished_at=now,
        heartbeat_at=now,
        hyperparameters=result.get("hyperparameters") or gen.hyperparameters,
        error="cancelled" if cancelled else "",
    )
    telemetry.points_store(
        run_id=run.pk, generation_id=gen.pk, attempt=claim.attempt, points=result.get("telemetry") or []
    )
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
            score=result.get("score"),
            metrics=result.get("metrics") or {},
            algorithm=gen.algorithm or run.task.algorithm,
            hyperparameters=gen.hyperparameters,
            tickers=list(result.get("tickers") or []),
            checkpoint=stored,
            sha256=result.get("sha256", ""),
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
        _run_stop_if_all_zero(run)
    pod.refresh_from_db()
    _pod_continue(run, budget, pod, gen)
    _run_maybe_finish(run)
    _budget_dispatch(budget)
    _publish_budget_usage(budget.id, run)
    return agent


def _pod_continue(run: Run, budget: ClusterBudget, pod: Pod, gen: Generation) -> None:
    """Queue the pod's next generation after ``gen`` ended, if run, pod count and budget allow;
    else idle, retire or stop the pod (the run begins to finish when the budget is spent)."""
    next_gen = None
    if run.status == Run.Status.RUNNING and pod.index < run.num_pods:
        reserved = selectors.budget_running_generations(budget.id).aggregate(t=Sum("env_steps"))["t"] or 0
        reason = _budget_spent_reason(budget, run, reserved_steps=reserved)
        if reason is None:
            next_gen = _new_generation(run, pod)
        elif not reserved or _budget_spent_reason(budget, run) is not None:
            _run_begin_finishing(run, reason)
        else:
            next_gen = _new_generation(run, pod)  # waits for the steps held by running ones
    if next_gen is None:
        state = Pod.State.RETIRED if pod.index >= run.num_pods else Pod.State.IDLE
        if run.status in (Run.Status.FINISHING, *Run.TERMINAL):
            state = Pod.State.STOPPED
        Pod.objects.filter(pk=pod.pk).update(state=state)
        pod.state = state
        _publish_pod(pod, gen)


def _run_stop_if_all_zero(run: Run) -> None:
    """Fail ``run`` when its last ``PADDOCK_ZERO_SCORE_GENERATIONS`` agents all scored exactly
    0: such agents never trade (or their score is undefined), and a run that only makes them
    would spend its whole budget on them (e.g. an initial cash so large that no trade of hmax
    shares moves the value). Running generations are cancelled; the reason says what to check."""
    n = int(_setting("PADDOCK_ZERO_SCORE_GENERATIONS", 8))
    last = list(Agent.objects.filter(run=run).order_by("-created_seq").values_list("score", flat=True)[:n])
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
        _cancel_waiting(run)
        Pod.objects.filter(run=run).exclude(state=Pod.State.RETIRED).update(state=Pod.State.STOPPED)
        _publish_run(run)


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
        budget = _lock_budget(run.budget_id)
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
        _run_maybe_finish(run)
        _budget_dispatch(budget)
        _publish_budget_usage(budget.id, run)


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
    if _run_set_paused(run, reason=reason):
        logger.warning("run paused itself: %s", reason, extra={"run": run.pk})


def generation_fail(*, claim: Claim, error: str, retry: bool, count_attempt: bool = True) -> None:
    """Record a failed attempt. A transient failure (``retry``) queues the generation again
    while attempts remain; a permanent one (bad data or config) fails the generation and the
    run, whose other generations would fail the same way. With ``count_attempt=False`` (the
    worker lost its database connection: nothing is wrong with the generation) the attempt is
    given back, so the next claim has the same number and the generation keeps all its tries."""
    with transaction.atomic():
        run = Run.objects.get(pk=claim.run_id)
        budget = _lock_budget(run.budget_id)
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
            _budget_dispatch(budget)
            _publish_budget_usage(budget.id, run)
            return
        _generation_fail_locked(gen, run, budget, error)


def _generation_fail_locked(gen: Generation, run: Run, budget: ClusterBudget, error: str) -> None:
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
        _cancel_waiting(run)
        Pod.objects.filter(run=run).update(state=Pod.State.STOPPED)
    _budget_dispatch(budget)
    _publish_budget_usage(budget.id, run if n else None)


# --- housekeeping --------------------------------------------------------------------------


def generations_reap_stale(*, stale_after: float | None = None) -> list[int]:
    """Mark running generations without a heartbeat for ``stale_after`` seconds ``stale`` and
    send them again (a new attempt); generations of runs that no longer run are cancelled.

    Returns:
        Ids of the generations reaped.
    """
    stale_after = stale_after_s() if stale_after is None else stale_after
    cutoff = timezone.now() - timedelta(seconds=stale_after)
    reaped = []
    candidates = Generation.objects.filter(status=Generation.Status.RUNNING, heartbeat_at__lt=cutoff)
    for gen in candidates.select_related("run", "pod"):
        with transaction.atomic():
            budget = _lock_budget(gen.run.budget_id)
            run = Run.objects.get(pk=gen.run_id)
            n = Generation.objects.filter(
                pk=gen.pk, status=Generation.Status.RUNNING, attempt=gen.attempt, heartbeat_at__lt=cutoff
            ).update(status=Generation.Status.STALE, error=f"no heartbeat from {gen.worker} for {stale_after:g} s")
            if not n:
                continue
            reaped.append(gen.pk)
            logger.warning("generation %s of worker %s is stale", gen.pk, gen.worker, extra={"run": run.pk})
            if run.status == Run.Status.RUNNING and gen.pod.index < run.num_pods:
                Generation.objects.filter(pk=gen.pk).update(dispatched_at=timezone.now())
                Pod.objects.filter(pk=gen.pod_id).update(state=Pod.State.QUEUED)
                gen_id = gen.pk
                transaction.on_commit(lambda gen_id=gen_id: _send_generation_tasks([gen_id]))
            else:
                _generation_drop(gen, run, "worker lost while the run was not running")
            gen.refresh_from_db()
            pod = Pod.objects.get(pk=gen.pod_id)
            _publish_pod(pod, gen)
            _budget_dispatch(budget)
    return reaped


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
            budget = _lock_budget(budget_id)
            for run in Run.objects.filter(budget=budget, status__in=Run.ACTIVE):
                if run.status == Run.Status.RUNNING:
                    reason = _budget_spent_reason(budget, run)
                    if reason and not selectors.budget_running_generations(budget.id).filter(run=run).exists():
                        _run_begin_finishing(run, reason)
                        continue
                    if reason is None:
                        _ensure_pods(run)
                elif run.status == Run.Status.FINISHING:
                    _run_maybe_finish(run)
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
                transaction.on_commit(lambda ids=lost: _send_generation_tasks(ids))
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
                transaction.on_commit(lambda ids=lost_stale: _send_generation_tasks(ids))
                sent += len(lost_stale)
            sent += _budget_dispatch(budget)
    return sent


def local_copy_of_checkpoint(name: str, dest: Path) -> Path:
    """Copy a checkpoint from the default storage to a local file (workers train from local
    files; the storage may be remote)."""
    with default_storage.open(name, "rb") as src, open(dest, "wb") as out:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            out.write(chunk)
    return dest
