"""The trading rules and observation scales of the market envs: :class:`EnvConfig` (the stock
trading env's rules), the fixed observation scales of cash, prices, holdings and indicators,
and the check that a panel can be traded. Shared by :mod:`trainer.envs.stock_trading` and
:mod:`trainer.envs.portfolio`; re-exported by the former."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from trainer.data.market import MarketData
from trainer.errors import ConfigError, DataError

__all__ = [
    "CASH_SCALE",
    "HOLDINGS_SCALE",
    "MIN_EPISODE_STEPS",
    "PRICE_SCALE",
    "EnvConfig",
    "RulesConfig",
    "check_market",
    "feature_scale",
]

#: Observation scale of cash: 1,000,000 USD -> 15.3. (ElegantRL's vec env multiplies by 2**16.)
CASH_SCALE = 2.0**-16
#: Observation scale of close prices and price-like indicators: 128 USD -> 1.0.
PRICE_SCALE = 2.0**-7
#: Observation scale of holdings: 64 shares -> 1.0.
HOLDINGS_SCALE = 2.0**-6
#: With ``episode_length=None`` and a random start, an episode still has at least this many
#: steps (or the whole split when it is shorter): starts are drawn from the first
#: ``T - 1 - MIN_EPISODE_STEPS`` days. 63 trading days is one quarter.
MIN_EPISODE_STEPS = 63

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


class RulesConfig:
    """What the env configs (dataclasses) share: the dict round trip and the field checks, each
    error naming ``<prefix>.<field>`` (e.g. ``env.hmax``)."""

    def _bad(self, prefix: str, name: str, why: str) -> ConfigError:
        return ConfigError(f"{prefix}.{name}: {why} (got {getattr(self, name)!r})", field=f"{prefix}.{name}")

    def _real(self, prefix: str, name: str) -> float:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._bad(prefix, name, "must be a finite number")
        return float(value)

    def _integer(self, prefix: str, name: str) -> int:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self._bad(prefix, name, "must be a whole number")
        return int(value)

    def validate(self, *, prefix: str = "env") -> Any:  # pragma: no cover - every config overrides it
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, prefix: str = "env") -> Any:
        """Build and validate a config from a dict; missing keys keep their defaults.

        Args:
            data: e.g. ``{"hmax": 50, "turbulence_threshold": 120}``; ``None`` means defaults.
            prefix: dotted path used in error fields.

        Raises:
            ConfigError: ``data`` is not a dict, has an unknown key, or a value is invalid.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{prefix}: must be an object", field=prefix)
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{prefix}.{key}: unknown setting; expected one of {', '.join(sorted(known))}",
                    field=f"{prefix}.{key}",
                )
        return cls(**data).validate(prefix=prefix)


@dataclass
class EnvConfig(RulesConfig):
    """Trading rules and episode settings of :class:`StockTradingVecEnv`.

    Attributes:
        initial_cash: starting cash of every env, USD (> 0).
        hmax: shares traded per unit of action: action ``a`` in [-1, 1] becomes
            ``trunc(a * hmax)`` whole shares (an integer >= 1).
        buy_cost_pct: transaction cost of buys as a fraction of the traded value
            (``1e-3`` = 0.1 %), in [0, 1).
        sell_cost_pct: same for sells, in [0, 1).
        reward_scaling: multiplier of the daily change of portfolio value (USD) to get the
            reward; ``1e-4`` makes a 10,000 USD day a reward of 1. Must be > 0.
        turbulence_threshold: when set, on days whose ``MarketData.turbulence`` is >= this
            value the env sells all holdings and refuses buys (FinRL's risk control); ``None``
            disables it. Must be >= 0.
        episode_length: steps (trading days) per episode; ``None`` runs to the last day of the
            data. Must be >= 1 and less than the number of days.
        random_start: draw each episode's first day uniformly at random (per env) so that envs
            are decorrelated; ``False`` starts every episode on day 0.
        randomize_initial: training aid: start each episode with a random total wealth in
            ``[0.5, 1.5] * initial_cash``, a random part of it (up to half) already invested
            in random whole-share holdings.
    """

    initial_cash: float = 1e6
    hmax: int = 100
    buy_cost_pct: float = 1e-3
    sell_cost_pct: float = 1e-3
    reward_scaling: float = 1e-4
    turbulence_threshold: float | None = None
    episode_length: int | None = None
    random_start: bool = True
    randomize_initial: bool = False

    def validate(self, *, prefix: str = "env") -> EnvConfig:
        """Check every field and return ``self``.

        Args:
            prefix: dotted path of this config inside a larger spec, used in error fields.

        Raises:
            ConfigError: a field has an impossible value; ``details["field"]`` is e.g.
                ``"env.hmax"``.
        """

        bad, real, integer = (functools.partial(check, prefix) for check in (self._bad, self._real, self._integer))

        if real("initial_cash") <= 0:
            raise bad("initial_cash", "must be > 0")
        if integer("hmax") < 1:
            raise bad("hmax", "must be >= 1")
        for name in ("buy_cost_pct", "sell_cost_pct"):
            if not 0 <= real(name) < 1:
                raise bad(name, "must be a fraction in [0, 1), e.g. 0.001 for 0.1 %")
        if real("reward_scaling") <= 0:
            raise bad("reward_scaling", "must be > 0")
        if self.turbulence_threshold is not None and real("turbulence_threshold") < 0:
            raise bad("turbulence_threshold", "must be >= 0 or null")
        if self.episode_length is not None and integer("episode_length") < 1:
            raise bad("episode_length", "must be >= 1 or null")
        for name in ("random_start", "randomize_initial"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, "must be true or false")
        return self


def check_market(data: MarketData) -> None:
    """Raise DataError naming the ticker and date of the first unusable price or feature."""
    if data.num_days < 2:
        raise DataError(f"the trading env needs at least 2 days of data, got {data.num_days}", field="data")
    if data.num_stocks < 1:
        raise DataError("the trading env needs at least one ticker", field="data")
    bad = ~(np.isfinite(data.close) & (data.close > 0))
    if bad.any():
        t, n = np.argwhere(bad)[0]
        raise DataError(
            f"close price of {data.tickers[n]} on {data.dates[t]} is {data.close[t, n]!r}; prices must be positive",
            ticker=data.tickers[n],
            date=str(data.dates[t]),
        )
    bad = ~np.isfinite(data.features)
    if bad.any():
        t, n, f = np.argwhere(bad)[0]
        raise DataError(
            f"feature {data.feature_names[f]} of {data.tickers[n]} on {data.dates[t]} is not a finite number",
            ticker=data.tickers[n],
            date=str(data.dates[t]),
            field=data.feature_names[f],
        )
