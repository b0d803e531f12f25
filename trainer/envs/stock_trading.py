"""Vectorized multi-stock trading env: thousands of independent portfolios as batched tensors.

Every env ``e`` holds its own day index, cash (USD) and whole-share holdings of the ``N`` tickers
of a :class:`~trainer.data.market.MarketData` panel. One :meth:`StockTradingVecEnv.step` trades
all envs at once with fused tensor ops (no Python loop over envs or stocks), following the
daily-rebalancing MDP of FinRL (Liu et al. 2020, "FinRL: A Deep Reinforcement Learning Library
for Automated Stock Trading in Quantitative Finance", arXiv 2011.09607, section 3) as used by the
ElegantRL-Podracer paper (Liu et al. 2021, arXiv 2112.05923):

* the agent sees day ``t``'s close prices and indicators, trades at day ``t``'s close, and is
  rewarded with the change of its portfolio value from day ``t`` (before trading) to day ``t+1``
  (after trading, costs included), times ``reward_scaling``;
* sells execute before buys; buys are capped by the cash available after the sells.

It deliberately fixes four defects of ElegantRL's ``StockTradingVecEnv`` (each has a test):
the action is used as given (not replaced by a constant); every env has its own day index, so
envs do not all finish together; sell amounts are limited per env and per stock (not over the
wrong axis); cash enters the observation scaled by ``2**-16`` (not ``2**16``).

The episode API is Gymnasium's vector API with automatic reset ("same step" mode): see
:meth:`StockTradingVecEnv.step`.

Speed (``benchmarks/env_throughput.py``): one step is ~25 fused tensor ops over (E, N) plus
one row gather of a precomputed per-day observation table; no Python loop over envs or
stocks. Steps run under ``torch.no_grad`` rather than ``inference_mode`` because agents feed
the returned observations into autograd graphs, which inference tensors cannot join.

Two paths, one rule (``sync_free``): on the CPU three data-dependent branches (any env over its
cash, any turbulent day, any finished episode) skip work when nothing happens, which costs
nothing there. On an accelerator each such branch would be a host sync (the CPU waits for the
device to say whether any element is true), so the step instead computes every case for
every env and selects with ``torch.where``: no host sync, no data-dependent shapes, which lets
the step be captured in a CUDA graph or compiled. Both paths give identical results (tested
bit for bit on CPU with the same random draws), except for a NaN or infinite action: the CPU
path refuses it (``ValueError``, state unchanged), the sync-free path holds that row and counts
the step in ``nonfinite_steps`` (refusing would need a host sync every step).

State dtypes (``share_dtype``): cash and portfolio value are float64 (USD sums over many days
must not drift); holdings, prices and traded shares are float64 on the CPU (exact reference,
used by evaluation and backtests) and float32 on accelerators (half the memory traffic; whole
share counts are exact in float32 up to 2**24). Values from float32 holdings and prices are
summed in float64 and differ from the float64 ones by about 1e-7 relatively (tested).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.data.sessions import session_close_mask
from trainer.envs.counter_random import counter_uniform
from trainer.envs.episodes import (
    MIN_EPISODE_STEPS,
    EpisodeStarts,
    check_episode_setup,
    check_flatten_at_close,
    check_market,
)
from trainer.envs.membership_mask import member_mix, member_trades, members_tensor
from trainer.envs.observations import FeatureStats, fit_feature_stats, scale_free_market
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_layout import (
    CASH_SCALE,
    HOLDINGS_SCALE,
    market_observation_table,
    observation_layout,
    stock_obs_dim,
)
from trainer.errors import ConfigError
from trainer.util.nonfinite import nonfinite_action_error

__all__ = ["StockTradingVecEnv"]


def _value_float32(shares: torch.Tensor, prices: torch.Tensor) -> torch.Tensor:
    """(E,) float64 USD value of (E, N) float32 shares at (E, N) float32 prices.

    Each product is rounded once (relative error <= 2**-24) and the sum is accumulated in
    float64, so the value is within 6e-8 of exact, relatively. (For float64 shares the env uses
    ``torch.linalg.vecdot``.)
    """
    return torch.mul(shares, prices).sum(1, dtype=torch.float64)


class StockTradingVecEnv(EpisodeStarts):
    """``num_envs`` independent stock portfolios stepped together as batched torch tensors.

    Observation of env ``e`` on day ``t``, float32, layout in :meth:`observation_layout`. With
    ``observation="scale_free"`` (default; ``obs_dim = 1 + N + N*K``, ``K = 5 + F``)::

        [cash / V,
         holdings[0..N-1] * close[t] / V,                       # fractions of the value V
         z(features)[t, :, k]  for k in 0..K-1]                 # feature-major, train statistics

    where the features are the log returns, volatility and scale-free indicators of
    :mod:`trainer.envs.observations`, z-scored with ``feature_stats``. With
    ``observation="finrl"`` (``obs_dim = 1 + 2N + N*F``)::

        [cash * CASH_SCALE,
         close[t, 0..N-1] * PRICE_SCALE,
         holdings[0..N-1] * HOLDINGS_SCALE,
         features[t, :, f] * feature_scale(name_f)  for f in 0..F-1]   # feature-major

    Trade rule of one step, per env (all envs at once), at the close prices ``p`` of day ``t``:

    1. ``q = trunc(clip(action, -1, 1) * hmax)`` whole shares per stock (a NaN or infinite
       action is refused, see :meth:`step`);
    2. sells ``s = min(max(-q, 0), holdings)`` execute first: ``cash += sum(s*p) * (1 - sell_cost)``;
    3. buys ``b = max(q, 0)`` cost ``B = sum(b*p) * (1 + buy_cost)``. When ``B`` exceeds the cash,
       every buy of that env is scaled by the same factor ``cash / B`` and floored to whole
       shares, so the env spends at most its cash and keeps its intended mix across stocks;
    4. with a turbulence threshold, on a day with ``turbulence[t] >= threshold`` the env sells
       all holdings instead and buys nothing; so does ``flatten_at_close`` on the last bar of
       each session of an intraday panel (one step is one bar there);
    5. with a point-in-time universe (``MarketData.members``) a ticker that is not a member on
       day ``t`` is not bought and every share of it is sold at ``t``'s close
       (:mod:`trainer.envs.membership_mask`).

    The env then moves to day ``t+1``; the reward is ``(V[t+1] - V[t]) * reward_scaling``,
    where ``V = cash + holdings . close`` (costs reduce it). An episode ends by truncation on its
    last day (``start + episode_length`` or the end of the data); there is no terminal state.

    Args:
        data: market panel; ``close`` is the execution price.
        config: trading rules (validated here).
        num_envs: number of independent portfolios ``E`` (>= 1).
        device: torch device of all state tensors (``"cpu"``, ``"cuda"``...).
        seed: seed of the env's own random generator (start days, random initial wealth).
            CPU results are bit-for-bit reproducible for a given seed and action sequence.
        sync_free: step without host syncs (``torch.where`` over all envs instead of skipping
            work when no env needs it). Default: on every device but the CPU. The auto-reset
            then draws a start day for every env each step (only finished envs use it), so
            with random starts the random stream differs from the CPU shortcut's.
        share_dtype: dtype of holdings, prices and traded shares, ``torch.float64`` or
            ``torch.float32``. Default: float64 on the CPU, float32 elsewhere.
        feature_stats: z-score statistics of the scale-free features fitted on the train split
            (:func:`~trainer.envs.observations.fit_feature_stats`); ``None`` fits them on
            ``data``. For scale-free observations pass a panel made by
            :func:`~trainer.envs.observations.scale_free_market` over the whole history and
            then sliced, so lookbacks reach before the first day.
        state_info: ``False`` leaves the state (value, cash, holdings, costs, day) out of the
            step's ``info``: training reads only ``final_observation`` and ``episode_return``.

    Raises:
        ConfigError: invalid config, ``num_envs`` < 1, or ``episode_length`` not shorter than
            the data.
        DataError: fewer than 2 days, non-positive or non-finite prices, non-finite features.
    """

    #: state tensors the step replaces (:class:`~trainer.envs.graphed.CudaGraphStep` keeps them static)
    GRAPH_STATE = (
        "_day",
        "_end_day",
        "_cash",
        "_holdings",
        "_value",
        "_prices",
        "_episode_return",
        "_draw_count",
        "nonfinite_steps",
    )

    def __init__(
        self,
        data: MarketData,
        config: EnvConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
        sync_free: bool | None = None,
        share_dtype: torch.dtype | None = None,
        feature_stats: FeatureStats | None = None,
        state_info: bool = True,
    ) -> None:
        config = (config or EnvConfig()).validate()
        check_market(data)
        num_days = data.num_days
        check_episode_setup(num_days, data.dates[0], data.dates[-1], config.episode_length, num_envs)
        check_flatten_at_close(config.flatten_at_close, data.dates)
        self.feature_stats: FeatureStats | None = None
        self._scale_free = config.observation == "scale_free"
        if self._scale_free:
            data = scale_free_market(data)
            self.feature_stats = feature_stats if feature_stats is not None else fit_feature_stats(data)
        self.data = data
        self.config = config
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.num_stocks = data.num_stocks
        self.num_features = len(data.feature_names)
        self.num_days = num_days
        self.action_dim = self.num_stocks
        self.obs_dim = stock_obs_dim(self.num_stocks, self.num_features, scale_free=self._scale_free)
        self.tickers = tuple(data.tickers)
        self.state_info = bool(state_info)

        n, dev = self.num_stocks, self.device
        on_cpu = dev.type == "cpu"
        self.sync_free = (not on_cpu) if sync_free is None else bool(sync_free)
        self.share_dtype = share_dtype or (torch.float64 if on_cpu else torch.float32)
        if self.share_dtype not in (torch.float64, torch.float32):
            raise ConfigError(
                f"share_dtype: must be torch.float64 or torch.float32, got {share_dtype}", field="share_dtype"
            )
        self._close = torch.tensor(data.close, dtype=self.share_dtype, device=dev)
        # (E,) float64 USD value of (E, N) shares at (E, N) prices
        self._dot = torch.linalg.vecdot if self.share_dtype == torch.float64 else _value_float32
        self._turbulence = torch.tensor(data.turbulence, dtype=torch.float64, device=dev)
        # (T,) bool: rows on which every env sells everything and buys nothing (turbulent days,
        # session closes with flatten_at_close); None when no row can be one
        liquidate = np.zeros(num_days, dtype=bool)
        if config.turbulence_threshold is not None:
            liquidate |= data.turbulence >= config.turbulence_threshold
        if config.flatten_at_close:
            liquidate |= session_close_mask(data.dates)
        use_mask = config.turbulence_threshold is not None or config.flatten_at_close
        self._liquidate = torch.as_tensor(liquidate, device=dev) if use_mask else None
        # (T, N) bool members of each day (point-in-time universe), None: every ticker always
        self._members = members_tensor(data, dev)
        # The market part of every day's observation, precomputed once: one row gather per step.
        table, self._feature_scales = market_observation_table(data, self.feature_stats, scale_free=self._scale_free)
        self._market_obs = torch.as_tensor(table, device=dev)
        self._hold_slice = slice(1, 1 + n) if self._scale_free else slice(1 + n, 1 + 2 * n)

        # Random starts leave at least one episode_length (or MIN_EPISODE_STEPS) of data.
        min_steps = config.episode_length or min(MIN_EPISODE_STEPS, num_days - 1)
        self._latest_start = num_days - 1 - min_steps
        self._fixed_start: int | None = None
        self._generator = torch.Generator(device=dev)
        self._generator.manual_seed(int(seed))
        # Keeps floored buys strictly within cash despite rounding: values from float64 shares
        # are within ~1e-14 of exact, from float32 ones within 6e-8 (see _value_float32).
        self._keep_buy = 1.0 - (1e-12 if self.share_dtype == torch.float64 else 1e-6)
        self._needs_reset = True
        #: Steps (so far) that held a NaN or infinite action on the sync-free path, a 0-dim int64
        #: tensor on the device (the CPU path raises instead; see :meth:`step`).
        self.nonfinite_steps = torch.zeros((), dtype=torch.int64, device=dev)
        self.reset(seed=seed)

    # ------------------------------------------------------------------ layout / observations
    def observation_layout(self) -> dict[str, Any]:
        """Describe the observation vector so a saved policy can rebuild it from raw values.

        Returns:
            A JSON-able dict: ``version``, ``obs_dim``, ``blocks`` (in vector order, each with
            ``name``, ``offset``, ``size``, ``shape``, ``scale`` or ``scales``, ``unit`` and
            ``order``), ``tickers``, ``feature_names``, ``action`` (dimension, range and share
            rule) and the trading ``config``. ``obs[offset:offset+size] = raw * scale``.
        """
        return observation_layout(self)

    def _observe(self, day: torch.Tensor, cash: torch.Tensor, holdings: torch.Tensor) -> torch.Tensor:
        obs = torch.index_select(self._market_obs, 0, day)
        if self._scale_free:
            held = holdings * self._close.index_select(0, day)
            value = cash + held.sum(1)
            if self.sync_free:  # item assignment: ``out=`` into strided views breaks torch.compile's graph
                obs[:, 0] = cash / value
                obs[:, self._hold_slice] = held / value.to(held.dtype)[:, None]
            else:  # the CPU path writes in place (one pass fewer over (E, N)); same values
                torch.div(cash, value, out=obs[:, 0])
                torch.div(held, value[:, None], out=obs[:, self._hold_slice])
            return obs
        if self.sync_free:
            obs[:, 0] = cash * CASH_SCALE
            obs[:, self._hold_slice] = holdings * HOLDINGS_SCALE
        else:
            torch.mul(cash, CASH_SCALE, out=obs[:, 0])
            torch.mul(holdings, HOLDINGS_SCALE, out=obs[:, self._hold_slice])
        return obs

    # ------------------------------------------------------------------ episode starts
    def _initial_wealth(self, starts: torch.Tensor, counter: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(count,) float64 cash and (count, N) ``share_dtype`` holdings of new episodes
        starting on ``starts``; random numbers from the env's generator or, with ``counter``
        (the sync-free step), from :mod:`trainer.envs.counter_random`."""
        count, n, dev = starts.shape[0], self.num_stocks, self.device
        cfg, dtype = self.config, self.share_dtype
        if not cfg.randomize_initial:
            cash = torch.full((count,), float(cfg.initial_cash), dtype=torch.float64, device=dev)
            return cash, torch.zeros((count, n), dtype=dtype, device=dev)
        if counter:
            key, step = self._draw_key, self._draw_count
            wealth = cfg.initial_cash * (0.5 + counter_uniform(key, step, 1, (count,), torch.float64))
            invested = 0.5 * counter_uniform(key, step, 2, (count,), torch.float64)
            weights = counter_uniform(key, step, 3, (count, n), dtype)
        else:
            g = self._generator
            wealth = cfg.initial_cash * (0.5 + torch.rand(count, generator=g, device=dev, dtype=torch.float64))
            invested = 0.5 * torch.rand(count, generator=g, device=dev, dtype=torch.float64)
            # drawn in float64 whatever share_dtype: the same generator gives the same portfolios
            weights = torch.rand((count, n), generator=g, device=dev, dtype=torch.float64).to(dtype)
        if self._members is not None:  # the start day's members only
            weights = member_mix(weights, self._members.index_select(0, starts))
        else:
            weights = weights / weights.sum(1, keepdim=True)
        prices = self._close.index_select(0, starts)  # share_dtype: no float64 (E, N) work on accelerators
        holdings = torch.floor((wealth * invested).to(dtype)[:, None] * weights / prices)
        cash = wealth - (holdings * prices).sum(1, dtype=torch.float64)
        return cash, holdings

    # ------------------------------------------------------------------ API
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Start a new episode in every env.

        Args:
            seed: reseeds the env's generator (start days, random wealth); ``None`` continues it.
            options: ``{"start_day": d}`` starts every env on day index ``d`` (evaluation),
                and so do the automatic resets until the next ``reset`` call. Without it,
                starts follow ``config.random_start``.

        Returns:
            ``obs`` (E, obs_dim) float32 and ``info`` with ``portfolio_value`` (E,) float64 USD,
            ``cash`` (E,) float64 USD, ``holdings`` (E, N) ``share_dtype`` shares, ``costs``
            (E,) float64 USD (zeros) and ``day`` (E,) int64 day index into the data.

        Raises:
            ConfigError: ``start_day`` is not a day index that leaves at least one step.
        """
        self._read_reset_options(seed, options)
        with torch.no_grad():
            self._day = self._draw_starts(self.num_envs)
            self._end_day = self._end_days(self._day)
            self._cash, self._holdings = self._initial_wealth(self._day)
            self._prices = self._close.index_select(0, self._day)  # (E, N) close of each env's day
            self._value = self._cash + self._dot(self._holdings, self._prices)
            self._episode_return = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
            if self.sync_free:
                self._new_draw_key()
            obs = self._observe(self._day, self._cash, self._holdings)
        info = {
            "portfolio_value": self._value,
            "cash": self._cash,
            "holdings": self._holdings,
            "costs": torch.zeros(self.num_envs, dtype=torch.float64, device=self.device),
            "day": self._day,
        }
        return obs, info

    def step(
        self, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Trade every env at today's close, move to the next day and auto-reset finished envs.

        Args:
            action: (E, N) float, one value per stock in [-1, 1] (clipped). NaN and infinite
                values are refused: they only come from a diverged policy, and holding in
                their place (as this env once did) let such a policy score a quiet 0 and rank
                above every losing agent (issue 20). Agents check their own numbers after each
                update and evaluation names the agent before stepping; this check is the
                env's own guard, merged into the host sync a step already makes. On the
                sync-free path (accelerators) such rows hold instead and the step is counted
                in ``nonfinite_steps`` (see the module docstring).

        Returns:
            ``(obs, reward, terminated, truncated, info)``:

            * ``obs`` (E, obs_dim) float32; rows of finished envs already hold the first
              observation of their next episode;
            * ``reward`` (E,) float32, ``(V[t+1] - V[t]) * reward_scaling``;
            * ``terminated`` (E,) bool, always False (nothing ends an episode but time);
            * ``truncated`` (E,) bool, True where the episode reached its last day;
            * ``info``: ``final_observation`` (E, obs_dim) float32, the observation of the day
              just reached before any reset (equal to ``obs`` where not truncated; use it to
              bootstrap); ``episode_return`` (E,) float32, the undiscounted sum of rewards of
              the episode so far including this step (the episode's return where truncated);
              and the state after this step's trade on the new day, before any reset:
              ``portfolio_value`` = ``final_portfolio_value`` (E,) float64 USD, ``cash`` (E,)
              float64 USD, ``holdings`` (E, N) ``share_dtype`` shares, ``costs`` (E,) float64
              USD paid in this step, ``day`` (E,) int64 day index (with ``state_info`` off,
              only the first two).

            All returned tensors are fresh each step; the env never writes into them later.

        Raises:
            ValueError: ``action`` does not have shape (num_envs, num_stocks), or holds NaN or
                infinite values on the CPU path (the message names the env rows); the env's
                state is unchanged.
        """
        if tuple(action.shape) != (self.num_envs, self.num_stocks):
            raise ValueError(f"action must have shape {(self.num_envs, self.num_stocks)}, got {tuple(action.shape)}")
        with torch.no_grad():
            return self._step(action)

    def _step(self, action: torch.Tensor):
        # Speed notes (CPU, 4096 envs x 29 stocks): every (E, N) pass costs ~50-150 us, so passes
        # are fused or done in place on this step's temporaries; state tensors are replaced,
        # never written in place, because they are handed out in ``info``.
        cfg = self.config
        day, holdings, prices = self._day, self._holdings, self._prices
        # Scaling in float32 (the action's dtype) keeps e.g. 0.7 * 100 at exactly 70 shares; the
        # integer cast truncates toward zero and is ~7x faster than torch.trunc on CPU.
        act = action.to(device=self.device, dtype=torch.float32)
        finite = torch.isfinite(act).all()
        if self.sync_free:
            # Refusing a NaN or infinite action would need a host sync every step: such a row
            # holds (0 shares) and the step is counted in ``nonfinite_steps`` on the device.
            self.nonfinite_steps = self.nonfinite_steps + (~finite).to(torch.int64)
            act = torch.nan_to_num(act, nan=0.0, posinf=0.0, neginf=0.0)
        shares = act.clamp(-1.0, 1.0).mul_(cfg.hmax).to(torch.int32).to(self.share_dtype)

        sells = torch.minimum(shares.neg(), holdings).clamp_(min=0.0)  # = min(max(-q, 0), holdings)
        buys = shares.clamp_(min=0.0)
        if self._liquidate is not None:
            # Liquidate everything and refuse buys on turbulent days (and session closes).
            panic = self._liquidate.index_select(0, day)
            if self.sync_free:
                sells = torch.where(panic[:, None], holdings, sells)
                buys.masked_fill_(panic[:, None], 0.0)
            else:  # such days are rare: only the affected rows are rewritten
                rows = panic.nonzero().squeeze(1)
                if rows.numel():
                    sells.index_copy_(0, rows, holdings.index_select(0, rows))
                    buys.index_fill_(0, rows, 0.0)
        if self._members is not None:  # no buys of non-members; a ticker that left is sold
            sells, buys = member_trades(sells, buys, holdings, self._members.index_select(0, day))

        sell_value = self._dot(sells, prices)
        cash = self._cash + sell_value * (1.0 - cfg.sell_cost_pct)
        buy_value = self._dot(buys, prices)
        buy_cost = buy_value * (1.0 + cfg.buy_cost_pct)
        # Cash cap: scale all of an env's buys by one factor, then floor to whole shares. Rows
        # within their cash get factor 1 (their whole-share buys are unchanged by the floor).
        over = buy_cost > cash
        if self.sync_free:
            any_over = True  # every row goes through the cap; rows within their cash keep their buys
        else:
            # The step's one host sync (free on CPU) answers both questions. Nothing of the env's
            # state has been written yet, so refusing here leaves it as it was.
            all_finite, any_over = torch.stack((finite, over.any())).tolist()
            if not all_finite:
                raise nonfinite_action_error(act)
        if any_over:
            factor = torch.where(over, cash / buy_cost * self._keep_buy, 1.0)
            buys = buys.mul_(factor.to(self.share_dtype)[:, None]).floor_()
            buy_value = self._dot(buys, prices)
        cash = cash - buy_value * (1.0 + cfg.buy_cost_pct)
        costs = sell_value * cfg.sell_cost_pct + buy_value * cfg.buy_cost_pct
        holdings = torch.add(holdings, buys).sub_(sells)

        day = day + 1
        prices = self._close.index_select(0, day)
        value = cash + self._dot(holdings, prices)
        reward = ((value - self._value) * cfg.reward_scaling).to(torch.float32)
        episode_return = self._episode_return + reward
        truncated = day >= self._end_day
        obs = self._observe(day, cash, holdings)
        info = {"final_observation": obs, "episode_return": episode_return}
        if self.state_info:
            info.update(
                portfolio_value=value, final_portfolio_value=value, cash=cash, holdings=holdings, costs=costs, day=day
            )
        if self.sync_free:
            # Every env gets a next start; finished ones take it (no host sync, fixed shapes, no
            # generator in the step: the draws are counter-based).
            starts = self._draw_starts_counter(self.num_envs)
            new_cash, new_holdings = self._initial_wealth(starts, counter=True)
            self._draw_count = self._draw_count + 1
            new_prices = self._close.index_select(0, starts)
            rows = truncated[:, None]
            day = torch.where(truncated, starts, day)
            cash = torch.where(truncated, new_cash, cash)
            holdings = torch.where(rows, new_holdings, holdings)
            prices = torch.where(rows, new_prices, prices)
            value = torch.where(truncated, new_cash + self._dot(new_holdings, new_prices), value)
            episode_return = episode_return.masked_fill(truncated, 0.0)
            self._end_day = torch.where(truncated, self._end_days(starts), self._end_day)
            obs = torch.where(rows, self._observe(starts, new_cash, new_holdings), obs)
        elif bool(truncated.any()):
            done = truncated.nonzero().squeeze(1)
            starts = self._draw_starts(done.shape[0])
            new_cash, new_holdings = self._initial_wealth(starts)
            new_prices = self._close.index_select(0, starts)
            day = day.index_put((done,), starts)
            cash = cash.index_put((done,), new_cash)
            holdings = holdings.index_put((done,), new_holdings)
            prices.index_copy_(0, done, new_prices)  # private to the env: updated in place
            start_value = new_cash + self._dot(new_holdings, new_prices)
            value = value.index_put((done,), start_value)
            episode_return = episode_return.index_put((done,), torch.zeros_like(start_value, dtype=torch.float32))
            self._end_day = self._end_day.index_put((done,), self._end_days(starts))
            obs = obs.index_put((done,), self._observe(starts, new_cash, new_holdings))
        self._day, self._cash, self._holdings, self._value, self._prices = day, cash, holdings, value, prices
        self._episode_return = episode_return
        terminated = torch.zeros_like(truncated)
        return obs, reward, terminated, truncated, info

    @property
    def day(self) -> torch.Tensor:
        """(E,) int64 current day index of every env (a copy)."""
        return self._day.clone()

    def close(self) -> None:
        """Nothing to release; present for Gymnasium API symmetry."""
