"""Rebuilding an agent from a checkpoint, the one way every caller does it (the pod continuing
a parent, the CLI's ``evaluate``, bundle export, backtests, ensembles)."""

from __future__ import annotations

from typing import Any

import torch

from trainer.agents import make_agent
from trainer.artifacts.checkpoints import refuse_nonfinite
from trainer.artifacts.ensemble import ENSEMBLE, build_members
from trainer.errors import BundleError, ConfigError, error_summary

__all__ = ["build_agent"]


def build_agent(state: dict[str, Any], *, device: str | torch.device = "cpu") -> Any:
    """Rebuild the agent of a checkpoint with its full training state (CPU by default); an
    ensemble checkpoint gives a :class:`trainer.artifacts.ensemble.EnsembleAgent`.

    Args:
        state: a checkpoint dict (:func:`trainer.artifacts.checkpoints.load_checkpoint`).
        device: where the agent's networks live.

    Raises:
        BundleError: the state does not rebuild into an agent, or holds NaN or infinite
            numbers (a diverged agent).
    """
    refuse_nonfinite(state.get("agent"), "the agent state")  # an ensemble's members too
    if state.get("algorithm") == ENSEMBLE:
        try:
            return build_members(state, make_agent, device=device)
        except (ConfigError, KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise BundleError(f"ensemble checkpoint does not rebuild: {error_summary(exc)}") from exc
    try:
        agent = make_agent(
            state["algorithm"],
            int(state["obs_dim"]),
            int(state["action_dim"]),
            dict(state["hyperparameters"]),
            device=device,
            seed=int(state.get("seed", 0) or 0),
        )
        agent.load_state_dict(state["agent"])
    except (ConfigError, KeyError, RuntimeError, TypeError, ValueError) as exc:
        raise BundleError(
            f"checkpoint does not rebuild into a {state.get('algorithm')!r} agent: {error_summary(exc)}"
        ) from exc
    return agent
