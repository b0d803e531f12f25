"""Template tags of the runs pages.

- ``{% recent_runs 5 %}``: the user's newest runs, annotated like the runs list;
- ``{{ run|best_score }}``: the run's best validation score as lists show it: 3 decimals,
  ``"n/a"`` when its agents were validated on a window shorter than the short-window rule's
  minimum (an annualised Sharpe ratio of a few weeks means nothing), ``–`` before any score;
- ``{{ run|score_note }}``: why it is n/a (``"n/a (window shorter than 63 days)"``) or "".
"""

from __future__ import annotations

from django import template

from webapp.core import formatting
from webapp.runs.models import Run
from webapp.runs.selectors import payloads
from webapp.runs.selectors.runs import run_list

register = template.Library()


@register.simple_tag(takes_context=True)
def recent_runs(context, count: int = 10):
    """The signed-in user's newest runs, annotated like the runs list (for the dashboard)."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return []
    return payloads.with_score_notes(list(run_list(user=request.user)[:count]))


@register.filter
def score_note(run: Run) -> str:
    """``score_note``: the short-window reason, or ""."""
    return payloads.score_note(run)


@register.filter
def best_score(run: Run) -> str:
    """The run's best score: 3 decimals, ``"n/a"`` for a short validation window, ``–`` if none."""
    if run.best_score is None:
        return formatting.MISSING
    return "n/a" if payloads.score_note(run) else formatting.format_number(run.best_score, 3)
