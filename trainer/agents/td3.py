"""TD3 and DDPG for vectorized torch envs with continuous actions.

TD3: Fujimoto, van Hoof and Meger 2018, "Addressing Function Approximation Error in Actor-Critic
Methods" (arXiv 1802.09477): a deterministic tanh actor ``mu(s)``, K = 2 critics whose minimum
forms the target (clipped double Q, sec. 4.2), target policy smoothing (Gaussian noise clipped
to +-c on the target action, sec. 5.3), actor and target networks updated every
``policy_delay``-th critic update (sec. 5.2), Polyak-averaged targets.

DDPG (Lillicrap et al. 2016, "Continuous control with deep reinforcement learning",
arXiv 1509.02971) is the same algorithm with one critic, no target smoothing and no delay:
:class:`DDPGConfig` is :class:`TD3Config` with ``twin_critics=False``,
``target_policy_noise=0``, ``policy_delay=1`` as defaults, registered as ``"ddpg"``.
Exploration is Gaussian action noise (TD3 paper sec. 6.1; it replaced DDPG's Ornstein-Uhlenbeck
noise with no loss, so both use it here).

The collect/update loop and the replay buffer are shared with SAC
(:class:`~trainer.agents._off_policy.OffPolicyAgent`, :class:`~trainer.buffers.replay.ReplayBuffer`);
the formulas live in :mod:`trainer.ops.losses` (``td3_*``).

Tensor shapes: a replay batch is B transitions, obs (B, obs_dim), actions (B, A); the critics
answer (K, B) with K = 2 (TD3) or 1 (DDPG).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from trainer.agents._common import make_adam, seeded_init, set_lr
from trainer.agents._off_policy import OffPolicyAgent, OffPolicyConfig
from trainer.agents.networks import DeterministicPolicy, mlp
from trainer.agents.sac import PENDULUM_SAC
from trainer.buffers.replay import ReplayBuffer
from trainer.ops.losses import td3_actor_loss, td3_critic_loss, td3_critic_target, td3_target_action
from trainer.util.bounds import ACTION_NOISE

__all__ = ["DDPGAgent", "DDPGConfig", "PENDULUM_TD3", "TD3Agent", "TD3Config"]


@dataclass
class TD3Config(OffPolicyConfig):
    """TD3 hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536.
        hidden_sizes: widths of the actor and of each critic (ReLU), 1 to 8 layers of 1..4 096.
        actor_learning_rate: Adam step size of the actor, more than 0, at most 1e6
            (``trainer.util.bounds.MAX_SCALE``, as every scale below; paper: 1e-3; mutable by PBT).
        critic_learning_rate: Adam step size of the critics, more than 0, at most 1e6 (paper: 1e-3;
            mutable by PBT).
        batch_size: transitions per gradient update, 1..65 536.
        buffer_size: replay capacity in transitions, num_envs..2**22 (memory as SAC's).
        learning_starts: transitions collected with uniform random actions before the first update.
        updates_per_step: critic updates after each vector env step, 1..64.
        gamma: discount in (0, 1].
        tau: Polyak coefficient of the target networks in (0, 1] (paper: 0.005).
        exploration_noise: std of the Gaussian noise added to ``mu(s)`` while collecting, 0 to 10
            (``trainer.util.bounds.MAX_ACTION_NOISE``, as the next two; paper: 0.1, in [-1, 1]
            action units).
        target_policy_noise: std sigma of the target smoothing noise, 0 to 10 (paper: 0.2; 0 = DDPG).
        target_noise_clip: the smoothing noise is clipped to +-c, 0 to 10 (paper: 0.5).
        policy_delay: critic updates per actor and target update, 1..100 (paper: 2; 1 = DDPG).
        twin_critics: two critics and the clipped double-Q target (TD3) or one (DDPG); fixed
            at creation.
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, more than 0, at most 1e6.
        reward_scale: rewards are multiplied by this before learning, more than 0, at most 1e6.
    """

    algorithm: ClassVar[str] = "td3"

    num_envs: int = 1024
    hidden_sizes: tuple[int, ...] = (256, 256)
    actor_learning_rate: float = 1e-3
    critic_learning_rate: float = 1e-3
    batch_size: int = 1024
    buffer_size: int = 2**18
    learning_starts: int = 10_000
    updates_per_step: int = 4
    gamma: float = 0.99
    tau: float = 0.005
    exploration_noise: float = 0.1
    target_policy_noise: float = 0.2
    target_noise_clip: float = 0.5
    policy_delay: int = 2
    twin_critics: bool = True
    normalize_observations: bool = True
    obs_clip: float = 10.0
    reward_scale: float = 1.0

    FIXED: ClassVar[tuple[str, ...]] = ("hidden_sizes", "normalize_observations", "buffer_size", "twin_critics")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        r = self._require
        self._check_replay_fields(("actor_learning_rate", "critic_learning_rate"))
        for name in ("exploration_noise", "target_policy_noise", "target_noise_clip"):
            value = getattr(self, name)
            r(math.isfinite(value) and value >= 0, name, "must be >= 0")
            self._require_within(ACTION_NOISE, name)
        r(1 <= self.policy_delay <= 100, "policy_delay", "must be in [1, 100]")
        self._check_observation_fields()


@dataclass
class DDPGConfig(TD3Config):
    """DDPG = TD3 with one critic, no target policy smoothing and no policy delay (see module doc).

    The fields and their meaning are :class:`TD3Config`'s; only these defaults differ:
    ``twin_critics=False``, ``target_policy_noise=0.0``, ``policy_delay=1``.
    """

    algorithm: ClassVar[str] = "ddpg"

    target_policy_noise: float = 0.0
    policy_delay: int = 1
    twin_critics: bool = False


#: Hyperparameters for :class:`~trainer.envs.pendulum.PendulumVecEnv` (learning test and
#: ``benchmarks/pendulum_time_to_quality.py``): SAC's Pendulum preset without its temperature
#: fields; the same values suit DDPG.
PENDULUM_TD3: dict[str, Any] = {
    k: v for k, v in PENDULUM_SAC.items() if k not in ("alpha_learning_rate", "initial_alpha")
}


class TanhActor(nn.Module):
    """Deterministic policy ``mu(s) = tanh(MLP(s))``: (B, obs_dim) -> (B, A) float32 in [-1, 1]."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.net = mlp(obs_dim, hidden_sizes, action_dim, activation=nn.ReLU, orthogonal=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


class QNetworks(nn.Module):
    """K independent action-value MLPs: (B, obs_dim), (B, A) -> (K, B) float32."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int], count: int) -> None:
        super().__init__()
        self.qs = nn.ModuleList(
            mlp(obs_dim + action_dim, hidden_sizes, 1, activation=nn.ReLU, orthogonal=False) for _ in range(count)
        )

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, actions], dim=-1)
        return torch.stack([q(x).squeeze(-1) for q in self.qs])


class TD3Agent(OffPolicyAgent):
    """TD3 agent: actor, critics, their targets, optimizers, replay, RNG and counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, replay buffer and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (exploration and smoothing
            noise, replay sampling, env reset seeds).

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "td3"
    config_class = TD3Config
    SHAPE_FIELDS = TD3Config.FIXED
    STEP_SIZE_FIELDS = ("actor_learning_rate", "critic_learning_rate")
    LOSS_NAMES = ("critic_loss", "actor_loss")

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: TD3Config | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        self._init_agent(obs_dim, action_dim, config, device, check_type=True)
        cfg = self.config
        with seeded_init(seed):
            self.actor = TanhActor(obs_dim, action_dim, cfg.hidden_sizes)
            self.critic = QNetworks(obs_dim, action_dim, cfg.hidden_sizes, 2 if cfg.twin_critics else 1)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        for module in (self.actor, self.critic, self.actor_target, self.critic_target):
            module.to(self.device)
        self.obs_rms = self._make_normalizer()
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.actor_learning_rate, self.device)
        self.critic_optimizer = make_adam(self.critic.parameters(), cfg.critic_learning_rate, self.device)
        self.replay = ReplayBuffer(cfg.buffer_size, obs_dim, action_dim, self.device)
        self._init_counters(seed)
        self._last_actor_loss = torch.zeros((), device=self.device)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions for a batch of raw observations.

        Args:
            obs: (B, obs_dim) float32 raw observations (moved to the agent's device).
            deterministic: ``mu(s)`` when true; with exploration noise (from the agent's
                generator, which advances it) otherwise.

        Returns:
            (B, action_dim) float32 actions in [-1, 1] on the agent's device.
        """
        x = self._normalize(obs.to(self.device, torch.float32))
        return self.actor(x) if deterministic else self._explore(x)

    def policy_module(self) -> nn.Module:
        """A detached copy: raw obs (B, obs_dim) -> ``mu(s)`` (B, A), normalizer baked in."""
        return copy.deepcopy(DeterministicPolicy(self.actor, self.obs_rms)).eval()

    # ---------------------------------------------------------------- learning
    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        """``clip(mu(s) + N(0, exploration_noise^2), -1, 1)`` (E, A) for normalised obs (E, obs_dim)."""
        action = self.actor(obs)
        noise = torch.randn(action.shape, device=self.device, generator=self.generator)
        return action.add_(noise, alpha=self.config.exploration_noise).clamp_(-1.0, 1.0)

    def _update(self) -> torch.Tensor:
        """One critic step; every ``policy_delay``-th one also an actor step and target updates.

        Returns:
            (2,) detached critic loss and the latest actor loss.
        """
        cfg = self.config
        batch = self.replay.sample(cfg.batch_size, self.generator)
        obs, next_obs = self._normalize(batch.obs), self._normalize(batch.next_obs)

        with torch.no_grad():
            target_action = self.actor_target(next_obs)  # (B, A)
            noise = torch.randn(target_action.shape, device=self.device, generator=self.generator)
            next_action = td3_target_action(
                target_action, noise * cfg.target_policy_noise, noise_clip=cfg.target_noise_clip
            )
            target = td3_critic_target(
                batch.rewards, batch.terminated, self.critic_target(next_obs, next_action), gamma=cfg.gamma
            )  # (B,)
        critic_loss = td3_critic_loss(self.critic(obs, batch.actions), target)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()
        self.updates += 1

        if self.updates % cfg.policy_delay == 0:
            self.critic.requires_grad_(False)  # the actor loss must not leave gradients on the critics
            actor_loss = td3_actor_loss(self.critic(obs, self.actor(obs))[0])
            self.critic.requires_grad_(True)
            self.actor_optimizer.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_optimizer.step()
            self._last_actor_loss = actor_loss.detach()
            with torch.no_grad():  # Polyak averaging: theta' <- (1 - tau) theta' + tau theta
                for net, target_net in ((self.critic, self.critic_target), (self.actor, self.actor_target)):
                    for target_param, param in zip(target_net.parameters(), net.parameters()):
                        target_param.lerp_(param, cfg.tau)
        return torch.stack([critic_loss.detach(), self._last_actor_loss])

    # ------------------------------------------------------- hyperparameters
    def set_hyperparameters(self, **changes: Any) -> None:
        """Change hyperparameters between learn calls (PBT mutation); learning rates reach Adam.

        Raises:
            ConfigError: unknown key, bad value, or a field fixed at creation (``hidden_sizes``,
                ``normalize_observations``, ``buffer_size``, ``twin_critics``) given a different value.
        """
        self.config = self._changed_config(changes)
        set_lr(self.actor_optimizer, self.config.actor_learning_rate)
        set_lr(self.critic_optimizer, self.config.critic_learning_rate)

    # ------------------------------------------------------------ checkpoints
    def state_dict(self, *, include_replay_buffer: bool = False) -> dict[str, Any]:
        """Full training state as tensors and plain containers (``torch.load(weights_only=True)``-safe).

        Args:
            include_replay_buffer: also save the filled replay rows (needed for a bit-exact resume).
        """
        return {
            **self._common_state(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "last_actor_loss": self._last_actor_loss.clone(),
            "replay": self.replay.state_dict() if include_replay_buffer else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (config included; networks must have the same shapes).

        Raises:
            ConfigError: the state belongs to another algorithm, other dimensions or a different
                fixed field.
        """
        self._load_common_state(state)
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self._last_actor_loss = state["last_actor_loss"].to(self.device)
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])


class DDPGAgent(TD3Agent):
    """DDPG: :class:`TD3Agent` built from a :class:`DDPGConfig` (one critic, no smoothing, no delay)."""

    algorithm = "ddpg"
    config_class = DDPGConfig
    SHAPE_FIELDS = DDPGConfig.FIXED
