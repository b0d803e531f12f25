"""The observation layout of the portfolio env (:class:`~trainer.envs.portfolio.PortfolioVecEnv`):
its size, the market block of each day (precomputed once per env) and the JSON description a
bundle carries so that a saved policy can rebuild its observation from raw values.

**Observation** (``observation``):

* ``"scale_free"`` (default, :mod:`trainer.envs.observations`): z-scored log returns over 1, 5,
  21 and 63 days, 21-day volatility and the indicators made scale-free, per ticker
  (feature-major), then the current weights (N stocks, cash). The z-score statistics are
  ``feature_stats`` (fit them on the train split and pass them unchanged to every later env);
  without them the env fits them on its own data (fine for experiments, a leak for evaluation).
* ``"finrl"``: the constant-scaled close prices and indicators of
  :class:`~trainer.envs.stock_trading.StockTradingVecEnv`, then the current weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainer.data.market import MarketData
from trainer.envs.observations import FeatureStats, fit_feature_stats, is_scale_free, scale_free_market
from trainer.envs.stock_layout import PRICE_SCALE, feature_scale
from trainer.errors import ConfigError

__all__ = [
    "market_table",
    "observation_setup",
    "portfolio_market_block",
    "portfolio_obs_dim",
    "portfolio_observation_layout",
]


def portfolio_obs_dim(num_stocks: int, num_features: int) -> int:
    """``N*K + N + 1``: ``K`` market features per ticker (feature-major), then the ``N + 1``
    current weights (stocks and cash)."""
    return num_stocks * num_features + num_stocks + 1


def observation_setup(
    data: MarketData, observation: str, feature_stats: FeatureStats | None
) -> tuple[MarketData, FeatureStats | None, dict[str, float] | None]:
    """What an env's observation reads: ``(panel, feature_stats, scales)``.

    ``"scale_free"``: the panel's scale-free features and ``feature_stats`` (fitted on ``data``
    when ``None``), no scales; ``"scale_free_risk"``: the same with the risk features of
    :func:`~trainer.envs.observations.scale_free_market` after them. ``"finrl"``: the panel as it is, no statistics, and the constant
    scales ``{"close": PRICE_SCALE, indicator: scale, ...}``.

    Raises:
        ConfigError: ``"finrl"`` over a panel that already holds scale-free features.
    """
    if observation != "finrl":  # scale_free, or scale_free_risk with the risk features after them
        data = scale_free_market(data, risk=observation == "scale_free_risk")
        return data, (feature_stats if feature_stats is not None else fit_feature_stats(data)), None
    if is_scale_free(data):
        raise ConfigError(
            "env.observation: 'finrl' needs raw indicators, the panel holds scale-free features",
            field="env.observation",
        )
    return data, None, {"close": PRICE_SCALE, **{f: float(feature_scale(f)) for f in data.feature_names}}


def market_table(
    data: MarketData, obs_dim: int, *, feature_stats: FeatureStats | None, scales: Mapping[str, float] | None
) -> np.ndarray:
    """(T, obs_dim) float32: each day's market block (:func:`portfolio_market_block`) in front,
    zeros where the step writes the current weights."""
    block = portfolio_market_block(
        data.close, data.features, data.feature_names, feature_stats=feature_stats, scales=scales
    )
    table = np.zeros((data.num_days, obs_dim), dtype=np.float32)
    table[:, : block.shape[1]] = block
    return table


def portfolio_market_block(
    close: np.ndarray,
    features: np.ndarray,
    feature_names: Sequence[str],
    *,
    feature_stats: FeatureStats | None = None,
    scales: Mapping[str, float] | None = None,
) -> np.ndarray:
    """The market part of portfolio observations, ``K`` features of each of ``N`` tickers,
    feature-major (all tickers of the first feature, then the second...).

    Args:
        close: (T, N) close prices, USD.
        features: (T, N, F) features of ``feature_names``: scale-free ones
            (:func:`~trainer.envs.observations.scale_free_market`) with ``feature_stats``, raw
            indicators with ``scales``.
        feature_stats: the train split's statistics: ``K = F`` z-scores (clipped).
        scales: without ``feature_stats``, the FinRL layout's constants ``{"close": s, name:
            s, ...}`` (an exported layout's ``scales``): ``K = 1 + F``, the close then each
            indicator, times its scale.

    Returns:
        (T, N * K) float64.
    """
    if feature_stats is not None:
        market = feature_stats.apply(features, feature_names).astype(np.float64)
    else:
        factors = np.array([scales[name] for name in feature_names], dtype=np.float64)
        market = np.concatenate([close[:, :, None] * scales["close"], features * factors], axis=2)
    return np.transpose(market, (0, 2, 1)).reshape(market.shape[0], -1)


def portfolio_observation_layout(env: Any, scales: Mapping[str, float] | None) -> dict[str, Any]:
    """JSON description of a portfolio env's observation vector, action and config.

    Args:
        env: the :class:`~trainer.envs.portfolio.PortfolioVecEnv`.
        scales: its FinRL layout's constant scales (``None`` for the scale-free observation).
    """
    n, k = env.num_stocks, env.num_features
    market_names = list(env.data.feature_names) if env.feature_stats is not None else ["close", *env.data.feature_names]
    market: dict[str, Any] = {
        "name": "market",
        "offset": 0,
        "size": n * k,
        "shape": [k, n],
        "feature_names": market_names,
        "order": "feature-major: all tickers of feature_names[0], then feature_names[1], ...",
    }
    if env.feature_stats is not None:
        market["unit"] = "z-scores with the train split's statistics (feature_stats), clipped to +-5"
        market["feature_stats"] = env.feature_stats.to_dict()
    else:
        market["unit"] = "close and indicators times constant scales"
        market["scales"] = scales
    return {
        "env": "portfolio",
        "obs_dim": env.obs_dim,
        "observation": env.config.observation,
        "blocks": [
            market,
            {
                "name": "weights",
                "offset": n * k,
                "size": n + 1,
                "shape": [n + 1],
                "unit": "fraction of portfolio value before trading (tickers, then cash)",
            },
        ],
        "tickers": list(env.tickers),
        "feature_names": list(env.data.feature_names),
        "action": {
            "dim": n + 1,
            "low": -1.0,
            "high": 1.0,
            "order": "tickers, then cash",
            "rule": "target weights = softmax(logit_scale * a), cash logit "
            "logit_scale * a_cash - cash_bias * (1 - a_cash); zero action = equal weight",
            "logit_scale": env.config.logit_scale,
            "cash_bias": env.config.cash_bias,
        },
        "config": env.config.to_dict(),
    }
