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
the returned observations into autograd graphs, which inference tensors cannot join. Three
data-dependent branches (any env over its cash, any turbulent day, any finished episode)
each cost one host sync on CUDA and skip work on CPU when nothing happens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.envs.episodes import EpisodeStarts, check_episode_setup
from trainer.envs.market_rules import (
    CASH_SCALE,
    HOLDINGS_SCALE,
    MIN_EPISODE_STEPS,
    PRICE_SCALE,
    EnvConfig,
    check_market,
    feature_scale,
)
from trainer.errors import DataError

__all__ = [
    "CASH_SCALE",
    "HOLDINGS_SCALE",
    "MIN_EPISODE_STEPS",
    "PRICE_SCALE",
    "EnvConfig",
    "StockTradingVecEnv",
    "build_observation",
    "feature_scale",
]


def observation_size(num_stocks: int, num_features: int) -> int:
    """``obs_dim`` of :class:`StockTradingVecEnv`: cash, N prices, N holdings, N x F indicators."""
    return 1 + 2 * num_stocks + num_stocks * num_features


class StockTradingVecEnv(EpisodeStarts):
    """``num_envs`` independent stock portfolios stepped together as batched torch tensors.

    Observation of env ``e`` on day ``t`` (``obs_dim = 1 + 2N + N*F``), float32, layout in
    :meth:`observation_layout`::

        [cash * CASH_SCALE,
         close[t, 0..N-1] * PRICE_SCALE,
         holdings[0..N-1] * HOLDINGS_SCALE,
         features[t, :, f] * feature_scale(name_f)  for f in 0..F-1]   # feature-major

    Trade rule of one step, per env (all envs at once), at the close prices ``p`` of day ``t``:

    1. ``q = trunc(clip(action, -1, 1) * hmax)`` whole shares per stock (NaN counts as 0);
    2. sells ``s = min(max(-q, 0), holdings)`` execute first: ``cash += sum(s*p) * (1 - sell_cost)``;
    3. buys ``b = max(q, 0)`` cost ``B = sum(b*p) * (1 + buy_cost)``. When ``B`` exceeds the cash,
       every buy of that env is scaled by the same factor ``cash / B`` and floored to whole
       shares, so the env spends at most its cash and keeps its intended mix across stocks;
    4. with a turbulence threshold, on a day with ``turbulence[t] >= threshold`` the env sells
       all holdings instead and buys nothing.

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

    Raises:
        ConfigError: invalid config, ``num_envs`` < 1, or ``episode_length`` not shorter than
            the data.
        DataError: fewer than 2 days, non-positive or non-finite prices, non-finite features.
    """

    def __init__(
        self,
        data: MarketData,
        config: EnvConfig | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> None:
        config = (config or EnvConfig()).validate()
        check_market(data)
        num_days = data.num_days
        check_episode_setup(num_days, data.dates[0], data.dates[-1], config.episode_length, num_envs)
        self.data = data
        self.config = config
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.num_stocks = data.num_stocks
        self.num_features = len(data.feature_names)
        self.num_days = num_days
        self.action_dim = self.num_stocks
        self.obs_dim = observation_size(self.num_stocks, self.num_features)
        self.tickers = tuple(data.tickers)

        n, dev = self.num_stocks, self.device
        self._hold_slice = slice(1 + n, 1 + 2 * n)
        self._close = torch.tensor(data.close, dtype=torch.float64, device=dev)
        self._turbulence = torch.tensor(data.turbulence, dtype=torch.float64, device=dev)
        # The market part of every day's observation, precomputed once: one row gather per step.
        table = np.zeros((num_days, self.obs_dim), dtype=np.float32)
        table[:, 1 : 1 + n] = data.close * PRICE_SCALE
        fscales = np.array([feature_scale(f) for f in data.feature_names], dtype=np.float64)
        feats = np.transpose(data.features.astype(np.float64) * fscales, (0, 2, 1))  # (T, F, N)
        table[:, 1 + 2 * n :] = feats.reshape(num_days, -1)
        self._market_obs = torch.as_tensor(table, device=dev)
        self._feature_scales = fscales

        # Random starts leave at least one episode_length (or MIN_EPISODE_STEPS) of data.
        min_steps = config.episode_length or min(MIN_EPISODE_STEPS, num_days - 1)
        self._latest_start = num_days - 1 - min_steps
        self._fixed_start: int | None = None
        self._generator = torch.Generator(device=dev)
        self._generator.manual_seed(int(seed))
        self._keep_buy = 1.0 - 1e-12  # keeps floored buys strictly within cash despite rounding
        self._needs_reset = True
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
        n, f = self.num_stocks, self.num_features
        return {
            "version": 1,
            "obs_dim": self.obs_dim,
            "blocks": [
                {"name": "cash", "offset": 0, "size": 1, "shape": [1], "scale": CASH_SCALE, "unit": "USD"},
                {
                    "name": "close",
                    "offset": 1,
                    "size": n,
                    "shape": [n],
                    "scale": PRICE_SCALE,
                    "unit": "USD (adjusted close of the current day)",
                    "order": "tickers",
                },
                {
                    "name": "holdings",
                    "offset": 1 + n,
                    "size": n,
                    "shape": [n],
                    "scale": HOLDINGS_SCALE,
                    "unit": "shares",
                    "order": "tickers",
                },
                {
                    "name": "features",
                    "offset": 1 + 2 * n,
                    "size": n * f,
                    "shape": [f, n],
                    "scales": {name: float(s) for name, s in zip(self.data.feature_names, self._feature_scales)},
                    "unit": "indicator units",
                    "order": "feature-major: all tickers of feature_names[0], then feature_names[1], ...",
                },
            ],
            "tickers": list(self.tickers),
            "feature_names": list(self.data.feature_names),
            "action": {
                "dim": n,
                "low": -1.0,
                "high": 1.0,
                "order": "tickers",
                "rule": "shares = trunc(clip(a, -1, 1) * hmax); negative sells, positive buys",
                "hmax": self.config.hmax,
            },
            "config": self.config.to_dict(),
        }

    def _observe(self, day: torch.Tensor, cash: torch.Tensor, holdings: torch.Tensor) -> torch.Tensor:
        obs = torch.index_select(self._market_obs, 0, day)
        torch.mul(cash, CASH_SCALE, out=obs[:, 0])
        torch.mul(holdings, HOLDINGS_SCALE, out=obs[:, self._hold_slice])
        return obs

    # ------------------------------------------------------------------ episode starts
    def _initial_wealth(self, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        count, n, dev = starts.shape[0], self.num_stocks, self.device
        cfg = self.config
        if not cfg.randomize_initial:
            cash = torch.full((count,), float(cfg.initial_cash), dtype=torch.float64, device=dev)
            return cash, torch.zeros((count, n), dtype=torch.float64, device=dev)
        g = self._generator
        wealth = cfg.initial_cash * (0.5 + torch.rand(count, generator=g, device=dev, dtype=torch.float64))
        invested = 0.5 * torch.rand(count, generator=g, device=dev, dtype=torch.float64)
        weights = torch.rand((count, n), generator=g, device=dev, dtype=torch.float64)
        weights = weights / weights.sum(1, keepdim=True)
        prices = self._close.index_select(0, starts)
        holdings = torch.floor((wealth * invested)[:, None] * weights / prices)
        cash = wealth - (holdings * prices).sum(1)
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
            ``cash`` (E,) float64 USD, ``holdings`` (E, N) float64 shares, ``costs`` (E,)
            float64 USD (zeros) and ``day`` (E,) int64 day index into the data.

        Raises:
            ConfigError: ``start_day`` is not a day index that leaves at least one step.
        """
        self._read_reset_options(seed, options)
        with torch.no_grad():
            self._day = self._draw_starts(self.num_envs)
            self._end_day = self._end_days(self._day)
            self._cash, self._holdings = self._initial_wealth(self._day)
            self._prices = self._close.index_select(0, self._day)  # (E, N) close of each env's day
            self._value = self._cash + torch.linalg.vecdot(self._holdings, self._prices)
            self._episode_return = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
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
            action: (E, N) float, one value per stock in [-1, 1] (clipped; NaN means hold).

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
              float64 USD, ``holdings`` (E, N) float64 shares, ``costs`` (E,) float64 USD paid
              in this step, ``day`` (E,) int64 day index.

            All returned tensors are fresh each step; the env never writes into them later.

        Raises:
            ValueError: ``action`` does not have shape (num_envs, num_stocks).
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
        act = torch.nan_to_num(action.to(device=self.device, dtype=torch.float32), nan=0.0)
        shares = act.clamp_(-1.0, 1.0).mul_(cfg.hmax).to(torch.int32).to(torch.float64)

        sells = torch.minimum(shares.neg(), holdings).clamp_(min=0.0)  # = min(max(-q, 0), holdings)
        buys = shares.clamp_(min=0.0)
        if cfg.turbulence_threshold is not None:
            # Liquidate everything and refuse buys on turbulent days. Such days are rare, so
            # only the affected rows are rewritten (cheaper than masking all of (E, N)).
            panic = (self._turbulence.index_select(0, day) >= cfg.turbulence_threshold).nonzero().squeeze(1)
            if panic.numel():
                sells.index_copy_(0, panic, holdings.index_select(0, panic))
                buys.index_fill_(0, panic, 0.0)

        sell_value = torch.linalg.vecdot(sells, prices)
        cash = self._cash + sell_value * (1.0 - cfg.sell_cost_pct)
        buy_value = torch.linalg.vecdot(buys, prices)
        buy_cost = buy_value * (1.0 + cfg.buy_cost_pct)
        # Cash cap: scale all of an env's buys by one factor, then floor to whole shares.
        over = buy_cost > cash
        if bool(over.any()):  # a host sync; free on CPU, one small wait on CUDA
            factor = torch.where(over, cash / buy_cost * self._keep_buy, 1.0)
            buys = buys.mul_(factor[:, None]).floor_()
            buy_value = torch.linalg.vecdot(buys, prices)
        cash = cash - buy_value * (1.0 + cfg.buy_cost_pct)
        costs = sell_value * cfg.sell_cost_pct + buy_value * cfg.buy_cost_pct
        holdings = torch.add(holdings, buys).sub_(sells)

        day = day + 1
        prices = self._close.index_select(0, day)
        value = cash + torch.linalg.vecdot(holdings, prices)
        reward = ((value - self._value) * cfg.reward_scaling).to(torch.float32)
        episode_return = self._episode_return + reward
        truncated = day >= self._end_day
        obs = self._observe(day, cash, holdings)
        info = {
            "final_observation": obs,
            "episode_return": episode_return,
            "portfolio_value": value,
            "final_portfolio_value": value,
            "cash": cash,
            "holdings": holdings,
            "costs": costs,
            "day": day,
        }
        if bool(truncated.any()):
            done = truncated.nonzero().squeeze(1)
            starts = self._draw_starts(done.shape[0])
            new_cash, new_holdings = self._initial_wealth(starts)
            new_prices = self._close.index_select(0, starts)
            day = day.index_put((done,), starts)
            cash = cash.index_put((done,), new_cash)
            holdings = holdings.index_put((done,), new_holdings)
            prices.index_copy_(0, done, new_prices)  # private to the env: updated in place
            start_value = new_cash + torch.linalg.vecdot(new_holdings, new_prices)
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


def build_observation(
    layout: dict[str, Any],
    cash: np.ndarray | float,
    holdings: np.ndarray,
    close: np.ndarray,
    features: np.ndarray,
) -> np.ndarray:
    """Rebuild observations from raw values using an exported :meth:`observation_layout`.

    Used by saved agents (bundles) to act outside the env, e.g. on live prices.

    Args:
        layout: the dict returned by ``StockTradingVecEnv.observation_layout()``.
        cash: (B,) or scalar, cash in USD.
        holdings: (B, N) or (N,) shares, in ``layout["tickers"]`` order.
        close: (B, N) or (N,) close prices in USD.
        features: (B, N, F) or (N, F) raw indicators in ``layout["feature_names"]`` order.

    Returns:
        (B, obs_dim) float32 observations (or (obs_dim,) for unbatched input).

    Raises:
        DataError: an input's shape does not match the layout's tickers/features.
    """
    blocks = {b["name"]: b for b in layout["blocks"]}
    n, f = len(layout["tickers"]), len(layout["feature_names"])
    single = np.ndim(holdings) == 1
    cash = np.atleast_1d(np.asarray(cash, dtype=np.float64))
    holdings = np.atleast_2d(np.asarray(holdings, dtype=np.float64))
    close = np.atleast_2d(np.asarray(close, dtype=np.float64))
    features = np.asarray(features, dtype=np.float64)
    if features.ndim == 2:
        features = features[None]
    batch = holdings.shape[0]
    for name, arr, shape in (
        ("cash", cash, (batch,)),
        ("holdings", holdings, (batch, n)),
        ("close", close, (batch, n)),
        ("features", features, (batch, n, f)),
    ):
        if arr.shape != shape:
            raise DataError(f"{name} has shape {arr.shape}, the layout needs {shape}", field=name)
    obs = np.empty((batch, layout["obs_dim"]), dtype=np.float32)
    for name, raw in (("cash", cash[:, None]), ("close", close), ("holdings", holdings)):
        b = blocks[name]
        obs[:, b["offset"] : b["offset"] + b["size"]] = raw * b["scale"]
    b = blocks["features"]
    scales = np.array([b["scales"][name] for name in layout["feature_names"]], dtype=np.float64)
    scaled = np.transpose(features * scales, (0, 2, 1)).reshape(batch, -1)
    obs[:, b["offset"] : b["offset"] + b["size"]] = scaled
    return obs[0] if single else obs
