"""Reads of runs, agents, tasks and datasets: the runs list, one user's objects, the leaderboard
rows, a run's score history and the ``TaskSpec`` dict a generation trains on. Nothing here
writes (the other reads of the app are the sibling modules of this package: budgets, payloads,
lineage, curves, compare, ...).

Functions taking ``user`` are scoped to that user: a row of somebody else's answers ``None``
(views turn that into a 404), so there is one place to get isolation right.
"""

from __future__ import annotations

import bisect
from typing import Any

from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from webapp import engine
from webapp.market.models import Dataset
from webapp.runs import algorithms
from webapp.runs.models import Agent, Generation, Pod, Run, Task

HISTORY_MAX_POINTS = 2000


# --- runs list -----------------------------------------------------------------------------


def _count_subquery(qs: QuerySet) -> Subquery:
    """``(SELECT COUNT(*) ...)`` correlated on the outer run; one scalar per listed row."""
    return Coalesce(
        Subquery(qs.order_by().values("run_id").annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()),
        Value(0),
    )


def run_list(*, user, status: str = "", algorithm: str = "", search: str = "", tag: str = "") -> QuerySet[Run]:
    """The user's runs, newest first, with what the list shows annotated (no N+1).

    Annotations: ``pods_running`` (generations running now), ``agents_count`` (agents its pods
    trained; ensembles are not counted), ``ensembles_count`` (ensembles built of them),
    ``env_steps_done`` (env steps of finished generations). ``task`` and ``budget`` are joined;
    :func:`with_score_notes` adds what the pages need to show short-window scores as n/a.

    Args:
        status: one of ``Run.Status`` values, or empty for all.
        algorithm: ``ppo``/``sac``, or empty for all.
        search: matches the run name, the task name or the run id.
        tag: one of the run's tags (compared lower case), or empty for all.
    """
    qs = Run.objects.filter(owner=user).select_related("task", "budget", "owner")
    if status:
        qs = qs.filter(status=status)
    if algorithm:
        qs = qs.filter(task__algorithm=algorithm)
    search = (search or "").strip()
    if search:
        cond = Q(name__icontains=search) | Q(task__name__icontains=search)
        if search.isdigit():
            cond |= Q(pk=int(search))
        qs = qs.filter(cond)
    tag = (tag or "").strip().lower()
    if tag:
        qs = qs.filter(tags__list_has=tag)
    running = Generation.objects.filter(run_id=OuterRef("pk"), status=Generation.Status.RUNNING)
    agents = Agent.objects.filter(run_id=OuterRef("pk"), kind=Agent.Kind.TRAINED)
    ensembles = Agent.objects.filter(run_id=OuterRef("pk"), kind=Agent.Kind.ENSEMBLE)
    done = (
        Generation.objects.filter(run_id=OuterRef("pk"), status=Generation.Status.DONE)
        .order_by()
        .values("run_id")
        .annotate(total=Sum("env_steps"))
        .values("total")[:1]
    )
    return qs.annotate(
        pods_running=_count_subquery(running),
        agents_count=_count_subquery(agents),
        ensembles_count=_count_subquery(ensembles),
        env_steps_done=Coalesce(Subquery(done, output_field=IntegerField()), Value(0)),
    ).order_by("-created_at", "-id")


# --- objects of one user -------------------------------------------------------------------


def run_get(*, user, run_id: int) -> Run | None:
    """One of the user's runs with task, dataset and budget joined, or ``None`` (also for
    other users' runs)."""
    return Run.objects.filter(owner=user, pk=run_id).select_related("task", "task__dataset", "budget").first()


def agent_queryset(*, user) -> QuerySet[Agent]:
    """Agents of the user's runs, with what a row shows joined."""
    return Agent.objects.filter(run__owner=user).select_related("run", "pod", "generation")


def agent_get(*, user, agent_id: int) -> Agent | None:
    """One agent of one of the user's runs, or ``None``."""
    return agent_queryset(user=user).filter(pk=agent_id).first()


def leaderboard_queryset(run: Run) -> QuerySet[Agent]:
    """The run's leaderboard, best first (ties: older first), rows ready to render."""
    return (
        Agent.objects.filter(run=run, on_leaderboard=True)
        .select_related("pod", "generation")
        .order_by(F("score").desc(nulls_last=True), "created_seq")
    )


def dataset_queryset(*, user) -> QuerySet[Dataset]:
    return Dataset.objects.filter(owner=user)


def task_queryset(*, user) -> QuerySet[Task]:
    return Task.objects.filter(owner=user).select_related("dataset")


def score_history(run: Run, *, max_points: int = HISTORY_MAX_POINTS) -> list[dict[str, Any]]:
    """Best and median leaderboard score after each submitted agent, oldest first.

    Replays the leaderboard policy (the K best scores; agents without a score never rank)
    over the run's trained agents in submission order (ensembles never rank).

    Returns:
        ``[{"t": ISO time, "best": float, "median": float, "agents": int}]``, thinned evenly to
        at most ``max_points`` points (the last one is always kept).
    """
    k = max(1, run.leaderboard_size)
    top: list[float] = []  # ascending, the K best scores so far
    points = []
    rows = (
        Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED)
        .order_by("created_seq")
        .values_list("created_at", "score")
    )
    for n, (created_at, score) in enumerate(rows.iterator(chunk_size=2000), start=1):
        if score is None:
            continue
        bisect.insort(top, score)
        if len(top) > k:
            del top[0]
        mid = len(top) // 2
        median = top[mid] if len(top) % 2 else (top[mid - 1] + top[mid]) / 2  # top is sorted
        points.append({"t": created_at.isoformat(), "best": top[-1], "median": median, "agents": n})
    if len(points) > max_points:
        step = len(points) / max_points
        thinned = [points[int(i * step)] for i in range(max_points - 1)]
        points = thinned + [points[-1]]
    return points


def run_pods(run: Run) -> list[Pod]:
    """The run's pods by index (retired ones included, the page greys them)."""
    return list(run.pods.order_by("index"))


# --- tasks ---------------------------------------------------------------------------------


def task_spec(task: Task, algorithm: str | None = None) -> dict[str, Any]:
    """The ``trainer.pod.TaskSpec`` dict a generation trains on (with ``algorithm``, one of
    the task's allowed algorithms; ``None`` = ``task.algorithm``)."""
    algorithm = algorithm or task.algorithm
    return engine.task_spec_dict(
        data={"paths": task.dataset.source_paths(), "tickers": list(task.tickers), **task.dataset.data_options()},
        splits=task.splits,
        env=task.env,
        algorithm=algorithm,
        hyperparameters=algorithms.algorithm_hyperparameters(task, algorithm),
        kind=task.kind,
        selection=task.selection,
    )
