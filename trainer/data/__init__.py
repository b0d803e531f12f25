"""Market data: loading, validation, calendar alignment, indicators, splits, caching."""

from trainer.data.market import MarketData

__all__ = ["MarketData"]
