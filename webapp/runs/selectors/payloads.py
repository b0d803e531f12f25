"""The payloads live events and pages share: a run, a pod, a generation, a leaderboard row and
the ``run.snapshot`` a live page starts from (shapes in :mod:`webapp.runs.events`). Nothing here
writes; services publish these after their transaction commits, never while they hold row locks.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.utils import timezone

from webapp import engine
from webapp.runs.models import Agent, Generation, Pod, Run
from webapp.runs.selectors import baselines, deflated, eta
from webapp.runs.selectors.budgets import budget_progress, budget_running_generations, budget_usage
from webapp.runs.selectors.ensembles import ensemble_k
from webapp.runs.selectors.runs import leaderboard_queryset


def _iso(value) -> str | None:
    return value.isoformat() if value else None


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
        "score_se": agent.score_se,
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
    board and what it says as a whole, as ``run.snapshot`` and ``leaderboard.update`` carry them.
    Each item's ``within_one_se`` says whether it is within one SE of the best: a member of the
    run's deliverable (``engine.one_se_member_ids``)."""
    board = leaderboard_payload(run)
    rows = [
        (i["id"], i["score"], i["created_seq"], i["score_se"], (i["metrics"] or {}).get("sub_windows")) for i in board
    ]
    members = set(engine.one_se_member_ids(rows))
    for item in board:
        item["within_one_se"] = item["id"] in members
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
