"""Scale-free market observations and their train-split normalisation statistics.

A policy trained on 2010-2019 prices that sees raw prices (even scaled by a constant) meets
values it never saw in later years: a stock at five times its old price. The scale-free layout
replaces every price-denominated input by a ratio, so the same market situation looks the same
in any year:

* ``logret_L`` for ``L`` in :data:`LOOKBACKS` (1, 5, 21, 63 rows: trading days, or bars of an
  intraday panel, where the panel's session features pass through as "raw"): ``log(c[t] / c[t-L])``;
  for the first ``L`` days of the panel the window is shortened to the rows available
  (``log(c[t] / c[0])``);
* ``vol_21``: standard deviation of the last 21 daily log returns (not annualised; fewer rows at
  the start of the panel, 0 on the first day);
* every indicator of the panel, made scale-free by its kind: price-like ones (Bollinger bands,
  moving averages of close, OHLC) as ``indicator / close - 1``; MACD (a difference of prices)
  as ``macd / close``; bounded oscillators (RSI, CCI, DX, ADX) and others as they are.

Every feature is computed from prices up to its own day only (no look-ahead), so it can be
computed once over the whole panel and sliced afterwards: the validation split's first
``logret_63`` uses the last 63 train days, exactly what a trader would have known then.

**Risk features** (opt-in, portfolio tasks: observation ``"scale_free_risk"``), appended after
the others, from prices up to each day only: ``vol_63``, the standard deviation of the last
:data:`RISK_WINDOW` daily log returns; ``beta_63`` and ``corr_63``, the beta and correlation of
those returns with the equal-weight market's (``m_t = log(mean_i c_i[t] / c_i[t-1])``, the
panel's own tickers) over the same window; ``mom_12_1``, the 12-1 month momentum
``log(c[t-21] / c[t-252])`` (Jegadeesh & Titman 1993; the last month is skipped for its
short-term reversal). Windows are shortened at the start of the panel as above; a window with
no market variance gives beta and correlation 0. Risk is the predictable part of returns
(issue 25: the rank IC of 63-day volatility with next month's is about 0.6).

The features are then z-scored with :class:`FeatureStats` fitted on the **train split only**
(:func:`fit_feature_stats`); the statistics are saved in the checkpoint and the bundle and
applied unchanged to validation, test and live data, so nothing of those periods leaks into the
observation. Z-scores are clipped to +-:data:`Z_CLIP`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.data.market import MarketData
from trainer.errors import ConfigError, DataError

__all__ = [
    "LOOKBACKS",
    "OBSERVATIONS",
    "PORTFOLIO_OBSERVATIONS",
    "RISK_FEATURE_NAMES",
    "RISK_WINDOW",
    "SCALE_FREE_OBSERVATIONS",
    "VOL_WINDOW",
    "Z_CLIP",
    "FeatureStats",
    "fit_feature_stats",
    "has_risk_features",
    "is_scale_free",
    "risk_features",
    "scale_free_features",
    "scale_free_market",
]

#: Lookbacks of the log-return features, in rows: trading days (a day, a week, a month, a
#: quarter) on daily data, bars on intraday data (5 minutes to about 5 hours of 5-minute bars).
LOOKBACKS = (1, 5, 21, 63)
#: Window of the rolling volatility, rows (trading days, or bars of an intraday panel).
VOL_WINDOW = 21
#: Z-scores are clipped to this many train standard deviations.
Z_CLIP = 5.0
#: Observation layouts of the envs: ``"scale_free"`` (default) or ``"finrl"`` (raw prices and
#: indicators scaled by constants, as FinRL and ElegantRL do).
OBSERVATIONS = ("scale_free", "finrl")
#: The portfolio env's layouts: also ``"scale_free_risk"``, the scale-free one plus the risk features.
PORTFOLIO_OBSERVATIONS = ("scale_free", "scale_free_risk", "finrl")
#: The layouts whose features are scale-free and z-scored with train-split statistics.
SCALE_FREE_OBSERVATIONS = ("scale_free", "scale_free_risk")
#: Window of the risk features' volatility, beta and correlation, rows (a quarter of trading days).
RISK_WINDOW = 63
#: The 12-1 momentum: log return from ``MOMENTUM_LOOKBACK`` to ``MOMENTUM_SKIP`` rows ago.
MOMENTUM_LOOKBACK, MOMENTUM_SKIP = 252, 21
#: Names of the risk features, in the order they are appended.
RISK_FEATURE_NAMES = (f"vol_{RISK_WINDOW}", f"beta_{RISK_WINDOW}", f"corr_{RISK_WINDOW}", "mom_12_1")

_PRICE_LIKE = ("boll", "close", "open", "high", "low", "adj_", "sma", "ema")
_RELATIVE_TO_CLOSE = ("macd",)


def _kind(name: str) -> str:
    key = name.lower()
    if key.startswith(_RELATIVE_TO_CLOSE):
        return "ratio"  # x / close
    if key.startswith(_PRICE_LIKE):
        return "relative"  # x / close - 1
    return "raw"


def _market_feature_names(indicators: Sequence[str]) -> tuple[str, ...]:
    names = [f"logret_{lb}" for lb in LOOKBACKS] + [f"vol_{VOL_WINDOW}"]
    for name in indicators:
        kind = _kind(name)
        names.append(f"{name}_rel" if kind == "relative" else f"{name}_ratio" if kind == "ratio" else name)
    return tuple(names)


def is_scale_free(data: MarketData) -> bool:
    """True when ``data.features`` already hold :func:`scale_free_features` (by their names)."""
    return tuple(data.feature_names[: len(LOOKBACKS) + 1]) == _market_feature_names(())


def scale_free_features(
    close: np.ndarray, features: np.ndarray, feature_names: Sequence[str]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Compute the scale-free features of a price panel (see the module docstring).

    Args:
        close: (T, N) float64 adjusted close prices in USD, > 0.
        features: (T, N, F) indicators in their natural units.
        feature_names: (F,) names of the indicators (decide how each is made scale-free).

    Returns:
        ``(values, names)``: values (T, N, K) float32 with ``K = len(LOOKBACKS) + 1 + F``, in
        the order ``logret_1, logret_5, logret_21, logret_63, vol_21, <indicators>``.

    Raises:
        DataError: non-positive prices or mismatched shapes.
    """
    close = np.asarray(close, dtype=np.float64)
    features = np.asarray(features, dtype=np.float64)
    if close.ndim != 2 or features.shape[:2] != close.shape or features.shape[2] != len(feature_names):
        raise DataError(
            f"close {close.shape} and features {features.shape} do not match {len(feature_names)} feature names",
            field="features",
        )
    if not (np.isfinite(close).all() and (close > 0).all()):
        raise DataError("close prices must be positive and finite", field="close")
    t, n = close.shape
    log_close = np.log(close)
    out = np.empty((t, n, len(LOOKBACKS) + 1 + len(feature_names)), dtype=np.float64)
    for k, lb in enumerate(LOOKBACKS):
        past = np.concatenate([np.repeat(log_close[:1], min(lb, t), axis=0), log_close[: max(t - lb, 0)]])
        out[:, :, k] = log_close - past
    daily = np.zeros_like(log_close)
    daily[1:] = log_close[1:] - log_close[:-1]
    # Rolling std over the last VOL_WINDOW daily returns (ddof=0), from cumulative sums;
    # day 0 has no return and gets 0.
    c1 = np.cumsum(np.concatenate([np.zeros((1, n)), daily[1:]]), axis=0)
    c2 = np.cumsum(np.concatenate([np.zeros((1, n)), daily[1:] ** 2]), axis=0)
    idx = np.arange(t)
    lo = np.maximum(idx - VOL_WINDOW, 0)
    count = np.maximum(idx - lo, 1)[:, None]
    mean = (c1[idx] - c1[lo]) / count
    var = np.maximum((c2[idx] - c2[lo]) / count - mean**2, 0.0)
    out[:, :, len(LOOKBACKS)] = np.sqrt(var)
    base = len(LOOKBACKS) + 1
    for f, name in enumerate(feature_names):
        kind = _kind(name)
        if kind == "relative":
            out[:, :, base + f] = features[:, :, f] / close - 1.0
        elif kind == "ratio":
            out[:, :, base + f] = features[:, :, f] / close
        else:
            out[:, :, base + f] = features[:, :, f]
    return out.astype(np.float32), _market_feature_names(feature_names)


