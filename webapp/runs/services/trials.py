"""The trial ledger's writes: every trained agent is one trial of its task (``models.Trial``)."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction

from webapp.runs.models import Agent, Trial


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def trial_record(*, agent: Agent) -> Trial | None:
    """Enter a trained agent in its task's trial ledger, once (a second call returns the same
    row); ``None`` for an ensemble, which is no new trial."""
    if agent.kind != Agent.Kind.TRAINED:
        return None
    metrics = agent.metrics or {}
    rel = metrics.get("vs_equal_weight") or {}
    with transaction.atomic():
        trial, _ = Trial.objects.get_or_create(
            agent=agent,
            defaults={
                "task_id": agent.run.task_id,
                "run_id": agent.run_id,
                "sharpe_ratio": _finite(metrics.get("sharpe_ratio")),
                "information_ratio": _finite(rel.get("information_ratio")),
                "num_periods": metrics.get("num_periods") or metrics.get("num_days"),
            },
        )
    return trial
