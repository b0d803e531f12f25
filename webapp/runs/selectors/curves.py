"""Training curves (reads): the per-generation training telemetry the trainer records, as the
run page's and the agent page's charts and the CSV download read it
(:class:`~webapp.runs.models.TrainingPoint` rows, written by :mod:`webapp.runs.services.telemetry`).

The x axis of every curve is ``total_env_steps``: the env steps of the agent's whole line
(its ancestors' and its own), so a child's curve continues where its parent's ended.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from django.db.models import F

from webapp.core.errors import AppError
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


def curve_head(gen: Generation, agent: Agent | None, pod_index: int) -> dict[str, Any]:
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
        out.append({**curve_head(gen, agent, gen.pod.index), "points": by_gen[gen.pk]})
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
