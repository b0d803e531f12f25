"""Vectorized torch envs (one file per env) and their Gymnasium adapters.

Importing this package registers ``Paddock/StockTrading-v0`` and ``Paddock/Portfolio-v0`` with
Gymnasium; registration needs no data (the env takes a ``MarketData`` argument in
``gymnasium.make``).
"""

import gymnasium as _gym

from trainer.envs.pendulum import PendulumVecEnv
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_layout import build_observation
from trainer.envs.stock_trading import StockTradingVecEnv

STOCK_TRADING_ENV_ID = "Paddock/StockTrading-v0"
PORTFOLIO_ENV_ID = "Paddock/Portfolio-v0"

if STOCK_TRADING_ENV_ID not in _gym.registry:
    _gym.register(id=STOCK_TRADING_ENV_ID, entry_point="trainer.envs.gym_adapter:StockTradingEnv")
if PORTFOLIO_ENV_ID not in _gym.registry:
    _gym.register(id=PORTFOLIO_ENV_ID, entry_point="trainer.envs.gym_adapter:PortfolioEnv")

__all__ = [
    "PORTFOLIO_ENV_ID",
    "STOCK_TRADING_ENV_ID",
    "EnvConfig",
    "PendulumVecEnv",
    "PortfolioConfig",
    "PortfolioVecEnv",
    "StockTradingVecEnv",
    "build_observation",
]
