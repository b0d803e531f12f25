"""The processed, calendar-aligned market panel every env, pod and backtest consumes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from trainer.errors import DataError


def _to_day(value) -> np.datetime64:
    try:
        return np.datetime64(str(value)[:10], "D")
    except ValueError as exc:
        raise DataError(f"date {value!r} is not a YYYY-MM-DD date", field="date") from exc


@dataclass(frozen=True)
class MarketData:
    """Daily prices and features of ``N`` tickers on one trading calendar of ``T`` days.

    Attributes:
        dates: (T,) datetime64[D], strictly increasing exchange dates; for intraday data
            datetime64[s] naive America/New_York bar-end stamps (``trainer.data.timestamps``).
        tickers: (N,) ticker symbols, in column order of every array below.
        close: (T, N) float64, split/dividend-adjusted close in USD (raw close when the source
            has no adjusted column). This is the execution price of the trading env.
        features: (T, N, F) float32, technical indicators per ticker in their natural units
            (the env scales them); computed only from data up to each row's day.
        feature_names: (F,) names of ``features``' last axis, e.g. ``"macd"``, ``"rsi_30"``.
        turbulence: (T,) float64, FinRL turbulence index of each day (0 during warm-up).
        notes: human-readable report of what the loading policy did (dropped tickers,
            later start), so nothing is silent.
        source: short description of where the data came from (file names, yfinance).
        members: (T, N) bool point-in-time universe, True where ticker ``i`` is an index member
            on day ``t`` (:mod:`trainer.data.membership`); the envs trade only members and
            the 1/N benchmarks are over them. ``None``: every ticker is a member every day.
    """

    dates: np.ndarray
    tickers: tuple[str, ...]
    close: np.ndarray
    features: np.ndarray
    feature_names: tuple[str, ...]
    turbulence: np.ndarray
    notes: tuple[str, ...] = field(default=())
    source: str = ""
    members: np.ndarray | None = None

    def __post_init__(self) -> None:
        t, n = len(self.dates), len(self.tickers)
        if self.close.shape != (t, n):
            raise DataError(f"close has shape {self.close.shape}, expected {(t, n)}")
        if self.features.shape[:2] != (t, n) or self.features.shape[2] != len(self.feature_names):
            raise DataError(f"features has shape {self.features.shape}, expected {(t, n, len(self.feature_names))}")
        if self.turbulence.shape != (t,):
            raise DataError(f"turbulence has shape {self.turbulence.shape}, expected {(t,)}")
        if self.members is not None and (self.members.shape != (t, n) or self.members.dtype != np.bool_):
            raise DataError(f"members has shape {self.members.shape} ({self.members.dtype}), expected {(t, n)} bool")

    @property
    def num_days(self) -> int:
        return len(self.dates)

    @property
    def num_stocks(self) -> int:
        return len(self.tickers)

    def slice(self, start=None, end=None, *, name: str = "range") -> MarketData:
        """Return the days with ``start <= date <= end`` (inclusive, ``YYYY-MM-DD`` or dates).

        Intraday data (bar-end stamps) takes days or exchange-time moments ``YYYY-MM-DD HH:MM``
        (:func:`trainer.util.dates.range_bound`: a start day from its 00:00, an end day to its end,
        a moment compared with the bar-end stamps inclusively), so a range may start or end
        inside a session.

        Raises:
            DataError: the range is empty or inverted, naming ``name`` (e.g. "validation").
        """
        if self.dates.dtype != np.dtype("datetime64[D]"):
            return self._slice_bars(start, end, name=name)
        lo = _to_day(start) if start is not None else self.dates[0]
        hi = _to_day(end) if end is not None else self.dates[-1]
        if lo > hi:
            raise DataError(f"{name}: start {lo} is after end {hi}", field=name)
        mask = (self.dates >= lo) & (self.dates <= hi)
        if not mask.any():
            raise DataError(
                f"{name}: no trading days between {lo} and {hi}; data covers {self.dates[0]} to {self.dates[-1]}",
                field=name,
            )
        idx = np.flatnonzero(mask)
        return self.take(slice(idx[0], idx[-1] + 1))

    def _slice_bars(self, start, end, *, name: str) -> MarketData:
        from trainer.errors import ConfigError
        from trainer.util.dates import range_bound

        try:
            lo = range_bound(start, end=False) if start is not None else self.dates[0]
            hi = range_bound(end, end=True) if end is not None else self.dates[-1]
        except ConfigError as exc:
            raise DataError(f"{name}: {exc.message}", field=name) from None
        if start is not None and end is not None and lo > hi:
            raise DataError(f"{name}: start {start} is after end {end}", field=name)
        first = int(np.searchsorted(self.dates, lo, side="left"))
        stop = int(np.searchsorted(self.dates, hi, side="right"))
        if stop <= first:
            raise DataError(
                f"{name}: no bars between {start} and {end}; data covers {str(self.dates[0])[:16]} to "
                f"{str(self.dates[-1])[:16]}".replace("T", " "),
                field=name,
            )
        return self.take(slice(first, stop))

    def take(self, s: slice) -> MarketData:
        """The rows ``s`` (a slice of the time axis) of every per-row array, other fields kept."""
        return MarketData(
            dates=self.dates[s],
            tickers=self.tickers,
            close=self.close[s],
            features=self.features[s],
            feature_names=self.feature_names,
            turbulence=self.turbulence[s],
            notes=self.notes,
            source=self.source,
            members=self.members[s] if self.members is not None else None,
        )

    def content_hash(self) -> str:
        """SHA-256 hex digest of the arrays and names (stable across processes)."""
        h = hashlib.sha256()
        h.update("|".join(self.tickers).encode())
        h.update("|".join(self.feature_names).encode())
        stamps = self.dates if self.dates.dtype != np.dtype("datetime64[D]") else self.dates.astype("datetime64[D]")
        for arr in (stamps.astype(np.int64), self.close, self.features, self.turbulence):
            h.update(np.ascontiguousarray(arr).tobytes())
        if self.members is not None:  # a panel without a membership hashes as it always did
            h.update(b"members")
            h.update(np.ascontiguousarray(self.members).tobytes())
        return h.hexdigest()
