"""Soft Actor-Critic for vectorized torch envs with continuous actions.

Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications" (arXiv 1812.05905):
tanh-squashed Gaussian policy, twin Q critics with Polyak-averaged targets, automatic entropy
temperature (target entropy ``-action_dim``). Every vector env step adds E transitions to a
replay buffer on the env's device and is followed by ``updates_per_step`` gradient updates
(the loop is :meth:`trainer.agents._off_policy.OffPolicyAgent.learn`). The formulas live in
:mod:`trainer.ops`.

Resuming: every :meth:`SACAgent.learn` call resets the env with a seed drawn from the agent's
generator. ``state_dict(include_replay_buffer=True)`` also saves the replay contents, which makes
save/load/continue bit-identical to continuing in place (on CPU); without it (the default, to keep
checkpoints small) a loaded agent refills its buffer with its own policy before updating again.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from trainer.agents._common import make_adam, seeded_init, set_lr
from trainer.agents._off_policy import OffPolicyAgent, OffPolicyConfig
from trainer.agents.networks import DeterministicPolicy, SquashedGaussianActor, TwinQ
from trainer.buffers.replay import ReplayBuffer
from trainer.ops.losses import sac_actor_loss, sac_critic_loss, sac_critic_target, sac_temperature_loss
from trainer.util.bounds import MAX_SCALE, SCALE, Bound

__all__ = ["PENDULUM_SAC", "SACAgent", "SACConfig", "TARGET_ENTROPY"]

#: ``target_entropy``, in nats, or ``None``: a policy on [-1, 1]^A has at most ``A log 2`` nats
#: (the default target is ``-A``), so a target of a million nats either way is a typo; 1e300
#: became infinite in the float32 temperature loss and was reported as a divergence.
TARGET_ENTROPY = Bound(-MAX_SCALE, MAX_SCALE, nullable=True)


@dataclass
class SACConfig(OffPolicyConfig):
    """SAC hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536; each env step adds E transitions.
        hidden_sizes: widths of the actor and of each Q network (ReLU), 1 to 8 layers of
            1..4 096 each.
        actor_learning_rate: Adam step size of the policy, more than 0, at most 1e6
            (``trainer.util.bounds.MAX_SCALE``, as every scale below; mutable by PBT).
        critic_learning_rate: Adam step size of the twin critics, more than 0, at most 1e6 (mutable by PBT).
        alpha_learning_rate: Adam step size of the log temperature, more than 0, at most 1e6.
        batch_size: transitions per gradient update, 1..65 536.
        buffer_size: replay capacity in transitions, num_envs..2**22. Memory is about
            ``buffer_size * (2 obs_dim + action_dim + 2) * 4`` bytes (660 MB at the default with
            300-dim observations); a task whose buffer would pass ``trainer.task.MAX_BUFFER_BYTES``
            is refused.
        learning_starts: transitions collected (uniform random actions) before the first update,
            >= 0; updates also wait until the buffer holds ``max(learning_starts, batch_size)``.
        updates_per_step: gradient updates after each vector env step, 1..64. The replay ratio
            (updates per transition) is ``updates_per_step / num_envs``; with many envs the
            large batch compensates (ElegantRL-Podracer, Liu et al. 2021, arXiv 2112.05923, sec. 4).
        gamma: discount in (0, 1].
        tau: Polyak coefficient of the target critics in (0, 1] (paper: 0.005).
        initial_alpha: starting entropy temperature, more than 0, at most 1e6.
        autotune_alpha: learn alpha toward ``target_entropy`` (paper eq. 18); fixed otherwise.
        target_entropy: desired policy entropy in nats, -1e6 to 1e6 (:data:`TARGET_ENTROPY`); None
            means ``-action_dim`` (paper sec. 5).
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, more than 0, at most 1e6.
        reward_scale: rewards are multiplied by this before learning, more than 0, at most 1e6.
    """

    algorithm: ClassVar[str] = "sac"

    num_envs: int = 1024
    hidden_sizes: tuple[int, ...] = (256, 256)
    actor_learning_rate: float = 3e-4
    critic_learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    batch_size: int = 1024
    buffer_size: int = 2**18
    learning_starts: int = 10_000
    updates_per_step: int = 4
    gamma: float = 0.99
    tau: float = 0.005
    initial_alpha: float = 0.1
    autotune_alpha: bool = True
    target_entropy: float | None = None
    normalize_observations: bool = True
    obs_clip: float = 10.0
    reward_scale: float = 1.0

    FIXED: ClassVar[tuple[str, ...]] = ("hidden_sizes", "normalize_observations", "buffer_size")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        r = self._require
        self._check_replay_fields(("actor_learning_rate", "critic_learning_rate", "alpha_learning_rate"))
        r(math.isfinite(self.initial_alpha) and self.initial_alpha > 0, "initial_alpha", "must be > 0")
        self._require_within(SCALE, "initial_alpha")
        r(self.target_entropy is None or math.isfinite(self.target_entropy), "target_entropy", "must be finite")
        self._require_within(TARGET_ENTROPY, "target_entropy")
        self._check_observation_fields()


#: Hyperparameters that swing up :class:`~trainer.envs.pendulum.PendulumVecEnv` in ~20k transitions
#: (4 envs, 64x64 networks, 2 updates per vector step); used by the learning test and
#: ``benchmarks/pendulum_time_to_quality.py``.
PENDULUM_SAC: dict[str, Any] = {
    "num_envs": 4,
    "hidden_sizes": [64, 64],
    "batch_size": 256,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "updates_per_step": 2,
    "actor_learning_rate": 1e-3,
    "critic_learning_rate": 1e-3,
    "alpha_learning_rate": 1e-3,
    "initial_alpha": 1.0,
}


class SACAgent(OffPolicyAgent):
    """SAC agent: owns actor, twin critics and targets, optimizers, temperature, replay, RNG, counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, replay buffer and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (exploration, replay
            sampling, env reset seeds).

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "sac"
    config_class = SACConfig
    SHAPE_FIELDS = SACConfig.FIXED
    STEP_SIZE_FIELDS = ("actor_learning_rate", "critic_learning_rate", "alpha_learning_rate")
    #: losses, the temperature, the policy's entropy estimate ``-mean log pi(a|s)`` (nats) and
    #: the gradient norms of critics and actor
    LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "critic_grad_norm", "actor_grad_norm")

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: SACConfig | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        self._init_agent(obs_dim, action_dim, config, device)
        cfg = self.config
        with seeded_init(seed):
            self.actor = SquashedGaussianActor(obs_dim, action_dim, cfg.hidden_sizes)
            self.critic = TwinQ(obs_dim, action_dim, cfg.hidden_sizes)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        for module in (self.actor, self.critic, self.critic_target):
            module.to(self.device)
        self.obs_rms = self._make_normalizer()
        self.log_alpha = torch.tensor(math.log(cfg.initial_alpha), device=self.device, requires_grad=True)
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.actor_learning_rate, self.device)
        self.critic_optimizer = make_adam(self.critic.parameters(), cfg.critic_learning_rate, self.device)
        self.alpha_optimizer = make_adam([self.log_alpha], cfg.alpha_learning_rate, self.device)
        self.replay = ReplayBuffer(cfg.buffer_size, obs_dim, action_dim, self.device)
        self._init_counters(seed)

    @property
    def target_entropy(self) -> float:
        """Entropy target in nats (``-action_dim`` unless configured)."""
        te = self.config.target_entropy
        return float(-self.action_dim) if te is None else te

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions for a batch of raw observations.

        Args:
            obs: (B, obs_dim) float32 raw observations (moved to the agent's device).
            deterministic: ``tanh(mean)`` when true, a squashed Gaussian sample (from the agent's
                generator, which advances it) otherwise.

        Returns:
            (B, action_dim) float32 actions in [-1, 1] on the agent's device.
        """
        x = self._normalize(obs.to(self.device, torch.float32))
        if deterministic:
            return self.actor(x)
        action, _ = self.actor.sample(x, self.generator)
        return action

    def policy_module(self) -> nn.Module:
        """A detached copy: raw obs (B, obs_dim) -> ``tanh(mean)`` (B, A), normalizer baked in."""
        return copy.deepcopy(DeterministicPolicy(self.actor, self.obs_rms)).eval()

    # ---------------------------------------------------------------- learning
    def _explore(self, obs: torch.Tensor) -> torch.Tensor:
        """A squashed Gaussian sample (E, A) for normalised observations (E, obs_dim)."""
        action, _ = self.actor.sample(obs, self.generator)
        return action

    def _learned_tensors(self) -> list[torch.Tensor]:
        """Actor and critic parameters and the log temperature."""
        return [*super()._learned_tensors(), self.log_alpha]

    def _update(self) -> torch.Tensor:
        """One gradient step of critics, actor and temperature; returns its detached :attr:`LOSS_NAMES` (7,)."""
        cfg = self.config
        batch = self.replay.sample(cfg.batch_size, self.generator)
        obs, next_obs = self._normalize(batch.obs), self._normalize(batch.next_obs)
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(next_obs, self.generator)
            tq1, tq2 = self.critic_target(next_obs, next_action)
            target = sac_critic_target(
                batch.rewards, batch.terminated, tq1, tq2, next_log_prob, gamma=cfg.gamma, alpha=alpha
            )
        q1, q2 = self.critic(obs, batch.actions)
        critic_loss = sac_critic_loss(q1, q2, target)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        critic_grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.critic.parameters()])
        self.critic_optimizer.step()

        action, log_prob = self.actor.sample(obs, self.generator)
        self.critic.requires_grad_(False)  # the actor loss must not leave gradients on the critics
        q1_pi, q2_pi = self.critic(obs, action)
        self.critic.requires_grad_(True)
        actor_loss = sac_actor_loss(q1_pi, q2_pi, log_prob, alpha)
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.actor.parameters()])
        self.actor_optimizer.step()

        if cfg.autotune_alpha:
            alpha_loss = sac_temperature_loss(self.log_alpha, log_prob, self.target_entropy)
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()
        else:
            alpha_loss = torch.zeros((), device=self.device)

        with torch.no_grad():  # Polyak averaging: theta' <- (1 - tau) theta' + tau theta
            for target_param, param in zip(self.critic_target.parameters(), self.critic.parameters()):
                target_param.lerp_(param, cfg.tau)
        self.updates += 1
        entropy = log_prob.detach().mean().neg()
        losses = (critic_loss.detach(), actor_loss.detach(), alpha_loss.detach(), alpha, entropy)
        return torch.stack([*losses, critic_grad_norm, actor_grad_norm])

    # ------------------------------------------------------- hyperparameters
    def set_hyperparameters(self, **changes: Any) -> None:
        """Change hyperparameters between learn calls (PBT mutation); learning rates reach Adam.

        Raises:
            ConfigError: unknown key, bad value, or a field fixed at creation (``hidden_sizes``,
                ``normalize_observations``, ``buffer_size``) given a different value.
        """
        config = self._changed_config(changes)
        self.config = config
        set_lr(self.actor_optimizer, config.actor_learning_rate)
        set_lr(self.critic_optimizer, config.critic_learning_rate)
        set_lr(self.alpha_optimizer, config.alpha_learning_rate)

    # ------------------------------------------------------------ checkpoints
    def state_dict(self, *, include_replay_buffer: bool = False) -> dict[str, Any]:
        """Full training state as tensors and plain containers (``torch.load(weights_only=True)``-safe).

        Args:
            include_replay_buffer: also save the filled replay rows (large: see
                :class:`SACConfig.buffer_size`); needed for a bit-exact resume.
        """
        return {
            **self._common_state(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "replay": self.replay.state_dict() if include_replay_buffer else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (config included; networks must have the same shapes).

        Raises:
            ConfigError: the state belongs to another algorithm, other dimensions or a different
                fixed field.
        """
        self._load_common_state(state)
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
