"""Episode starts and ends, and the checks of the market panel, shared by the market envs (stock trading, portfolio).

Both envs keep a per-env day index (a row of the panel: a trading day, or a bar of an intraday
panel, so one step is one bar there); an episode starts on a day drawn by :meth:`EpisodeStarts._draw_starts`
and is truncated on :meth:`EpisodeStarts._end_days`. The mixin expects the env to set
``config.episode_length``, ``config.random_start``, ``num_days``, ``device``, ``_generator``,
``_latest_start`` (last allowed random start) and ``_fixed_start`` (``None`` or a day index).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trainer.data.market import MarketData
from trainer.data.sessions import is_intraday
from trainer.envs.counter_random import MASK31, counter_randint
from trainer.errors import ConfigError, DataError

#: With ``episode_length=None`` and a random start, an episode still has at least this many
#: steps (or the whole split when it is shorter): starts are drawn from the first
#: ``T - 1 - MIN_EPISODE_STEPS`` days. 63 trading days is one quarter.
MIN_EPISODE_STEPS = 63


class EpisodeStarts:
    """Start-day and end-day rules of the vectorized market envs (a mixin)."""

    config: Any
    num_days: int
    device: torch.device
    _generator: torch.Generator
    _latest_start: int
    _fixed_start: int | None
    #: sync-free draws (:mod:`trainer.envs.counter_random`): 0-dim int64 key and step counter
    _draw_key: torch.Tensor
    _draw_count: torch.Tensor

    def _new_draw_key(self) -> None:
        """Draw the counter-based stream's key from the env's generator and restart its counter
        (at ``reset``, outside the step: a seed fixes the sync-free draws too)."""
        self._draw_key = torch.randint(0, MASK31, (), generator=self._generator, device=self.device)
        self._draw_count = torch.zeros((), dtype=torch.long, device=self.device)

    def _draw_starts_counter(self, count: int, stream: int = 0) -> torch.Tensor:
        """As :meth:`_draw_starts`, from the counter-based stream (no generator, no host sync),
        for the sync-free steps: ``torch.compile(fullgraph=True)`` and CUDA graphs can hold it."""
        if self._fixed_start is not None or not self.config.random_start or self._latest_start <= 0:
            return self._draw_starts(count)
        return counter_randint(self._latest_start + 1, self._draw_key, self._draw_count, stream, (count,))

    def _draw_starts(self, count: int) -> torch.Tensor:
        """(count,) int64 first days: the fixed start, day 0, or uniform over ``[0, _latest_start]``."""
        if self._fixed_start is not None:
            return torch.full((count,), self._fixed_start, dtype=torch.long, device=self.device)
        if not self.config.random_start or self._latest_start <= 0:
            return torch.zeros(count, dtype=torch.long, device=self.device)
        return torch.randint(
            0, self._latest_start + 1, (count,), generator=self._generator, device=self.device, dtype=torch.long
        )

    def _end_days(self, starts: torch.Tensor) -> torch.Tensor:
        """(count,) int64 last days: ``start + episode_length`` or the last day of the data."""
        if self.config.episode_length is None:
            return torch.full_like(starts, self.num_days - 1)
        return torch.clamp(starts + self.config.episode_length, max=self.num_days - 1)

    def _read_reset_options(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Apply ``reset``'s ``seed`` and ``options`` (only ``start_day``) to the generator and start rule.

        Raises:
            ConfigError: an unknown option, or ``start_day`` outside ``[0, num_days - 2]``.
        """
        if seed is not None:
            self._generator.manual_seed(int(seed))
        options = options or {}
        unknown = set(options) - {"start_day"}
        if unknown:
            raise ConfigError(f"reset options: unknown key(s) {sorted(unknown)}; only start_day", field="options")
        self._fixed_start = None
        if options.get("start_day") is not None:
            start = options["start_day"]
            if isinstance(start, bool) or not isinstance(start, int | np.integer) or not 0 <= start < self.num_days - 1:
                raise ConfigError(
                    f"start_day: must be a day index in [0, {self.num_days - 2}] (got {start!r})", field="start_day"
                )
            self._fixed_start = int(start)


def check_episode_setup(num_days: int, first: Any, last: Any, episode_length: int | None, num_envs: Any) -> None:
    """Refuse a ``num_envs`` below 1 or an ``episode_length`` that does not fit the data.

    Args:
        num_days: days of the env's data; ``first``/``last``: its first and last date (for the message).

    Raises:
        ConfigError: naming ``num_envs`` or ``env.episode_length``.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs: must be an integer >= 1 (got {num_envs!r})", field="num_envs")
    if episode_length is not None and episode_length > num_days - 1:
        raise ConfigError(
            f"env.episode_length: {episode_length} steps do not fit in {num_days} days of data "
            f"({first} to {last}); use at most {num_days - 1}",
            field="env.episode_length",
        )


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


def check_flatten_at_close(flatten: bool, dates: Any, *, field: str = "env.flatten_at_close") -> None:
    """Refuse ``flatten_at_close`` on a daily panel (every day would be a session close).

    Args:
        flatten: the config's ``flatten_at_close``; dates: the env data's (T,) dates.

    Raises:
        ConfigError: naming ``field``.
    """
    if flatten and not is_intraday(dates):
        raise ConfigError(
            f"{field}: flattening at the session close needs intraday bars; this data is daily "
            f"({dates[0]} to {dates[-1]})",
            field=field,
        )
