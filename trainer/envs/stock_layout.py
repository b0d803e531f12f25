"""The observation layout of the stock-trading env: the constant scales of FinRL's layout,
``obs_dim``, the exported layout dict and :func:`build_observation`, which rebuilds observations
from raw values outside the env (bundles, serving).

Two layouts (``EnvConfig.observation``): ``"scale_free"`` (default), cash and holdings as fractions
of the portfolio value and z-scored scale-free features; ``"finrl"``, FinRL's cash, prices,
holdings and indicators times the constant scales below. See
:class:`~trainer.envs.stock_trading.StockTradingVecEnv` for the vector itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.envs.observations import FeatureStats
from trainer.errors import DataError

__all__ = [
    "CASH_SCALE",
    "HOLDINGS_SCALE",
    "PRICE_SCALE",
    "build_observation",
    "feature_scale",
    "market_observation_table",
    "observation_layout",
    "stock_obs_dim",
]

#: Observation scale of cash: 1,000,000 USD -> 15.3. (ElegantRL's vec env multiplies by 2**16.)
CASH_SCALE = 2.0**-16
#: Observation scale of close prices and price-like indicators: 128 USD -> 1.0.
PRICE_SCALE = 2.0**-7
#: Observation scale of holdings: 64 shares -> 1.0.
HOLDINGS_SCALE = 2.0**-6

# Fixed (data-independent) scales, so a policy trained on one split sees identically scaled
# observations on any other split. Keys are matched against the feature name.
_EXACT_FEATURE_SCALES = {
    "macd": 2.0**-2,  # USD, typically within +-5
    "volume": 2.0**-24,  # shares per day, ~1e7
}
_PREFIX_FEATURE_SCALES = (
    ("rsi", 2.0**-6),  # 0..100
    ("dx", 2.0**-6),  # 0..100
    ("adx", 2.0**-6),  # 0..100
    ("cci", 2.0**-7),  # roughly -300..300
    ("boll", PRICE_SCALE),  # Bollinger bands are prices
    ("close", PRICE_SCALE),  # close_30_sma, close_60_sma, ...
    ("open", PRICE_SCALE),
    ("high", PRICE_SCALE),
    ("low", PRICE_SCALE),
    ("adj_", PRICE_SCALE),
)


def feature_scale(name: str) -> float:
    """Return the fixed observation scale of an indicator, chosen from its name.

    Price-like indicators (Bollinger bands, moving averages of close, OHLC) share
    :data:`PRICE_SCALE`; RSI/DX (0..100) use ``2**-6``; CCI ``2**-7``; MACD ``2**-2``.
    Unknown names keep their natural units (scale 1.0) and are listed as such in
    :meth:`StockTradingVecEnv.observation_layout`.

    Args:
        name: feature name as in ``MarketData.feature_names``, e.g. ``"rsi_30"``.

    Returns:
        The multiplier applied to the raw indicator value, a power of two.
    """
    key = name.lower()
    if key in _EXACT_FEATURE_SCALES:
        return _EXACT_FEATURE_SCALES[key]
    for prefix, scale in _PREFIX_FEATURE_SCALES:
        if key.startswith(prefix):
            return scale
    return 1.0


def stock_obs_dim(num_stocks: int, num_features: int, *, scale_free: bool) -> int:
    """Length of the stock-trading env's observation vector.

    ``1 + N + N*K`` for the scale-free layout (cash and holdings as value fractions, ``K``
    z-scored features per ticker), ``1 + 2N + N*F`` for FinRL's (cash, close prices, holdings,
    ``F`` indicators per ticker).

    Args:
        num_stocks: ``N``, the tickers traded.
        num_features: features per ticker in the observation (``K`` or ``F``).
        scale_free: which layout.
    """
    market_blocks = 1 if scale_free else 2  # holdings only, or close prices and holdings
    return 1 + market_blocks * num_stocks + num_stocks * num_features


def market_observation_table(
    data: Any, feature_stats: FeatureStats | None, *, scale_free: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The market part of every day's observation, computed once per env (a step gathers a row).

    Args:
        data: the env's ``MarketData`` (already scale-free for the ``"scale_free"`` layout).
        feature_stats: the z-score statistics of the ``"scale_free"`` layout (unused otherwise).
        scale_free: which layout (``EnvConfig.observation == "scale_free"``).

    Returns:
        ``(table, feature_scales)``: ``table`` (T, obs_dim) float32 with the cash and holdings
        blocks left 0 (the env writes them each step), the prices block (``"finrl"`` only) as
        ``close * PRICE_SCALE`` and the features block feature-major (``[f0 of all tickers, f1
        of all tickers, ...]``), z-scored or times :func:`feature_scale`; ``feature_scales``
        (F,) float64, ones for ``"scale_free"``.
    """
    n, num_days = data.num_stocks, data.num_days
    table = np.zeros((num_days, stock_obs_dim(n, len(data.feature_names), scale_free=scale_free)), dtype=np.float32)
    if scale_free:
        fscales = np.ones(len(data.feature_names))
        z = feature_stats.apply(data.features, data.feature_names)
        table[:, 1 + n :] = np.transpose(z, (0, 2, 1)).reshape(num_days, -1)
    else:
        table[:, 1 : 1 + n] = data.close * PRICE_SCALE
        fscales = np.array([feature_scale(f) for f in data.feature_names], dtype=np.float64)
        feats = np.transpose(data.features.astype(np.float64) * fscales, (0, 2, 1))  # (T, F, N)
        table[:, 1 + 2 * n :] = feats.reshape(num_days, -1)
    return table, fscales


