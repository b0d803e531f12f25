"""One configuration run with several seeds: N runs of the same task and settings, seeds
``seed`` to ``seed + N - 1``, sharing a ``seed_group`` whose statistics the run page shows
(:mod:`webapp.runs.selectors.seed_groups`)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from webapp.core.errors import AppError
from webapp.runs import bounds
from webapp.runs.models import Run, Task
from webapp.runs.services.lifecycle import run_create, run_start


@transaction.atomic
def runs_create_seeds(*, owner, task: Task, seeds: int, seed: int = 0, name: str = "", **settings: Any) -> list[Run]:
    """Create ``seeds`` runs of ``task`` with seeds ``seed, seed + 1, ...`` (one group).

    Args:
        seeds: how many runs (``bounds.SEEDS``: 1 to 32); 1 makes one run without a group.
        seed: the first seed.
        name: the runs' name; each gets `` · seed <s>`` after it when there are several.
        settings: the rest of :func:`run_create`'s arguments (budget, num_pods, ...).

    Returns:
        The runs, in seed order.

    Raises:
        AppError: ``seeds`` out of bounds (400 naming it), or what :func:`run_create` raises
            for the first run (every run has the same settings); nothing is kept then.
    """
    why = bounds.SEEDS.error(seeds)
    if why:
        raise AppError(f"seeds: {why}", fields={"seeds": why})
    if seeds == 1:
        return [run_create(owner=owner, task=task, seed=seed, name=name, **settings)]
    group = uuid.uuid4().hex
    base = name or f"{task.name} run"
    runs = []
    for offset in range(int(seeds)):
        run = run_create(owner=owner, task=task, seed=seed + offset, name=f"{base} · seed {seed + offset}", **settings)
        Run.objects.filter(pk=run.pk).update(seed_group=group)
        run.seed_group = group
        runs.append(run)
    return runs


@transaction.atomic
def runs_create_with_task(*, owner, task: Task, seeds: int, **settings: Any) -> list[Run]:
    """Store a task made by ``task_prepare`` (validated before, outside any transaction: that
    reads the data files) and create its runs (:func:`runs_create_seeds`, same arguments) in one
    transaction: the task and its runs, or neither.

    Raises:
        AppError: as :func:`runs_create_seeds`; the task is not kept then.
    """
    task.save()
    return runs_create_seeds(owner=owner, task=task, seeds=seeds, **settings)


def runs_start(runs: list[Run]) -> list[str]:
    """Start each run; the message of each one refused (e.g. its budget is spent), in order."""
    refused = []
    for run in runs:
        try:
            run_start(run=run)
        except AppError as exc:
            refused.append(f"{run.name}: {exc.message}")
    return refused
