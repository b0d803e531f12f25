"""Vectorized torch envs (one file per env) and their Gymnasium adapters.

Importing this package registers ``Paddock/StockTrading-v0`` with Gymnasium; registration
needs no data (the env takes a ``MarketData`` argument in ``gymnasium.make``).
"""

import gymnasium as _gym

from trainer.envs.pendulum import PendulumVecEnv
from trainer.envs.stock_trading import EnvConfig, StockTradingVecEnv, build_observation

STOCK_TRADING_ENV_ID = "Paddock/StockTrading-v0"

if STOCK_TRADING_ENV_ID not in _gym.registry:
    _gym.register(id=STOCK_TRADING_ENV_ID, entry_point="trainer.envs.gym_adapter:StockTradingEnv")

__all__ = ["STOCK_TRADING_ENV_ID", "EnvConfig", "PendulumVecEnv", "StockTradingVecEnv", "build_observation"]