def observation_layout(env: Any) -> dict[str, Any]:
    """Describe the observation vector so a saved policy can rebuild it from raw values.

    Args:
        env: a :class:`~trainer.envs.stock_trading.StockTradingVecEnv` (its
            ``observation_layout`` method calls this).

    Returns:
        A JSON-able dict: ``version``, ``obs_dim``, ``blocks`` (in vector order, each with
        ``name``, ``offset``, ``size``, ``shape``, ``scale`` or ``scales``, ``unit`` and
        ``order``), ``tickers``, ``feature_names``, ``action`` (dimension, range and share
        rule) and the trading ``config``. ``obs[offset:offset+size] = raw * scale``.
    """
    n, f = env.num_stocks, env.num_features
    if env._scale_free:
        return _scale_free_layout(env)
    return {
        "version": 1,
        "obs_dim": env.obs_dim,
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
                "scales": {name: float(s) for name, s in zip(env.data.feature_names, env._feature_scales)},
                "unit": "indicator units",
                "order": "feature-major: all tickers of feature_names[0], then feature_names[1], ...",
            },
        ],
        "tickers": list(env.tickers),
        "feature_names": list(env.data.feature_names),
        "action": _action_layout(env),
        "config": env.config.to_dict(),
    }


def _action_layout(env: Any) -> dict[str, Any]:
    return {
        "dim": env.num_stocks,
        "low": -1.0,
        "high": 1.0,
        "order": "tickers",
        "rule": "shares = trunc(clip(a, -1, 1) * hmax); negative sells, positive buys",
        "hmax": env.config.hmax,
    }


def _scale_free_layout(env: Any) -> dict[str, Any]:
    n, k = env.num_stocks, env.num_features
    return {
        "version": 1,
        "observation": "scale_free",
        "obs_dim": env.obs_dim,
        "blocks": [
            {"name": "cash", "offset": 0, "size": 1, "shape": [1], "unit": "fraction of portfolio value"},
            {
                "name": "holdings",
                "offset": 1,
                "size": n,
                "shape": [n],
                "unit": "value held as a fraction of portfolio value",
                "order": "tickers",
            },
            {
                "name": "features",
                "offset": 1 + n,
                "size": n * k,
                "shape": [k, n],
                "unit": "z-scores with the train split's statistics (feature_stats), clipped to +-5",
                "feature_stats": env.feature_stats.to_dict(),
                "order": "feature-major: all tickers of feature_names[0], then feature_names[1], ...",
            },
        ],
        "tickers": list(env.tickers),
        "feature_names": list(env.data.feature_names),
        "action": _action_layout(env),
        "config": env.config.to_dict(),
    }


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
        features: (B, N, F) or (N, F) raw indicators in ``layout["feature_names"]`` order; for a
            scale-free layout the raw scale-free features of that day
            (:func:`~trainer.envs.observations.scale_free_features` over the price history),
            z-scored here with the layout's train statistics.

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
    if layout.get("observation") == "scale_free":
        stats = FeatureStats.from_dict(blocks["features"]["feature_stats"])
        held = holdings * close
        value = cash + held.sum(1)
        obs[:, 0] = cash / value
        obs[:, 1 : 1 + n] = held / value[:, None]
        z = stats.apply(features, layout["feature_names"])
        obs[:, 1 + n :] = np.transpose(z, (0, 2, 1)).reshape(batch, -1)
        return obs[0] if single else obs
    for name, raw in (("cash", cash[:, None]), ("close", close), ("holdings", holdings)):
        b = blocks[name]
        obs[:, b["offset"] : b["offset"] + b["size"]] = raw * b["scale"]
    b = blocks["features"]
    scales = np.array([b["scales"][name] for name in layout["feature_names"]], dtype=np.float64)
    scaled = np.transpose(features * scales, (0, 2, 1)).reshape(batch, -1)
    obs[:, b["offset"] : b["offset"] + b["size"]] = scaled
    return obs[0] if single else obs
