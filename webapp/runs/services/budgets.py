"""Cluster budgets: create and change them, the one rule deciding whether a budget is spent
(:func:`budget_verdict`), and dispatching queued generations into a budget's free slots.

Lock order: see :mod:`webapp.runs.services.common` (budget row first, then the run).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import transaction
from django.utils import timezone

from webapp.config.celery import app as celery_app
from webapp.core.errors import AppError
from webapp.runs import bounds, broker
from webapp.runs.models import ClusterBudget, Generation, Run
from webapp.runs.selectors.budgets import budget_running_generations
from webapp.runs.services.common import fewest_trained_steps, lock_budget, publish_budget_usage

logger = logging.getLogger(__name__)

#: The Celery task that trains one generation (registered as ``webapp.runs.tasks.run_generation``: ``webapp.runs.tasks.train_generation_task``).
RUN_GENERATION_TASK = "webapp.runs.tasks.run_generation"


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
    purpose: str = "assigned",
) -> ClusterBudget:
    """Create a cluster budget.

    Args:
        actor: the user creating it; owner unless ``owner`` is given.
        owner: the user the budget is for; only staff may give a budget to someone else.
        max_concurrent_pods: generations running at once across all runs (GPUs).
        gpu_hours_cap, max_wall_clock_s, deadline, env_step_cap: limits, ``None`` = none.
        purpose: ``"assigned"`` (by staff) or ``"demo"``; neither counts against a quota (a
            user's own budgets are made by :func:`webapp.runs.services.quotas.budget_create_own`).

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
        purpose=purpose,
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
    budget = lock_budget(budget.pk)  # lock order: the budget row only
    for name, value in changes.items():
        setattr(budget, name, value)
    budget.save(update_fields=list(changes) or None)
    budget_dispatch(budget)
    publish_budget_usage(budget.pk)
    return budget


@dataclass(frozen=True)
class BudgetVerdict:
    """Whether a run may start another generation on a budget.

    Attributes:
        state: ``"ok"`` (it may), ``"held"`` (the env-step cap is reached only if the env steps
            of generations running now are counted: the new generation waits for them to
            end, since a cancelled or failed one gives its steps back) or ``"spent"`` (a limit
            is spent whatever the running generations do: the run finishes).
        reason: one line naming the limit (empty when ``ok``).
    """

    state: str
    reason: str = ""

    OK: ClassVar[str] = "ok"
    HELD: ClassVar[str] = "held"
    SPENT: ClassVar[str] = "spent"


def _spent_reason(budget: ClusterBudget, run: Run, *, now: datetime, reserved_steps: int, needed: int) -> str:
    if budget.ended_at is not None:
        return f"budget {budget.name!r} was ended by its owner"
    if budget.gpu_hours_cap is not None and budget.gpu_seconds_used >= budget.gpu_hours_cap * 3600.0:
        return f"budget {budget.name!r}: GPU-hours cap of {budget.gpu_hours_cap:g} h is spent"
    if budget.env_step_cap is not None and budget.env_steps_used + reserved_steps + needed > budget.env_step_cap:
        return (
            f"budget {budget.name!r}: env-step cap of {budget.env_step_cap} is spent "
            f"({budget.env_steps_used} used, a generation needs {needed})"
        )
    if budget.deadline is not None and now >= budget.deadline:
        return f"budget {budget.name!r}: deadline {budget.deadline.isoformat()} has passed"
    if budget.max_wall_clock_s is not None and run.started_at is not None:
        if (now - run.started_at).total_seconds() >= budget.max_wall_clock_s:
            return f"budget {budget.name!r}: wall-clock limit of {budget.max_wall_clock_s} s per run is spent"
    return ""


def budget_verdict(
    budget: ClusterBudget,
    run: Run,
    *,
    reserved_steps: int = 0,
    needed: int | None = None,
    now: datetime | None = None,
) -> BudgetVerdict:
    """The one rule for "is the budget spent, or only held by running generations?".

    A new generation of ``run`` needs ``needed`` env steps; the budget's usage
    counters hold what finished generations used. Limits: the GPU-hours cap, the env-step cap,
    the deadline and the per-run wall clock (from ``run.started_at``).

    Args:
        budget: the budget (read with its row locked when the answer leads to a write).
        run: the run wanting a generation.
        reserved_steps: env steps of the budget's generations running now (other than the one
            being decided); they count against the env-step cap until they end.
        needed: env steps the new generation will train, when known (its claim knows the
            algorithm and hyperparameters: :func:`~webapp.runs.services.common.trained_env_steps`,
            whole rollouts, so at least ``run.generation_steps``); ``None``: the fewest a generation
            of the run trains (:func:`~webapp.runs.services.common.fewest_trained_steps`).
        now: the time to judge deadline and wall clock at (default: now).

    Returns:
        ``spent`` when a limit is spent without counting ``reserved_steps``; else ``held``
        when counting them the env-step cap is reached; else ``ok``.
    """
    now = now or timezone.now()
    if needed is None:  # an unsaved run without a task (the table tests): the steps asked
        needed = run.generation_steps if run.task_id is None else fewest_trained_steps(run.task, run.generation_steps)
    reason = _spent_reason(budget, run, now=now, reserved_steps=0, needed=needed)
    if reason:
        return BudgetVerdict(BudgetVerdict.SPENT, reason)
    if reserved_steps:
        reason = _spent_reason(budget, run, now=now, reserved_steps=reserved_steps, needed=needed)
        if reason:
            return BudgetVerdict(BudgetVerdict.HELD, reason)
    return BudgetVerdict(BudgetVerdict.OK)


def budget_refusal(budget: ClusterBudget, verdict: BudgetVerdict, *, verb: str, user) -> AppError:
    """The 409 a run gets when ``verdict`` (not ``ok``) keeps it from ``verb`` (``"start"``,
    ``"resume"``, ``"create a run"``): the verdict's reason and what ``user`` (the run's owner)
    can do about it, also under the field ``budget`` (where the new-run form shows it)."""
    if budget.ended_at is not None:
        advice = "choose another budget"
    elif budget.purpose == "own" or user.is_staff:
        advice = "raise its limits on the Budgets page (PATCH /api/budgets/<id>/) or choose another budget"
    else:
        advice = "ask staff to raise its limits, or choose another budget"
    why = f"{verdict.reason}; {advice}"
    return AppError(f"cannot {verb}: {why}", fields={"budget": why}, status=409)


def budget_dispatch(budget: ClusterBudget) -> int:
    """Send task messages for the budget's oldest undispatched queued generations, as many as
    it has free slots (call with the budget row locked). Returns how many were sent."""
    free = budget.max_concurrent_pods - budget_running_generations(budget.id).count()
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
        transaction.on_commit(lambda: send_generation_tasks(ids))
    return len(ids)


def send_generation_tasks(ids: list[int]) -> None:
    """Send one ``run_generation`` message per id (after the dispatching transaction
    committed). A message that cannot be sent (broker down) leaves its generation undispatched,
    so the next sweep (at the latest when the broker is back) sends it."""
    for gen_id in ids:
        try:
            # by task name: the tasks module imports these services, so they do not import it
            celery_app.send_task(RUN_GENERATION_TASK, args=[gen_id], task_id=broker.generation_task_id(gen_id))
        except Exception as exc:
            logger.warning("could not send generation %s (%s); the sweep will send it", gen_id, exc)
            Generation.objects.filter(pk=gen_id, status__in=Generation.CLAIMABLE).update(dispatched_at=None)
