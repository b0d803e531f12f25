"""Finding NaN and infinite numbers in training statistics, checkpoints and policy actions.

A diverged agent must fail loudly (issue 20): its losses or parameters are NaN or infinite and
its policy emits NaN actions. These helpers name what is non-finite so the errors raised with
them (:class:`~trainer.errors.Diverged`, :class:`~trainer.errors.PolicyError`,
:class:`~trainer.errors.BundleError`) can say so in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from trainer.errors import PolicyError

__all__ = [
    "check_policy_actions",
    "first_nonfinite",
    "label",
    "labelled",
    "nonfinite_action_error",
    "nonfinite_kind",
    "nonfinite_tensors",
]


def label(value: float) -> float | str:
    """``value`` itself when finite, else ``"NaN"``, ``"inf"`` or ``"-inf"``.

    JSON has no NaN, and turning it into ``null`` would make a diverged loss look merely
    missing; the string keeps it visible in stats, logs and the API.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def labelled(tree: Any) -> Any:
    """A copy of nested dicts/lists/tuples (as lists) with every float passed through :func:`label`."""
    if isinstance(tree, float):
        return label(tree)
    if isinstance(tree, Mapping):
        return {key: labelled(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return [labelled(value) for value in tree]
    return tree


def first_nonfinite(values: Iterable[tuple[str, float]]) -> tuple[str, str] | None:
    """The first ``(name, "NaN" | "inf" | "-inf")`` of ``(name, value)`` pairs, or None."""
    for name, value in values:
        if not math.isfinite(value):
            return name, str(label(value))
    return None


def nonfinite_kind(tensors: Iterable[torch.Tensor]) -> str:
    """``"NaN"`` when a tensor holds NaN, else ``"inf"`` (call when something is not finite)."""
    return "NaN" if any(bool(torch.isnan(t).any()) for t in tensors) else "inf"


def nonfinite_tensors(tree: Any, prefix: str = "") -> list[str]:
    """Dotted names of the floating-point tensors in a nested state that hold NaN or inf.

    Args:
        tree: dicts, lists and tuples of tensors and plain values (a checkpoint's ``agent``
            state, a ``state_dict``).
        prefix: name of ``tree`` itself (e.g. ``"agent"``).

    Returns:
        Names such as ``["agent.actor.mean.0.weight"]``, in traversal order; empty when every
        tensor is finite.
    """
    found: list[str] = []
    if isinstance(tree, torch.Tensor):
        if tree.is_floating_point() and not bool(torch.isfinite(tree).all()):
            found.append(prefix or "tensor")
    elif isinstance(tree, Mapping):
        for key, value in tree.items():
            found += nonfinite_tensors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            found += nonfinite_tensors(value, f"{prefix}.{i}" if prefix else str(i))
    return found


def nonfinite_action_error(action: torch.Tensor) -> ValueError:
    """The error an env raises for a step whose (E, A) ``action`` holds NaN or inf, naming the rows."""
    rows = (~torch.isfinite(action)).any(1).nonzero().squeeze(1).tolist()
    shown = ", ".join(str(r) for r in rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
    return ValueError(f"action holds NaN or infinite values in env row(s) {shown}; actions must be finite")


def check_policy_actions(action: torch.Tensor, *, policy: str, date: Any) -> None:
    """Refuse an action with NaN or infinite entries (one host sync).

    Args:
        action: (B, N) actions the policy returned.
        policy: who emitted it, for the message (e.g. ``"agent 12"``, a bundle's file name).
        date: the trading day the action was for (``YYYY-MM-DD`` or a date).

    Raises:
        PolicyError: ``"<policy> emits non-finite actions (NaN) on 2020-03-16: ..."``;
            ``details``: ``policy``, ``date``, ``value`` (``"NaN"`` or ``"inf"``).
    """
    finite = torch.isfinite(action)
    if bool(finite.all()):
        return
    value = "NaN" if bool(torch.isnan(action).any()) else "inf"
    day = str(date)[:10]
    raise PolicyError(
        f"{policy} emits non-finite actions ({'NaN' if value == 'NaN' else 'infinite values'}) on {day}: "
        "its training diverged, so it cannot be evaluated or backtested",
        policy=policy,
        date=day,
        value=value,
    )
