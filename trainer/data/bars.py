"""What the bars of a panel are: :class:`BarInfo` (``panel.attrs["bars"]``, read with
:func:`bar_info`), the one place the rest of Paddock learns a panel's interval, session, periods
per year and missing-bar report. :mod:`trainer.data.intraday` fills it in; daily panels get
:data:`DAILY`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from trainer.data.timestamps import TRADING_DAYS_PER_YEAR


@dataclass(frozen=True)
class MissingBars:
    """Bars one ticker misses inside its own span, all filled (see the module doc).

    Attributes:
        ticker: the symbol.
        count: bars filled.
        days: days with at least one filled bar.
        worst: up to 5 ``(YYYY-MM-DD, bars filled)``, most first.
    """

    ticker: str
    count: int
    days: int
    worst: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class BarInfo:
    """What the bars of a panel are; ``panel.attrs["bars"]`` (see :func:`bar_info`).

    Attributes:
        interval: ``"1d"``, ``"1h"``, ``"30m"``, ``"15m"``, ``"5m"`` or ``"1m"``.
        minutes: bar length in minutes (1440 for daily bars).
        session: ``"daily"``, ``"regular"`` (09:30-16:00 ET) or ``"extended"`` (04:00-20:00 ET).
        bars_per_session: bars of a full regular session (78 for 5-minute bars; 1 for daily).
        periods_per_year: ``bars_per_session * 252``: the factor metrics annualise with.
        timezone: how the file's stamps were read (``"UTC (column name datetime_utc)"``).
        bar_label: what the file's stamps mark, as used: ``"start"`` or ``"end"``.
        bar_label_detected: what the stamps looked like (``"start"``, ``"end"`` or ``"unclear"``).
        sessions: trading days in the panel.
        half_days: ``YYYY-MM-DD`` of the early-close days found.
        missing: per ticker with filled bars, :class:`MissingBars`.
    """

    interval: str = "1d"
    minutes: int = 1440
    session: str = "daily"
    bars_per_session: int = 1
    periods_per_year: int = TRADING_DAYS_PER_YEAR
    timezone: str = ""
    bar_label: str = "end"
    bar_label_detected: str = "end"
    sessions: int = 0
    half_days: tuple[str, ...] = ()
    missing: tuple[MissingBars, ...] = field(default=())

    @property
    def intraday(self) -> bool:
        return self.interval != "1d"

    @property
    def missing_bars(self) -> int:
        return sum(m.count for m in self.missing)

    def to_dict(self) -> dict:
        """JSON-able dict (tuples become lists); :meth:`from_dict` reads it back."""
        d = asdict(self)
        d["half_days"] = list(self.half_days)
        d["missing"] = [{**asdict(m), "worst": [list(w) for w in m.worst]} for m in self.missing]
        return d

    @classmethod
    def from_dict(cls, data: dict | None) -> BarInfo:
        if not data:
            return DAILY
        data = dict(data)
        data["half_days"] = tuple(data.get("half_days", ()))
        data["missing"] = tuple(
            MissingBars(m["ticker"], int(m["count"]), int(m["days"]), tuple((str(d), int(n)) for d, n in m["worst"]))
            for m in data.get("missing", ())
        )
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def summary(self) -> str:
        """One line for pages and notes, e.g. ``5-minute bars, regular session 09:30-16:00 ET
        (78 bars a session, 78 x 252 periods a year)``."""
        if not self.intraday:
            return "daily bars (252 periods a year)"
        span = "09:30-16:00 ET" if self.session == "regular" else "04:00-20:00 ET"
        size = f"{self.minutes}-minute" if self.minutes < 60 else "hourly"
        return (
            f"{size} bars, {self.session} session {span} ({self.bars_per_session} bars a session, "
            f"{self.bars_per_session} x {TRADING_DAYS_PER_YEAR} periods a year)"
        )


DAILY = BarInfo()
"""The :class:`BarInfo` of daily panels."""


def bar_info(panel: pd.DataFrame) -> BarInfo:
    """The panel's :class:`BarInfo` (``attrs["bars"]``), :data:`DAILY` when it has none."""
    info = panel.attrs.get("bars")
    if isinstance(info, BarInfo):
        return info
    return BarInfo.from_dict(info) if isinstance(info, dict) else DAILY
