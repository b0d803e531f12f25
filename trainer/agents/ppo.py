"""Proximal Policy Optimization for vectorized torch envs with continuous actions.

Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv 1707.06347), with the
implementation choices studied by Andrychowicz et al. 2021, "What Matters in On-Policy
Reinforcement Learning?" (arXiv 2006.05990): separate actor and critic MLPs, a Gaussian policy
with state-independent log std, GAE, advantage normalisation, running observation
normalisation, global gradient-norm clipping. The loop, shared with A2C, reads top to bottom
in :meth:`trainer.agents._on_policy.OnPolicyAgent.learn`; PPO's collection and update are
:meth:`PPOAgent._collect` and :meth:`PPOAgent._train_on_rollout`; the formulas live in
:mod:`trainer.ops`.

Resuming is exact: every :meth:`PPOAgent.learn` call starts by resetting the env with a seed
drawn from the agent's own generator, so ``learn(N); learn(M)`` on one agent and ``learn(N)``,
save, load into a fresh agent, ``learn(M)`` (with an identically constructed env) give
bit-identical parameters on CPU. Loading a checkpoint saved on another device type (a GPU
checkpoint on a CPU, or the reverse) restores everything but the random stream, which is
reseeded deterministically from the saved one (:func:`trainer.agents._common.restore_generator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from trainer.agents._common import StopFn, seeded_init
from trainer.agents._on_policy import Divergence, OnPolicyAgent, OnPolicyConfig
from trainer.agents.flat import FlatActorCritic, FlatAdam
from trainer.agents.ppo_reference import reference_optimizer, reference_step
from trainer.buffers.rollout import RolloutBatch, RolloutBuffer
from trainer.errors import ConfigError
from trainer.ops.losses import diag_gaussian_log_normalizer, ppo_loss_gradients
from trainer.util.bounds import SCALE
from trainer.util.nonfinite import first_nonfinite, nonfinite_kind

__all__ = ["PENDULUM_PPO", "PPOAgent", "PPOConfig"]

#: Statistics of one gradient step, in the order of :meth:`PPOAgent._update`'s rows: the
#: ``PPOGradients.stats`` of :func:`trainer.ops.losses.ppo_loss_gradients`, then the global
#: gradient norm before clipping. Each is checked for NaN/inf after the rollout's updates.
UPDATE_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm")
#: Per-rollout statistics in stats and telemetry: the means of :data:`UPDATE_STATS` over the
#: rollout's gradient steps, plus the explained variance of its value predictions.
LOSS_NAMES = (*UPDATE_STATS, "explained_variance")
#: Most passes over one rollout (the PPO paper uses 3-15).
MAX_UPDATE_EPOCHS = 100


@dataclass
class PPOConfig(OnPolicyConfig):
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
        learning_rate: Adam step size for actor and critic, more than 0, at most 1e6
            (``trainer.util.bounds.MAX_SCALE``, as every scale below; mutable by PBT).
        update_epochs: passes K over each rollout, 1..100 (the PPO paper uses 3-15 with small
            rollouts; with 16k-sample rollouts 2 passes learned as well as 8 at 1/4 the cost).
        num_minibatches: gradient steps per epoch, 1..rollout_steps*num_envs; each rollout is
            split into this many near-equal minibatches (4 096 samples each by default). A count
            rather than a size, so the pod may change ``num_envs`` without invalidating it.
        gamma: discount in (0, 1]; 0.99 ~ a 100-step (trading-day) horizon.
        gae_lambda: GAE lambda in [0, 1] (arXiv 1506.02438).
        clip_coef: policy ratio clip epsilon, more than 0, at most 1e6 (PPO paper eq. 7, 0.1-0.3 typical).
        value_clip_coef: clip of the value update around the rollout values, > 0, or None for a
            plain squared error (None is recommended by arXiv 2006.05990, sec. 3.5); at most 1e6.
        ent_coef: weight of the entropy bonus, 0 to 1e6 (``trainer.util.bounds.MAX_PENALTY``;
            mutable by PBT).
        vf_coef: weight of the value loss in the joint loss, 0 to 1e6 (matters for gradient clipping).
        max_grad_norm: global L2 gradient-norm clip, more than 0, at most 1e6.
        normalize_advantages: standardise advantages over each rollout.
        normalize_observations: standardise observations with running mean/var (fixed at creation).
        obs_clip: normalised observations are clipped to +-obs_clip, more than 0, at most 1e6.
        init_log_std: initial log std of the Gaussian policy in action units ([-1, 1] scale).
        reward_scale: rewards are multiplied by this before learning, more than 0, at most 1e6
            (statistics report the env's unscaled returns).
        critic_hidden_sizes: widths of the critic MLP when it differs from the actor's, or None
            (the same as ``hidden_sizes``). Different widths cannot use the fast update.
        update_impl: how a minibatch gradient step is computed: ``"fast"``, the hand-written
            closed-form gradient and fused Adam (:class:`~trainer.agents.networks.FlatActorCritic`,
            several times faster on a CPU), or ``"autograd"``, the readable reference
            (``torch.autograd`` + ``torch.optim.Adam`` + ``clip_grad_norm_``,
            :mod:`trainer.agents.ppo_reference`). Both give the same update (to float rounding);
            networks the fast path cannot handle use the reference whatever this says (also
            the cross-sectional policy).
        policy: the actor's mean, fixed at creation: ``"mlp"`` (an MLP of the flat
            observation) or ``"cross_sectional"`` (portfolio tasks only: one per-ticker scorer
            shared by every ticker, :class:`~trainer.agents.cross_sectional.CrossSectionalPolicy`,
            exactly the 1/N action untrained; ``hidden_sizes`` are then its per-ticker widths,
            the actor reads raw observations and ``normalize_observations`` applies to the
            critic only; see :mod:`trainer.agents._on_policy`). Always the autograd update.
        kappa: tilt bound of the cross-sectional policy, > 0 and at most the env's
            ``logit_scale / 2``: its weights stay within ``e^(2 kappa)`` of each other (fixed at
            creation; unused by the MLP).
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
    policy: str = "mlp"
    kappa: float = 0.5

    # fields that shape the networks or statistics and cannot change after the agent exists
    FIXED: ClassVar[tuple[str, ...]] = (
        "hidden_sizes",
        "critic_hidden_sizes",
        "normalize_observations",
        "init_log_std",
        "policy",
        "kappa",
    )
    UPDATE_IMPLS: ClassVar[tuple[str, ...]] = ("fast", "autograd")

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first impossible field."""
        r = self._require
        self._check_rollout_fields()
        r(1 <= self.update_epochs <= MAX_UPDATE_EPOCHS, "update_epochs", f"must be in [1, {MAX_UPDATE_EPOCHS}]")
        batch = self.rollout_steps * self.num_envs
        r(1 <= self.num_minibatches <= batch, "num_minibatches", f"must be in [1, rollout_steps * num_envs = {batch}]")
        self._check_return_fields()
        r(self.clip_coef > 0, "clip_coef", "must be > 0")
        self._require_within(SCALE, "clip_coef")
        r(self.value_clip_coef is None or self.value_clip_coef > 0, "value_clip_coef", "must be > 0 or null")
        self._require_within(SCALE, "value_clip_coef")
        self._check_loss_fields()
        if self.critic_hidden_sizes is not None:
            self._require_hidden_sizes("critic_hidden_sizes")
        r(self.update_impl in self.UPDATE_IMPLS, "update_impl", f"must be one of {', '.join(self.UPDATE_IMPLS)}")
        self._check_policy_fields()


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


