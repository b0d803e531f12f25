"""RL agents (PPO, SAC) for vectorized torch envs, built by name through :func:`make_agent`.

Importing this package loads only the agents and their networks, never a training runner.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.agents.ppo import PPOAgent, PPOConfig
from trainer.agents.sac import SACAgent, SACConfig
from trainer.errors import ConfigError

__all__ = ["ALGORITHMS", "PPOAgent", "PPOConfig", "SACAgent", "SACConfig", "agent_from_state_dict", "make_agent"]

ALGORITHMS: dict[str, tuple[type, type]] = {"ppo": (PPOAgent, PPOConfig), "sac": (SACAgent, SACConfig)}


def make_agent(
    algo: str,
    obs_dim: int,
    action_dim: int,
    hyperparameters: dict[str, Any] | None = None,
    *,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> PPOAgent | SACAgent:
    """Build a fresh agent.

    Args:
        algo: a key of :data:`ALGORITHMS` (``"ppo"`` or ``"sac"``).
        obs_dim: observation size of the env.
        action_dim: action size of the env.
        hyperparameters: config fields to override (JSON-able; missing ones keep defaults).
        device: torch device of the env the agent will train on.
        seed: seeds network initialisation and the agent's generator.

    Raises:
        ConfigError: unknown ``algo`` (``field="algorithm"``) or a bad hyperparameter
            (``field="<algo>.<name>"``).
    """
    if algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algo!r}; choose one of {sorted(ALGORITHMS)}", field="algorithm")
    agent_cls, config_cls = ALGORITHMS[algo]
    config = config_cls.from_dict(hyperparameters or {})
    return agent_cls(obs_dim, action_dim, config, device=device, seed=seed)


def agent_from_state_dict(state: dict[str, Any], *, device: str | torch.device = "cpu") -> PPOAgent | SACAgent:
    """Rebuild an agent (same algorithm, dimensions and config) from ``agent.state_dict()``.

    Raises:
        ConfigError: the state names an unknown algorithm or holds an invalid config.
    """
    agent = make_agent(
        state.get("algorithm"), int(state["obs_dim"]), int(state["action_dim"]), state["config"], device=device
    )
    agent.load_state_dict(state)
    return agent
