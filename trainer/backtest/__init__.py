"""Backtests: run a policy over dates (``engine``) and score return series (``metrics``)."""

from trainer.backtest.engine import BacktestResult, load_benchmark_close, run_backtest
from trainer.backtest.metrics import METRIC_CONTRACT, compute_metrics, returns_from_values

__all__ = [
    "METRIC_CONTRACT",
    "BacktestResult",
    "compute_metrics",
    "load_benchmark_close",
    "returns_from_values",
    "run_backtest",
]