def _rolling_means(x: np.ndarray, window: int) -> np.ndarray:
    """Mean of rows ``max(t - window, 0) + 1 .. t`` of ``x`` (T, ...) for every ``t`` (row 0: 0),
    from cumulative sums: the last ``window`` daily returns, fewer at the panel's start."""
    c = np.cumsum(np.concatenate([np.zeros_like(x[:1]), x[1:]]), axis=0)
    idx = np.arange(x.shape[0])
    lo = np.maximum(idx - window, 0)
    count = np.maximum(idx - lo, 1).reshape((-1,) + (1,) * (x.ndim - 1))
    return (c[idx] - c[lo]) / count


def risk_features(close: np.ndarray) -> np.ndarray:
    """The risk features of the module docstring.

    Args:
        close: (T, N) float64 adjusted close prices in USD, > 0.

    Returns:
        (T, N, 4) float32: ``vol_63``, ``beta_63``, ``corr_63``, ``mom_12_1`` (:data:`RISK_FEATURE_NAMES`).
    """
    log_close = np.log(np.asarray(close, dtype=np.float64))
    t = log_close.shape[0]
    d = np.zeros_like(log_close)
    d[1:] = log_close[1:] - log_close[:-1]
    m = np.zeros(t)
    m[1:] = np.log(np.exp(d[1:]).mean(axis=1))  # the equal-weight market's daily log return
    mean_d, mean_m = _rolling_means(d, RISK_WINDOW), _rolling_means(m, RISK_WINDOW)[:, None]
    var_d = np.maximum(_rolling_means(d * d, RISK_WINDOW) - mean_d**2, 0.0)
    var_m = np.maximum(_rolling_means(m * m, RISK_WINDOW)[:, None] - mean_m**2, 0.0)
    cov = _rolling_means(d * m[:, None], RISK_WINDOW) - mean_d * mean_m
    tiny = 1e-18
    beta = np.where(var_m > tiny, cov / np.maximum(var_m, tiny), 0.0)
    denom = np.sqrt(var_d * var_m)
    corr = np.where(denom > tiny, np.clip(cov / np.maximum(denom, tiny), -1.0, 1.0), 0.0)
    idx = np.arange(t)
    mom = log_close[np.maximum(idx - MOMENTUM_SKIP, 0)] - log_close[np.maximum(idx - MOMENTUM_LOOKBACK, 0)]
    return np.stack([np.sqrt(var_d), beta, corr, mom], axis=2).astype(np.float32)


