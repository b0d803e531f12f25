"""Reads of the runs app (the only one): runs, budgets, tasks, leaderboards, lineage, score
history, and the payloads events and pages share. Nothing here writes.

Functions taking ``user`` are scoped to that user: a row of somebody else's answers ``None``
(views turn that into a 404), so there is one place to get isolation right.
"""

from __future__ import annotations

import bisect
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.market.models import Dataset
from webapp.runs import algorithms, baselines, deflated, eta
from webapp.runs.models import Agent, ClusterBudget, Generation, Pod, Run, Task

HISTORY_MAX_POINTS = 2000


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


def _agent_counts(run: Run) -> dict[str, int]:
    """``{"agents": trained agents, "ensembles": ensembles}`` of the run (one query)."""
    kinds = dict(run.agents.order_by().values_list("kind").annotate(n=Count("id")))
    return {"agents": kinds.get(Agent.Kind.TRAINED, 0), "ensembles": kinds.get(Agent.Kind.ENSEMBLE, 0)}


def score_note(run: Run) -> str:
    """Why the run's scores read "n/a" on pages: ``"n/a (window shorter than 63 days)"`` when its
    agents were validated on a window shorter than the short-window rule's minimum (their
    metrics' ``short_window``; every agent of a run has the same validation days), else ``""``.

    Reads ``run.score_note_text`` when :func:`with_score_notes` set it (no query), else the
    run's first scored agent."""
    if hasattr(run, "score_note_text"):
        return run.score_note_text
    return with_score_notes([run])[0].score_note_text


def with_score_notes(runs: list[Run]) -> list[Run]:
    """Set ``score_note_text`` (:func:`score_note`) on each of ``runs`` with one query for all
    (the runs list and the dashboard); returns ``runs``."""
    from webapp import engine

    windows: dict[int, dict[str, Any]] = {}
    rows = (
        Agent.objects.filter(run_id__in=[r.pk for r in runs])
        .exclude(score=None)
        .order_by("run_id", "created_seq")
        .values("run_id", "metrics__short_window", "metrics__min_annualised_days")
    )
    for row in rows:
        windows.setdefault(
            row["run_id"],
            {"short_window": row["metrics__short_window"], "min_annualised_days": row["metrics__min_annualised_days"]},
        )
    for run in runs:
        window = windows.get(run.pk)
        run.score_note_text = engine.withheld_metrics(window).get("sharpe_ratio", "") if window else ""
    return runs


def run_payload(run: Run) -> dict[str, Any]:
    """The ``run`` object of ``run.update`` and ``run.snapshot`` events (``score_note``: why
    pages show ``best_score`` as "n/a", :func:`score_note`)."""
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
        "score_note": score_note(run),
        "score_metric": run.score_rule["rule"],  # the rule's name, as the API gives it
        "score_rule": run.score_rule,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "elapsed_s": elapsed,
        # the pods' trained agents; ensembles (built of them) are counted apart
        **_agent_counts(run),
        "budget": {
            **budget_usage(run.budget),
            "progress": budget_progress(run.budget, run),
            "eta": eta.budget_eta(run.budget, run),
        },
        "ensemble_k": ensemble_k(run),
    }


#: Smallest and default number of leaderboard agents an ensemble is built of.
ENSEMBLE_MIN_K, ENSEMBLE_DEFAULT_K = 2, 3


def ensemble_k(run: Run) -> int | None:
    """The K the run page's "Build ensemble" button offers: the default, or the leaderboard's
    size when it holds fewer agents; ``None`` when it holds fewer than 2 (no ensemble)."""
    size = leaderboard_queryset(run).count()
    return min(ENSEMBLE_DEFAULT_K, size) if size >= ENSEMBLE_MIN_K else None


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


