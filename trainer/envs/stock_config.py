"""Trading rules and episode settings of the stock-trading env (:class:`EnvConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trainer.envs.config_base import EnvConfigBase
from trainer.envs.observations import check_observation
from trainer.errors import ConfigError
from trainer.util.bounds import Bound

__all__ = ["EnvConfig"]


@dataclass
class EnvConfig(EnvConfigBase):
    """Trading rules and episode settings of :class:`StockTradingVecEnv`.

    Attributes:
        initial_cash: starting cash of every env, USD (100 to 1e10).
        hmax: shares traded per unit of action: action ``a`` in [-1, 1] becomes
            ``trunc(a * hmax)`` whole shares (an integer, 1 to 1,000,000).
        buy_cost_pct: transaction cost of buys as a fraction of the traded value
            (``1e-3`` = 0.1 %), in [0, 0.1].
        sell_cost_pct: same for sells, in [0, 0.1].
        reward_scaling: multiplier of the daily change of portfolio value (USD) to get the
            reward; ``1e-4`` makes a 10,000 USD day a reward of 1. In (0, 1].
        turbulence_threshold: when set, on days whose ``MarketData.turbulence`` is >= this
            value the env sells all holdings and refuses buys (FinRL's risk control); ``None``
            disables it. In (0, 1e6].
        episode_length: steps (trading days, or bars of an intraday panel) per episode; ``None``
            runs to the last row of the data. Must be >= 1 and less than the number of rows.
        random_start: draw each episode's first day uniformly at random (per env) so that envs
            are decorrelated; ``False`` starts every episode on day 0.
        randomize_initial: training aid: start each episode with a random total wealth in
            ``[0.5, 1.5] * initial_cash``, a random part of it (up to half) already invested
            in random whole-share holdings.
        observation: ``"scale_free"`` (default): cash and holdings as fractions of the
            portfolio value and the z-scored scale-free features of
            :mod:`trainer.envs.observations`; ``"finrl"``: FinRL's layout of cash, prices,
            holdings and indicators times constant scales (to compare with FinRL).
        flatten_at_close: intraday panels only: on the last bar of every session the env sells
            all holdings at that bar's close (sell costs paid) and buys nothing, whatever the
            action, so no position is held overnight. An error on daily data.
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
    observation: str = "scale_free"
    flatten_at_close: bool = False

    #: The limits of every numeric setting (see :mod:`trainer.util.bounds`): far outside
    #: anything that trains well, so that a typo is an error naming the field.
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "initial_cash": Bound(100, 1e10, unit=" USD"),
        "hmax": Bound(1, 1_000_000, integer=True),
        "buy_cost_pct": Bound(0, 0.1),
        "sell_cost_pct": Bound(0, 0.1),
        "reward_scaling": Bound(0, 1, low_open=True),
        "turbulence_threshold": Bound(0, 1e6, low_open=True, nullable=True),
        "episode_length": Bound(1, integer=True, nullable=True),
    }

    def validate(self, *, prefix: str = "env") -> EnvConfig:
        """Check every field and return ``self``.

        Args:
            prefix: dotted path of this config inside a larger spec, used in error fields.

        Raises:
            ConfigError: a field has an impossible value; ``details["field"]`` is e.g.
                ``"env.hmax"``.
        """

        def bad(name: str, why: str) -> ConfigError:
            return self._bad(prefix, name, why)

        self.check_bounds(prefix)
        for name in ("random_start", "randomize_initial", "flatten_at_close"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, "must be true or false")
        check_observation(self.observation, field=f"{prefix}.observation")
        return self
