"""Every agent of a run and where it came from: the all-agents table (sort, filters, CSV), the
lineage tree and the score-vs-env-steps scatter (reads only).

Terms, as the pages label them: an agent's **generation** is its depth in the lineage (a fresh
agent is generation 1, a child its parent's + 1); its **own env steps** are what its
generation trained and its **line's env steps** (``total_env_steps``) add its ancestors';
its **lineage** is the fresh agent its line starts at. An **ensemble** (``Agent.kind``) has none
of these: the table shows it as "ensemble of #a, #b, ..." and the tree and scatter, which follow
lines, leave it out.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from django.db.models import F, QuerySet

from webapp.runs.models import Agent, Run

#: Sort keys of the table -> ordering (ties: older first).
SORTS: dict[str, list[Any]] = {
    "score": [F("score").asc(nulls_first=True), "created_seq"],
    "-score": [F("score").desc(nulls_last=True), "created_seq"],
    "id": ["created_seq"],
    "-id": ["-created_seq"],
    # ensembles have no generation, pod or own env steps: last either way
    "generation": [F("depth").asc(nulls_last=True), "created_seq"],
    "-generation": [F("depth").desc(nulls_last=True), "created_seq"],
    "pod": [F("pod__index").asc(nulls_last=True), "created_seq"],
    "-pod": [F("pod__index").desc(nulls_last=True), "created_seq"],
    "env_steps": [F("generation__env_steps").asc(nulls_last=True), "created_seq"],
    "-env_steps": [F("generation__env_steps").desc(nulls_last=True), "created_seq"],
    "total_env_steps": ["total_env_steps", "created_seq"],
    "-total_env_steps": ["-total_env_steps", "created_seq"],
}
DEFAULT_SORT = "-score"


def agent_table(
    run: Run,
    *,
    sort: str = DEFAULT_SORT,
    pod: int | None = None,
    lineage: int | None = None,
    generation: int | None = None,
    min_score: float | None = None,
    leaderboard_only: bool = False,
) -> QuerySet[Agent]:
    """The run's agents, filtered and sorted (pod, generation and parent joined)."""
    qs = Agent.objects.filter(run=run).select_related("pod", "generation")
    if pod is not None:
        qs = qs.filter(pod__index=pod)
    if lineage is not None:
        qs = qs.filter(lineage_id=lineage)
    if generation is not None:
        qs = qs.filter(depth=generation)
    if min_score is not None:
        qs = qs.filter(score__gte=min_score)
    if leaderboard_only:
        qs = qs.filter(on_leaderboard=True)
    return qs.order_by(*SORTS.get(sort, SORTS[DEFAULT_SORT]))


def mutation_text(mutations: dict[str, Any] | None) -> str:
    """``{"learning_rate": [3e-4, 2.4e-4]}`` -> ``"learning_rate 0.0003 → 0.00024"``."""
    parts = []
    for name, change in (mutations or {}).items():
        old, new = (list(change) + [None, None])[:2]
        parts.append(f"{name} {_num(old)} → {_num(new)}")
    return ", ".join(parts)


def _num(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


CSV_COLUMNS = [
    "agent_id",
    "score",
    "generation",
    "pod",
    "pod_generation",
    "parent_id",
    "lineage",
    "env_steps",
    "total_env_steps",
    "on_leaderboard",
    "mutation",
    "hyperparameters",
    "created_at",
    "kind",
    "members",
]


def agents_csv(agents: QuerySet[Agent]) -> str:
    """The table as CSV, every agent of the query (no paging), one row each; an ensemble's
    generation, pod and env-steps cells are empty, ``members`` its member ids (``a;b;c``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for a in agents.iterator(chunk_size=500):
        hp = " ".join(f"{k}={_num(v)}" for k, v in sorted(a.hyperparameters.items()) if not isinstance(v, list | dict))
        gen = a.generation
        writer.writerow(
            [
                a.pk,
                "" if a.score is None else a.score,
                "" if a.depth is None else a.depth,
                "" if a.pod is None else a.pod.index,
                "" if gen is None else gen.number,
                a.parent_id or "",
                a.lineage_id or "",
                "" if gen is None else gen.env_steps,
                a.total_env_steps,
                int(a.on_leaderboard),
                "" if gen is None else mutation_text(gen.mutations),
                hp,
                a.created_at.isoformat(),
                a.kind,
                ";".join(map(str, a.members or [])),
            ]
        )
    return out.getvalue()


def lineage_tree(run: Run, *, max_nodes: int = 2000) -> list[dict[str, Any]]:
    """The run's trained agents as a forest, flattened depth-first for an indented list
    (ensembles start no line).

    Roots are fresh agents (and agents whose parent was deleted), oldest first; children
    follow their parent, oldest first. Each item: ``agent``, ``level`` (0 for a root),
    ``mutation`` (text of the changes applied when it was copied), ``children`` (count),
    ``best`` (whether its score is the run's best). At most ``max_nodes`` items.
    """
    agents = list(
        Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED)
        .select_related("pod", "generation")
        .order_by("created_seq")[: max_nodes * 2]
    )
    ids = {a.pk for a in agents}
    children: dict[int | None, list[Agent]] = {}
    for a in agents:
        key = a.parent_id if a.parent_id in ids else None
        children.setdefault(key, []).append(a)
    best = max((a.score for a in agents if a.score is not None), default=None)
    out: list[dict[str, Any]] = []
    stack = [(a, 0) for a in reversed(children.get(None, []))]
    while stack and len(out) < max_nodes:
        agent, level = stack.pop()
        kids = children.get(agent.pk, [])
        out.append(
            {
                "agent": agent,
                "level": level,
                "mutation": mutation_text(agent.generation.mutations),
                "children": len(kids),
                "best": best is not None and agent.score == best,
            }
        )
        stack.extend((k, level + 1) for k in reversed(kids))
    return out


def scatter_points(run: Run) -> list[dict[str, Any]]:
    """Score against the line's env steps, one point per scored trained agent, for the scatter."""
    rows = (
        Agent.objects.filter(run=run, kind=Agent.Kind.TRAINED, score__isnull=False)
        .order_by("created_seq")
        .values("id", "score", "total_env_steps", "lineage_id", "depth", "pod__index", "generation__env_steps")
    )
    return [
        {
            "id": r["id"],
            "score": r["score"],
            "total_env_steps": r["total_env_steps"],
            "lineage": r["lineage_id"],
            "generation": r["depth"],
            "pod": r["pod__index"],
            "env_steps": r["generation__env_steps"],
        }
        for r in rows
    ]


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
