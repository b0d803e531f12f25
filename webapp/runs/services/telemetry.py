"""Training telemetry: the per-generation training curves the trainer records.

Writes (``point_record`` while a generation trains, ``points_store`` when it ends) and reads
(``run_curves``, ``agent_curves``, ``curves_csv``) of :class:`~webapp.runs.models.TrainingPoint`
rows. The trainer records at most ``TELEMETRY_MAX_POINTS`` points per generation
(``trainer.pod.GenerationResult.telemetry``); each point is stored as it is recorded and sent
as a numbered ``metrics`` event (``events.METRICS``), so the run page's curves grow live.

The x axis of every curve is ``total_env_steps``: the env steps of the agent's whole line
(its ancestors' and its own), so a child's curve continues where its parent's ended.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import F

from webapp.core.errors import AppError
from webapp.runs import events
from webapp.runs.models import Agent, Generation, Run, TrainingPoint

#: Every curve, name -> label (what the page's metric menu and the CSV header say). The names
#: are the trainer's (``GenerationResult.telemetry``) and the columns of ``TrainingPoint``.
METRICS: dict[str, str] = {
    "episode_return_mean": "Mean episode return (training)",
    "policy_loss": "Policy loss",
    "value_loss": "Value loss",
    "entropy": "Entropy",
    "approx_kl": "Approximate KL",
    "clip_fraction": "Clip fraction",
    "explained_variance": "Explained variance",
    "learning_rate": "Learning rate",
    "steps_per_s": "Env steps per second",
    "critic_loss": "Q loss (critics summed)",
    "actor_loss": "Actor loss",
    "alpha_loss": "Temperature loss (SAC)",
    "alpha": "Temperature alpha (SAC)",
}
#: The curves each algorithm records (the page offers only these).
ALGORITHM_METRICS: dict[str, tuple[str, ...]] = {
    "ppo": (
        "episode_return_mean",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
        "learning_rate",
        "steps_per_s",
    ),
    "sac": ("episode_return_mean", "critic_loss", "actor_loss", "alpha_loss", "alpha", "learning_rate", "steps_per_s"),
    "a2c": (
        "episode_return_mean",
        "policy_loss",
        "value_loss",
        "entropy",
        "explained_variance",
        "learning_rate",
        "steps_per_s",
    ),
    "td3": ("episode_return_mean", "critic_loss", "actor_loss", "learning_rate", "steps_per_s"),
    "ddpg": ("episode_return_mean", "critic_loss", "actor_loss", "learning_rate", "steps_per_s"),
}
#: Most points a generation may store (the trainer's ``TELEMETRY_MAX_POINTS``, plus slack for
#: a point recorded twice by a redelivered attempt, which is not read).
MAX_POINTS_PER_GENERATION = 50


def parse_names(raw: str | None, *, algorithm: str | None = None) -> list[str]:
    """The metric names of a ``?names=a,b`` parameter (all of the algorithm's when empty).

    Raises:
        AppError: an unknown name (400, field ``names``, listing the known ones).
    """
    if not raw:
        return list(ALGORITHM_METRICS.get(algorithm or "", METRICS))
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise AppError(
            f"names: unknown metric {', '.join(unknown)}; known: {', '.join(METRICS)}",
            fields={"names": f"unknown metric {', '.join(unknown)}"},
        )
    return list(dict.fromkeys(names))


def _row(point: Mapping[str, Any]) -> dict[str, Any]:
    row = {name: finite_or_none(point.get(name)) for name in METRICS}
    row["total_env_steps"] = int(point.get("total_env_steps") or 0)
    row["env_steps"] = int(point.get("generation_env_steps", point.get("env_steps")) or 0)
    row["elapsed_s"] = finite_or_none(point.get("elapsed_s")) or 0.0
    return row


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, ``None`` when it is missing, not a number, NaN or infinite."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None


# --- writes --------------------------------------------------------------------------------


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
            {"pod": pod_index, "curve": _curve_head(gen, None, pod_index), "point": row},
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


# --- reads ---------------------------------------------------------------------------------


def _curve_head(gen: Generation, agent: Agent | None, pod_index: int) -> dict[str, Any]:
    """Who a curve belongs to: generation, pod, agent (None while training), parent, lineage
    (the fresh agent the line starts at; None for a fresh agent still training) and depth."""
    parent = gen.parent
    if agent is not None:
        lineage, depth = agent.lineage_id or agent.pk, agent.depth
    elif parent is not None:
        lineage, depth = parent.lineage_id or parent.pk, parent.depth + 1
    else:
        lineage, depth = None, 1
    return {
        "generation_id": gen.pk,
        "pod": pod_index,
        "number": gen.number,
        "agent_id": agent.pk if agent is not None else None,
        "parent_id": gen.parent_id,
        "lineage": lineage,
        "depth": depth,
        "status": gen.status,
    }


def _curves(generations: Iterable[Generation], names: list[str]) -> list[dict[str, Any]]:
    gens = list(generations)
    points = (
        TrainingPoint.objects.filter(generation__in=[g.pk for g in gens], attempt=F("generation__attempt"))
        .order_by("generation_id", "env_steps")
        .values("generation_id", "total_env_steps", "env_steps", "elapsed_s", *names)
    )
    columns = ["total_env_steps", "env_steps", "elapsed_s", *names]
    by_gen: dict[int, dict[str, list]] = {}
    for p in points:
        cols = by_gen.setdefault(p["generation_id"], {c: [] for c in columns})
        for c in columns:
            cols[c].append(p[c])
    out = []
    for gen in gens:
        if gen.pk not in by_gen:
            continue
        agent = getattr(gen, "agent", None) if _has_agent(gen) else None
        out.append({**_curve_head(gen, agent, gen.pod.index), "points": by_gen[gen.pk]})
    return out


def _has_agent(gen: Generation) -> bool:
    try:
        gen.agent  # noqa: B018 - reverse one-to-one: raises when there is none
    except Agent.DoesNotExist:
        return False
    return True


def run_curves(run: Run, names: list[str]) -> dict[str, Any]:
    """Every generation's training curve of a run, oldest generation first.

    Returns:
        ``{"metrics": {name: label}, "curves": [{generation_id, pod, number, agent_id,
        parent_id, lineage, depth, status, "points": {"total_env_steps": [...], "env_steps":
        [...], "elapsed_s": [...], <name>: [...]}}]}``; columns are equally long, a value the
        algorithm does not record is null.
    """
    gens = (
        Generation.objects.filter(run=run, training_points__isnull=False)
        .distinct()
        .select_related("pod", "parent", "agent")
        .order_by("started_at", "pk")
    )
    return {"metrics": {n: METRICS[n] for n in names}, "curves": _curves(gens, names)}


def agent_curves(agent: Agent, names: list[str], *, max_depth: int = 500) -> dict[str, Any]:
    """The training curves of an agent's generation and its ancestors', oldest first (same
    shape as :func:`run_curves`; none for an ensemble, which trained nothing)."""
    chain: list[int] = []
    current: Agent | None = None if agent.is_ensemble else agent
    while current is not None and len(chain) < max_depth:
        chain.append(current.generation_id)
        current = current.parent
    gens = Generation.objects.filter(pk__in=chain).select_related("pod", "parent", "agent")
    order = {gid: i for i, gid in enumerate(reversed(chain))}
    return {
        "metrics": {n: METRICS[n] for n in names},
        "curves": _curves(sorted(gens, key=lambda g: order[g.pk]), names),
    }


CSV_HEAD = ["generation_id", "pod", "number", "agent_id", "parent_id", "lineage", "depth", "status"]


def curves_csv(payload: dict[str, Any]) -> str:
    """:func:`run_curves`'s payload as CSV: one row per point, the curve's owner repeated."""
    names = list(payload["metrics"])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_HEAD, "total_env_steps", "env_steps", "elapsed_s", *names])
    for curve in payload["curves"]:
        head = [("" if curve[c] is None else curve[c]) for c in CSV_HEAD]
        cols = curve["points"]
        for i in range(len(cols["total_env_steps"])):
            values = [cols[c][i] for c in ("total_env_steps", "env_steps", "elapsed_s", *names)]
            writer.writerow([*head, *("" if v is None else v for v in values)])
    return out.getvalue()
