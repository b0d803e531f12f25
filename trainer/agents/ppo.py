"""Proximal Policy Optimization for vectorized torch envs with continuous actions.

Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv 1707.06347), with the
implementation choices studied by Andrychowicz et al. 2021, "What Matters in On-Policy
Reinforcement Learning?" (arXiv 2006.05990): separate actor and critic MLPs, a Gaussian policy
with state-independent log std, GAE, advantage normalisation, running observation
normalisation, global gradient-norm clipping. The loop reads top to bottom in
:meth:`PPOAgent.learn`; the formulas live in :mod:`trainer.ops`.

Resuming is exact: every :meth:`PPOAgent.learn` call starts by resetting the env with a seed
drawn from the agent's own generator, so ``learn(N); learn(M)`` on one agent and ``learn(N)``,
save, load into a fresh agent, ``learn(M)`` (with an identically constructed env) give
bit-identical parameters on CPU. Loading a checkpoint saved on another device type (a GPU
checkpoint on a CPU, or the reverse) restores everything but the random stream, which is
reseeded deterministically from the saved one (:func:`trainer.agents._common.restore_generator`).
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
from trainer.agents.networks import (
    DeterministicPolicy,
    FlatActorCritic,
    FlatAdam,
    GaussianActor,
    RunningMeanStd,
    ValueCritic,
    mlp_forward,
)
from trainer.agents.ppo_reference import reference_optimizer, reference_step
from trainer.buffers.rollout import RolloutBatch, RolloutBuffer
from trainer.errors import ConfigError
from trainer.nonfinite import first_nonfinite, nonfinite_kind
from trainer.ops.gae import compute_gae
from trainer.ops.losses import diag_gaussian_log_normalizer, ppo_loss_gradients

__all__ = ["PENDULUM_PPO", "PPOAgent", "PPOConfig"]

#: Statistics of one gradient step, in the order of :meth:`PPOAgent._update`'s rows: the
#: ``PPOGradients.stats`` of :func:`trainer.ops.losses.ppo_loss_gradients`, then the global
#: gradient norm before clipping. Each is checked for NaN/inf after the rollout's updates.
UPDATE_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")
#: Per-rollout statistics in stats and telemetry: the means of :data:`UPDATE_STATS` over the
#: rollout's gradient steps, plus the explained variance of its value predictions.
LOSS_NAMES = (*UPDATE_STATS, "explained_variance")
#: Longest rollout per env (16 years of trading days; the default is 16).
MAX_ROLLOUT_STEPS = 4_096
#: Most passes over one rollout (the PPO paper uses 3-15).
MAX_UPDATE_EPOCHS = 100


@dataclass
class PPOConfig(AgentConfig):
    """PPO hyperparameters. Defaults target the stock-trading env (1024 envs, ~300 obs, 29 actions).

    The defaults follow ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923, sec. 4): many
    envs, a short horizon and few passes over each large rollout, so a pod's time goes into
    collecting fresh data rather than re-fitting old data. On the Dow-30 env (one CPU thread)
    they train ~15x faster per env step than the earlier (256, 256) x 8-epoch defaults, and
    their validation Sharpe after 0.5M steps was no worse (0.81-0.90 over seeds 0-2, vs 0.66);
    see ``benchmarks/train_throughput.py``. ``PENDULUM_PPO`` holds a preset for Pendulum.

    Attributes:
        num_envs: parallel envs E the pod creates, 1..65 536. One rollout is ``rollout_steps * num_envs``
            transitions (16 384 by default, a large batch in the spirit of ElegantRL-Podracer).
        rollout_steps: steps T per env and rollout, 1..4 096. The rollout buffer holds about
            ``T * E * (obs_dim + action_dim + 8) * 4`` bytes (22 MB at the defaults with 300-dim
            observations); a task whose buffer would pass ``trainer.task.MAX_BUFFER_BYTES`` is refused.
        hidden_sizes: widths of the actor and critic MLPs (tanh), 1 to 8 layers of 1..4 096 each.
            (64, 64) is also Stable-Baselines3's default; the first layer (obs_dim x 64) dominates
            the cost.
        learning_rate: Adam step size for actor and critic, > 0 (mutable by PBT).
        update_epochs: passes K over each rollout, 1..100 (the PPO paper uses 3-15 with small
            rollouts; with 16k-sample rollouts 2 passes learned as well as 8 at 1/4 the cost).
        num_minibatches: gradient steps per epoch, 1..rollout_steps*num_envs; each rollout is
            split into this many near-equal minibatches (4 096 samples each by default). A count
            rather than a size, so the pod may change ``num_envs`` without invalidating it.
        gamma: discount in (0, 1]; 0.99 ~ a 100-step (trading-day) horizon.
        gae_lambda: GAE lambda in [0, 1] (arXiv 1506.02438).
        clip_coef: policy ratio clip epsilon > 0 (PPO paper eq. 7, 0.1-0.3 typical).
        value_clip_coef: clip of the value update around the rollout values, > 0, or None for a
            plain squared error (None is recommended by arXiv 2006.05990, sec. 3.5).
        ent_coef: weight >= 0 of the entropy bonus (mutable by PBT).
        vf_coef: weight >= 0 of the value loss in the joint loss (matters for gradient clipping).
        max_grad_norm: global L2 gradient-norm clip, > 0.
        normalize_advantages: standardise advantages over each rollout.
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, > 0.
        init_log_std: initial log std of the Gaussian policy in action units ([-1, 1] scale).
        reward_scale: rewards are multiplied by this before learning, > 0 (statistics report the
            env's unscaled returns).
        critic_hidden_sizes: widths of the critic MLP when it differs from the actor's, or None
            (the same as ``hidden_sizes``). Different widths cannot use the fast update.
        update_impl: how a minibatch gradient step is computed: ``"fast"``, the hand-written
            closed-form gradient and fused Adam (:class:`~trainer.agents.networks.FlatActorCritic`,
            several times faster on a CPU), or ``"autograd"``, the readable reference
            (``torch.autograd`` + ``torch.optim.Adam`` + ``clip_grad_norm_``,
            :mod:`trainer.agents.ppo_reference`). Both give the same update (to float rounding);
            networks the fast path cannot handle use the reference whatever this says.
    """

    algorithm: ClassVar[str] = "ppo"

    num_envs: int = 1024
    rollout_steps: int = 16
    hidden_sizes: tuple[int, ...] = (64, 64)
    learning_rate: float = 3e-4
    update_epochs: int = 2
    num_minibatches: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    value_clip_coef: float | None = None
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantages: bool = True
    normalize_observations: bool = True
    obs_clip: float = 10.0
    init_log_std: float = -0.5
    reward_scale: float = 1.0
    critic_hidden_sizes: tuple[int, ...] | None = None
    update_impl: str = "fast"

    # fields that shape the networks or statistics and cannot change after the agent exists
    FIXED: ClassVar[tuple[str, ...]] = ("hidden_sizes", "critic_hidden_sizes", "normalize_observations", "init_log_std")
    UPDATE_IMPLS: ClassVar[tuple[str, ...]] = ("fast", "autograd")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        r = self._require
        r(1 <= self.num_envs <= MAX_NUM_ENVS, "num_envs", f"must be in [1, {MAX_NUM_ENVS}]")
        r(1 <= self.rollout_steps <= MAX_ROLLOUT_STEPS, "rollout_steps", f"must be in [1, {MAX_ROLLOUT_STEPS}]")
        self._require_hidden_sizes()
        r(math.isfinite(self.learning_rate) and self.learning_rate > 0, "learning_rate", "must be > 0")
        r(1 <= self.update_epochs <= MAX_UPDATE_EPOCHS, "update_epochs", f"must be in [1, {MAX_UPDATE_EPOCHS}]")
        batch = self.rollout_steps * self.num_envs
        r(1 <= self.num_minibatches <= batch, "num_minibatches", f"must be in [1, rollout_steps * num_envs = {batch}]")
        r(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        r(0 <= self.gae_lambda <= 1, "gae_lambda", "must be in [0, 1]")
        r(self.clip_coef > 0, "clip_coef", "must be > 0")
        r(self.value_clip_coef is None or self.value_clip_coef > 0, "value_clip_coef", "must be > 0 or null")
        r(self.ent_coef >= 0, "ent_coef", "must be >= 0")
        r(self.vf_coef >= 0, "vf_coef", "must be >= 0")
        r(self.max_grad_norm > 0, "max_grad_norm", "must be > 0")
        r(self.obs_clip > 0, "obs_clip", "must be > 0")
        r(-20 <= self.init_log_std <= 2, "init_log_std", "must be in [-20, 2]")
        r(math.isfinite(self.reward_scale) and self.reward_scale > 0, "reward_scale", "must be > 0")
        if self.critic_hidden_sizes is not None:
            self._require_hidden_sizes("critic_hidden_sizes")
        r(self.update_impl in self.UPDATE_IMPLS, "update_impl", f"must be one of {', '.join(self.UPDATE_IMPLS)}")


#: Hyperparameters that swing up :class:`~trainer.envs.pendulum.PendulumVecEnv` fast: 64 envs x
#: 50 steps per rollout (a quarter of the Python-level env steps of 16 x 200 for the same 3 200
#: samples), 10 epochs of 4 minibatches of 800, lr 3e-3, gamma 0.95, rewards scaled by 0.1 and
#: (16, 16) tanh MLPs. On one CPU thread a gradient step on 800 samples is bound by the hidden
#: layers' matrix products, and 16-wide networks cross -250 in as few env steps as 64-wide ones
#: (51-77k, seeds 0-2, vs 90-115k for 64-wide at lr 1e-3) at a fraction of the cost per step;
#: lr 2e-3 and 5e-3 were slower to the threshold. Quality holds on afterwards: after 154k steps
#: the deterministic policy scores -174 to -202 (seeds 0-2, 32 evaluation episodes).
#: Used by ``benchmarks/pendulum_time_to_quality.py``.
PENDULUM_PPO: dict[str, Any] = {
    "num_envs": 64,
    "rollout_steps": 50,
    "hidden_sizes": [16, 16],
    "num_minibatches": 4,
    "update_epochs": 10,
    "gamma": 0.95,
    "learning_rate": 3e-3,
    "ent_coef": 0.0,
    "reward_scale": 0.1,
}


class PPOAgent(AgentBase):
    """PPO agent: owns its networks, optimizer, observation statistics, RNG and counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, rollouts and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (action noise,
            minibatch order, env reset seeds).

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "ppo"
    config_class = PPOConfig
    SHAPE_FIELDS = ("hidden_sizes", "critic_hidden_sizes", "normalize_observations")
    STEP_SIZE_FIELDS = ("learning_rate",)

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: PPOConfig | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        if obs_dim < 1 or action_dim < 1:
            raise ConfigError(f"obs_dim and action_dim must be >= 1, got {obs_dim}, {action_dim}", field="env")
        self.config = config if config is not None else PPOConfig()
        self.config.validate()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)
        cfg = self.config
        with seeded_init(seed):
            self.actor = GaussianActor(obs_dim, action_dim, cfg.hidden_sizes, cfg.init_log_std)
            self.critic = ValueCritic(obs_dim, cfg.critic_hidden_sizes or cfg.hidden_sizes)
        self.actor.to(self.device)
        self.critic.to(self.device)
        # every parameter becomes a view into one flat tensor (see FlatActorCritic)
        self.net = FlatActorCritic(self.actor, self.critic)
        self.obs_rms = (
            RunningMeanStd(obs_dim, clip=cfg.obs_clip).to(self.device) if cfg.normalize_observations else None
        )
        self.optimizer = FlatAdam(self.net.flat.data, self.net.grad, lr=cfg.learning_rate, eps=1e-5)
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
            obs: (B, obs_dim) float32 raw observations (any device; moved to the agent's).
            deterministic: the policy mean when true, a Gaussian sample (drawn from the agent's
                generator, which advances it) otherwise.

        Returns:
            (B, action_dim) float32 actions in [-1, 1] on the agent's device.
        """
        x = self._normalize(obs.to(self.device, torch.float32))
        if deterministic:
            action = self.actor(x)
        else:
            action, _ = self.actor.sample(x, self.generator)
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
        """Train for at least ``env_steps`` transitions (whole rollouts of T * E).

        The env is reset first with a seed from the agent's generator (see the module docstring).

        Args:
            env: vectorized env following ``docs/architecture.md`` on the agent's device.
            env_steps: transitions to collect, >= 0.
            progress: called at most ~4 times a second with ``env_steps`` (this call),
                ``total_env_steps``, ``steps_per_s``, ``episode_return_mean`` (last 100 finished
                episodes, unscaled, None before any) and the latest losses.
            should_stop: polled between rollouts and between epochs; when it returns true the
                call ends early with ``stats["cancelled"] = True``.
            telemetry: called after the updates of at most ``TELEMETRY_MAX_POINTS`` rollouts,
                evenly spread (:func:`~trainer.agents._common.telemetry_due`), and after the
                last one (also the one that diverged), with a point of
                :meth:`AgentBase._telemetry_point` holding that rollout's mean losses (as in
                the returned stats) and ``learning_rate``.

        Returns:
            Stats dict: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean``, ``episodes``, ``cancelled`` and the last
            rollout's mean ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
            ``clip_fraction`` and ``explained_variance`` (``1 - Var(R - V) / Var(R)`` of the
            rollout's GAE returns R and value predictions V, as cleanrl and SB3 log it; 1 is a
            perfect critic, <= 0 one no better than a constant; NaN when Var(R) = 0), and
            ``grad_norm``, the mean global gradient norm before clipping.

        Raises:
            ConfigError: the env's dimensions differ from the agent's, or there are more minibatches
                than samples in the env's rollout.
            Diverged: after a rollout's updates, a gradient step's loss, entropy, KL, clip
                fraction or gradient norm, or a parameter, is NaN or infinite (checked once per
                rollout, in the host sync its statistics need anyway); the message names the
                first such gradient step and quantity and the learning rate.
        """
        cfg = self.config
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        num_envs, num_steps = env.num_envs, cfg.rollout_steps
        if cfg.num_minibatches > num_steps * num_envs:
            raise ConfigError(
                f"ppo.num_minibatches {cfg.num_minibatches} exceeds rollout_steps * env.num_envs = {num_steps * num_envs}",
                field="ppo.num_minibatches",
            )
        if env_steps < 0:
            raise ConfigError(f"env_steps must be >= 0, got {env_steps}", field="env_steps")
        iterations = math.ceil(env_steps / (num_steps * num_envs))
        buf = RolloutBuffer(num_steps, num_envs, self.obs_dim, self.action_dim, self.device)
        throttle = Throttle(progress)
        start = time.monotonic()
        clock = TelemetryClock(start)
        collected, episodes, cancelled = 0, 0, False
        losses: dict[str, float] = {}

        env_seed = int(torch.randint(0, 2**31 - 1, (1,), device=self.device, generator=self.generator).item())
        obs, _ = env.reset(seed=env_seed)
        # On the CPU a host sync is free, so V(final obs) is computed only for the (usually few)
        # truncated rows; on an accelerator it is computed for every row to avoid the sync.
        sparse_final = self.device.type == "cpu"
        for iteration in range(iterations):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            # ---- collect T steps in E envs
            with torch.no_grad():
                # the std is fixed during a rollout, so its exp and the log-density constant are hoisted
                std = self.net.log_std.exp()
                log_norm = diag_gaussian_log_normalizer(self.net.log_std)
                for t in range(num_steps):
                    x = self._normalize(obs, update=True)
                    buf.obs[t] = x
                    mean, buf.values[t] = self.net.forward(x)
                    noise = torch.randn(mean.shape, device=self.device, generator=self.generator)
                    # log N(mean + std * noise; mean, std) = -|noise|^2 / 2 - sum log std - A log(2 pi) / 2
                    torch.sub(noise.square().sum(-1).mul_(-0.5), log_norm, out=buf.log_probs[t])
                    action = torch.addcmul(mean, noise, std, out=buf.actions[t])
                    obs, reward, terminated, truncated, info = env.step(action.clamp(-1.0, 1.0))
                    torch.mul(reward, cfg.reward_scale, out=buf.rewards[t])
                    buf.terminated[t], buf.truncated[t] = terminated, truncated
                    buf.episode_returns[t] = info["episode_return"]
                    buf.final_values[t] = self._final_values(info["final_observation"], truncated, sparse_final)
                last_values = mlp_forward(self.critic.net, self._normalize(obs)).squeeze(-1)
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

            # ---- K epochs of minibatch updates on the clipped objective
            rows, count = self._update(buf, should_stop)
            if count < cfg.update_epochs * cfg.num_minibatches:
                cancelled = True
            diverged = None
            if count:
                # The one host sync of the update: every gradient step's statistics, the
                # explained variance and whether all parameters are still finite.
                params_finite = torch.isfinite(self.net.flat).all().to(rows.dtype).reshape(1)
                host = torch.cat((rows[:count].reshape(-1), explained.reshape(1), params_finite)).tolist()
                width = len(UPDATE_STATS)
                steps = [host[i * width : (i + 1) * width] for i in range(count)]
                means = [sum(column) / count for column in zip(*steps)]
                losses = dict(zip(LOSS_NAMES, [*means, host[-2]]))
                diverged = self._divergence_of(steps, params_finite=host[-1] == 1.0)
                if diverged is not None:
                    update, quantity, value = diverged
                    losses = {**losses, **dict(zip(UPDATE_STATS, steps[update - (self.updates - count + 1)]))}
            if telemetry is not None and (cancelled or diverged or telemetry_due(iteration, iterations)):
                telemetry(self._telemetry_point(collected, clock, {**losses, "learning_rate": cfg.learning_rate}))
            if diverged is not None:
                stats = self._stats(collected, episodes, start, losses, cancelled)
                raise self.divergence(update=update, quantity=quantity, value=value, stats=stats)
            if throttle.due():
                throttle(self._stats(collected, episodes, start, losses, cancelled))
            if cancelled:
                break
        return self._stats(collected, episodes, start, losses, cancelled)

    def _final_values(self, final_obs: torch.Tensor, truncated: torch.Tensor, sparse: bool) -> torch.Tensor:
        """(E,) float32 V(final observation) where ``truncated``, 0 elsewhere (under no_grad)."""
        if not sparse:
            return torch.where(truncated, mlp_forward(self.critic.net, self._normalize(final_obs)).squeeze(-1), 0.0)
        out = torch.zeros(truncated.shape, device=truncated.device)
        rows = truncated.nonzero().squeeze(-1)
        if rows.numel():
            out[rows] = mlp_forward(self.critic.net, self._normalize(final_obs[rows])).squeeze(-1)
        return out

    def _divergence_of(self, steps: list[list[float]], *, params_finite: bool) -> tuple[int, str, str] | None:
        """``(update, quantity, value)`` of the first non-finite statistic among the last
        ``len(steps)`` gradient steps (rows of :data:`UPDATE_STATS`), else of the parameters
        when they are not finite; ``None`` when all is finite."""
        first_update = self.updates - len(steps) + 1
        for i, step in enumerate(steps):
            bad = first_nonfinite(zip(UPDATE_STATS, step))
            if bad is not None:
                return first_update + i, bad[0], bad[1]
        if not params_finite:
            return self.updates, "parameters", nonfinite_kind([self.net.flat])
        return None

    def _update(self, buf: RolloutBuffer, should_stop: StopFn | None) -> tuple[torch.Tensor, int]:
        """K epochs of minibatch gradient steps on one rollout.

        Each step is the hand-written one (:meth:`_fast_step`) or, when ``update_impl`` is
        ``"autograd"`` or the networks do not fit the fast layout, the autograd reference
        (:func:`trainer.agents.ppo_reference.reference_step`). Statistics stay on the device
        (no host sync per step); ``should_stop`` is polled between epochs.

        Returns:
            ``(rows, count)``: rows (K * M, 6) float32 whose first ``count`` rows (the gradient
            steps taken) hold each step's :data:`UPDATE_STATS`.
        """
        cfg = self.config
        reference = cfg.update_impl == "autograd" or not self.net.fast
        adam = reference_optimizer(self.net, self.optimizer) if reference else None
        flat = buf.flatten()
        rows = torch.zeros((cfg.update_epochs * cfg.num_minibatches, len(UPDATE_STATS)), device=self.device)
        count = 0
        for _epoch in range(cfg.update_epochs):
            if should_stop is not None and should_stop():
                break
            perm = torch.randperm(buf.size, device=self.device, generator=self.generator)
            for indices in torch.tensor_split(perm, cfg.num_minibatches):
                batch = RolloutBuffer.gather(flat, indices)
                if adam is not None:
                    stats, grad_norm = reference_step(self.net, adam, batch, cfg)
                    self.optimizer.steps += 1  # the moments are shared; the step count is not
                else:
                    stats, grad_norm = self._fast_step(batch)
                rows[count, :5] = stats
                rows[count, 5] = grad_norm
                self.updates += 1
                count += 1
        return rows, count

    def _fast_step(self, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """One minibatch step with the closed-form gradient and :class:`FlatAdam`; returns the
        (5,) statistics of :func:`~trainer.ops.losses.ppo_loss_gradients` and the gradient norm
        before clipping."""
        cfg, net = self.config, self.net
        keep: list[torch.Tensor] = []
        mean, new_values = net.forward(batch.obs, keep)
        grads = ppo_loss_gradients(
            mean,
            new_values,
            net.log_std,
            batch.actions,
            batch.log_probs,
            batch.advantages,
            batch.values,
            batch.returns,
            clip_coef=cfg.clip_coef,
            value_clip_coef=cfg.value_clip_coef,
            ent_coef=cfg.ent_coef,
            vf_coef=cfg.vf_coef,
        )
        net.backward(keep, grads.means, grads.values, grads.log_std)
        # global gradient-norm clip, as torch.nn.utils.clip_grad_norm_
        grad_norm = torch.linalg.vector_norm(net.grad)
        net.grad.mul_(torch.clamp(cfg.max_grad_norm / (grad_norm + 1e-6), max=1.0))
        self.optimizer.step()
        return grads.stats, grad_norm

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
            ConfigError: the state belongs to another algorithm or other dimensions.
        """
        self._load_common_state(state)
        self.optimizer.load_state_dict(state["optimizer"])
