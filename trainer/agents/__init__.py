"""RL agents (PPO, A2C, SAC, TD3, DDPG, direct) for vectorized torch envs, built by name through :func:`make_agent`.

Importing this package loads only the agents and their networks, never a training runner.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.agents.a2c import A2CAgent, A2CConfig
from trainer.agents.direct import DirectAgent, DirectConfig
from trainer.agents.ppo import PPOAgent, PPOConfig
from trainer.agents.sac import SACAgent, SACConfig
from trainer.agents.td3 import DDPGAgent, DDPGConfig, TD3Agent, TD3Config
from trainer.errors import ConfigError

__all__ = [
    "ALGORITHMS",
    "OFF_POLICY",
    "A2CAgent",
    "A2CConfig",
    "DDPGAgent",
    "DDPGConfig",
    "DirectAgent",
    "DirectConfig",
    "PPOAgent",
    "PPOConfig",
    "SACAgent",
    "SACConfig",
    "TD3Agent",
    "TD3Config",
    "agent_from_state_dict",
    "make_agent",
    "not_mutated",
]

#: Algorithm name -> (agent class, config class), in the order forms list them.
ALGORITHMS: dict[str, tuple[type, type]] = {
    "ppo": (PPOAgent, PPOConfig),
    "a2c": (A2CAgent, A2CConfig),
    "sac": (SACAgent, SACConfig),
    "td3": (TD3Agent, TD3Config),
    "ddpg": (DDPGAgent, DDPGConfig),
    "direct": (DirectAgent, DirectConfig),
}
#: Algorithms that learn from a replay buffer (one generation step = one vector env step of
#: ``num_envs`` transitions); the others learn from rollouts of ``rollout_steps x num_envs``.
OFF_POLICY: frozenset[str] = frozenset({"sac", "td3", "ddpg"})


def not_mutated(algorithm: str) -> tuple[str, ...]:
    """Hyperparameters of ``algorithm`` that a tournament's mutation may not move: those fixed
    at creation (``FIXED``: shapes, the policy kind) and those a line decides once
    (``NOT_MUTATED``, e.g. direct's ``challenger_alpha``). Unknown algorithm: ConfigError."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r}", field="algorithm")
    config = ALGORITHMS[algorithm][1]
    return tuple(config.FIXED) + tuple(getattr(config, "NOT_MUTATED", ()))


Agent = PPOAgent | A2CAgent | SACAgent | TD3Agent | DirectAgent


def make_agent(
    algo: str,
    obs_dim: int,
    action_dim: int,
    hyperparameters: dict[str, Any] | None = None,
    *,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> Agent:
    """Build a fresh agent.

    Args:
        algo: a key of :data:`ALGORITHMS` (``"ppo"``, ``"a2c"``, ``"sac"``, ``"td3"``, ``"ddpg"``,
            ``"direct"``).
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


def agent_from_state_dict(state: dict[str, Any], *, device: str | torch.device = "cpu") -> Agent:
    """Rebuild an agent (same algorithm, dimensions and config) from ``agent.state_dict()``.

    Raises:
        ConfigError: the state names an unknown algorithm or holds an invalid config.
    """
    agent = make_agent(
        state.get("algorithm"), int(state["obs_dim"]), int(state["action_dim"]), state["config"], device=device
    )
    agent.load_state_dict(state)
    return agent
