"""Gymnasium single-env view of :class:`~trainer.envs.stock_trading.StockTradingVecEnv`.

The adapter wraps a one-env vectorized env, so both share the same dynamics code; it only
converts between NumPy and torch and turns the vector env's automatic reset into Gymnasium's
explicit one (the terminal observation is returned, the caller then calls ``reset``).
Registered as ``Paddock/StockTrading-v0`` by ``trainer.envs``; make it with
``gymnasium.make("Paddock/StockTrading-v0", data=market_data, config=EnvConfig(...))``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.envs.stock_trading import EnvConfig, StockTradingVecEnv

__all__ = ["ENV_ID", "StockTradingEnv"]

ENV_ID = "Paddock/StockTrading-v0"


class StockTradingEnv(gym.Env):
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

    metadata = {"render_modes": []}

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
        low[: 1 + 2 * self.vec_env.num_stocks] = 0.0
        self.observation_space = gym.spaces.Box(low, big, shape=(self.vec_env.obs_dim,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(self.vec_env.action_dim,), dtype=np.float32)

    def observation_layout(self) -> dict[str, Any]:
        """The observation layout of the wrapped env (see the vector env)."""
        return self.vec_env.observation_layout()

    @staticmethod
    def _info(info: dict[str, torch.Tensor]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("portfolio_value", "cash", "costs", "episode_return"):
            if key in info:
                out[key] = float(info[key][0])
        out["holdings"] = info["holdings"][0].cpu().numpy().copy()
        out["day"] = int(info["day"][0])
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode; ``options={"start_day": d}`` fixes the first day.

        Returns:
            ``obs`` (obs_dim,) float32 and ``info`` (portfolio_value, cash, costs in USD,
            holdings (N,) shares, day index).
        """
        super().reset(seed=seed)
        obs, info = self.vec_env.reset(seed=seed, options=options)
        return obs[0].cpu().numpy().copy(), self._info(info)

    def step(self, action):
        """Trade one day.

        Args:
            action: (N,) array-like in [-1, 1].

        Returns:
            ``(obs, reward, terminated, truncated, info)``; on the last day of the episode
            ``obs`` is the terminal observation and the caller must ``reset``.
        """
        act = torch.as_tensor(np.asarray(action, dtype=np.float32).reshape(1, -1))
        obs, reward, terminated, truncated, info = self.vec_env.step(act)
        done = bool(terminated[0]) or bool(truncated[0])
        if done:
            obs = info["final_observation"]
        return (
            obs[0].cpu().numpy().copy(),
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            self._info(info),
        )
