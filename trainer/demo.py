"""The built-in demo task (Dow-30 daily data; stock trading with PPO, or a portfolio task with
the direct learner), defined once for the CLI, the web app's demo and the benchmarks;
importable without torch."""

from __future__ import annotations

from typing import Any

from trainer.algorithms import default_algorithm

__all__ = ["DEMO_DATA_FILE", "demo_task_dict"]

#: File of the demo task, relative to the data folder (``../shared/data``).
DEMO_DATA_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


def demo_task_dict(kind: str = "stock_trading") -> dict[str, Any]:
    """The built-in demo task: Dow-30, train 2010-2019, validate 2020, test 2021-01-01..2022-11-15,
    of ``kind`` with that kind's default algorithm (:func:`trainer.algorithms.default_algorithm`:
    ``"ppo"`` for stock trading, ``"direct"`` for a portfolio task).

    ``data.paths`` is relative: pass the data folder (``../shared/data``) as ``data_dir``. The
    data range starts with the train split; indicators of the first days are computed from the
    rows available (the file starts 2010-01-04). DOW (listed 2019-03-20) is dropped by the
    default missing-data policy, leaving 29 tickers.

    Returns:
        A fresh dict accepted by :meth:`trainer.task.TaskSpec.from_dict` (callers may edit it);
        a ``"kind"`` key only for a portfolio task.

    Raises:
        ConfigError: an unknown ``kind`` (field ``kind``).
    """
    algorithm = default_algorithm(kind)
    return {
        "data": {"paths": [DEMO_DATA_FILE], "start": "2010-01-01", "end": "2022-11-15"},
        "train": {"start": "2010-01-01", "end": "2019-12-31"},
        "validation": {"start": "2020-01-01", "end": "2020-12-31"},
        "test": {"start": "2021-01-01", "end": "2022-11-15"},
        "env": {},
        "algorithm": algorithm,
        "hyperparameters": {},
        **({"kind": kind} if kind != "stock_trading" else {}),
    }
