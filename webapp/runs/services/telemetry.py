"""Training telemetry (writes): the per-generation training curves the trainer records.

``point_record`` stores a point while a generation trains and ``points_store`` the full curve
when it ends, as :class:`~webapp.runs.models.TrainingPoint` rows (read by
:mod:`webapp.runs.selectors.curves`). The trainer records at most ``TELEMETRY_MAX_POINTS``
points per generation (``trainer.pod.GenerationResult.telemetry``); each point is stored as it
is recorded and sent as a numbered ``metrics`` event (``events.METRICS``), so the run page's
curves grow live. The event's payload is built from the generation row this service read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction

from webapp.core.formatting import finite_or_none
from webapp.runs import events
from webapp.runs.models import Generation, TrainingPoint
from webapp.runs.selectors.curves import METRICS, curve_head

#: Most points a generation may store (the trainer's ``TELEMETRY_MAX_POINTS``, plus slack for
#: a point recorded twice by a redelivered attempt, which is not read).
MAX_POINTS_PER_GENERATION = 50


def _row(point: Mapping[str, Any]) -> dict[str, Any]:
    row = {name: finite_or_none(point.get(name)) for name in METRICS}
    row["total_env_steps"] = int(point.get("total_env_steps") or 0)
    row["env_steps"] = int(point.get("generation_env_steps", point.get("env_steps")) or 0)
    row["elapsed_s"] = finite_or_none(point.get("elapsed_s")) or 0.0
    return row


def point_record(*, run_id: int, generation_id: int, attempt: int, pod_index: int, point: Mapping[str, Any]) -> bool:
    """Store one point of a running generation and send it as a ``metrics`` event.

    Only the attempt that holds the generation stores (a late or reaped attempt's point is
    dropped), and at most :data:`MAX_POINTS_PER_GENERATION` per attempt.

    Returns:
        Whether the point was stored.
    """
    with transaction.atomic():
        gen = (
            Generation.objects.filter(pk=generation_id, attempt=attempt, status=Generation.Status.RUNNING)
            .select_related("parent")
            .first()
        )
        if gen is None:
            return False
        if TrainingPoint.objects.filter(generation=gen, attempt=attempt).count() >= MAX_POINTS_PER_GENERATION:
            return False
        row = _row(point)
        TrainingPoint.objects.create(run_id=run_id, generation=gen, attempt=attempt, **row)
        events.publish(
            run_id,
            events.METRICS,
            {"pod": pod_index, "curve": curve_head(gen, None, pod_index), "point": row},
        )
    return True


def points_store(*, run_id: int, generation_id: int, attempt: int, points: Iterable[Mapping[str, Any]]) -> None:
    """Replace an attempt's stored points by the full curve the trainer returned (inside the
    transaction that stores the generation's result; a point missed live is filled in)."""
    rows = [_row(p) for p in list(points)[:MAX_POINTS_PER_GENERATION]]
    TrainingPoint.objects.filter(generation_id=generation_id, attempt=attempt).delete()
    TrainingPoint.objects.bulk_create(
        [TrainingPoint(run_id=run_id, generation_id=generation_id, attempt=attempt, **row) for row in rows]
    )
