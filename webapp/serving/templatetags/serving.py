"""``{% agent_serving agent %}``: the agent page's serving card (endpoint, call counts, tokens)."""

from __future__ import annotations

from django import template
from django.conf import settings

from webapp.serving.selectors import agent_serve_stats

register = template.Library()


@register.inclusion_tag("serving/_agent.html", takes_context=True)
def agent_serving(context, agent) -> dict:
    """The card's context: the endpoint, call counts, and example bodies that this agent
    accepts (one of its own tickers; current weights too for a portfolio agent)."""
    request = context.get("request")
    base = request.build_absolute_uri("/").rstrip("/") if request is not None else ""
    tickers = list(agent.tickers or agent.run.task.tickers or ["AAPL"])
    return {
        "agent": agent,
        "stats": agent_serve_stats(agent),
        "base_url": base,
        "rate_limit": settings.PADDOCK_SERVE_RATE_LIMIT,
        "ticker": tickers[0],
        "portfolio": agent.run.task.kind == "portfolio",
    }
