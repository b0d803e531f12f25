"""A FinRL-style single stock-trading env in NumPy: the speed peer of ``env_throughput.py``.

It follows the structure of FinRL's ``StockTradingEnv`` (Liu et al. 2020, arXiv 2011.09607): one
portfolio, one Python call per day, the state kept as a flat NumPy vector
``[cash, close..., holdings..., indicators...]``, actions scaled by ``hmax`` and truncated to
whole shares, then stocks sold one by one (most negative action first) and bought one by one
(largest action first), each buy limited by the cash left at that moment. Prices and indicators
are read from preloaded arrays (no DataFrame lookups per step), so the peer is as fast as that
design gets in NumPy. It is written for this benchmark only; the trading rules are close to,
not identical with, :class:`trainer.envs.StockTradingVecEnv` (whose buys share one cash cap).
"""

from __future__ import annotations

import numpy as np


class FinRLStyleNumpyEnv:
    """One portfolio stepped in Python with NumPy arrays.

    Args:
        close: (T, N) float64 close prices in USD.
        features: (T, N, F) float32 indicators (flattened feature-major into the state).
        initial_cash: starting cash in USD.
        hmax: shares per unit of action.
        buy_cost_pct: buy cost as a fraction of the traded value.
        sell_cost_pct: sell cost as a fraction of the traded value.
        reward_scaling: multiplier of the daily change in portfolio value (USD).
        seed: seed of the random start day.
    """

    def __init__(
        self,
        close: np.ndarray,
        features: np.ndarray,
        *,
        initial_cash: float = 1e6,
        hmax: int = 100,
        buy_cost_pct: float = 1e-3,
        sell_cost_pct: float = 1e-3,
        reward_scaling: float = 1e-4,
        seed: int = 0,
    ) -> None:
        self.close = np.asarray(close, dtype=np.float64)
        self.tech = np.ascontiguousarray(np.transpose(features, (0, 2, 1)).reshape(len(close), -1), dtype=np.float64)
        self.num_days, self.stock_dim = self.close.shape
        self.initial_cash = initial_cash
        self.hmax = hmax
        self.buy_cost_pct = buy_cost_pct
        self.sell_cost_pct = sell_cost_pct
        self.reward_scaling = reward_scaling
        self.rng = np.random.default_rng(seed)
        self.state_dim = 1 + 2 * self.stock_dim + self.tech.shape[1]
        self.reset()

    def _state(self) -> np.ndarray:
        return np.concatenate(([self.cash], self.close[self.day], self.holdings, self.tech[self.day])).astype(
            np.float32
        )

    def reset(self) -> np.ndarray:
        """Start at a random day leaving at least 63 trading days; return the state (float32)."""
        self.day = int(self.rng.integers(0, max(1, self.num_days - 64)))
        self.cash = float(self.initial_cash)
        self.holdings = np.zeros(self.stock_dim)
        self.total_asset = self.cash
        return self._state()

    def _sell(self, index: int, shares: int) -> None:
        price = self.close[self.day, index]
        sold = min(shares, self.holdings[index])
        if sold > 0:
            self.cash += price * sold * (1 - self.sell_cost_pct)
            self.holdings[index] -= sold

    def _buy(self, index: int, shares: int) -> None:
        price = self.close[self.day, index]
        affordable = self.cash // (price * (1 + self.buy_cost_pct))
        bought = min(affordable, shares)
        if bought > 0:
            self.cash -= price * bought * (1 + self.buy_cost_pct)
            self.holdings[index] += bought

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, dict]:
        """Trade at today's close, move one day; at the last day return done and restart.

        Args:
            action: (N,) float in [-1, 1].

        Returns:
            ``(state, reward, done, info)`` with the new state (float32) and reward (float).
        """
        shares = (np.clip(action, -1, 1) * self.hmax).astype(int)
        order = np.argsort(shares)
        for index in order[: np.count_nonzero(shares < 0)]:
            self._sell(index, -shares[index])
        for index in order[::-1][: np.count_nonzero(shares > 0)]:
            self._buy(index, shares[index])
        self.day += 1
        end_asset = self.cash + float(self.holdings @ self.close[self.day])
        reward = (end_asset - self.total_asset) * self.reward_scaling
        self.total_asset = end_asset
        done = self.day >= self.num_days - 1
        state = self._state()
        if done:
            self.reset()
        return state, reward, done, {"portfolio_value": end_asset}
