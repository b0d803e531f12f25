"""Direct-gradient portfolio learning through the env's differentiable dynamics (``direct``).

For a price-taking portfolio the reward is an exact, smooth function of the action, so instead
of estimating a policy gradient from noisy samples (PPO) this learner follows the true gradient
of a utility of net returns, backpropagated through the cost-and-drift transition of
:func:`trainer.envs.portfolio_dynamics.transition` (the one the env steps with). This is the
*direct reinforcement* of Moody & Saffell (2001, "Learning to Trade via Direct Reinforcement",
IEEE TNN 12(4)): optimise the trading system's performance function itself, through its
recurrent dependence on the previous position; the portfolio form with proportional costs and
a shared per-asset network is Jiang, Xu & Liang (2017, arXiv 1706.10059, sec. 5: the reward
is the mean log return of a batch of windows, maximised by gradient ascent); short windows of
a differentiable simulator, backpropagated and truncated at the window's end, are the
analytic policy gradients of SHAC (Xu et al. 2022, "Accelerated Policy Learning with
Parallel Differentiable Simulation", arXiv 2204.07137; without its critic: no value is
bootstrapped past the window).

**One gradient step.** ``E = num_envs`` windows of ``H = rollout_steps`` days are drawn from
the train split (start days uniform), each over its own random subset of ``m = subset_size``
tickers (augmentation: the policy cannot learn a ticker's identity, and a cross-sectional
scorer sees many universes). Every window starts at 1/m in the subset (no cash) and runs the
policy (:class:`~trainer.agents.cross_sectional.CrossSectionalPolicy`) and the transition for
``H`` days, all windows as one batch of (E, m) tensors. With ``r_t`` the net log return of day
``t`` (after costs), ``b_t = log(mean_i R_i)`` the subset's cost-free daily-rebalanced 1/N log
return and ``tau_t`` the turnover, the objective averaged over windows is::

    J = mean_t r_t                                  (log growth; Jiang et al. 2017, eq. 22)
        - variance_penalty * var_t(r_t)             (mean-variance utility, Markowitz 1952;
                                                      Moody & Saffell 2001 sec. III, Sharpe)
        - tracking_penalty * var_t(r_t - b_t)       (tracking error against 1/N, Roll 1992,
                                                      "A Mean/Variance Analysis of Tracking Error")
        - turnover_penalty * mean_t tau_t           (the delta |F_t - F_{t-1}| cost term of
                                                      Moody & Saffell 2001, eq. 2)

on top of the costs ``cost_pct * tau_t`` already inside ``r_t``. ``-J`` is minimised by AdamW
(decoupled weight decay, Loshchilov & Hutter 2019, arXiv 1711.05101), which here also pulls
the tilt towards 1/N (the score head starts at zero); the gradient's global norm is clipped.

Budget: one gradient step consumes ``num_envs * rollout_steps`` env steps (transitions), so a
generation of ``env_steps`` runs ``ceil(env_steps / (E H))`` steps; the env the pod gives
:meth:`DirectAgent.learn` is only read for its market tables
(:meth:`~trainer.envs.portfolio.PortfolioVecEnv.market_tensors`) and rules, never stepped.
Acting, evaluation, backtests, bundles and serving go through the policy's env action, which
the env maps to weights with its own softmax, exactly as for the other algorithms.

Cost: the default 2M env steps of ``python -m trainer train`` are 94 gradient steps of 1,024
windows x 21 days; on the demo's Dow-30 train split (29 tickers, 2,516 days, band 0.01) they
took 21.5-24.6 s of one CPU core per seed (seeds 0-2, ``time.process_time``; the windows'
embedding runs as one batched pass, only the head and the transition loop over days).
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainer.agents._common import (
    AgentBase,
    ProgressFn,
    StopFn,
    TelemetryClock,
    TelemetryFn,
    Throttle,
    check_env,
    restore_generator,
    seeded_init,
    set_lr,
    telemetry_due,
)
from trainer.agents.cross_sectional import CrossSectionalPolicy, check_kappa, features_per_ticker
from trainer.agents.direct_config import DirectConfig
from trainer.agents.direct_gate import gate_plan, run_gate
from trainer.agents.direct_objective import (
    Penalties,
    WindowBatch,
    action_map,
    check_flatten,
    draw_windows,
    window_objective,
)
from trainer.envs.portfolio_dynamics import Dynamics
from trainer.errors import ConfigError
from trainer.util.nonfinite import first_nonfinite, nonfinite_kind

__all__ = ["DirectAgent", "DirectConfig"]

#: Statistics of a gradient step, in stats and telemetry.
STEP_STATS = ("objective", "mean_log_return", "variance", "tracking_variance", "turnover", "grad_norm")


@dataclass
class _Run:
    """What one :meth:`DirectAgent.learn` call has done so far, across the gate's phases."""

    throttle: Throttle
    clock: TelemetryClock
    telemetry: TelemetryFn | None
    should_stop: StopFn | None
    iterations: int
    done: int = 0
    collected: int = 0
    episodes: int = 0
    cancelled: bool = False
    held: int = 0  # env steps accounted as held at 1/N (hold_equal_weight)
    losses: dict = field(default_factory=dict)


