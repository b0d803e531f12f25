"""Vectorized portfolio-allocation env: the agent chooses target weights over N stocks and cash.

Each of ``E`` envs holds a portfolio value and its current weights over the ``N`` tickers of a
:class:`~trainer.data.market.MarketData` panel plus cash. One :meth:`PortfolioVecEnv.step`
rebalances every env to the target weights of its action at day ``t``'s close, pays a
proportional cost on the turnover, and lets the weights drift with prices to day ``t+1``'s close.
Same vector API, automatic reset and speed habits as
:class:`~trainer.envs.stock_trading.StockTradingVecEnv` (fused tensor ops over (E, N), one row
gather of a precomputed per-day observation table, no Python loop over envs or stocks).

**Action -> target weights** (:func:`~trainer.envs.portfolio_dynamics.target_weights`): the
action (E, N+1) in [-1, 1] (stocks in ticker order, then cash) is a softmax's logits; a zero
action holds the **equal-weight portfolio** (almost no cash), all-cash stays reachable.

**Dynamics at each close** (all envs at once, :func:`~trainer.envs.portfolio_dynamics.transition`):
the weights move to the target (or, with ``rebalance_band``, ``band_mode`` and ``trade_rate``,
part of the way), ``cost_pct`` of the turnover is paid, and the weights drift with prices to the
next close; the reward is ``reward`` (log return, excess log return over 1/N, or the
differential Sharpe ratio) less ``turnover_penalty`` per unit of turnover, times
``reward_scaling``. The formulas and their sources are in :mod:`trainer.envs.portfolio_dynamics`.
Every episode starts all in cash on its first day, so the first rebalance pays ``cost_pct`` on
the invested fraction; the differential Sharpe ratio starts from ``A_0 = 0`` and ``B_0 =``
:data:`~trainer.envs.portfolio_dynamics.DSR_PRIOR_VARIANCE` (a 1 % daily volatility prior;
with ``B_0 = 0`` the first step is 0/0). ``rebalance_band`` must be below ``1/N``, else a zero
action would never leave the initial cash. With ``execution_lag`` 1 the target of step ``k``'s action is traded at step
``k+1``'s close (kept as a pending order, not observed; the first step of an episode holds).

**Intraday panels**: one step is one bar (the env never looks at the clock); lookbacks and
episode lengths count bars. With ``flatten_at_close`` the target of a session's last bar is
all cash, so the overnight gap is never held.

**Point-in-time universe** (``MarketData.members``): only the members of day ``t`` are held from
its close; a zero action, and the 1/N of ``excess_log_return``, are over them
(:mod:`trainer.envs.membership_mask`).

**Observation** (``observation``, ``"scale_free"``, ``"scale_free_risk"`` or ``"finrl"``): the
market block of each day, then the current weights (:mod:`trainer.envs.portfolio_layout`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.data.sessions import session_close_mask
from trainer.envs.episodes import (
    MIN_EPISODE_STEPS,
    EpisodeStarts,
    check_episode_setup,
    check_flatten_at_close,
    check_market,
)
from trainer.envs.membership_mask import member_equal_weight_log_gross, member_target, members_tensor, sell_non_members
from trainer.envs.observations import FeatureStats
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import DSR_PRIOR_VARIANCE, Dynamics, PortfolioState, target_weights, transition
from trainer.envs.portfolio_layout import (
    market_table,
    observation_setup,
    portfolio_obs_dim,
    portfolio_observation_layout,
)
from trainer.errors import ConfigError
from trainer.util.nonfinite import nonfinite_action_error

__all__ = ["PortfolioVecEnv"]


def _after_trade(members, closing, all_cash, traded: torch.Tensor) -> torch.Tensor:
    """What the traded weights become before costs: what a band, a trade rate or a held row kept
    of a non-member goes to cash (``members`` (E, N) bool, or ``None``), then all cash on a
    session's last bar (``closing`` (E, 1) bool, or ``None``). No host sync."""
    if members is not None:
        traded = sell_non_members(traded, members)
    if closing is not None:
        traded = torch.where(closing, all_cash, traded)
    return traded


