"""Backtests: run a policy over dates (``engine``) and score return series (``metrics``)."""

from trainer.backtest.benchmark import load_benchmark_close
from trainer.backtest.contract import METRIC_CONTRACT
from trainer.backtest.engine import BacktestResult, run_backtest
from trainer.backtest.metrics import compute_metrics, returns_from_values

__all__ = [
    "METRIC_CONTRACT",
    "BacktestResult",
    "compute_metrics",
    "load_benchmark_close",
    "returns_from_values",
    "run_backtest",
]
