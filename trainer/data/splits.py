"""Cut one :class:`MarketData` into named, chronological, non-overlapping date ranges."""

from __future__ import annotations

from collections.abc import Mapping

from trainer.data.market import MarketData
from trainer.errors import DataError


def split_market_data(data: MarketData, ranges: Mapping[str, tuple]) -> dict[str, MarketData]:
    """Slice ``data`` into e.g. ``{"train": (s, e), "validation": (s, e), "test": (s, e)}``.

    Args:
        data: the full panel.
        ranges: name -> inclusive ``(start, end)`` (``YYYY-MM-DD`` or ``None`` for open ends),
            in chronological order.

    Returns:
        name -> ``data.slice(start, end, name=name)``, same order as ``ranges``.

    Raises:
        DataError: a range is empty or inverted (``field`` is its name), or a range's first
            trading day is not after the previous range's last one (overlap leaks test data
            into training).
    """
    out: dict[str, MarketData] = {}
    previous = None
    for name, bounds in ranges.items():
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise DataError(f"{name}: expected a (start, end) pair, got {bounds!r}", field=name)
        part = data.slice(bounds[0], bounds[1], name=name)
        if previous is not None and part.dates[0] <= out[previous].dates[-1]:
            raise DataError(
                f"{name} starts {part.dates[0]}, not after {previous} ends {out[previous].dates[-1]}; "
                "ranges must be chronological and must not overlap",
                field=name,
            )
        out[name] = part
        previous = name
    return out
