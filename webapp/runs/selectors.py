"""Reads of runs, budgets and leaderboards, and the payloads events and pages share."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet, Sum
from django.utils import timezone

from webapp.runs import baselines, deflated
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def budget_running_generations(budget_id: int) -> QuerySet[Generation]:
    """Generations holding one of the budget's slots: running, or stale (their worker may still
    be alive) across every run on the budget."""
    return Generation.objects.filter(
        run__budget_id=budget_id, status__in=(Generation.Status.RUNNING, Generation.Status.STALE)
    )


def budget_usage(budget: ClusterBudget) -> dict[str, Any]:
    """Live usage of a budget: ``pods_running``, ``gpu_seconds_used``, ``gpu_hours_used``,
    ``env_steps_used`` and the caps (``None`` = unlimited)."""
    running = budget_running_generations(budget.id)
    reserved = running.aggregate(total=Sum("env_steps"))["total"] or 0
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


def budget_list(*, user) -> QuerySet[ClusterBudget]:
    """Budgets a user may run on (staff: all)."""
    qs = ClusterBudget.objects.all()
    return qs if user.is_staff else qs.filter(owner=user)


def run_list(*, user) -> QuerySet[Run]:
    """The user's runs, newest first."""
    return Run.objects.filter(owner=user).select_related("task", "budget")


def run_get(*, user, run_id: int) -> Run | None:
    """One of the user's runs, or ``None`` (also for other users' runs)."""
    return Run.objects.filter(owner=user, pk=run_id).select_related("task", "budget").first()


def run_payload(run: Run) -> dict[str, Any]:
    """The ``run`` object of ``run.update`` and ``run.snapshot`` events."""
    elapsed = None
    if run.started_at:
        elapsed = ((run.finished_at or timezone.now()) - run.started_at).total_seconds()
    return {
        "id": run.id,
        "name": run.name,
        "status": run.status,
        "status_reason": run.status_reason,
        "num_pods": run.num_pods,
        "generation_steps": run.generation_steps,
        "leaderboard_size": run.leaderboard_size,
        "best_score": run.best_score,
        "score_metric": run.score_metric,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "elapsed_s": elapsed,
        "agents": run.agents.count(),
        "budget": {**budget_usage(run.budget), "progress": budget_progress(run.budget, run)},
    }


def pod_payload(pod: Pod, generation: Generation | None = None) -> dict[str, Any]:
    """The ``pod`` object of ``pod.update`` events: state and the latest generation."""
    if generation is None:
        generation = pod.generations.order_by("-number").first()
    return {
        "index": pod.index,
        "state": pod.state,
        "generations_done": pod.generations_done,
        "current_agent_id": pod.current_agent_id,
        "env_steps": pod.env_steps,
        "steps_per_s": pod.steps_per_s,
        "generation": None if generation is None else generation_payload(generation),
        "queued_reason": pod_queued_reason(pod) if pod.state == Pod.State.QUEUED else "",
        "last_failure": pod_last_failure(pod),
    }


def pod_last_failure(pod: Pod) -> str:
    """Why the pod's last finished generation failed alone (e.g. "generation 3 diverged: PPO
    diverged at update 2: ..."), or "" when it succeeded or none finished yet."""
    last = (
        pod.generations.filter(status__in=(Generation.Status.DONE, Generation.Status.FAILED))
        .order_by("-number")
        .values_list("number", "status", "failure", "error")
        .first()
    )
    if last is None or last[1] != Generation.Status.FAILED or not last[2]:
        return ""
    number, _, failure, error = last
    return f"generation {number} {Generation.Failure(failure).label}: {error}"


def pod_queued_reason(pod: Pod) -> str:
    """Why a queued pod is not training yet, in words: its run is paused, the budget's
    concurrent-pod limit is reached (by every run on it), or no worker of the ``gpu`` queue has
    taken its generation yet (all busy, or none running: see the workers page)."""
    run = pod.run
    if run.status == Run.Status.PAUSED:
        return "run paused: resume it to train"
    budget = run.budget
    running = budget_running_generations(budget.pk).count()
    if running >= budget.max_concurrent_pods:
        return (
            f"waiting for a budget slot: {running} of {budget.max_concurrent_pods} pods allowed by "
            f"budget {budget.name} are training"
        )
    return "waiting for a free worker on the gpu queue"


