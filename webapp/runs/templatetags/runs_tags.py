"""Template tags of the runs pages."""

from __future__ import annotations

from django import template

from webapp.runs import selectors

register = template.Library()


@register.simple_tag(takes_context=True)
def recent_runs(context, count: int = 10):
    """The signed-in user's newest runs, annotated like the runs list (for the dashboard)."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return []
    return list(selectors.run_list(user=request.user)[:count])
