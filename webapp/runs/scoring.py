"""The name of a task's validation score, in words: which selection rule made it.

The score every agent carries is not always a Sharpe ratio: by default it is the mean minus one
standard deviation of the Sharpe ratios of 4 validation sub-windows (``trainer.selection.
SelectionRule``; the task's ``selection``). Pages and the API label it with :func:`score_rule`
rather than with ``Run.score_metric`` (the stored field is always ``"sharpe"``, the quantity the
rule is built on; the API and the live events give the rule's name in its place).
"""

from __future__ import annotations

from typing import Any

#: The rules ``trainer.selection.RULES`` knows, and the defaults of ``SelectionRule``.
RULES = ("mean_minus_std", "worst_window", "full_sharpe")
DEFAULT = {"rule": "mean_minus_std", "windows": 4, "k": 1.0}


def score_rule(selection: dict[str, Any] | None) -> dict[str, Any]:
    """The task's selection rule with its label.

    Args:
        selection: ``Task.selection`` (or an agent's ``metrics["selection"]``): ``rule``,
            ``windows``, ``k``; missing keys (``{}``) take ``SelectionRule``'s defaults.

    Returns:
        ``{"rule": str, "windows": int, "k": float, "label": str}``, e.g. ``label`` =
        ``"mean - 1 std of the Sharpe ratios of 4 validation sub-windows"``.
    """
    sel = {**DEFAULT, **{k: v for k, v in (selection or {}).items() if k in DEFAULT and v is not None}}
    rule, windows, k = str(sel["rule"]), sel["windows"], sel["k"]
    if rule == "mean_minus_std":
        label = f"mean - {k:g} std of the Sharpe ratios of {windows} validation sub-windows"
    elif rule == "worst_window":
        label = f"worst Sharpe ratio of {windows} validation sub-windows"
    elif rule == "full_sharpe":
        label = "Sharpe ratio of the whole validation window"
    else:
        label = rule
    return {"rule": rule, "windows": windows, "k": k, "label": label}
