"""Market data: loading, validation, calendar alignment, indicators, splits, caching."""

from trainer.data.bars import DAILY, BarInfo, bar_info
from trainer.data.indicators import DEFAULT_INDICATORS, turbulence_index
from trainer.data.loading import load_panel
from trainer.data.market import MarketData
from trainer.data.pipeline import build_market_data, load_market_data
from trainer.data.spec import DataSpec
from trainer.data.splits import split_market_data
from trainer.data.yahoo import download_yfinance, panel_from_yfinance, yfinance_to_long

__all__ = [
    "DAILY",
    "BarInfo",
    "bar_info",
    "DEFAULT_INDICATORS",
    "DataSpec",
    "MarketData",
    "build_market_data",
    "download_yfinance",
    "load_market_data",
    "load_panel",
    "panel_from_yfinance",
    "split_market_data",
    "turbulence_index",
    "yfinance_to_long",
]