class DirectAgent(AgentBase):
    """The direct learner: a :class:`CrossSectionalPolicy` trained by :func:`~trainer.agents.direct_objective.window_objective`.

    Args:
        obs_dim: portfolio observation size ``N K + N + 1``.
        action_dim: ``N + 1``.
        config: hyperparameters (validated here); defaults when None.
        device: where the policy, the windows and the dynamics live (the env's device).
        seed: seeds network initialisation and the agent's generator (windows, subsets).

    Raises:
        ConfigError: invalid config; sizes that are not a portfolio observation (field ``env``);
            ``subset_size`` above ``N`` (field ``direct.subset_size``).
    """

    algorithm = "direct"
    config_class = DirectConfig
    SHAPE_FIELDS = ("hidden_sizes", "cash")
    STEP_SIZE_FIELDS = ("learning_rate",)

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: DirectConfig | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        self._init_agent(obs_dim, action_dim, config, device, check_type=True)
        cfg = self.config
        self.num_features = features_per_ticker(obs_dim, action_dim)
        cfg.subset_for(action_dim - 1)
        with seeded_init(seed):
            self.policy = CrossSectionalPolicy(self.num_features, cfg.hidden_sizes, cfg.kappa, cash=cfg.cash)
        self.policy.to(self.device)
        self.obs_rms = None  # the scale-free features are z-scored with the train split's statistics already
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay
        )
        self._init_counters(seed)

    @property
    def actor(self) -> nn.Module:
        """The policy (the name the other agents' actor goes by)."""
        return self.policy

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions (B, N+1) float32 in [-1, 1] for raw observations (B, obs_dim); the policy is
        deterministic, so ``deterministic`` changes nothing."""
        return self.policy(obs.to(self.device, torch.float32))

    def policy_module(self) -> nn.Module:
        """A detached copy: raw obs (B, obs_dim) -> action (B, N+1), in eval mode."""
        return copy.deepcopy(self.policy).eval()

    # ---------------------------------------------------------------- learning
    def _check_env(self, env: Any) -> tuple[Any, Dynamics]:
        """The env's market tables and rules; refuse an env or a ``kappa`` the policy cannot serve."""
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        if not hasattr(env, "market_tensors"):
            raise ConfigError("direct: trains on portfolio tasks only (kind 'portfolio')", field="algorithm")
        env_cfg = env.config
        check_kappa(self.config.kappa, env_cfg.logit_scale, field=self.config.field_name("kappa"))
        check_flatten(env_cfg)
        self.policy.logit_scale.fill_(float(env_cfg.logit_scale))
        return env.market_tensors(), Dynamics.from_config(env_cfg)

    def learn(
        self,
        env: Any,
        env_steps: int,
        *,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
        telemetry: TelemetryFn | None = None,
    ) -> dict[str, Any]:
        """Take ``ceil(env_steps / (num_envs * rollout_steps))`` gradient steps on the env's days;
        with ``challenger_alpha`` > 0 the gate's share of them (``GATE_SHARE``) decides, on
        held-out days, whether the unpenalised challenger replaces this configuration
        (:mod:`~trainer.agents.direct_gate`).

        Args:
            env: a :class:`~trainer.envs.portfolio.PortfolioVecEnv` over the train split on the
                agent's device (read, never stepped).
            env_steps: transitions to account for, >= 0 (``E H`` per gradient step).
            progress, should_stop, telemetry: as :meth:`OnPolicyAgent.learn
                <trainer.agents._on_policy.OnPolicyAgent.learn>`; ``should_stop`` is polled
                between gradient steps; telemetry points hold :data:`STEP_STATS` and
                ``learning_rate``.

        Returns:
            Stats: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean`` (mean window log return of the last 100
            steps), ``episodes`` (windows), ``cancelled``, the last step's :data:`STEP_STATS`
            and ``challenger`` when the gate was on (:mod:`~trainer.agents.direct_gate`: a verdict or ``skipped``)
            or the line holds 1/N (``{"held": True, "closed_gate": "hold"}``).

        Raises:
            ConfigError: another env's sizes, a stock-trading env, ``kappa`` above the env's
                ``logit_scale / 2``, ``subset_size`` above N, a window longer than the split, or
                ``env_steps`` < 0.
            Diverged: the objective, its gradient or a parameter became NaN or infinite.
        """
        cfg = self.config
        (features, gross, _), dynamics = self._check_env(env)
        tables = (features, gross, getattr(env, "market_members", None))  # members: None or (T, N) bool
        if env_steps < 0:
            raise ConfigError(f"env_steps must be >= 0, got {env_steps}", field="env_steps")
        cfg.check_challenger_kappa(env.config.logit_scale)
        iterations = math.ceil(env_steps / (cfg.num_envs * cfg.rollout_steps))
        run = _Run(Throttle(progress), TelemetryClock(time.monotonic()), telemetry, should_stop, iterations)
        self.policy.train()
        rules = (dynamics, env.config)
        gated = cfg.challenger_alpha > 0 and not cfg.hold_equal_weight
        gate = gate_plan(gross.shape[0], cfg.rollout_steps, iterations) if gated else None
        if isinstance(gate, list):
            gate = run_gate(self, run, tables, rules, gate)
        if not run.cancelled and self.config.hold_equal_weight:
            self._hold(run, iterations - run.done)
        elif not run.cancelled:
            self._train(run, tables, rules, iterations - run.done)
        self.policy.eval()
        stats = self._stats(run)
        if gate is None and cfg.hold_equal_weight:
            gate = {"held": True, "closed_gate": "hold"}  # asked and closed earlier in this line
        return stats if gate is None else {**stats, "challenger": gate}

    def _snapshot(self) -> tuple[dict, dict]:  # the policy and AdamW, restored by _restore
        return copy.deepcopy(self.policy.state_dict()), copy.deepcopy(self.optimizer.state_dict())

    def _restore(self, snapshot: tuple[dict, dict], config: DirectConfig) -> None:
        self.policy.load_state_dict(snapshot[0])
        self.optimizer.load_state_dict(snapshot[1])
        self.config = config
        self.policy.kappa = config.kappa

    def _train(self, run: _Run, tables: tuple, rules: tuple, steps: int) -> None:
        """``steps`` gradient steps of the current config on these tables (``run`` counts them):
        ``(features (T, N, K), gross (T, N), members (T, N) bool or None)``."""
        features, gross, members = tables
        cfg = self.config
        subset = cfg.subset_for(self.action_dim - 1)
        per_step = cfg.num_envs * cfg.rollout_steps
        penalties = Penalties(cfg.variance_penalty, cfg.tracking_penalty, cfg.turnover_penalty)
        for _ in range(steps):
            if run.should_stop is not None and run.should_stop():
                run.cancelled = True
                return
            windows = {"num_windows": cfg.num_envs, "length": cfg.rollout_steps, "subset": subset}
            batch = draw_windows(features, gross, **windows, generator=self.generator, members=members)
            run.losses = losses = self._step(batch, rules[0], penalties, rules[1])
            run.collected += per_step
            run.episodes += cfg.num_envs
            self.env_steps += per_step
            self.recent_returns.append(losses["mean_log_return"] * cfg.rollout_steps)
            bad = first_nonfinite(losses.items())
            params_ok = all(bool(torch.isfinite(p).all()) for p in self.policy.parameters())
            if run.telemetry is not None and (bad or not params_ok or telemetry_due(run.done, run.iterations)):
                point = {**losses, "learning_rate": cfg.learning_rate}
                run.telemetry(self._telemetry_point(run.collected, run.clock, point))
            run.done += 1
            if bad is not None or not params_ok:
                quantity, value = bad if bad is not None else ("parameters", nonfinite_kind(self.policy.parameters()))
                raise self.divergence(update=self.updates, quantity=quantity, value=value, stats=self._stats(run))
            if run.throttle.due():
                run.throttle(self._stats(run, cancelled=False))

    def _hold(self, run: _Run, steps: int) -> None:
        """Hold 1/N for ``steps`` gradient steps' worth of env steps: the policy's output is
        set to zero (:meth:`CrossSectionalPolicy.hold_equal_weight_`), nothing is trained."""
        self.policy.hold_equal_weight_()
        held = steps * self.config.num_envs * self.config.rollout_steps
        run.done += steps
        run.collected += held
        run.held += held
        self.env_steps += held

    def _step(self, batch: WindowBatch, dynamics: Dynamics, penalties: Penalties, env_cfg: Any) -> dict[str, float]:
        """One AdamW step on ``-J``; returns the step's :data:`STEP_STATS` (one host read)."""
        terms = window_objective(self.policy, batch, dynamics, penalties, **action_map(env_cfg))
        self.optimizer.zero_grad(set_to_none=True)
        (-terms.objective).backward()
        grad_norm = nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.max_grad_norm)
        # a non-finite gradient must not reach the parameters: the step is skipped and reported
        if torch.isfinite(grad_norm):
            self.optimizer.step()
        self.updates += 1
        values = torch.stack([t.detach().to(torch.float64) for t in terms] + [grad_norm.to(torch.float64)])
        return dict(zip(STEP_STATS, values.tolist()))

    def _stats(self, run: _Run, cancelled: bool | None = None) -> dict[str, Any]:
        cancelled = run.cancelled if cancelled is None else cancelled
        stats = {**self._base_stats(run.collected, run.episodes, run.clock.start, cancelled), **run.losses}
        return {**stats, "held_env_steps": run.held} if run.held else stats

    # ------------------------------------------------------- hyperparameters
    def set_hyperparameters(self, **changes: Any) -> None:
        """Change hyperparameters between learn calls (PBT mutation); ``learning_rate`` and
        ``weight_decay`` reach AdamW, ``kappa`` the policy.

        Raises:
            ConfigError: unknown key, bad value, ``subset_size`` above N, or ``hidden_sizes`` /
                ``cash`` given a different value.
        """
        config = self._changed_config(changes)
        config.subset_for(self.action_dim - 1)
        self.config = config
        set_lr(self.optimizer, config.learning_rate)
        for group in self.optimizer.param_groups:
            group["weight_decay"] = config.weight_decay
        self.policy.kappa = config.kappa

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Full training state as tensors and plain containers (``torch.load(weights_only=True)``-safe)."""
        return {
            "algorithm": self.algorithm,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "config": self.config.to_dict(),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "generator_device": self.generator.device.type,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "recent_returns": list(self.recent_returns),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (config included).

        Raises:
            ConfigError: the state belongs to another algorithm, other dimensions, hidden sizes or cash setting.
        """
        if state.get("algorithm") != self.algorithm:
            raise ConfigError(
                f"state is for algorithm {state.get('algorithm')!r}, not {self.algorithm}", field="algorithm"
            )
        if (state["obs_dim"], state["action_dim"]) != (self.obs_dim, self.action_dim):
            raise ConfigError("state has different obs_dim/action_dim", field="env")
        config = DirectConfig.from_dict(state["config"])
        for name in self.SHAPE_FIELDS:
            if getattr(config, name) != getattr(self.config, name):
                field = f"{self.algorithm}.{name}"
                raise ConfigError(f"state has a different {field}", field=field)
        self.config = config
        self.policy.kappa = config.kappa
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        restore_generator(self.generator, state["generator"], state.get("generator_device"))
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        self.recent_returns = deque((float(x) for x in state["recent_returns"]), maxlen=self.recent_returns.maxlen)
