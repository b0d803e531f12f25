"""What the New run page needs to estimate a run before it starts: each budget's room left,
the training speed the workers measured on recent generations and how many training workers
are alive (reads only; the page's script does the arithmetic as the user edits the form,
``static/js/run_estimate.js``: pods at once = min(pods, the budget's max concurrent pods,
training workers alive))."""

from __future__ import annotations

from typing import Any

from django.db.models import DurationField, ExpressionWrapper, F
from django.utils import timezone

from webapp.runs.models import ClusterBudget, Generation

#: Generations the speed is measured over (the latest done ones of that algorithm).
SPEED_SAMPLE = 50


def measured_speed(*, algorithm: str, sample: int = SPEED_SAMPLE) -> dict[str, Any] | None:
    """Env steps per second of one pod, measured over the latest ``sample`` done generations
    of ``algorithm`` on any worker: their env steps over their wall time (training,
    evaluation and the worker's overhead included). ``None`` without any."""
    rows = list(
        Generation.objects.filter(
            status=Generation.Status.DONE,
            run__task__algorithm=algorithm,
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .annotate(took=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))
        .order_by("-finished_at")
        .values_list("env_steps", "took")[:sample]
    )
    seconds = sum(t.total_seconds() for _, t in rows if t is not None)
    steps = sum(int(s) for s, t in rows if t is not None)
    if not rows or seconds <= 0:
        return None
    return {"steps_per_s": steps / seconds, "generations": len(rows)}


def budget_room(budget: ClusterBudget) -> dict[str, Any]:
    """What is left of a budget for a new run: env steps, device seconds, seconds to the
    deadline (``None`` = no limit), its wall clock per run and pods at once."""
    now = timezone.now()
    return {
        "name": budget.name,
        "env_steps_left": None if budget.env_step_cap is None else max(0, budget.env_step_cap - budget.env_steps_used),
        "device_seconds_left": None
        if budget.gpu_hours_cap is None
        else max(0.0, budget.gpu_hours_cap * 3600 - budget.gpu_seconds_used),
        "deadline_s": None if budget.deadline is None else max(0.0, (budget.deadline - now).total_seconds()),
        "max_wall_clock_s": budget.max_wall_clock_s,
        "max_concurrent_pods": budget.max_concurrent_pods,
    }


def training_workers() -> int | None:
    """Training workers alive now: those whose heartbeat (the source ``/healthz`` reads,
    :func:`webapp.core.workers.read_heartbeats`) says they consume the ``gpu`` queue. Each
    trains one generation at a time (concurrency 1), so this many pods train at once at most.
    ``None`` when Redis does not answer (unknown)."""
    import redis

    from webapp.config.celery import app
    from webapp.core.workers import read_heartbeats

    try:
        beats = read_heartbeats(app.conf.broker_url)
    except redis.RedisError:
        return None
    return sum(1 for b in beats if "gpu" in (b.get("queues") or []))


def estimate_inputs(*, budgets, algorithms) -> dict[str, Any]:
    """The page's JSON: ``{"budgets": {id: budget_room}, "speed": {algorithm: measured_speed},
    "training_workers": training_workers()}``."""
    return {
        "budgets": {str(b.pk): budget_room(b) for b in budgets},
        "speed": {a: measured_speed(algorithm=a) for a in algorithms},
        "training_workers": training_workers(),
    }