def has_risk_features(data: MarketData) -> bool:
    """True when ``data.features`` end with the :func:`risk_features` (by their names)."""
    return tuple(data.feature_names[-len(RISK_FEATURE_NAMES) :]) == RISK_FEATURE_NAMES


def scale_free_market(data: MarketData, *, risk: bool = False) -> MarketData:
    """Return ``data`` with its indicators replaced by :func:`scale_free_features` (unchanged when
    they already are), and with ``risk`` the :func:`risk_features` appended (unless there).
    Compute this on the whole panel, then slice it into splits."""
    if not is_scale_free(data):
        values, names = scale_free_features(data.close, data.features, data.feature_names)
        data = dataclasses.replace(data, features=values, feature_names=names)
    if risk and not has_risk_features(data):
        values = np.concatenate([data.features, risk_features(data.close)], axis=2)
        data = dataclasses.replace(data, features=values, feature_names=(*data.feature_names, *RISK_FEATURE_NAMES))
    return data


@dataclass(frozen=True)
class FeatureStats:
    """Per-feature mean and standard deviation used to z-score observations.

    Attributes:
        names: (K,) feature names, in the order of ``MarketData.feature_names``.
        mean: (K,) float64 mean over every (day, ticker) of the fitting range.
        std: (K,) float64 standard deviation over the same values (1.0 where it is 0).
        fitted_on: ``[first, last]`` ISO dates of the range the statistics come from (the
            train split), kept so a reader can check no later day went in.
    """

    names: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    fitted_on: tuple[str, str]

    def apply(self, features: np.ndarray, feature_names: Sequence[str]) -> np.ndarray:
        """Z-score ``features`` (..., K) with these statistics, clipped to +-:data:`Z_CLIP`.

        Raises:
            DataError: ``feature_names`` differ from the names the statistics were fitted on.
        """
        if tuple(feature_names) != self.names:
            raise DataError(
                f"features {list(feature_names)} do not match the normalisation statistics' {list(self.names)}",
                field="feature_names",
            )
        z = (np.asarray(features, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.std)
        return np.clip(z, -Z_CLIP, Z_CLIP).astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (lists of floats)."""
        return {
            "names": list(self.names),
            "mean": list(self.mean),
            "std": list(self.std),
            "fitted_on": list(self.fitted_on),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureStats:
        """Inverse of :meth:`to_dict`.

        Raises:
            ConfigError: missing keys or lengths that differ (field ``feature_stats``).
        """
        try:
            names, mean, std = tuple(data["names"]), tuple(map(float, data["mean"])), tuple(map(float, data["std"]))
            fitted_on = tuple(data.get("fitted_on") or ("", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"feature_stats: unreadable ({exc})", field="feature_stats") from None
        if not (len(names) == len(mean) == len(std)) or any(s <= 0 for s in std):
            raise ConfigError(
                "feature_stats: names, mean and std must have one positive std per name", field="feature_stats"
            )
        return cls(names=names, mean=mean, std=std, fitted_on=(str(fitted_on[0]), str(fitted_on[-1])))


def fit_feature_stats(train: MarketData) -> FeatureStats:
    """Fit :class:`FeatureStats` on the features of the train split (every day and ticker).

    Args:
        train: the train split only; its features are used as they are (call
            :func:`scale_free_market` on the whole panel first, then slice).

    Returns:
        The statistics; a constant feature gets std 1.0 so it maps to 0.
    """
    flat = train.features.reshape(-1, train.features.shape[2]).astype(np.float64)
    mean = flat.mean(axis=0)
    std = flat.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return FeatureStats(
        names=tuple(train.feature_names),
        mean=tuple(float(x) for x in mean),
        std=tuple(float(x) for x in std),
        fitted_on=(str(train.dates[0]), str(train.dates[-1])),
    )


def check_observation(name: Any, *, field: str = "env.observation", allowed: Sequence[str] = OBSERVATIONS) -> str:
    """Validate an observation layout name.

    Args:
        allowed: the env's layouts (:data:`OBSERVATIONS`, or :data:`PORTFOLIO_OBSERVATIONS`).

    Raises:
        ConfigError: not one of ``allowed``, naming ``field``.
    """
    if name not in allowed:
        raise ConfigError(f"{field}: {name!r} is not one of {', '.join(allowed)}", field=field)
    return str(name)
