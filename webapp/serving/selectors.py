"""Reads of policy serving: an agent's and the serve tokens' call counts (database rows plus
what Redis holds that is not flushed yet, see ``webapp/serving/counters.py``)."""

from __future__ import annotations

from django.db.models import QuerySet

from webapp.serving import cache, counters
from webapp.serving.models import AgentServeStats, ServeToken


def agent_serve_stats(agent) -> dict:
    """``{"calls", "observations", "errors", "last_called_at"}`` of an agent (zeros before any call),
    including counts not yet flushed from Redis."""
    stats = AgentServeStats.objects.filter(agent_id=agent.pk).first()
    pending = counters.pending_agent(agent.pk, cache.stamp(agent.created_at))
    last = [t for t in (stats and stats.last_called_at, pending.last) if t is not None]
    return {
        "calls": (stats.calls if stats else 0) + pending.calls,
        "observations": (stats.observations if stats else 0) + pending.observations,
        "errors": (stats.errors if stats else 0) + pending.errors,
        "last_called_at": max(last) if last else None,
    }


def serve_tokens_of(owner) -> list[ServeToken]:
    """The owner's serve tokens, newest first, with ``calls`` and ``last_used_at`` including
    counts not yet flushed from Redis."""
    tokens: QuerySet[ServeToken] = ServeToken.objects.filter(owner=owner).select_related("agent")
    rows = list(tokens)
    pending = counters.pending_tokens([(t.pk, cache.stamp(t.created_at)) for t in rows])
    for token in rows:
        extra = pending.get(token.pk)
        if extra is not None:
            token.calls += extra.calls
            last = [t for t in (token.last_used_at, extra.last) if t is not None]
            token.last_used_at = max(last) if last else None
    return rows
