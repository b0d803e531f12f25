"""Soft Actor-Critic for vectorized torch envs with continuous actions.

Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications" (arXiv 1812.05905):
tanh-squashed Gaussian policy, twin Q critics with Polyak-averaged targets, automatic entropy
temperature (target entropy ``-action_dim``). Every vector env step adds E transitions to a
replay buffer on the env's device and is followed by ``updates_per_step`` gradient updates.
The formulas live in :mod:`trainer.ops`.

Resuming: every :meth:`SACAgent.learn` call resets the env with a seed drawn from the agent's
generator. ``state_dict(include_replay_buffer=True)`` also saves the replay contents, which makes
save/load/continue bit-identical to continuing in place (on CPU); without it (the default, to keep
checkpoints small) a loaded agent refills its buffer with its own policy before updating again.
A checkpoint from another device type (GPU on CPU, or the reverse) loads everything but the
random stream, which is reseeded deterministically from the saved one
(:func:`trainer.agents._common.restore_generator`).
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from trainer.agents._common import (
    MAX_NUM_ENVS,
    AgentBase,
    AgentConfig,
    ProgressFn,
    StopFn,
    TelemetryClock,
    TelemetryFn,
    Throttle,
    check_env,
    seeded_init,
    set_lr,
    telemetry_due,
)
from trainer.agents.networks import DeterministicPolicy, RunningMeanStd, SquashedGaussianActor, TwinQ
from trainer.buffers.replay import ReplayBuffer
from trainer.errors import ConfigError
from trainer.ops.losses import sac_actor_loss, sac_critic_loss, sac_critic_target, sac_temperature_loss

#: The statistics ``_update`` returns, in order.
LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha")

__all__ = ["SACAgent", "SACConfig"]

#: Largest replay buffer, in transitions (4.2 M; 10.6 GB with 300-dim observations).
MAX_BUFFER_SIZE = 2**22
#: Largest minibatch of one gradient update.
MAX_BATCH_SIZE = 65_536
#: Most gradient updates after one vector env step.
MAX_UPDATES_PER_STEP = 64


@dataclass
class SACConfig(AgentConfig):
    """SAC hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536; each env step adds E transitions.
        hidden_sizes: widths of the actor and of each Q network (ReLU), 1 to 8 layers of
            1..4 096 each.
        actor_learning_rate: Adam step size of the policy, > 0 (mutable by PBT).
        critic_learning_rate: Adam step size of the twin critics, > 0 (mutable by PBT).
        alpha_learning_rate: Adam step size of the log temperature, > 0.
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
        initial_alpha: starting entropy temperature, > 0.
        autotune_alpha: learn alpha toward ``target_entropy`` (paper eq. 18); fixed otherwise.
        target_entropy: desired policy entropy in nats; None means ``-action_dim`` (paper sec. 5).
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, > 0.
        reward_scale: rewards are multiplied by this before learning, > 0.
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
        r(1 <= self.num_envs <= MAX_NUM_ENVS, "num_envs", f"must be in [1, {MAX_NUM_ENVS}]")
        self._require_hidden_sizes()
        for name in ("actor_learning_rate", "critic_learning_rate", "alpha_learning_rate"):
            value = getattr(self, name)
            r(math.isfinite(value) and value > 0, name, "must be > 0")
        r(1 <= self.batch_size <= MAX_BATCH_SIZE, "batch_size", f"must be in [1, {MAX_BATCH_SIZE}]")
        r(self.buffer_size >= self.num_envs, "buffer_size", f"must be >= num_envs ({self.num_envs})")
        r(self.buffer_size <= MAX_BUFFER_SIZE, "buffer_size", f"must be <= {MAX_BUFFER_SIZE} (2**22)")
        r(self.learning_starts >= 0, "learning_starts", "must be >= 0")
        r(
            1 <= self.updates_per_step <= MAX_UPDATES_PER_STEP,
            "updates_per_step",
            f"must be in [1, {MAX_UPDATES_PER_STEP}]",
        )
        r(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        r(0 < self.tau <= 1, "tau", "must be in (0, 1]")
        r(math.isfinite(self.initial_alpha) and self.initial_alpha > 0, "initial_alpha", "must be > 0")
        r(self.target_entropy is None or math.isfinite(self.target_entropy), "target_entropy", "must be finite")
        r(self.obs_clip > 0, "obs_clip", "must be > 0")
        r(math.isfinite(self.reward_scale) and self.reward_scale > 0, "reward_scale", "must be > 0")


class SACAgent(AgentBase):
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

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: SACConfig | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        if obs_dim < 1 or action_dim < 1:
            raise ConfigError(f"obs_dim and action_dim must be >= 1, got {obs_dim}, {action_dim}", field="env")
        self.config = config if config is not None else SACConfig()
        self.config.validate()
        cfg = self.config
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)
        with seeded_init(seed):
            self.actor = SquashedGaussianActor(obs_dim, action_dim, cfg.hidden_sizes)
            self.critic = TwinQ(obs_dim, action_dim, cfg.hidden_sizes)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        for module in (self.actor, self.critic, self.critic_target):
            module.to(self.device)
        self.obs_rms = (
            RunningMeanStd(obs_dim, clip=cfg.obs_clip).to(self.device) if cfg.normalize_observations else None
        )
        self.log_alpha = torch.tensor(math.log(cfg.initial_alpha), device=self.device, requires_grad=True)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_learning_rate)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_learning_rate)
        self.replay = ReplayBuffer(cfg.buffer_size, obs_dim, action_dim, self.device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.env_steps = 0  # transitions collected over the agent's life
        self.updates = 0  # gradient updates over the agent's life
        self.recent_returns: deque[float] = deque(maxlen=100)

    @property
    def target_entropy(self) -> float:
        """Entropy target in nats (``-action_dim`` unless configured)."""
        te = self.config.target_entropy
        return float(-self.action_dim) if te is None else te

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self.obs_rms is None else self.obs_rms(obs)

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
    def _update(self) -> torch.Tensor:
        """One gradient step of critics, actor and temperature; returns detached losses (4,)."""
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
        self.critic_optimizer.step()

        action, log_prob = self.actor.sample(obs, self.generator)
        self.critic.requires_grad_(False)  # the actor loss must not leave gradients on the critics
        q1_pi, q2_pi = self.critic(obs, action)
        self.critic.requires_grad_(True)
        actor_loss = sac_actor_loss(q1_pi, q2_pi, log_prob, alpha)
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
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
        return torch.stack([critic_loss.detach(), actor_loss.detach(), alpha_loss.detach(), alpha])

    def learn(
        self,
        env: Any,
        env_steps: int,
        *,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
        telemetry: TelemetryFn | None = None,
    ) -> dict[str, Any]:
        """Train for at least ``env_steps`` transitions (whole vector steps of E).

        The env is reset first with a seed from the agent's generator (see the module docstring).
        Until the agent has collected ``learning_starts`` transitions it acts uniformly at random.

        Args:
            env: vectorized env following ``docs/architecture.md`` on the agent's device.
            env_steps: transitions to collect, >= 0.
            progress: called at most ~4 times a second with ``env_steps`` (this call),
                ``total_env_steps``, ``steps_per_s``, ``episode_return_mean`` (last 100 finished
                episodes, unscaled, None before any) and the latest losses.
            should_stop: polled after every env step and its updates; when it returns true the
                call ends early with ``stats["cancelled"] = True``.
            telemetry: called after at most ``TELEMETRY_MAX_POINTS`` vector steps, evenly
                spread (:func:`~trainer.agents._common.telemetry_due`), and after the last one,
                with a point of :meth:`AgentBase._telemetry_point` holding the latest
                ``critic_loss`` (Q1 + Q2 losses), ``actor_loss``, ``alpha_loss``, ``alpha`` (once
                updates have started) and ``learning_rate`` (the actor's).

        Returns:
            Stats dict: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean``, ``episodes``, ``cancelled``, and the latest
            ``critic_loss``, ``actor_loss``, ``alpha_loss``, ``alpha`` once updates have started.

        Raises:
            ConfigError: the env's dimensions differ from the agent's, or it has more envs than the
                replay capacity.
        """
        cfg = self.config
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        if env.num_envs > cfg.buffer_size:
            raise ConfigError(
                f"sac.buffer_size {cfg.buffer_size} is smaller than env.num_envs {env.num_envs}",
                field="sac.buffer_size",
            )
        if env_steps < 0:
            raise ConfigError(f"env_steps must be >= 0, got {env_steps}", field="env_steps")
        num_envs = env.num_envs
        vector_steps = math.ceil(env_steps / num_envs)
        throttle = Throttle(progress)
        start = time.monotonic()
        clock = TelemetryClock(start)
        collected, episodes, cancelled = 0, 0, False
        last_losses: torch.Tensor | None = None
        pending_returns: list[torch.Tensor] = []  # finished-episode returns not yet moved to host

        env_seed = int(torch.randint(0, 2**31 - 1, (1,), device=self.device, generator=self.generator).item())
        obs, _ = env.reset(seed=env_seed)
        for step in range(vector_steps):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            if self.obs_rms is not None:
                self.obs_rms.update(obs)
            with torch.no_grad():
                if self.env_steps < cfg.learning_starts:
                    action = (
                        torch.rand((num_envs, self.action_dim), device=self.device, generator=self.generator)
                        .mul_(2.0)
                        .sub_(1.0)
                    )
                else:
                    action, _ = self.actor.sample(self._normalize(obs), self.generator)
            next_obs, reward, terminated, truncated, info = env.step(action)
            done = terminated | truncated
            real_next = torch.where(done[:, None], info["final_observation"], next_obs)
            self.replay.add(obs, action, reward * cfg.reward_scale, real_next, terminated)
            pending_returns.append(info["episode_return"][done])
            obs = next_obs
            collected += num_envs
            self.env_steps += num_envs

            if self.replay.size >= max(cfg.learning_starts, cfg.batch_size):
                for _ in range(cfg.updates_per_step):
                    last_losses = self._update()
            if telemetry is not None and telemetry_due(step, vector_steps):
                episodes += self._drain(pending_returns)
                values = dict(zip(LOSS_NAMES, last_losses.tolist())) if last_losses is not None else {}
                telemetry(self._telemetry_point(collected, clock, {**values, "learning_rate": cfg.actor_learning_rate}))
            if throttle.due():
                episodes += self._drain(pending_returns)
                throttle(self._stats(collected, episodes, start, last_losses, cancelled))
        episodes += self._drain(pending_returns)
        return self._stats(collected, episodes, start, last_losses, cancelled)

    def _drain(self, pending: list[torch.Tensor]) -> int:
        """Move finished-episode returns to ``recent_returns`` (one device sync); returns the count."""
        if not pending:
            return 0
        finished = torch.cat(pending).tolist()
        pending.clear()
        self.recent_returns.extend(finished)
        return len(finished)

    def _stats(
        self, collected: int, episodes: int, start: float, losses: torch.Tensor | None, cancelled: bool
    ) -> dict[str, Any]:
        stats = self._base_stats(collected, episodes, start, cancelled)
        if losses is not None:
            stats.update(zip(LOSS_NAMES, losses.tolist()))
        return stats

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
