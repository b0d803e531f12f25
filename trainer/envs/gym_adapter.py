"""Gymnasium single-env views of :class:`~trainer.envs.stock_trading.StockTradingVecEnv` and
:class:`~trainer.envs.portfolio.PortfolioVecEnv`.

Each adapter wraps a one-env vectorized env, so both share the same dynamics code; it only
converts between NumPy and torch and turns the vector env's automatic reset into Gymnasium's
explicit one (the terminal observation is returned, the caller then calls ``reset``).
Registered as ``Paddock/StockTrading-v0`` and ``Paddock/Portfolio-v0`` by ``trainer.envs``; make
them with ``gymnasium.make("Paddock/StockTrading-v0", data=market_data, config=EnvConfig(...))``
(``PortfolioConfig`` for the portfolio env).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.envs.observations import FeatureStats
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv

__all__ = ["ENV_ID", "PORTFOLIO_ENV_ID", "PortfolioEnv", "StockTradingEnv"]

ENV_ID = "Paddock/StockTrading-v0"
PORTFOLIO_ENV_ID = "Paddock/Portfolio-v0"


class _VecEnvAdapter(gym.Env):
    """Shared reset/step of the adapters: one-env vector env <-> NumPy, explicit reset."""

    metadata = {"render_modes": []}
    vec_env: Any
    _info_floats: tuple[str, ...] = ()
    _info_arrays: tuple[str, ...] = ()

    def observation_layout(self) -> dict[str, Any]:
        """The observation layout of the wrapped env (see the vector env)."""
        return self.vec_env.observation_layout()

    def _info(self, info: dict[str, torch.Tensor]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in self._info_floats:
            if key in info:
                out[key] = float(info[key][0])
        for key in self._info_arrays:
            if key in info:
                out[key] = info[key][0].cpu().numpy().copy()
        out["day"] = int(info["day"][0])
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode; ``options={"start_day": d}`` fixes the first day.

        Returns:
            ``obs`` (obs_dim,) float32 and ``info`` (the vector env's info of env 0, as floats
            and NumPy arrays).
        """
        super().reset(seed=seed)
        obs, info = self.vec_env.reset(seed=seed, options=options)
        return obs[0].cpu().numpy().copy(), self._info(info)

    def step(self, action):
        """Advance one day.

        Args:
            action: (action_dim,) array-like in [-1, 1].

        Returns:
            ``(obs, reward, terminated, truncated, info)``; on the last day of the episode
            ``obs`` is the terminal observation and the caller must ``reset``.
        """
        act = torch.as_tensor(np.asarray(action, dtype=np.float32).reshape(1, -1))
        obs, reward, terminated, truncated, info = self.vec_env.step(act)
        if bool(terminated[0]) or bool(truncated[0]):
            obs = info["final_observation"]
        return (
            obs[0].cpu().numpy().copy(),
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            self._info(info),
        )


class PortfolioEnv(_VecEnvAdapter):
    """One portfolio-allocation env as a ``gymnasium.Env`` (NumPy in and out).

    Spaces: ``observation_space`` is a float32 ``Box`` of shape ``(obs_dim,)`` (layout in
    :meth:`PortfolioVecEnv.observation_layout`; weights in [0, 1]); ``action_space`` is a
    float32 ``Box(-1, 1, (N+1,))``, one value per ticker then cash (see the vector env).

    Args:
        data: market panel.
        config: rules and reward; a dict is read with :meth:`PortfolioConfig.from_dict`.
        feature_stats: train-split z-score statistics (object or dict); ``None`` fits them on
            ``data``.
        device, seed, render_mode: as :class:`StockTradingEnv`.

    Raises:
        ConfigError, DataError: as :class:`PortfolioVecEnv`.
    """

    _info_floats = ("portfolio_value", "cash", "costs", "turnover", "episode_return")
    _info_arrays = ("weights", "holdings")

    def __init__(
        self,
        data: MarketData,
        config: PortfolioConfig | dict | None = None,
        *,
        feature_stats: FeatureStats | dict | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        if isinstance(config, dict):
            config = PortfolioConfig.from_dict(config)
        if isinstance(feature_stats, dict):
            feature_stats = FeatureStats.from_dict(feature_stats)
        self.vec_env = PortfolioVecEnv(data, config, num_envs=1, device=device, seed=seed, feature_stats=feature_stats)
        self.render_mode = render_mode
        n = self.vec_env.num_stocks
        big = np.finfo(np.float32).max
        low = np.full(self.vec_env.obs_dim, -big, dtype=np.float32)
        high = np.full(self.vec_env.obs_dim, big, dtype=np.float32)
        low[-(n + 1) :], high[-(n + 1) :] = 0.0, 1.0
        self.observation_space = gym.spaces.Box(low, high, shape=(self.vec_env.obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(self.vec_env.action_dim,), dtype=np.float32)


class StockTradingEnv(_VecEnvAdapter):
    """One stock portfolio as a ``gymnasium.Env`` (NumPy in and out).

    Spaces: ``observation_space`` is a float32 ``Box`` of shape ``(obs_dim,)`` with the layout of
    :meth:`StockTradingVecEnv.observation_layout` (cash, price and holding entries >= 0); ``action_space`` is a float32
    ``Box(-1, 1, (N,))``, one value per ticker (see the vector env for the trade rule).

    Args:
        data: market panel to trade.
        config: trading rules; a dict is read with :meth:`EnvConfig.from_dict`.
        device: torch device of the wrapped env (``"cpu"`` is fastest for one env).
        seed: initial seed of the wrapped env's generator; ``reset(seed=...)`` reseeds.
        render_mode: only ``None`` is supported.

    Raises:
        ConfigError, DataError: as :class:`StockTradingVecEnv`.
    """

    _info_floats = ("portfolio_value", "cash", "costs", "episode_return")
    _info_arrays = ("holdings",)

    def __init__(
        self,
        data: MarketData,
        config: EnvConfig | dict | None = None,
        *,
        device: str | torch.device = "cpu",
        seed: int = 0,
        render_mode: str | None = None,
    ) -> None:
        if isinstance(config, dict):
            config = EnvConfig.from_dict(config)
        self.vec_env = StockTradingVecEnv(data, config, num_envs=1, device=device, seed=seed)
        self.render_mode = render_mode
        # Cash, prices and holdings are never negative; indicators (MACD, CCI) can be. The
        # largest float32 stands in for "unbounded" so that samplers and checkers get finite bounds.
        big = np.finfo(np.float32).max
        low = np.full(self.vec_env.obs_dim, -big, dtype=np.float32)
        # Scale-free: cash and holding fractions (>= 0) then z-scores; FinRL: cash, prices, holdings.
        nonneg = 1 + self.vec_env.num_stocks * (1 if self.vec_env.feature_stats is not None else 2)
        low[:nonneg] = 0.0
        self.observation_space = gym.spaces.Box(low, big, shape=(self.vec_env.obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(self.vec_env.action_dim,), dtype=np.float32)
