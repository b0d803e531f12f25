"""The name of a task's validation score, in words: which selection rule made it.

The score every agent carries is not always a Sharpe ratio: by default it is the mean minus one
standard deviation of the Sharpe ratios of 4 validation sub-windows (``trainer.selection.
SelectionRule``; the task's ``selection``). Pages and the API label it with :func:`score_rule`
rather than with ``Run.score_metric`` (the stored field is always ``"sharpe"``, the quantity the
rule is built on; the API and the live events give the rule's name in its place).
"""

from __future__ import annotations

from typing import Any

from webapp import engine


def score_rule(selection: dict[str, Any] | None) -> dict[str, Any]:
    """The task's selection rule with its label (``engine.selection_rule``).

    Args:
        selection: ``Task.selection`` (or an agent's ``metrics["selection"]``): ``rule``,
            ``windows``, ``k``; missing keys (``{}``) take ``SelectionRule``'s defaults.

    Returns:
        ``{"rule": str, "windows": int, "k": float, "label": str}``, e.g. ``label`` =
        ``"mean - 1 x std of the Sharpe ratios of 4 validation sub-windows"``.
    """
    return engine.selection_rule(selection)
