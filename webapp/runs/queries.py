"""Reads the pages and the API need beyond ``selectors`` (lists, lineage, score history),
plus the lazily exported agent bundle.

Everything here is scoped to a user: a row of somebody else's answers ``None`` (views turn
that into a 404), so there is one place to get isolation right.
"""

from __future__ import annotations

import bisect
import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset
from webapp.runs import selectors, services
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run, Task

logger = logging.getLogger(__name__)

ALGORITHMS = engine.algorithms()
HISTORY_MAX_POINTS = 2000


# --- runs list -----------------------------------------------------------------------------


def _count_subquery(qs: QuerySet) -> Subquery:
    """``(SELECT COUNT(*) ...)`` correlated on the outer run; one scalar per listed row."""
    return Coalesce(
        Subquery(qs.order_by().values("run_id").annotate(n=Count("id")).values("n")[:1], output_field=IntegerField()),
        Value(0),
    )


def run_list(*, user, status: str = "", algorithm: str = "", search: str = "") -> QuerySet[Run]:
    """The user's runs, newest first, with what the list shows annotated (no N+1).

    Annotations: ``pods_running`` (generations running now), ``agents_count``,
    ``env_steps_done`` (env steps of finished generations). ``task`` and ``budget`` are joined.

    Args:
        status: one of ``Run.Status`` values, or empty for all.
        algorithm: ``ppo``/``sac``, or empty for all.
        search: matches the run name, the task name or the run id.
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
    running = Generation.objects.filter(run_id=OuterRef("pk"), status=Generation.Status.RUNNING)
    agents = Agent.objects.filter(run_id=OuterRef("pk"))
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
        env_steps_done=Coalesce(Subquery(done, output_field=IntegerField()), Value(0)),
    ).order_by("-created_at", "-id")


#: The one definition of a budget's "% used" lives with the other reads.
budget_progress = selectors.budget_progress


# --- objects of one user -------------------------------------------------------------------


def run_get(*, user, run_id: int) -> Run | None:
    """One of the user's runs with task, dataset and budget joined, or ``None``."""
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


def budget_queryset(*, user) -> QuerySet[ClusterBudget]:
    """Budgets a user sees: their own; staff see every budget."""
    qs = ClusterBudget.objects.select_related("owner")
    return qs if user.is_staff else qs.filter(owner=user)


def budgets_with_usage(*, user) -> list[tuple[ClusterBudget, dict[str, Any]]]:
    """Each visible budget with its live usage (``selectors.budget_usage``) and run count.

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


# --- agents: lineage and history -----------------------------------------------------------


def agent_lineage(agent: Agent, *, max_depth: int = 500) -> list[dict[str, Any]]:
    """The chain from ``agent`` back to its first ancestor, newest first.

    Each item: ``agent`` (the Agent, pod and generation joined), ``mutations``
    (``{name: [old, new]}`` applied when it was copied from its parent), ``how``: ``fresh``
    (no parent), ``copied`` (from another pod's leaderboard agent, possibly mutated) or
    ``continued`` (its own pod's previous agent, trained further).

    Two queries: the run's ``(id, parent_id)`` edges, then the chain's rows.
    """
    parents = dict(Agent.objects.filter(run_id=agent.run_id).values_list("id", "parent_id"))
    chain = [agent.id]
    while len(chain) < max_depth:
        parent = parents.get(chain[-1])
        if parent is None or parent in chain:
            break
        chain.append(parent)
    rows = {a.id: a for a in Agent.objects.filter(pk__in=chain).select_related("pod", "generation")}
    out = []
    for agent_id in chain:
        a = rows[agent_id]
        parent = rows.get(a.parent_id)
        if a.parent_id is None:
            how = "fresh"
        elif parent is not None and parent.pod_id == a.pod_id and not a.generation.mutations:
            how = "continued"
        else:
            how = "copied"
        out.append({"agent": a, "mutations": a.generation.mutations or {}, "how": how})
    return out


def score_history(run: Run, *, max_points: int = HISTORY_MAX_POINTS) -> list[dict[str, Any]]:
    """Best and median leaderboard score after each submitted agent, oldest first.

    Replays the leaderboard policy (the K best scores; agents without a score never rank)
    over the run's agents in submission order.

    Returns:
        ``[{"t": ISO time, "best": float, "median": float, "agents": int}]``, thinned evenly to
        at most ``max_points`` points (the last one is always kept).
    """
    k = max(1, run.leaderboard_size)
    top: list[float] = []  # ascending, the K best scores so far
    points = []
    rows = Agent.objects.filter(run=run).order_by("created_seq").values_list("created_at", "score")
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


# --- agent bundles -------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A finished bundle file in the default storage.

    Attributes:
        name: storage name of the zip.
        sha256: hex digest of the whole file (the download's ETag).
        size: bytes.
    """

    name: str
    sha256: str
    size: int


def _sidecar_name(agent: Agent) -> str:
    return f"bundles/run-{agent.run_id}/agent-{agent.id}.json"


def _read_sidecar(agent: Agent) -> Bundle | None:
    name = _sidecar_name(agent)
    if not default_storage.exists(name):
        return None
    try:
        with default_storage.open(name, "rb") as fh:
            info = json.loads(fh.read().decode())
        bundle = Bundle(name=info["name"], sha256=info["sha256"], size=int(info["size"]))
        # a sidecar of another checkpoint (an older agent under the same id, e.g. a reused
        # storage folder after the database was recreated) is stale: export again
        if info["checkpoint_sha256"] != agent.sha256:
            return None
    except (ValueError, KeyError, TypeError):
        return None
    return bundle if default_storage.exists(bundle.name) else None


def agent_bundle(agent: Agent) -> Bundle:
    """The agent's downloadable bundle, exported from its checkpoint on first use.

    The zip is written to a local temporary file by the trainer, copied to the default storage,
    and only then is the sidecar ``agent-<id>.json`` (name, sha256, size) written: a reader
    trusts a bundle only through its sidecar, so a half-copied file is never served. Two first
    downloads racing both export; the second to finish keeps the first one's file.

    Raises:
        AppError: the agent has no checkpoint (404) or the checkpoint is unreadable (400).
    """
    found = _read_sidecar(agent)
    if found is not None:
        return found
    if default_storage.exists(_sidecar_name(agent)):  # stale or unreadable: replaced below
        default_storage.delete(_sidecar_name(agent))
    if not agent.checkpoint or not default_storage.exists(agent.checkpoint):
        raise AppError("this agent has no checkpoint to export", status=404)
    with tempfile.TemporaryDirectory(prefix="paddock-bundle-") as tmp:
        local = services.local_copy_of_checkpoint(agent.checkpoint, Path(tmp) / "agent.pt")
        out = Path(tmp) / f"agent-{agent.id}.zip"
        sha256 = engine.export_bundle(local, out)
        size = out.stat().st_size
        with open(out, "rb") as fh:
            stored = default_storage.save(f"bundles/run-{agent.run_id}/agent-{agent.id}.zip", File(fh))
    again = _read_sidecar(agent)
    if again is not None:  # lost a race: keep the first finished bundle
        default_storage.delete(stored)
        return again
    bundle = Bundle(name=stored, sha256=sha256, size=size)
    payload = json.dumps({"name": stored, "sha256": sha256, "size": size, "checkpoint_sha256": agent.sha256}).encode()
    default_storage.save(_sidecar_name(agent), ContentFile(payload))
    logger.info("exported bundle of agent %s (%d bytes)", agent.id, size, extra={"run": agent.run_id})
    return bundle