class PPOAgent(OnPolicyAgent):
    """PPO agent: owns its networks, optimizer, observation statistics, RNG and counters.

    Args:
        obs_dim: observation size (>= 1).
        action_dim: action size (>= 1); actions live in [-1, 1].
        config: hyperparameters (validated here); defaults when None.
        device: where networks, rollouts and sampling live (should be the env's device).
        seed: seeds network initialisation and the agent's generator (action noise,
            minibatch order, env reset seeds).

    :meth:`learn` (:class:`~trainer.agents._on_policy.OnPolicyAgent`'s) reports the last
    rollout's mean ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
    ``clip_fraction`` and ``grad_norm`` (the global gradient norm before clipping) over its
    gradient steps, and its ``explained_variance``; ``should_stop`` is also polled between
    epochs. A divergence names the first gradient step whose statistic went non-finite.

    Raises:
        ConfigError: invalid config or dimensions.
    """

    algorithm = "ppo"
    config_class = PPOConfig
    SHAPE_FIELDS = ("hidden_sizes", "critic_hidden_sizes", "normalize_observations", "policy", "kappa")
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
        self._init_agent(obs_dim, action_dim, config, device)
        cfg = self.config
        with seeded_init(seed):
            self.actor, self.critic, self.obs_rms = self._make_networks(cfg.critic_hidden_sizes or cfg.hidden_sizes)
        # every parameter becomes a view into one flat tensor (see FlatActorCritic)
        self.net = FlatActorCritic(self.actor, self.critic)
        self.optimizer = FlatAdam(self.net.flat.data, self.net.grad, lr=cfg.learning_rate, eps=1e-5)
        self._init_counters(seed)

    # ---------------------------------------------------------------- learning
    def _check_rollout_size(self, num_envs: int) -> None:
        cfg = self.config
        if cfg.num_minibatches > cfg.rollout_steps * num_envs:
            raise ConfigError(
                f"ppo.num_minibatches {cfg.num_minibatches} exceeds rollout_steps * env.num_envs = "
                f"{cfg.rollout_steps * num_envs}",
                field="ppo.num_minibatches",
            )

    def _collect(self, env: Any, obs: torch.Tensor, buf: RolloutBuffer) -> tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        # On the CPU a host sync is free, so V(final obs) is computed only for the (usually few)
        # truncated rows; on an accelerator it is computed for every row to avoid the sync.
        sparse_final = self.device.type == "cpu"
        # the std is fixed during a rollout, so its exp and the log-density constant are hoisted
        std = self.net.log_std.exp()
        log_norm = diag_gaussian_log_normalizer(self.net.log_std)
        for t in range(cfg.rollout_steps):
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
        return obs, self.net.values(self._normalize(obs))

    def _train_on_rollout(
        self, buf: RolloutBuffer, explained: torch.Tensor, should_stop: StopFn | None, losses: dict[str, float]
    ) -> tuple[dict[str, float], Divergence | None, bool]:
        """K epochs of minibatch updates on the clipped objective, then one host sync reads every
        gradient step's statistics, the explained variance and whether all parameters are finite."""
        cfg = self.config
        rows, count = self._update(buf, should_stop)
        stopped = count < cfg.update_epochs * cfg.num_minibatches
        if not count:
            return losses, None, stopped
        params_finite = torch.isfinite(self.net.flat).all().to(rows.dtype).reshape(1)
        host = torch.cat((rows[:count].reshape(-1), explained.reshape(1), params_finite)).tolist()
        width = len(UPDATE_STATS)
        steps = [host[i * width : (i + 1) * width] for i in range(count)]
        means = [sum(column) / count for column in zip(*steps)]
        losses = dict(zip(LOSS_NAMES, [*means, host[-2]]))
        diverged = self._divergence_of(steps, params_finite=host[-1] == 1.0)
        if diverged is not None:
            losses = {**losses, **dict(zip(UPDATE_STATS, steps[diverged[0] - (self.updates - count + 1)]))}
        return losses, diverged, stopped

    def _final_values(self, final_obs: torch.Tensor, truncated: torch.Tensor, sparse: bool) -> torch.Tensor:
        """(E,) float32 V(final observation) where ``truncated``, 0 elsewhere (under no_grad)."""
        if not sparse:
            return torch.where(truncated, self.net.values(self._normalize(final_obs)), 0.0)
        out = torch.zeros(truncated.shape, device=truncated.device)
        rows = truncated.nonzero().squeeze(-1)
        if rows.numel():
            out[rows] = self.net.values(self._normalize(final_obs[rows]))
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
