"""The live run page's ETA (reads): the time until the budget's binding limit ends the run.

Each limit of the budget gives its own time left, and the smallest one binds:

- env-step cap: the env steps left (finished generations' and those of the pods training now
  taken off) over the training rate of the budget's pods right now (their ``steps_per_s``
  summed: the current rate, not the average since the start, which counts set-up and the
  first generation's warm-up and so overstates the time left early in a run); between
  generations, when no pod is training, the rate of the last finished generations times the
  pods that train at once;
- device-hours cap: the device seconds left over the pods training now (each pod holds one);
- wall clock per run and deadline: the time left on the clock.

A limit whose rate is unknown (no pod training yet) gives no time; ``None`` when none does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone

from webapp.runs.models import ClusterBudget, Generation, Pod, Run

#: Finished generations whose rate stands in when no pod is training at the moment.
RECENT_GENERATIONS = 8

LABELS = {
    "env_steps": "env-step cap",
    "gpu_hours": "device-hours cap",
    "wall_clock": "wall clock per run",
    "deadline": "deadline",
}


def budget_eta(budget: ClusterBudget, run: Run, *, now: datetime | None = None) -> dict[str, Any]:
    """``{"seconds": time left (s) or None, "limit": key of LABELS or None, "label": words}``
    for ``run`` on ``budget`` (one query for the pods training now)."""
    now = now or timezone.now()
    pods = Pod.objects.filter(run__budget=budget, run__status__in=Run.ACTIVE, state=Pod.State.TRAINING).aggregate(
        rate=Sum("steps_per_s"), inflight=Sum("env_steps"), n=Count("id")
    )
    rate, inflight, running = float(pods["rate"] or 0.0), int(pods["inflight"] or 0), int(pods["n"] or 0)
    if rate <= 0:
        rate = _recent_rate(budget, run)
    left: dict[str, float] = {}
    if budget.env_step_cap and rate > 0:
        left["env_steps"] = max(0.0, budget.env_step_cap - budget.env_steps_used - inflight) / rate
    if budget.gpu_hours_cap and running:
        left["gpu_hours"] = max(0.0, budget.gpu_hours_cap * 3600.0 - budget.gpu_seconds_used) / running
    if budget.max_wall_clock_s and run.started_at:
        left["wall_clock"] = max(0.0, budget.max_wall_clock_s - (now - run.started_at).total_seconds())
    if budget.deadline:
        left["deadline"] = max(0.0, (budget.deadline - now).total_seconds())
    if not left:
        return {"seconds": None, "limit": None, "label": ""}
    limit = min(left, key=left.get)
    return {"seconds": round(left[limit], 1), "limit": limit, "label": LABELS[limit]}


def _recent_rate(budget: ClusterBudget, run: Run) -> float:
    """Env steps per second of the budget's last finished generations (each timed from claim
    to result), times the pods that train at once (the budget's pods at once, at most the
    run's pods); 0 before any finished."""
    rows = (
        Generation.objects.filter(
            run__budget=budget, status=Generation.Status.DONE, started_at__isnull=False, finished_at__isnull=False
        )
        .order_by("-finished_at")
        .values_list("env_steps", "started_at", "finished_at")[:RECENT_GENERATIONS]
    )
    rates = [steps / (end - start).total_seconds() for steps, start, end in rows if end > start and steps]
    if not rates:
        return 0.0
    return sum(rates) / len(rates) * min(budget.max_concurrent_pods, run.num_pods)
