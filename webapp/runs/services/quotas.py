"""Budgets of one's own: any user creates, raises and ends budgets within their quota
(:mod:`webapp.runs.selectors.quotas`), and staff set a user's quota. Budgets staff assign and the
demo's budget are made by :func:`webapp.runs.services.budgets.budget_create` and count
against no quota.

Lock order: see :mod:`webapp.runs.services.common` (budget row first, then the run). Creating
or raising an own budget locks the owner's quota row first, so that two requests at once
cannot both take the last hours left.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from webapp.core.errors import AppError
from webapp.demo.profiles import BUDGET_NAME, INTRADAY_BUDGET_NAME
from webapp.runs import bounds
from webapp.runs.models import BudgetQuota, ClusterBudget
from webapp.runs.selectors import quotas
from webapp.runs.services.budgets import BUDGET_EDITABLE, budget_dispatch, budget_errors, budget_update
from webapp.runs.services.common import lock_budget, publish_budget_usage

#: Names the demo's budgets take; an own budget of that name would be mistaken for them.
RESERVED_NAMES = (BUDGET_NAME, INTRADAY_BUDGET_NAME)


def _lock_quota(user) -> None:
    BudgetQuota.objects.get_or_create(user=user)
    BudgetQuota.objects.select_for_update().get(user=user)


def _own_errors(*, owner, values: dict[str, Any], exclude_id: int | None = None) -> dict[str, str]:
    fields = budget_errors(
        owner=owner,
        name=values.get("name"),
        deadline=values.get("deadline"),
        exclude_id=exclude_id,
        **{k: values.get(k) for k in bounds.BUDGET},
    )
    if str(values.get("name") or "").strip() in RESERVED_NAMES:
        fields.setdefault("name", "is the name of the demo's budget; choose another")
    quota = quotas.quota_of(owner, exclude_id=exclude_id)
    for name, why in quotas.quota_errors(
        quota, gpu_hours_cap=values.get("gpu_hours_cap"), max_concurrent_pods=values.get("max_concurrent_pods")
    ).items():
        fields.setdefault(name, why)
    return fields


@transaction.atomic
def budget_create_own(
    *,
    actor,
    name: str,
    gpu_hours_cap: float | None = None,
    max_concurrent_pods: int = 1,
    max_wall_clock_s: int | None = None,
    deadline=None,
    env_step_cap: int | None = None,
) -> ClusterBudget:
    """Create a budget of the actor's own, within their quota.

    Args:
        actor: the user; the budget's owner.
        gpu_hours_cap: device hours (required: it is what the quota counts).
        max_concurrent_pods: pods at once (counted by the quota too).
        max_wall_clock_s, deadline, env_step_cap: further limits, ``None`` = none.

    Raises:
        AppError: 400 with every bad field at once; a cap or pod count above the quota names
            the quota and what is left of it.
    """
    _lock_quota(actor)
    values = {
        "name": name,
        "gpu_hours_cap": gpu_hours_cap,
        "max_concurrent_pods": max_concurrent_pods,
        "max_wall_clock_s": max_wall_clock_s,
        "deadline": deadline,
        "env_step_cap": env_step_cap,
    }
    bounds.raise_all(_own_errors(owner=actor, values=values))
    return ClusterBudget.objects.create(
        owner=actor,
        purpose="own",
        **{**values, "name": str(name).strip(), "max_concurrent_pods": int(max_concurrent_pods)},
    )


@transaction.atomic
def budget_change(*, actor, budget: ClusterBudget, **changes: Any) -> ClusterBudget:
    """Change a budget: staff any budget (:func:`budget_update`); its owner an own budget that
    is not ended, within the quota (the owner stays).

    Raises:
        AppError: 403 (not staff and not an open own budget of the actor's), 400 naming each
            bad field (the quota named where a cap or the pods exceed it).
    """
    if actor.is_staff:
        return budget_update(actor=actor, budget=budget, **changes)
    if budget.owner_id != actor.id or budget.purpose != "own":
        raise AppError("only staff can change a budget they assigned", status=403)
    if budget.ended_at is not None:
        raise AppError("budget ended: it cannot be changed", fields={"budget": "ended"}, status=409)
    fields = {name: "cannot be changed" for name in changes if name not in BUDGET_EDITABLE or name == "owner"}
    if "max_concurrent_pods" in changes and changes["max_concurrent_pods"] is None:
        fields["max_concurrent_pods"] = "required"
    _lock_quota(actor)
    values = {name: getattr(budget, name) for name in BUDGET_EDITABLE if name != "owner"}
    values.update({k: v for k, v in changes.items() if k in values})
    if "deadline" not in changes:
        values["deadline"] = None  # a deadline already passed is not this change's error
    for name, why in _own_errors(owner=actor, values=values, exclude_id=budget.pk).items():
        fields.setdefault(name, why)
    bounds.raise_all(fields)
    budget = lock_budget(budget.pk)
    for name, value in changes.items():
        setattr(budget, name, str(value).strip() if name == "name" else value)
    budget.save(update_fields=list(changes) or None)
    budget_dispatch(budget)  # a raised pod count takes effect at once
    publish_budget_usage(budget.pk)
    return budget


@transaction.atomic
def budget_end(*, actor, budget: ClusterBudget) -> ClusterBudget:
    """End a budget: no generation starts on it any more (its running runs finish when their
    running generations end) and, if it is an own budget, its quota is free again.

    Raises:
        AppError: 403 (neither staff nor the owner of an own budget), 409 (already ended).
    """
    if not actor.is_staff and (budget.owner_id != actor.id or budget.purpose != "own"):
        raise AppError("only staff can end a budget they assigned", status=403)
    budget = lock_budget(budget.pk)
    if budget.ended_at is not None:
        raise AppError("budget already ended", fields={"budget": "ended"}, status=409)
    budget.ended_at = timezone.now()
    budget.save(update_fields=["ended_at"])
    publish_budget_usage(budget.pk)
    return budget


@transaction.atomic
def quota_set(*, actor, user, device_hours: float | None, max_concurrent_pods: int | None) -> BudgetQuota:
    """Set a user's quota (staff only); ``None`` goes back to the settings' default.

    Raises:
        AppError: not staff (403), a value outside ``bounds.BUDGET``'s (400, naming the field).
    """
    if not actor.is_staff:
        raise AppError("only staff can change quotas", status=403)
    limits = {
        "device_hours": bounds.BUDGET["gpu_hours_cap"],
        "max_concurrent_pods": bounds.BUDGET["max_concurrent_pods"],
    }
    bounds.raise_all(bounds.errors({"device_hours": device_hours, "max_concurrent_pods": max_concurrent_pods}, limits))
    quota, _ = BudgetQuota.objects.update_or_create(
        user=user, defaults={"device_hours": device_hours, "max_concurrent_pods": max_concurrent_pods}
    )
    return quota