def agent_payload(
    agent: Agent, run_sharpes: deflated.RunSharpes | None = None, ledger: deflated.LedgerStats | None = None
) -> dict[str, Any]:
    """One leaderboard row (``pod`` and ``generation`` joined: ``leaderboard`` selects them).

    ``generation`` is the depth in the lineage (1 = fresh), ``pod_generation`` the pod's
    counter; ``env_steps`` is what the agent's own generation trained and ``total_env_steps``
    its line's (ancestors' + own). ``deflated_sharpe`` is the Deflated Sharpe Ratio against every
    agent the run has evaluated (``run_sharpes``, computed here when not given): the raw Sharpe
    ratio against zero. ``deflated_sharpe_vs_equal_weight`` is the DSR of its information ratio
    over 1/N against its task's trial ledger (``ledger``; ``ledger_trials`` entries), and
    ``vs_equal_weight`` / ``vs_equal_weight_with_costs`` the trainer's objects (interval,
    p-value, verdict) against both 1/N.
    """
    stats = run_sharpes if run_sharpes is not None else deflated.run_sharpes(agent.run_id)
    ledger = ledger if ledger is not None else deflated.task_ledger(agent.run.task_id)
    row_baselines = baselines.agent_baselines(agent)
    raw = deflated.agent_dsr(agent, stats)
    against = deflated.agent_dsr_vs_equal_weight(agent, ledger)
    metrics = agent.metrics or {}
    return {
        "id": agent.id,
        "deflated_sharpe": raw,
        "deflated_sharpe_vs_equal_weight": against,
        "dsr_text": deflated.dsr_text(against, raw, note=row_baselines.get("note") or ""),
        "trials": stats.trials,
        "ledger_trials": ledger.trials,
        "vs_equal_weight": metrics.get("vs_equal_weight"),
        "vs_equal_weight_with_costs": metrics.get("vs_equal_weight_with_costs"),
        "score": agent.score,
        "metrics": agent.metrics,
        "pod": agent.pod.index,
        "baselines": row_baselines,
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
    return list(leaderboard_queryset(run))


def leaderboard_payload(run: Run) -> list[dict[str, Any]]:
    stats, ledger = deflated.run_sharpes(run.id), deflated.task_ledger(run.task_id)
    return [agent_payload(a, stats, ledger) for a in leaderboard(run)]


def leaderboard_with_verdict(run: Run) -> dict[str, Any]:
    """``{"leaderboard": leaderboard_payload, "verdict": baselines.leaderboard_verdict}``: the
    board and what it says as a whole, as ``run.snapshot`` and ``leaderboard.update`` carry them."""
    board = leaderboard_payload(run)
    return {"leaderboard": board, "verdict": baselines.leaderboard_verdict([item["baselines"] for item in board])}


def run_snapshot(run: Run) -> dict[str, Any]:
    """Everything a live page needs at connect time, as one ``run.snapshot`` event.

    ``seq`` is read before the objects, so an event numbered ``seq + 1`` or later may already
    be reflected here; clients apply such later deltas idempotently.
    """
    run = Run.objects.select_related("budget", "task").get(pk=run.pk)
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
        **leaderboard_with_verdict(run),
    }


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


# --- agents: lineage and history -----------------------------------------------------------


def agent_lineage(agent: Agent, *, max_depth: int = 500) -> list[dict[str, Any]]:
    """The chain from ``agent`` back to its first ancestor, newest first.

    Each item: ``agent`` (the Agent, pod and generation joined), ``mutations``
    (``{name: [old, new]}`` applied when it was copied from its parent), ``how``: ``fresh``
    (no parent), ``copied`` (from another pod's leaderboard agent, possibly mutated) or
    ``continued`` (its own pod's previous agent, trained further). An ensemble has no lineage:
    ``[]`` (its members are in ``agent.members``).

    Two queries: the run's ``(id, parent_id)`` edges, then the chain's rows.
    """
    if agent.is_ensemble:
        return []
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
    return {
        "data": {"paths": task.dataset.source_paths(), "tickers": list(task.tickers), **task.dataset.data_options()},
        "train": task.splits["train"],
        "validation": task.splits["validation"],
        "test": task.splits["test"],
        "env": task.env,
        "algorithm": algorithm,
        "hyperparameters": algorithms.algorithm_hyperparameters(task, algorithm),
        "kind": task.kind,
        "selection": task.selection or {},
    }
