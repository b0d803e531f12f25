"""The collect-GAE-update loop shared by the on-policy agents (PPO, A2C).

Each rollout steps E envs for T steps into a :class:`~trainer.buffers.rollout.RolloutBuffer`,
computes GAE advantages and returns (:func:`~trainer.ops.gae.compute_gae`) and the explained
variance of the values, normalises the advantages, then hands the rollout to the algorithm's
update. The algorithms differ only in how they collect (PPO's fused actor-critic forward, A2C's
two modules: :meth:`OnPolicyAgent._collect`) and in the update that follows
(:meth:`OnPolicyAgent._train_on_rollout`).

**Actors.** ``policy="mlp"`` (default) is a :class:`~trainer.agents.networks.GaussianActor`
over an MLP of the flat observation. ``policy="cross_sectional"`` (portfolio tasks only) puts
:class:`~trainer.agents.cross_sectional.CrossSectionalPolicy` in the MLP's place as the mean
(:func:`~trainer.agents.cross_sectional.gaussian_actor`): one per-ticker scorer shared by every
ticker, a pooled context, the tilt bounded by ``kappa``, exactly the 1/N action while its head
is zero (as it is initialised), permutation-equivariant and defined on any universe size. Its
actor reads the **raw** observation: a running normaliser per flat index would give each
ticker's column its own mean and scale (the ticker's identity would come back through the
statistics, and they exist for the trained universe only), and the portfolio env's
scale-free features are z-scored on the train split already. ``normalize_observations`` then
standardises the critic's input only (the critic holds the agent's
:class:`~trainer.agents.networks.RunningMeanStd`, updated during collection as usual; the
rollout stores raw observations, so the update's values are standardised with the statistics
of the end of the rollout, its collection's with those of each step). The critic stays an MLP
of the flat observation: it is not needed to serve the policy.

Resuming is exact: every :meth:`OnPolicyAgent.learn` call starts by resetting the env with a
seed drawn from the agent's own generator, so ``learn(N); learn(M)`` on one agent and
``learn(N)``, save, load into a fresh agent, ``learn(M)`` (with an identically constructed env)
give bit-identical parameters on CPU.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

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
    set_lr,
    telemetry_due,
)
from trainer.agents.cross_sectional import check_kappa, check_universe, gaussian_actor
from trainer.agents.networks import DeterministicPolicy, GaussianActor, RunningMeanStd, ValueCritic
from trainer.buffers.rollout import RolloutBuffer
from trainer.errors import ConfigError
from trainer.ops.gae import compute_gae
from trainer.util.bounds import PENALTY, SCALE

__all__ = ["MAX_ROLLOUT_STEPS", "MIN_ROLLOUT_SAMPLES", "POLICIES", "OnPolicyAgent", "OnPolicyConfig"]

#: Longest rollout per env (16 years of trading days; the default is 16).
MAX_ROLLOUT_STEPS = 4_096

#: Fewest samples (``num_envs * rollout_steps``) one rollout may hold: a variance needs two.
MIN_ROLLOUT_SAMPLES = 2

#: ``(update, quantity, value)`` of the first non-finite statistic or parameter of an update.
Divergence = tuple[int, str, str]

#: The actors of ``OnPolicyConfig.policy`` (see the module docstring).
POLICIES = ("mlp", "cross_sectional")


class OnPolicyConfig(AgentConfig):
    """The checks of the fields PPO's and A2C's configs share, in the order each ``validate``
    calls them (so the first impossible field is still the one named)."""

    def _check_rollout_fields(self) -> None:
        """``num_envs``, ``rollout_steps``, ``hidden_sizes`` and ``learning_rate``."""
        r = self._require
        r(1 <= self.num_envs <= MAX_NUM_ENVS, "num_envs", f"must be in [1, {MAX_NUM_ENVS}]")
        r(1 <= self.rollout_steps <= MAX_ROLLOUT_STEPS, "rollout_steps", f"must be in [1, {MAX_ROLLOUT_STEPS}]")
        self._check_rollout_batch()
        self._require_hidden_sizes()
        r(math.isfinite(self.learning_rate) and self.learning_rate > 0, "learning_rate", "must be > 0")
        self._require_within(SCALE, "learning_rate")

    def _check_rollout_batch(self) -> None:
        """A rollout of ``num_envs * rollout_steps`` samples must hold at least
        :data:`MIN_ROLLOUT_SAMPLES`: the explained variance and the advantage normalisation
        divide by the rollout's (unbiased) variance, which one sample does not have, so every
        update would be NaN and the run would "diverge" whatever the learning rate.

        Raises:
            ConfigError: naming both fields (``field`` is ``<algo>.rollout_steps``).
        """
        samples = self.num_envs * self.rollout_steps
        if samples < MIN_ROLLOUT_SAMPLES:
            raise ConfigError(
                f"{self.field_name('rollout_steps')}: rollout_steps x num_envs = {self.rollout_steps} x {self.num_envs} "
                f"= {samples} sample per rollout; {self.algorithm.upper()} needs at least {MIN_ROLLOUT_SAMPLES} (the "
                "advantages and the explained variance are normalised by the rollout's variance): raise num_envs "
                "or rollout_steps",
                field=self.field_name("rollout_steps"),
            )

    def _check_policy_fields(self) -> None:
        """``policy`` and ``kappa`` (checked whatever the policy, so a typo never waits for a switch)."""
        r = self._require
        r(self.policy in POLICIES, "policy", f"must be one of {', '.join(POLICIES)}")
        r(
            math.isfinite(self.kappa) and self.kappa > 0,
            "kappa",
            "(tilt bound of the cross-sectional policy) must be > 0",
        )

    def check_task(self, *, kind: str, env: Any, num_tickers: int | None) -> None:
        """Refuse the cross-sectional policy on a task that is not a portfolio one (field
        ``<algo>.policy``), a ``kappa`` above the env's ``logit_scale / 2`` (``<algo>.kappa``) and
        a single ticker (field ``tickers``: the policy has no cash head)."""
        if self.policy != "cross_sectional":
            return
        if kind != "portfolio":
            field = self.field_name("policy")
            raise ConfigError(
                f"{field}: the cross-sectional policy trains portfolio tasks only (target weights), this task is "
                f"{kind!r}; use policy mlp",
                field=field,
            )
        check_kappa(self.kappa, env.logit_scale, field=self.field_name("kappa"))
        check_universe(num_tickers, cash=False, algorithm=self.algorithm)

    def _check_return_fields(self) -> None:
        """``gamma`` and ``gae_lambda``."""
        self._require(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        self._require(0 <= self.gae_lambda <= 1, "gae_lambda", "must be in [0, 1]")

    def _check_loss_fields(self) -> None:
        """``ent_coef`` and ``vf_coef`` (loss weights, at most ``MAX_PENALTY``), ``max_grad_norm``,
        ``obs_clip`` and ``reward_scale`` (at most ``MAX_SCALE``, :mod:`trainer.util.bounds`) and
        ``init_log_std``."""
        r = self._require
        for name in ("ent_coef", "vf_coef"):
            r(getattr(self, name) >= 0, name, "must be >= 0")
            self._require_within(PENALTY, name)
        for name in ("max_grad_norm", "obs_clip"):
            r(getattr(self, name) > 0, name, "must be > 0")
            self._require_within(SCALE, name)
        r(-20 <= self.init_log_std <= 2, "init_log_std", "must be in [-20, 2]")
        r(math.isfinite(self.reward_scale) and self.reward_scale > 0, "reward_scale", "must be > 0")
        self._require_within(SCALE, "reward_scale")


class OnPolicyAgent(AgentBase):
    """Base of the rollout agents: owns acting, :meth:`learn`, hyperparameter changes and
    checkpoints; subclasses build the networks and add :meth:`_collect` and :meth:`_train_on_rollout`.

    Subclasses own ``actor`` (a :class:`~trainer.agents.networks.GaussianActor`), ``critic``,
    ``optimizer``, ``obs_rms`` and ``config`` (with ``rollout_steps``, ``learning_rate``,
    ``gamma``, ``gae_lambda``, ``normalize_advantages``) besides :class:`AgentBase`'s fields.
    """

    def _make_networks(self, critic_hidden_sizes: Any) -> tuple[GaussianActor, ValueCritic, RunningMeanStd | None]:
        """``(actor, critic, obs_rms)`` of the config's ``policy`` on the agent's device (call
        under :func:`~trainer.agents._common.seeded_init`): the actor first, as the initial
        parameters have always been drawn.

        Raises:
            ConfigError: the cross-sectional policy on sizes that are not a portfolio
                observation (field ``<algo>.policy``).
        """
        cfg = self.config
        obs_rms = self._make_normalizer()
        if cfg.policy == "cross_sectional":
            actor = gaussian_actor(
                self.obs_dim,
                self.action_dim,
                cfg.hidden_sizes,
                cfg.kappa,
                cfg.init_log_std,
                field=cfg.field_name("policy"),
            )
            critic = ValueCritic(self.obs_dim, critic_hidden_sizes, normalizer=obs_rms)
        else:
            actor = GaussianActor(self.obs_dim, self.action_dim, cfg.hidden_sizes, cfg.init_log_std)
            critic = ValueCritic(self.obs_dim, critic_hidden_sizes)
        return actor.to(self.device), critic.to(self.device), obs_rms

    @property
    def actor_normalizer(self) -> RunningMeanStd | None:
        """The normaliser of the actor's input: ``obs_rms``, or None for the cross-sectional
        policy, which reads raw observations (its critic standardises its own input)."""
        return None if self.config.policy == "cross_sectional" else self.obs_rms

    def _normalize(self, obs: torch.Tensor, update: bool = False) -> torch.Tensor:
        """What the actor reads and the rollout stores, from raw ``obs`` (E, obs_dim); with
        ``update`` the running statistics take the batch in first (also when only the critic
        applies them)."""
        if self.obs_rms is None:
            return obs
        if update:
            self.obs_rms.update(obs)
        normalizer = self.actor_normalizer
        return normalizer(obs) if normalizer is not None else obs

    def _check_policy_env(self, env: Any) -> None:
        """The cross-sectional actor acts in a portfolio env's logits: refuse another env (field
        ``<algo>.policy``) and a ``kappa`` above its ``logit_scale / 2``, then express the actions
        in its ``logit_scale`` (a buffer of the policy, saved with it)."""
        cfg = self.config
        if cfg.policy != "cross_sectional":
            return
        env_cfg = getattr(env, "config", None)
        if not hasattr(env, "market_tensors") or not hasattr(env_cfg, "logit_scale"):
            field = cfg.field_name("policy")
            raise ConfigError(
                f"{field}: the cross-sectional policy trains in portfolio envs only (target weights)", field=field
            )
        check_kappa(cfg.kappa, env_cfg.logit_scale, field=cfg.field_name("kappa"))
        self.actor.mean.logit_scale.fill_(float(env_cfg.logit_scale))

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
        action = self.actor(x) if deterministic else self.actor.sample(x, self.generator)[0]
        return action.clamp(-1.0, 1.0)

    def policy_module(self) -> nn.Module:
        """A detached copy: raw obs (B, obs_dim) -> clipped policy mean (B, A), the actor's
        normalizer baked in (none for the cross-sectional policy, which then acts on a universe
        of any size)."""
        return copy.deepcopy(DeterministicPolicy(self.actor, self.actor_normalizer)).eval()

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
            should_stop: polled between rollouts (PPO also between epochs); when it returns
                true the call ends early with ``stats["cancelled"] = True``.
            telemetry: called after the update of at most ``TELEMETRY_MAX_POINTS`` rollouts,
                evenly spread (:func:`~trainer.agents._common.telemetry_due`), and after the
                last one (also the one that diverged), with a point of
                :meth:`AgentBase._telemetry_point` holding that rollout's losses (as in the
                returned stats) and ``learning_rate``.

        Returns:
            Stats dict: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean``, ``episodes``, ``cancelled`` and the last
            rollout's losses (the algorithm's class docstring lists them), among them
            ``explained_variance`` (``1 - Var(R - V) / Var(R)`` of the rollout's GAE returns R
            and value predictions V, as cleanrl and SB3 log it; 1 is a perfect critic, <= 0 one
            no better than a constant; NaN when Var(R) = 0).

        Raises:
            ConfigError: the env's dimensions differ from the agent's, ``env_steps`` < 0,
                (PPO) there are more minibatches than samples in the env's rollout, or the
                cross-sectional policy meets an env that is not a portfolio one or whose
                ``logit_scale`` is below ``2 kappa``.
            Diverged: after a rollout's update, a loss statistic or a parameter is NaN or
                infinite (checked once per rollout, in the host sync its statistics need
                anyway); the message names the first such gradient step and quantity and the
                learning rate.
        """
        cfg = self.config
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        self._check_policy_env(env)
        self._check_rollout_size(env.num_envs)
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

        obs = self._reset_env(env)
        for iteration in range(iterations):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            # ---- collect T steps in E envs: buf.obs (T, E, obs_dim), buf.actions (T, E, A), rest (T, E)
            with torch.no_grad():
                obs, last_values = self._collect(env, obs, buf)
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
            finished_copy = buf.start_finished_episode_returns()  # overlaps the update on CUDA

            # ---- the algorithm's update on the rollout
            losses, diverged, stopped = self._train_on_rollout(buf, explained, should_stop, losses)
            finished = finished_copy.returns()
            episodes += len(finished)
            self.recent_returns.extend(finished)
            cancelled = cancelled or stopped
            if telemetry is not None and (cancelled or diverged or telemetry_due(iteration, iterations)):
                telemetry(self._telemetry_point(collected, clock, {**losses, "learning_rate": cfg.learning_rate}))
            if diverged is not None:
                update, quantity, value = diverged
                stats = self._stats(collected, episodes, start, losses, cancelled)
                raise self.divergence(update=update, quantity=quantity, value=value, stats=stats)
            if throttle.due():
                throttle(self._stats(collected, episodes, start, losses, cancelled))
            if cancelled:
                break
        return self._stats(collected, episodes, start, losses, cancelled)

    def _check_rollout_size(self, num_envs: int) -> None:
        """Refuse a rollout of ``rollout_steps * num_envs`` samples the update cannot split
        (:class:`ConfigError`); any size suits by default."""

    def _collect(self, env: Any, obs: torch.Tensor, buf: RolloutBuffer) -> tuple[torch.Tensor, torch.Tensor]:
        """Step ``env`` for ``rollout_steps`` from ``obs`` (E, obs_dim) into ``buf`` (under no_grad):
        normalised observations, values, actions, log-probabilities, scaled rewards, flags,
        episode returns and V(final observation) of truncated rows. Returns the next raw
        observations (E, obs_dim) and their values (E,).
        """
        raise NotImplementedError  # pragma: no cover - overridden

    def _train_on_rollout(
        self, buf: RolloutBuffer, explained: torch.Tensor, should_stop: StopFn | None, losses: dict[str, float]
    ) -> tuple[dict[str, float], Divergence | None, bool]:
        """Update on a collected rollout with advantages, returns and ``explained`` (() float32).

        Returns:
            ``(losses, diverged, stopped)``: the rollout's losses (``losses``, the previous
            rollout's, when no gradient step ran), the first non-finite ``(update, quantity,
            value)`` or None, and whether ``should_stop`` cut the update short.
        """
        raise NotImplementedError  # pragma: no cover - overridden

    def _stats(self, collected: int, episodes: int, start: float, losses: dict, cancelled: bool) -> dict[str, Any]:
        return {**self._base_stats(collected, episodes, start, cancelled), **losses}

    # ------------------------------------------------------- hyperparameters
    def set_hyperparameters(self, **changes: Any) -> None:
        """Change hyperparameters between learn calls (PBT mutation); ``learning_rate`` reaches Adam.

        Raises:
            ConfigError: unknown key, bad value, or a field fixed at creation (``hidden_sizes``,
                ``normalize_observations``, ``init_log_std``, ``policy``, ``kappa``, PPO's
                ``critic_hidden_sizes``) given a different value.
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