class PortfolioVecEnv(EpisodeStarts):
    """``num_envs`` independent portfolios allocated by target weights, stepped as batched tensors.

    See the module docstring for the action map, the dynamics, the rewards and the observation.

    Args:
        data: market panel; ``close`` is the execution price. For the scale-free observation
            pass a panel made with :func:`~trainer.envs.observations.scale_free_market` over
            the whole history and then sliced (so lookbacks reach before the split); raw
            indicators are converted here with the history the panel has.
        config: rules and reward (validated here); defaults when None.
        num_envs: ``E`` >= 1.
        device: torch device of the state tensors.
        seed: seed of the env's own generator (start days).
        feature_stats: z-score statistics of the scale-free features, fitted on the train
            split (:func:`~trainer.envs.observations.fit_feature_stats`); ``None`` fits them
            on ``data``. Ignored by the ``"finrl"`` observation.
        sync_free: step without host syncs or data-dependent shapes (see "Two paths" below).
            Default: on every device but the CPU.
        dtype: of the allocation arithmetic (weights, prices, growth, rewards), ``torch.float64``
            or ``torch.float32``. Default: float64 on the CPU (the exact reference of evaluation
            and backtests), float32 elsewhere (FP64 runs at 1/2 to 1/64 of the FP32 rate on
            GPUs). The portfolio value stays float64 (a product over thousands of steps).
        state_info: ``False`` leaves out the per-step state of ``info`` (see :meth:`step`):
            training reads only ``final_observation`` and ``episode_return``.

    **Two paths** (``sync_free``), as in :class:`~trainer.envs.stock_trading.StockTradingVecEnv`:
    on the CPU the step checks the action for NaN with one host read and resets only the
    finished envs (free there); the sync-free path computes every env's reset and selects it
    with ``torch.where``, draws start days from :mod:`trainer.envs.counter_random` (no
    generator in the step) and holds a NaN or infinite action's row (no trade) instead of
    refusing it, counting such steps in ``nonfinite_steps``. ``torch.compile(env.step,
    fullgraph=True)`` and CUDA graphs can hold that step. With fixed start days both paths
    give the same results (float64: bit for bit; tested).

    Raises:
        ConfigError: invalid config, ``num_envs`` or ``episode_length``; a ``"finrl"``
            observation over a panel without raw indicators.
        DataError: fewer than 2 days, non-positive prices, non-finite features, or
            ``feature_stats`` for other features.
    """

    #: state tensors the step replaces (:class:`~trainer.envs.graphed.CudaGraphStep` keeps them static)
    GRAPH_STATE = (
        "_day",
        "_end_day",
        "_weights",
        "_value",
        "_episode_return",
        "_dsr_a",
        "_dsr_b",
        "_pending",
        "_draw_count",
        "nonfinite_steps",
    )

    def __init__(
        self,
        data: MarketData,
        config: PortfolioConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
        feature_stats: FeatureStats | None = None,
        sync_free: bool | None = None,
        dtype: torch.dtype | None = None,
        state_info: bool = True,
    ) -> None:
        config = (config or PortfolioConfig()).validate()
        check_market(data)
        num_days = data.num_days
        check_episode_setup(num_days, data.dates[0], data.dates[-1], config.episode_length, num_envs)
        check_flatten_at_close(config.flatten_at_close, data.dates)
        if config.rebalance_band >= 1.0 / data.num_stocks:
            raise ConfigError(
                f"env.rebalance_band: must be below 1/N = {1.0 / data.num_stocks:.4g} for {data.num_stocks} "
                f"tickers, else a zero action never leaves the initial cash (got {config.rebalance_band!r})",
                field="env.rebalance_band",
            )
        self.config = config
        self._dynamics = Dynamics.from_config(config)
        self.num_envs = num_envs
        self.device = torch.device(device)
        on_cpu = self.device.type == "cpu"
        self.sync_free = (not on_cpu) if sync_free is None else bool(sync_free)
        self.dtype = dtype or (torch.float64 if on_cpu else torch.float32)
        if self.dtype not in (torch.float64, torch.float32):
            raise ConfigError(f"dtype: must be torch.float64 or torch.float32, got {dtype}", field="dtype")
        self.state_info = bool(state_info)
        self.num_stocks = n = data.num_stocks
        self.num_days = num_days
        self.action_dim = n + 1
        self.tickers = tuple(data.tickers)
        data, self.feature_stats, self._scales = observation_setup(data, config.observation, feature_stats)
        self.data = data
        self.num_features = len(data.feature_names) + (self.feature_stats is None)  # FinRL: close too
        self.obs_dim = portfolio_obs_dim(n, self.num_features)
        dev = self.device
        table = market_table(data, self.obs_dim, feature_stats=self.feature_stats, scales=self._scales)
        self._market_obs = torch.as_tensor(table, device=dev)
        self._weights_slice = slice(n * self.num_features, self.obs_dim)
        self._close = torch.tensor(data.close, dtype=self.dtype, device=dev)
        gross = np.ones((num_days, n), dtype=np.float64)
        gross[:-1] = data.close[1:] / data.close[:-1]  # row t: close[t+1] / close[t]; last row unused
        self._gross = torch.tensor(gross, dtype=self.dtype, device=dev)
        # (T, N) bool members of each day (point-in-time universe), None: every ticker always
        self._members = members_tensor(data, dev)
        ew = member_equal_weight_log_gross(gross, data.members)  # 1/N over each day's members
        self._log_ew_gross = torch.tensor(ew, dtype=self.dtype, device=dev)

        min_steps = config.episode_length or min(MIN_EPISODE_STEPS, num_days - 1)
        self._latest_start = num_days - 1 - min_steps
        self._generator = torch.Generator(device=dev)
        self._generator.manual_seed(int(seed))
        self._fixed_start: int | None = None
        self._all_cash = torch.zeros(n + 1, dtype=self.dtype, device=dev)
        self._all_cash[n] = 1.0
        #: Steps (so far) that held a NaN or infinite action on the sync-free path, a 0-dim int64
        #: tensor on the device (the CPU path raises instead; see :meth:`step`).
        self.nonfinite_steps = torch.zeros((), dtype=torch.int64, device=dev)
        # (T,) bool, the last bar of each session; only read when flatten_at_close is on
        self._session_close = torch.as_tensor(
            session_close_mask(data.dates) if config.flatten_at_close else np.zeros(num_days, dtype=bool), device=dev
        )
        self.reset()

    # ------------------------------------------------------------------ layout
    def observation_layout(self) -> dict[str, Any]:
        """JSON description of the observation vector, the action and the config
        (:func:`~trainer.envs.portfolio_layout.portfolio_observation_layout`)."""
        return portfolio_observation_layout(self, self._scales)

    def _observe(self, day: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        obs = torch.index_select(self._market_obs, 0, day)
        obs[:, self._weights_slice] = weights
        return obs

    def _state_info(self, value: torch.Tensor, weights: torch.Tensor, day: torch.Tensor) -> dict[str, torch.Tensor]:
        if not self.state_info:
            return {}
        n = self.num_stocks
        prices = self._close.index_select(0, day)
        return {
            "portfolio_value": value,
            "weights": weights,
            "cash": weights[:, n] * value,
            "holdings": weights[:, :n] * value.to(self.dtype)[:, None] / prices,
            "day": day,
        }

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Start a new episode in every env, all in cash.

        Args:
            seed: reseeds the start-day generator; ``None`` continues it.
            options: ``{"start_day": d}`` starts every env (and later auto-resets) on day ``d``.

        Returns:
            ``obs`` (E, obs_dim) float32 and ``info`` with ``portfolio_value`` (E,) float64 USD,
            ``weights`` (E, N+1) ``dtype``, ``cash`` (E,) USD, ``holdings`` (E, N) ``dtype``
            (fractional) shares, ``costs`` (E,) zeros and ``day`` (E,) int64 (``state_info``
            off: ``costs`` only).

        Raises:
            ConfigError: ``start_day`` outside ``[0, T-2]`` or an unknown option.
        """
        self._read_reset_options(seed, options)
        e, dev = self.num_envs, self.device
        with torch.no_grad():
            self._day = self._draw_starts(e)
            self._end_day = self._end_days(self._day)
            self._weights = self._all_cash.expand(e, -1).clone()
            self._value = torch.full((e,), float(self.config.initial_cash), dtype=torch.float64, device=dev)
            self._dsr_a = torch.zeros(e, dtype=self.dtype, device=dev)
            self._dsr_b = torch.full((e,), DSR_PRIOR_VARIANCE, dtype=self.dtype, device=dev)
            # execution_lag: the order to trade at the next close, NaN rows: none (hold)
            self._pending = torch.full((e, self.action_dim), torch.nan, dtype=self.dtype, device=dev)
            self._episode_return = torch.zeros(e, dtype=torch.float32, device=dev)
            if self.sync_free:
                self._new_draw_key()
            obs = self._observe(self._day, self._weights)
        info = self._state_info(self._value, self._weights, self._day)
        info["costs"] = torch.zeros(e, dtype=torch.float64, device=dev)
        return obs, info

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Rebalance every env at today's close, drift to the next close, auto-reset finished envs.

        Args:
            action: (E, N+1) float in [-1, 1] (clipped), stocks then cash. NaN and infinite
                values are refused, as by :meth:`StockTradingVecEnv.step` (a diverged policy
                must not pass for one that holds; issue 20).

        Returns:
            ``(obs, reward, terminated, truncated, info)`` as in
            :meth:`StockTradingVecEnv.step`: ``obs`` (E, obs_dim) float32 (next episode's first
            observation where truncated), ``reward`` (E,) float32, ``terminated`` all False,
            ``truncated`` (E,) bool; ``info`` has ``final_observation``, ``episode_return``,
            and the state reached before any reset: ``portfolio_value`` (E,) float64 USD,
            ``weights`` (E, N+1) drifted weights, ``target_weights`` (E, N+1), ``cash`` USD,
            ``holdings`` (E, N) shares, ``costs`` (E,) USD paid in this step, ``turnover`` (E,)
            fraction, ``log_return`` (E,) and ``day`` (E,) int64. ``target_weights``
            are the weights traded to, after ``rebalance_band``, ``trade_rate`` and
            ``flatten_at_close`` (with ``execution_lag`` 1: toward the previous step's target).
            Weights, holdings, turnover and log returns are of ``dtype``; with ``state_info``
            off, ``info`` holds only ``final_observation`` and ``episode_return``.

        Raises:
            ValueError: ``action`` does not have shape (num_envs, N+1), or holds NaN or
                infinite values on the CPU path (the message names the env rows); the env's
                state is unchanged. The sync-free path holds such rows instead (no trade) and
                counts the step in ``nonfinite_steps``.
        """
        if tuple(action.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"action must have shape {(self.num_envs, self.action_dim)}, got {tuple(action.shape)}")
        with torch.no_grad():
            return self._step(action)

    def _step(self, action: torch.Tensor):
        cfg, lag = self.config, self.config.execution_lag
        day, weights, value = self._day, self._weights, self._value
        action = action.to(self.device)
        target = target_weights(action, logit_scale=cfg.logit_scale, cash_bias=cfg.cash_bias, dtype=self.dtype)
        members = None if self._members is None else self._members.index_select(0, day)
        if members is not None:  # the day's members and cash only (trainer.envs.membership_mask)
            target = member_target(target, members)
        if self.sync_free:
            # Refusing a NaN or infinite action would need a host sync: such a row holds
            # (with execution_lag, its pending order is NaN, which holds when it comes due).
            row_finite = torch.isfinite(action).all(1)
            self.nonfinite_steps = self.nonfinite_steps + (~row_finite).any().to(torch.int64)
            target = torch.where(row_finite[:, None], target, torch.nan if lag else weights)
        else:
            finite = torch.isfinite(action).all()
        if lag:  # trade the order decided one step ago (NaN rows: none, hold); keep today's
            target, pending = torch.where(self._pending.isfinite().all(1, keepdim=True), self._pending, weights), target
        closing = self._session_close.index_select(0, day)[:, None] if cfg.flatten_at_close else None
        after_trade = partial(_after_trade, members, closing, self._all_cash)
        state = PortfolioState(weights, value, self._dsr_a, self._dsr_b)
        gross, log_ew_gross = self._gross.index_select(0, day), self._log_ew_gross.index_select(0, day)
        step = transition(state, target, gross, log_ew_gross, self._dynamics, after_trade=after_trade)
        new_weights, new_value = step.state.weights, step.state.value
        reward = step.reward.to(torch.float32)
        episode_return = self._episode_return + reward
        day = day + 1
        truncated = day >= self._end_day
        obs = self._observe(day, new_weights)
        info = {"final_observation": obs, "episode_return": episode_return}
        if self.state_info:
            info.update(self._state_info(new_value, new_weights, day))
            info.update(
                final_portfolio_value=new_value,
                target_weights=step.traded,
                costs=value * step.costs_fraction.to(torch.float64),
                turnover=step.turnover,
                log_return=step.log_return,
            )
        state = (day, new_weights, new_value, episode_return, obs)
        if self.sync_free:
            state = self._reset_finished_sync_free(truncated, *state)
        else:
            # One host read answers both; no state has been written yet, so a refused step changes nothing.
            all_finite, any_truncated = torch.stack((finite, truncated.any())).tolist()
            if not all_finite:
                raise nonfinite_action_error(action)
            if any_truncated:
                state = self._reset_finished(truncated.nonzero().squeeze(1), *state)
        if cfg.reward == "differential_sharpe":  # each new episode restarts from A_0 = 0, B_0 = prior
            self._dsr_a = torch.where(truncated, 0.0, step.state.dsr_a)
            self._dsr_b = torch.where(truncated, DSR_PRIOR_VARIANCE, step.state.dsr_b)
        if lag:  # a new episode has no pending order
            self._pending = torch.where(truncated[:, None], torch.nan, pending)
        self._day, self._weights, self._value, self._episode_return, obs = state
        return obs, reward, torch.zeros_like(truncated), truncated, info

    def _reset_finished(self, done, day, weights, value, episode_return, obs) -> tuple[torch.Tensor, ...]:
        """CPU path: only the finished rows ``done`` (K,) int64 start again; returns the new state."""
        starts = self._draw_starts(done.shape[0])
        day = day.index_put((done,), starts)
        weights = weights.index_put((done,), self._all_cash.expand(done.shape[0], -1))
        value = value.index_fill(0, done, float(self.config.initial_cash))
        episode_return = episode_return.index_fill(0, done, 0.0)
        self._end_day = self._end_day.index_put((done,), self._end_days(starts))
        obs = obs.index_put((done,), self._observe(starts, weights.index_select(0, done)))
        return day, weights, value, episode_return, obs

    def _reset_finished_sync_free(
        self, truncated, day, weights, value, episode_return, obs
    ) -> tuple[torch.Tensor, ...]:
        """Sync-free path: every env gets a next start, finished ones take it (fixed shapes, no
        generator: :mod:`trainer.envs.counter_random`); returns the new state."""
        starts = self._draw_starts_counter(self.num_envs)
        self._draw_count = self._draw_count + 1
        rows = truncated[:, None]
        self._end_day = torch.where(truncated, self._end_days(starts), self._end_day)
        return (
            torch.where(truncated, starts, day),
            torch.where(rows, self._all_cash, weights),
            value.masked_fill(truncated, float(self.config.initial_cash)),
            episode_return.masked_fill(truncated, 0.0),
            torch.where(rows, self._observe(starts, self._all_cash.expand(self.num_envs, -1)), obs),
        )

    @property
    def day(self) -> torch.Tensor:
        """(E,) int64 current day index of every env (a copy)."""
        return self._day.clone()

    def market_tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(features (T, N, K) float32, gross (T, N), log_ew_gross (T,))`` on the env's device, for
        learners that differentiate through the dynamics over windows of days: every day's market
        block (ticker-major), ``close[t+1] / close[t]`` (last row 1) and ``log(mean_i gross[t, i])``."""
        n, k = self.num_stocks, self.num_features
        return self._market_obs[:, : n * k].unflatten(1, (k, n)).transpose(1, 2), self._gross, self._log_ew_gross

    @property
    def market_members(self) -> torch.Tensor | None:
        """(T, N) bool on the env's device: the point-in-time universe the env trades
        (``MarketData.members``, :mod:`trainer.envs.membership_mask`), or ``None`` (every ticker)."""
        return self._members

    def close(self) -> None:
        """Nothing to release; present for Gymnasium API symmetry."""
