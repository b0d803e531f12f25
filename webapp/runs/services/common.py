"""What every part of the runs services shares: settings, limits, row locks and the events
that tell live pages a budget, run or pod changed.

Lock order, wherever two rows are written in one transaction: the budget row first
(:func:`lock_budget`), then the run (:func:`lock_budget_and_run`), then generations and pods
(conditional updates, no row locks). Every service that locks takes them in this order, so two
transactions never wait on each other in a circle.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from webapp.core.errors import AppError
from webapp.runs import events, selectors
from webapp.runs.models import ClusterBudget, Generation, Pod, Run

MAX_ATTEMPTS = 3
MAX_PODS = 256
#: Env steps per generation when a run does not say (the New run form and the API): one PPO
#: rollout at the default hyperparameters (1 024 envs x 16 steps).
DEFAULT_GENERATION_STEPS = 16_384


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def stale_after_s() -> float:
    """Seconds without a heartbeat after which a running generation is presumed dead."""
    return _setting("PADDOCK_STALE_AFTER_S", 120.0)


def redispatch_after_s() -> float:
    """Seconds after which a queued generation's message is presumed lost and sent again."""
    return _setting("PADDOCK_REDISPATCH_AFTER_S", 60.0)


def check_positive(fields: dict[str, str], name: str, value: Any, *, integer: bool = False) -> None:
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        fields[name] = f"must be a positive {'integer' if integer else 'number'}, got {value!r}"


def raise_field_errors(fields: dict[str, str]) -> None:
    """Raise one :class:`AppError` for the bad fields collected (the first one in its message),
    or nothing when ``fields`` is empty."""
    if fields:
        name, message = next(iter(fields.items()))
        raise AppError(f"{name}: {message}", fields=fields)


def lock_budget(budget_id: int) -> ClusterBudget:
    """Lock a budget row (``SELECT ... FOR UPDATE``) for the rest of the transaction.

    Lock order: the budget row is always the FIRST lock a service takes; a run row, if any,
    comes after it (:func:`lock_budget_and_run`).
    """
    return ClusterBudget.objects.select_for_update().get(pk=budget_id)


def lock_budget_and_run(run: Run) -> tuple[ClusterBudget, Run]:
    """Lock ``run``'s budget row, then the run row, in that order (the one lock order of the
    runs services), and return both freshly read."""
    budget = lock_budget(run.budget_id)  # lock order: 1. budget
    locked = Run.objects.select_for_update().get(pk=run.pk)  # lock order: 2. run
    return budget, locked


def publish_run(run: Run) -> None:
    run.refresh_from_db()
    events.publish(run.id, events.RUN_UPDATE, {"run": selectors.run_payload(run)})


def publish_budget_usage(budget_id: int, run: Run | None = None) -> None:
    """Send ``run.update`` to ``run`` and to every other active run on the budget: its usage
    (pods running, env steps, GPU hours) is on each of their pages and has changed."""
    if run is not None:
        publish_run(run)
    others = Run.objects.filter(budget_id=budget_id).exclude(status__in=Run.TERMINAL)
    if run is not None:
        others = others.exclude(pk=run.pk)
    for other in others.select_related("budget"):
        events.publish(other.id, events.RUN_UPDATE, {"run": selectors.run_payload(other)})


def publish_pod(pod: Pod, gen: Generation | None = None) -> None:
    events.publish(pod.run_id, events.POD_UPDATE, {"pod": selectors.pod_payload(pod, gen)})
