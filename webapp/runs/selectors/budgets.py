"""Reads of budgets: the generations holding a budget's slots, its live usage, how much of it
is spent (the one "% used" definition) and the budgets a user sees. Nothing here writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from webapp.runs.models import ClusterBudget, Generation, Run


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def budget_running_generations(budget_id: int) -> QuerySet[Generation]:
    """Generations holding one of the budget's slots: running, or stale (their worker may still
    be alive) across every run on the budget."""
    return Generation.objects.filter(
        run__budget_id=budget_id, status__in=(Generation.Status.RUNNING, Generation.Status.STALE)
    )


def reserved_steps(running: QuerySet[Generation]) -> int:
    """Env steps the generations in ``running`` (e.g. :func:`budget_running_generations`)
    will train: what they hold of a budget's env-step cap until they end."""
    return int(running.aggregate(total=Sum("env_steps"))["total"] or 0)


def budget_usage(budget: ClusterBudget) -> dict[str, Any]:
    """Live usage of a budget: ``pods_running``, ``gpu_seconds_used``, ``gpu_hours_used``,
    ``env_steps_used`` and the caps (``None`` = unlimited)."""
    running = budget_running_generations(budget.id)
    reserved = reserved_steps(running)
    return {
        "budget_id": budget.id,
        "name": budget.name,
        "pods_running": running.count(),
        "max_concurrent_pods": budget.max_concurrent_pods,
        "gpu_seconds_used": round(budget.gpu_seconds_used, 3),
        "gpu_hours_used": round(budget.gpu_seconds_used / 3600.0, 6),
        "gpu_hours_cap": budget.gpu_hours_cap,
        "env_steps_used": budget.env_steps_used,
        "env_steps_reserved": int(reserved),
        "env_step_cap": budget.env_step_cap,
        "deadline": _iso(budget.deadline),
        "max_wall_clock_s": budget.max_wall_clock_s,
    }


#: Names of the limits in :func:`budget_progress`, as pages label them.
BUDGET_LIMIT_LABELS = {
    "env_steps": "env steps",
    "gpu_hours": "device hours",
    "wall_clock": "wall clock per run",
    "deadline": "deadline",
}


def budget_progress(
    budget: ClusterBudget, run: Run | None = None, *, now: datetime | None = None, runs: list[Run] | None = None
) -> dict[str, Any]:
    """How much of a budget is spent: the one definition behind every "% used" (runs list,
    run page, ``budget_progress`` of ``/api/runs/<id>``, ``progress`` of ``/api/budgets/<id>``).

    Each limit the budget sets gives a fraction in [0, 1]:

    - ``env_steps``: env steps trained on the budget / ``env_step_cap``;
    - ``gpu_hours``: device time (GPU or CPU) used on the budget / ``gpu_hours_cap``;
    - ``wall_clock``: time since the run started (to its end, if it ended) / ``max_wall_clock_s``;
    - ``deadline``: time since the run started / time from its start to ``deadline``.

    The last two are per run: for ``run`` when given, else the largest over the budget's
    active runs (``runs``, or loaded here). ``fraction`` is the largest of them all, the limit
    that ends runs first; ``limit`` names it.

    Returns:
        ``{"fraction": float | None, "limit": str | None, "limit_label": str | None,
        "limits": {name: fraction}}``; all ``None`` (``limits`` empty) when nothing limits the
        budget. ``limit_label`` is the limit's name as pages show it.
    """
    now = now or timezone.now()
    limits: dict[str, float] = {}
    if budget.env_step_cap:
        limits["env_steps"] = budget.env_steps_used / budget.env_step_cap
    if budget.gpu_hours_cap:
        limits["gpu_hours"] = budget.gpu_seconds_used / (budget.gpu_hours_cap * 3600.0)
    if budget.max_wall_clock_s or budget.deadline:
        if run is not None:
            timed = [run]
        elif runs is not None:
            timed = runs
        else:
            timed = list(Run.objects.filter(budget_id=budget.id, status__in=Run.ACTIVE))
        for r in timed:
            if r.started_at is None:
                continue
            elapsed = ((r.finished_at or now) - r.started_at).total_seconds()
            if budget.max_wall_clock_s:
                limits["wall_clock"] = max(limits.get("wall_clock", 0.0), elapsed / budget.max_wall_clock_s)
            total = (budget.deadline - r.started_at).total_seconds() if budget.deadline else 0.0
            if total > 0:
                limits["deadline"] = max(limits.get("deadline", 0.0), elapsed / total)
    limits = {k: round(max(0.0, min(1.0, v)), 6) for k, v in limits.items()}
    if not limits:
        return {"fraction": None, "limit": None, "limit_label": None, "limits": {}}
    limit = max(limits, key=limits.get)
    return {"fraction": limits[limit], "limit": limit, "limit_label": BUDGET_LIMIT_LABELS[limit], "limits": limits}


def budget_queryset(*, user) -> QuerySet[ClusterBudget]:
    """Budgets a user sees: their own; staff see every budget."""
    qs = ClusterBudget.objects.select_related("owner")
    return qs if user.is_staff else qs.filter(owner=user)


def budgets_with_usage(*, user) -> list[tuple[ClusterBudget, dict[str, Any]]]:
    """Each visible budget with its live usage (:func:`budget_usage`) and run count.

    Three queries in all: budgets with run counts, running generations grouped by budget, and
    the active runs (whose wall clock counts in ``progress``).
    """
    budgets = list(
        budget_queryset(user=user).annotate(
            runs_count=Count("runs", distinct=True),
            active_runs=Count("runs", filter=Q(runs__status__in=Run.ACTIVE), distinct=True),
        )
    )
    running = dict(
        Generation.objects.filter(
            run__budget__in=budgets, status__in=(Generation.Status.RUNNING, Generation.Status.STALE)
        )
        .order_by()
        .values_list("run__budget_id")
        .annotate(n=Count("id"))
    )
    active: dict[int, list[Run]] = {b.id: [] for b in budgets}
    for r in Run.objects.filter(budget__in=budgets, status__in=Run.ACTIVE):
        active[r.budget_id].append(r)
    out = []
    for b in budgets:
        usage = {
            "pods_running": running.get(b.id, 0),
            "gpu_hours_used": b.gpu_seconds_used / 3600.0,
            "progress": budget_progress(b, runs=active[b.id]),
        }
        out.append((b, usage))
    return out


def users_for_budgets() -> QuerySet:
    """Active users a staff member may assign a budget to."""
    return get_user_model().objects.filter(is_active=True).order_by("username")