def generation_payload(gen: Generation) -> dict[str, Any]:
    """One generation: number, status, parent, hyperparameters, worker, times."""
    return {
        "id": gen.id,
        "number": gen.number,
        "status": gen.status,
        "attempt": gen.attempt,
        "parent_id": gen.parent_id,
        "hyperparameters": gen.hyperparameters,
        "mutations": gen.mutations,
        "env_steps": gen.env_steps,
        "worker": gen.worker,
        "device": gen.device,
        "started_at": _iso(gen.started_at),
        "finished_at": _iso(gen.finished_at),
        "error": gen.error,
    }


def agent_payload(agent: Agent, run_sharpes: deflated.RunSharpes | None = None) -> dict[str, Any]:
    """One leaderboard row (``pod`` and ``generation`` joined: ``leaderboard`` selects them).

    ``generation`` is the depth in the lineage (1 = fresh), ``pod_generation`` the pod's
    counter; ``env_steps`` is what the agent's own generation trained and ``total_env_steps``
    its line's (ancestors' + own). ``deflated_sharpe`` is the Deflated Sharpe Ratio against every
    agent the run has evaluated (``run_sharpes``, computed here when not given).
    """
    stats = run_sharpes if run_sharpes is not None else deflated.run_sharpes(agent.run_id)
    return {
        "id": agent.id,
        "deflated_sharpe": deflated.agent_dsr(agent, stats),
        "trials": stats.trials,
        "score": agent.score,
        "metrics": agent.metrics,
        "pod": agent.pod.index,
        "baselines": {**(b := baselines.agent_baselines(agent)), "text": baselines.baselines_text(b)},
        "generation": agent.depth,
        "pod_generation": agent.generation.number,
        "env_steps": agent.generation.env_steps,
        "total_env_steps": agent.total_env_steps,
        "lineage": agent.lineage_id,
        "parent_id": agent.parent_id,
        "created_seq": agent.created_seq,
        "algorithm": agent.algorithm,
        "hyperparameters": agent.hyperparameters,
        "sha256": agent.sha256,
        "created_at": _iso(agent.created_at),
    }


def leaderboard(run: Run) -> list[Agent]:
    """The run's leaderboard, best first (ties: older first)."""
    return list(
        Agent.objects.filter(run=run, on_leaderboard=True)
        .select_related("pod", "generation")
        .order_by(F("score").desc(nulls_last=True), "created_seq")
    )


def leaderboard_payload(run: Run) -> list[dict[str, Any]]:
    stats = deflated.run_sharpes(run.id)
    return [agent_payload(a, stats) for a in leaderboard(run)]


def run_snapshot(run: Run) -> dict[str, Any]:
    """Everything a live page needs at connect time, as one ``run.snapshot`` event.

    ``seq`` is read before the objects, so an event numbered ``seq + 1`` or later may already
    be reflected here; clients apply such later deltas idempotently.
    """
    run = Run.objects.select_related("budget").get(pk=run.pk)
    pods = list(run.pods.order_by("index"))
    latest: dict[int, Generation] = {}
    for gen in Generation.objects.filter(run=run).order_by("pod_id", "number"):
        latest[gen.pod_id] = gen
    return {
        "type": "run.snapshot",
        "seq": run.event_seq,
        "run_id": run.id,
        "run": run_payload(run),
        "pods": [pod_payload(p, latest.get(p.id)) for p in pods],
        "leaderboard": leaderboard_payload(run),
    }


def run_lineage(run: Run) -> list[dict[str, Any]]:
    """Every agent of a run with its parent, oldest first (the lineage tree's edges)."""
    return [
        {"id": a.id, "parent_id": a.parent_id, "score": a.score, "pod": a.pod.index, "created_seq": a.created_seq}
        for a in Agent.objects.filter(run=run).select_related("pod").order_by("created_seq")
    ]


def generation_intervals(run: Run) -> list[tuple[Any, Any]]:
    """``(started_at, finished_at)`` of the run's finished generations, by start time."""
    return list(
        Generation.objects.filter(run=run, finished_at__isnull=False, started_at__isnull=False)
        .order_by("started_at")
        .values_list("started_at", "finished_at")
    )
