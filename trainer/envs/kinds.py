"""The task kinds of Paddock and the one place that builds an env for a kind.

A task's ``kind`` picks its env and config class:

* ``"stock_trading"``: :class:`~trainer.envs.stock_trading.StockTradingVecEnv` with
  :class:`~trainer.envs.stock_trading.EnvConfig` (whole-share trades, FinRL's MDP);
* ``"portfolio"``: :class:`~trainer.envs.portfolio.PortfolioVecEnv` with
  :class:`~trainer.envs.portfolio.PortfolioConfig` (target weights over stocks and cash).

Pods, evaluation, backtests and bundles call :func:`make_env` and :func:`prepare_market`, so a
policy always meets the observation it was trained with.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.data.market import MarketData
from trainer.envs.observations import (
    LOOKBACKS,
    RISK_FEATURE_NAMES,
    SCALE_FREE_OBSERVATIONS,
    FeatureStats,
    fit_feature_stats,
    scale_free_market,
)
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_layout import portfolio_obs_dim
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_layout import stock_obs_dim
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import ConfigError

__all__ = [
    "DEFAULT_KIND",
    "KINDS",
    "config_class",
    "env_config_from_dict",
    "fit_stats",
    "kind_of",
    "make_env",
    "observation_dim",
    "prepare_market",
]

STOCK_TRADING = "stock_trading"
PORTFOLIO = "portfolio"
KINDS = (STOCK_TRADING, PORTFOLIO)
DEFAULT_KIND = STOCK_TRADING
_CLASSES = {STOCK_TRADING: (StockTradingVecEnv, EnvConfig), PORTFOLIO: (PortfolioVecEnv, PortfolioConfig)}


def check_kind(kind: Any, *, field: str = "kind") -> str:
    """Return ``kind`` when it is one of :data:`KINDS`.

    Raises:
        ConfigError: naming ``field``.
    """
    if kind not in KINDS:
        raise ConfigError(f"{field}: {kind!r} is not one of {', '.join(KINDS)}", field=field)
    return kind


def config_class(kind: str) -> type:
    """``EnvConfig`` or ``PortfolioConfig``."""
    return _CLASSES[check_kind(kind)][1]


def env_config_from_dict(kind: str, data: dict[str, Any] | None, *, prefix: str = "env") -> Any:
    """Validate an env config dict for ``kind``.

    Raises:
        ConfigError: an unknown kind, key or bad value, with a dotted field.
    """
    return config_class(kind).from_dict(data, prefix=prefix)


def kind_of(config: Any) -> str:
    """The kind of an env config object."""
    return PORTFOLIO if isinstance(config, PortfolioConfig) else STOCK_TRADING


def uses_scale_free(config: Any) -> bool:
    """True when the config asks for a scale-free observation (with or without risk features)."""
    return getattr(config, "observation", "finrl") in SCALE_FREE_OBSERVATIONS


def uses_risk_features(config: Any) -> bool:
    """True when the config asks for the risk features too (``"scale_free_risk"``, portfolio tasks)."""
    return getattr(config, "observation", "finrl") == "scale_free_risk"


def prepare_market(market: MarketData, config: Any) -> MarketData:
    """The panel the env reads: scale-free features (and risk features when asked for) over the
    *whole* panel when the config asks for them (so each split's lookbacks reach into the days
    before it), else ``market``."""
    if not uses_scale_free(config):
        return market
    return scale_free_market(market, risk=uses_risk_features(config))


def fit_stats(train: MarketData, config: Any) -> FeatureStats | None:
    """Z-score statistics of the train split (``None`` for the FinRL layout)."""
    return fit_feature_stats(train) if uses_scale_free(config) else None


def make_env(
    data: MarketData,
    config: Any,
    *,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int = 0,
    feature_stats: FeatureStats | None = None,
    state_info: bool = True,
) -> Any:
    """Build the vector env of ``config``'s kind over ``data`` (already :func:`prepare_market`-ed).

    Args:
        feature_stats: the train split's statistics for scale-free observations.
        state_info: ``False`` for training: the step's ``info`` then holds only
            ``final_observation`` and ``episode_return`` (the portfolio env skips its state).

    Raises:
        ConfigError, DataError: as the env's constructor.
    """
    cls = PortfolioVecEnv if isinstance(config, PortfolioConfig) else StockTradingVecEnv
    return cls(
        data, config, num_envs=num_envs, device=device, seed=seed, feature_stats=feature_stats, state_info=state_info
    )


def observation_dim(config: Any, num_tickers: int, num_features: int) -> tuple[int, int]:
    """``(obs_dim, action_dim)`` of the env ``config`` builds over ``N`` tickers of a panel with
    ``F`` features per ticker, before any data is loaded (the env itself counts its arrays).

    Args:
        config: the kind's env config (its ``observation`` layout decides the count).
        num_tickers: ``N``.
        num_features: ``F = len(MarketData.feature_names)`` of the raw panel: the indicators,
            plus the 3 session features on intraday bars
            (:func:`trainer.data.sessions.panel_feature_names`).
    """
    n, f = num_tickers, num_features
    scale_free = uses_scale_free(config)
    # per ticker: the scale-free features (log returns, volatility, F indicators) or the F raw ones
    k = len(LOOKBACKS) + 1 + f if scale_free else f
    k += len(RISK_FEATURE_NAMES) if uses_risk_features(config) else 0
    if isinstance(config, PortfolioConfig):
        return portfolio_obs_dim(n, k if scale_free else 1 + f), n + 1  # FinRL layout: close and F
    return stock_obs_dim(n, k, scale_free=scale_free), n
