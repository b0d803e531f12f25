"""Advantage Actor-Critic (A2C) for vectorized torch envs with continuous actions.

Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning" (arXiv 1602.01783),
in its synchronous form (OpenAI baselines' A2C; Wu et al. 2017, arXiv 1708.05144, sec. 5): E
envs step together for T steps, then ONE gradient step on the whole rollout of T * E samples on
``-mean(log pi(a|s) A) - ent_coef H + vf_coef * 0.5 (V - R)^2`` (:func:`trainer.ops.losses.a2c_loss`).
Advantages come from GAE (arXiv 1506.02438; ``gae_lambda = 1`` gives the paper's n-step
returns). It shares PPO's rollout storage (:class:`~trainer.buffers.rollout.RolloutBuffer`),
GAE (:func:`~trainer.ops.gae.compute_gae`), Gaussian actor, value critic and observation
normalizer, and its loop (:meth:`trainer.agents._on_policy.OnPolicyAgent.learn`); what differs
from PPO is the loss (no ratio, no clip) and one pass per rollout. Everything here runs on
plain autograd.

Tensor shapes: observations (E, obs_dim), actions (E, A) per env step; the rollout is (T, E, ...)
and is flattened to (T * E, ...) for the update.

Resuming is exact: every :meth:`A2CAgent.learn` call resets the env with a seed drawn from the
agent's own generator, so learn / save / load / learn equals learning straight through on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from trainer.agents._common import StopFn, seeded_init
from trainer.agents._on_policy import Divergence, OnPolicyAgent, OnPolicyConfig
from trainer.buffers.rollout import RolloutBuffer
from trainer.ops.losses import a2c_loss
from trainer.util.nonfinite import first_nonfinite, nonfinite_kind

__all__ = ["A2CAgent", "A2CConfig", "PENDULUM_A2C"]

#: Statistics of an update checked for NaN/inf (the explained variance is NaN, legitimately,
#: when the returns do not vary).
A2C_CHECKED = ("policy_loss", "value_loss", "entropy", "grad_norm")


@dataclass
class A2CConfig(OnPolicyConfig):
    """A2C hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536.
        rollout_steps: steps T per env before each gradient step, 1..4 096 (the paper's t_max = 5;
            16 here so one update sees 16 384 samples, as a PPO rollout does).
        hidden_sizes: widths of the actor and critic MLPs (tanh), 1 to 8 layers of 1..4 096 each.
        learning_rate: Adam step size, more than 0, at most 1e6 (``trainer.util.bounds.MAX_SCALE``, as
            every scale below; mutable by PBT). The paper uses shared RMSProp;
            Adam with 16k-sample batches was as good and needs no extra tuning.
        gamma: discount in (0, 1].
        gae_lambda: GAE lambda in [0, 1]; 1 gives the n-step returns of the paper.
        ent_coef: entropy bonus weight, 0 to 1e6 (``trainer.util.bounds.MAX_PENALTY``; paper: 0.01;
            mutable by PBT).
        vf_coef: weight of the value loss in the joint loss, 0 to 1e6.
        max_grad_norm: global L2 gradient-norm clip, more than 0, at most 1e6.
        normalize_advantages: standardise advantages over each rollout (not in the paper; makes
            the step size independent of the reward scale).
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, more than 0, at most 1e6.
        init_log_std: initial log std of the Gaussian policy ([-1, 1] action units).
        reward_scale: rewards are multiplied by this before learning, more than 0, at most 1e6.
        policy: the actor's mean, fixed at creation: ``"mlp"`` or ``"cross_sectional"``
            (portfolio tasks only; the actor reads raw observations, ``normalize_observations``
            applies to the critic only), as PPO's (:class:`~trainer.agents.ppo.PPOConfig`).
        kappa: tilt bound of the cross-sectional policy, > 0 and at most the env's
            ``logit_scale / 2`` (fixed at creation; unused by the MLP).
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
    policy: str = "mlp"
    kappa: float = 0.5

    FIXED: ClassVar[tuple[str, ...]] = ("hidden_sizes", "normalize_observations", "init_log_std", "policy", "kappa")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        self._check_rollout_fields()
        self._check_return_fields()
        self._check_loss_fields()
        self._check_policy_fields()


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


class A2CAgent(OnPolicyAgent):
    """A2C agent: owns its actor, critic, optimizer, observation statistics, RNG and counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, rollouts and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (action noise, env resets).

    :meth:`learn` (:class:`~trainer.agents._on_policy.OnPolicyAgent`'s) makes one gradient step
    per rollout and reports its ``policy_loss``, ``value_loss``, ``entropy``, ``grad_norm``
    (before clipping) and ``explained_variance`` (of the value targets by the rollout's values).

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "a2c"
    config_class = A2CConfig
    SHAPE_FIELDS = ("hidden_sizes", "normalize_observations", "policy", "kappa")
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
        self._init_agent(obs_dim, action_dim, config, device)
        cfg = self.config
        with seeded_init(seed):
            self.actor, self.critic, self.obs_rms = self._make_networks(cfg.hidden_sizes)
        params = [*self.actor.parameters(), *self.critic.parameters()]
        # fused (one kernel for all parameters) on CUDA, as SAC/TD3 (make_adam); default elsewhere
        fused = True if self.device.type == "cuda" else None
        self.optimizer = torch.optim.Adam(params, lr=cfg.learning_rate, eps=1e-5, fused=fused)
        self._init_counters(seed)

    # ---------------------------------------------------------------- learning
    def _collect(self, env: Any, obs: torch.Tensor, buf: RolloutBuffer) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        for t in range(cfg.rollout_steps):
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
        return obs, self.critic(self._normalize(obs))

    def _train_on_rollout(
        self, buf: RolloutBuffer, explained: torch.Tensor, should_stop: StopFn | None, losses: dict[str, float]
    ) -> tuple[dict[str, float], Divergence | None, bool]:
        """One gradient step on all T * E samples; never stopped part way."""
        losses, params_finite = self._update(buf.flatten(), explained)
        bad = first_nonfinite((k, losses[k]) for k in A2C_CHECKED)
        if bad is None and not params_finite:
            bad = ("parameters", nonfinite_kind(p for g in self.optimizer.param_groups for p in g["params"]))
        return losses, None if bad is None else (self.updates, *bad), False

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
