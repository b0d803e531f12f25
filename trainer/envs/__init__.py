"""Vectorized torch envs (one file per env) and their Gymnasium adapters.

Importing this package registers ``Paddock/StockTrading-v0`` and ``Paddock/Portfolio-v0`` with
Gymnasium; registration needs no data (the env takes a ``MarketData`` argument in
``gymnasium.make``) and imports no torch, so the config classes (``stock_config``,
``portfolio_config``) and their bounds load without it (the web side reads them at start-up).
Import each env and config from its own module.
"""

import gymnasium as _gym

STOCK_TRADING_ENV_ID = "Paddock/StockTrading-v0"
PORTFOLIO_ENV_ID = "Paddock/Portfolio-v0"

if STOCK_TRADING_ENV_ID not in _gym.registry:
    _gym.register(id=STOCK_TRADING_ENV_ID, entry_point="trainer.envs.gym_adapter:StockTradingEnv")
if PORTFOLIO_ENV_ID not in _gym.registry:
    _gym.register(id=PORTFOLIO_ENV_ID, entry_point="trainer.envs.gym_adapter:PortfolioEnv")

__all__ = ["PORTFOLIO_ENV_ID", "STOCK_TRADING_ENV_ID"]
