"""Reads of policy serving: an agent's call counts."""

from __future__ import annotations

from webapp.serving.models import AgentServeStats


def agent_serve_stats(agent_id: int) -> dict:
    """``{"calls", "observations", "errors", "last_called_at"}`` of an agent (zeros before any call)."""
    stats = AgentServeStats.objects.filter(agent_id=agent_id).first()
    if stats is None:
        return {"calls": 0, "observations": 0, "errors": 0, "last_called_at": None}
    return {
        "calls": stats.calls,
        "observations": stats.observations,
        "errors": stats.errors,
        "last_called_at": stats.last_called_at,
    }
