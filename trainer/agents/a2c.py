"""Advantage Actor-Critic (A2C) for vectorized torch envs with continuous actions.

Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning" (arXiv 1602.01783),
in its synchronous form (OpenAI baselines' A2C; Wu et al. 2017, arXiv 1708.05144, sec. 5): E
envs step together for T steps, then ONE gradient step on the whole rollout of T * E samples on
``-mean(log pi(a|s) A) - ent_coef H + vf_coef * 0.5 (V - R)^2`` (:func:`trainer.ops.losses.a2c_loss`).
Advantages come from GAE (arXiv 1506.02438; ``gae_lambda = 1`` gives the paper's n-step
returns). It shares PPO's rollout storage (:class:`~trainer.buffers.rollout.RolloutBuffer`),
GAE (:func:`~trainer.ops.gae.compute_gae`), Gaussian actor, value critic and observation
normalizer; what differs from PPO is the loss (no ratio, no clip) and one pass per rollout.
Everything here runs on plain autograd, so the module reads top to bottom.

Tensor shapes: observations (E, obs_dim), actions (E, A) per env step; the rollout is (T, E, ...)
and is flattened to (T * E, ...) for the update.

Resuming is exact: every :meth:`A2CAgent.learn` call resets the env with a seed drawn from the
agent's own generator, so learn / save / load / learn equals learning straight through on CPU.
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
from trainer.agents.networks import DeterministicPolicy, GaussianActor, RunningMeanStd, ValueCritic
from trainer.buffers.rollout import RolloutBuffer
from trainer.errors import ConfigError
from trainer.nonfinite import first_nonfinite, nonfinite_kind
from trainer.ops.gae import compute_gae
from trainer.ops.losses import a2c_loss

__all__ = ["A2CAgent", "A2CConfig", "PENDULUM_A2C"]

#: Statistics of an update checked for NaN/inf (the explained variance is NaN, legitimately,
#: when the returns do not vary).
A2C_CHECKED = ("policy_loss", "value_loss", "entropy", "grad_norm")
#: Longest rollout per env (the paper's t_max is 5; 16 years of trading days at most).
MAX_ROLLOUT_STEPS = 4_096


@dataclass
class A2CConfig(AgentConfig):
    """A2C hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536.
        rollout_steps: steps T per env before each gradient step, 1..4 096 (the paper's t_max = 5;
            16 here so one update sees 16 384 samples, as a PPO rollout does).
        hidden_sizes: widths of the actor and critic MLPs (tanh), 1 to 8 layers of 1..4 096 each.
        learning_rate: Adam step size, > 0 (mutable by PBT). The paper uses shared RMSProp;
            Adam with 16k-sample batches was as good and needs no extra tuning.
        gamma: discount in (0, 1].
        gae_lambda: GAE lambda in [0, 1]; 1 gives the n-step returns of the paper.
        ent_coef: entropy bonus weight >= 0 (paper: 0.01; mutable by PBT).
        vf_coef: weight >= 0 of the value loss in the joint loss.
        max_grad_norm: global L2 gradient-norm clip, > 0.
        normalize_advantages: standardise advantages over each rollout (not in the paper; makes
            the step size independent of the reward scale).
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, > 0.
        init_log_std: initial log std of the Gaussian policy ([-1, 1] action units).
        reward_scale: rewards are multiplied by this before learning, > 0.
    """

    algorithm: ClassVar[str] = "a2c"

    num_envs: int = 1024
    rollout_steps: int = 16
    hidden_sizes: tuple[int, ...] = (64, 64)
    learning_rate: float = 7e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantages: bool = True
    normalize_observations: bool = True
    obs_clip: float = 10.0
    init_log_std: float = -0.5
    reward_scale: float = 1.0

    FIXED: ClassVar[tuple[str, ...]] = ("hidden_sizes", "normalize_observations", "init_log_std")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        r = self._require
        r(1 <= self.num_envs <= MAX_NUM_ENVS, "num_envs", f"must be in [1, {MAX_NUM_ENVS}]")
        r(1 <= self.rollout_steps <= MAX_ROLLOUT_STEPS, "rollout_steps", f"must be in [1, {MAX_ROLLOUT_STEPS}]")
        self._require_hidden_sizes()
        r(math.isfinite(self.learning_rate) and self.learning_rate > 0, "learning_rate", "must be > 0")
        r(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        r(0 <= self.gae_lambda <= 1, "gae_lambda", "must be in [0, 1]")
        r(self.ent_coef >= 0, "ent_coef", "must be >= 0")
        r(self.vf_coef >= 0, "vf_coef", "must be >= 0")
        r(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")
        r(self.obs_clip > 0, "obs_clip", "must be > 0")
        r(-20 <= self.init_log_std <= 2, "init_log_std", "must be in [-20, 2]")
        r(math.isfinite(self.reward_scale) and self.reward_scale > 0, "reward_scale", "must be > 0")


#: Hyperparameters for :class:`~trainer.envs.pendulum.PendulumVecEnv` (used by the learning test
#: and ``benchmarks/pendulum_time_to_quality.py``): 32 envs x 8 steps per update, gamma and GAE
#: lambda 0.9 (the RL Zoo's A2C Pendulum values), lr 1e-3, rewards x 0.1, raw observations.
#: A2C needs far more samples than PPO here (one gradient step per 256 transitions): on seed 0
#: the last 20 training episodes averaged -838 after 512k transitions and -157 after 1.02M, and
#: stay noisy afterwards. With running observation normalisation it had not passed -900 by 1.4M.
PENDULUM_A2C: dict[str, Any] = {
    "num_envs": 32,
    "rollout_steps": 8,
    "hidden_sizes": [64, 64],
    "gamma": 0.9,
    "gae_lambda": 0.9,
    "learning_rate": 1e-3,
    "ent_coef": 0.0,
    "init_log_std": -1.0,
    "reward_scale": 0.1,
    "normalize_observations": False,
}


class A2CAgent(AgentBase):
    """A2C agent: owns its actor, critic, optimizer, observation statistics, RNG and counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, rollouts and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (action noise, env resets).

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "a2c"
    config_class = A2CConfig
    SHAPE_FIELDS = ("hidden_sizes", "normalize_observations")
    STEP_SIZE_FIELDS = ("learning_rate",)

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: A2CConfig | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        if obs_dim < 1 or action_dim < 1:
            raise ConfigError(f"obs_dim and action_dim must be >= 1, got {obs_dim}, {action_dim}", field="env")
        self.config = config if config is not None else A2CConfig()
        self.config.validate()
        cfg = self.config
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)
        with seeded_init(seed):
            self.actor = GaussianActor(obs_dim, action_dim, cfg.hidden_sizes, cfg.init_log_std).to(self.device)
            self.critic = ValueCritic(obs_dim, cfg.hidden_sizes).to(self.device)
        self.obs_rms = (
            RunningMeanStd(obs_dim, clip=cfg.obs_clip).to(self.device) if cfg.normalize_observations else None
        )
        params = [*self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = torch.optim.Adam(params, lr=cfg.learning_rate, eps=1e-5)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.env_steps = 0  # transitions collected over the agent's life
        self.updates = 0  # gradient steps over the agent's life
        self.recent_returns: deque[float] = deque(maxlen=100)

    def _normalize(self, obs: torch.Tensor, update: bool = False) -> torch.Tensor:
        if self.obs_rms is None:
            return obs
        if update:
            self.obs_rms.update(obs)
        return self.obs_rms(obs)

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions for a batch of raw observations.

        Args:
            obs: (B, obs_dim) float32 raw observations (moved to the agent's device).
            deterministic: the policy mean when true, a Gaussian sample (from the agent's
                generator, which advances it) otherwise.

        Returns:
            (B, action_dim) float32 actions in [-1, 1] on the agent's device.
        """
        x = self._normalize(obs.to(self.device, torch.float32))
        action = self.actor(x) if deterministic else self.actor.sample(x, self.generator)[0]
        return action.clamp(-1.0, 1.0)

    def policy_module(self) -> nn.Module:
        """A detached copy: raw obs (B, obs_dim) -> clipped policy mean (B, A), normalizer baked in."""
        return copy.deepcopy(DeterministicPolicy(self.actor, self.obs_rms)).eval()

    # ---------------------------------------------------------------- learning
    def learn(
        self,
        env: Any,
        env_steps: int,
        *,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
        telemetry: TelemetryFn | None = None,
    ) -> dict[str, Any]:
        """Train for at least ``env_steps`` transitions (whole rollouts of T * E, one update each).

        Args:
            env: vectorized env following ``docs/architecture.md`` on the agent's device.
            env_steps: transitions to collect, >= 0.
            progress: called at most ~4 times a second with the stats below so far.
            should_stop: polled between rollouts; when it returns true the call ends early with
                ``stats["cancelled"] = True``.
            telemetry: called after the update of at most ``TELEMETRY_MAX_POINTS`` rollouts,
                evenly spread (:func:`~trainer.agents._common.telemetry_due`), and after the
                last one, with a point of :meth:`AgentBase._telemetry_point` holding that
                update's losses, ``explained_variance`` and ``learning_rate``.

        Returns:
            Stats dict: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean``, ``episodes``, ``cancelled`` and the last
            update's ``policy_loss``, ``value_loss``, ``entropy``, ``explained_variance`` (of the
            value targets by the rollout's values).

        Raises:
            ConfigError: the env's dimensions differ from the agent's, or ``env_steps`` < 0.
        """
        cfg = self.config
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        if env_steps < 0:
            raise ConfigError(f"env_steps must be >= 0, got {env_steps}", field="env_steps")
        num_envs, num_steps = env.num_envs, cfg.rollout_steps
        iterations = math.ceil(env_steps / (num_steps * num_envs))
        buf = RolloutBuffer(num_steps, num_envs, self.obs_dim, self.action_dim, self.device)
        throttle = Throttle(progress)
        start = time.monotonic()
        clock = TelemetryClock(start)
        collected, episodes, cancelled = 0, 0, False
        losses: dict[str, float] = {}

        env_seed = int(torch.randint(0, 2**31 - 1, (1,), device=self.device, generator=self.generator).item())
        obs, _ = env.reset(seed=env_seed)
        for iteration in range(iterations):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            # ---- collect T steps in E envs: buf.obs (T, E, obs_dim), buf.actions (T, E, A), rest (T, E)
            with torch.no_grad():
                for t in range(num_steps):
                    x = self._normalize(obs, update=True)
                    buf.obs[t] = x
                    buf.values[t] = self.critic(x)
                    buf.actions[t], buf.log_probs[t] = self.actor.sample(x, self.generator)
                    obs, reward, terminated, truncated, info = env.step(buf.actions[t].clamp(-1.0, 1.0))
                    buf.rewards[t] = reward * cfg.reward_scale
                    buf.terminated[t], buf.truncated[t] = terminated, truncated
                    buf.episode_returns[t] = info["episode_return"]
                    final = self.critic(self._normalize(info["final_observation"]))
                    buf.final_values[t] = torch.where(truncated, final, 0.0)
                last_values = self.critic(self._normalize(obs))
                buf.advantages[:], buf.returns[:] = compute_gae(
                    buf.rewards,
                    buf.values,
                    last_values,
                    buf.terminated,
                    buf.truncated,
                    buf.final_values,
                    gamma=cfg.gamma,
                    gae_lambda=cfg.gae_lambda,
                )
                explained = 1.0 - torch.var(buf.returns - buf.values) / torch.var(buf.returns)
                if cfg.normalize_advantages:
                    std, mean_adv = torch.std_mean(buf.advantages)
                    buf.advantages.sub_(mean_adv).div_(std + 1e-8)
            collected += buf.size
            self.env_steps += buf.size
            finished = buf.finished_episode_returns()
            episodes += len(finished)
            self.recent_returns.extend(finished)

            # ---- one gradient step on all T * E samples
            losses, params_finite = self._update(buf.flatten(), explained)
            bad = first_nonfinite((k, losses[k]) for k in A2C_CHECKED)
            if bad is None and not params_finite:
                bad = ("parameters", nonfinite_kind(p for g in self.optimizer.param_groups for p in g["params"]))
            if telemetry is not None and (bad or telemetry_due(iteration, iterations)):
                telemetry(self._telemetry_point(collected, clock, {**losses, "learning_rate": cfg.learning_rate}))
            if bad is not None:
                stats = self._stats(collected, episodes, start, losses, cancelled)
                raise self.divergence(update=self.updates, quantity=bad[0], value=bad[1], stats=stats)
            if throttle.due():
                throttle(self._stats(collected, episodes, start, losses, cancelled))
        return self._stats(collected, episodes, start, losses, cancelled)

    def _update(self, batch: Any, explained: torch.Tensor) -> tuple[dict[str, float], bool]:
        """One A2C gradient step on a flattened rollout (:class:`~trainer.buffers.rollout.RolloutBatch`, B = T * E);
        returns its losses, ``grad_norm`` (before clipping) and ``explained`` (() float32
        explained variance) as floats, and whether every parameter is still finite."""
        cfg = self.config
        log_prob, entropy = self.actor.evaluate(batch.obs, batch.actions)  # (B,), (B,)
        values = self.critic(batch.obs)  # (B,)
        out = a2c_loss(
            log_prob, entropy, values, batch.advantages, batch.returns, ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef
        )
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        grad_norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        finite = torch.stack([torch.isfinite(p).all() for p in params]).all()
        names = ("policy_loss", "value_loss", "entropy", "grad_norm", "explained_variance")
        stats = torch.stack([out.policy_loss, out.value_loss, out.entropy, grad_norm, explained, finite]).tolist()
        return dict(zip(names, stats[:-1])), stats[-1] == 1.0  # one host sync

    def _stats(self, collected: int, episodes: int, start: float, losses: dict, cancelled: bool) -> dict[str, Any]:
        return {**self._base_stats(collected, episodes, start, cancelled), **losses}

    # ------------------------------------------------------- hyperparameters
    def set_hyperparameters(self, **changes: Any) -> None:
        """Change hyperparameters between learn calls (PBT mutation); ``learning_rate`` reaches Adam.

        Raises:
            ConfigError: unknown key, bad value, or a field fixed at creation (``hidden_sizes``,
                ``normalize_observations``, ``init_log_std``) given a different value.
        """
        self.config = self._changed_config(changes)
        set_lr(self.optimizer, self.config.learning_rate)

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Full training state as tensors and plain containers (``torch.load(weights_only=True)``-safe)."""
        return {**self._common_state(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (config included; networks must have the same shapes).

        Raises:
            ConfigError: the state belongs to another algorithm, other dimensions or hidden sizes.
        """
        self._load_common_state(state)
        self.optimizer.load_state_dict(state["optimizer"])
