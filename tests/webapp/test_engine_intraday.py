"""The web's door to the trainer on 5-minute bars: QQQ's intraday bars from the data file are
the benchmark (validation baseline and backtest, bar by bar), the daily file otherwise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import BENCHMARK_FILE, DOW30_FILE
from tests.intraday import FIVE_MIN_FILE
from webapp import engine
from webapp.engine.backtests import validation_benchmark_returns

TASK = {
    "data": {"paths": [FIVE_MIN_FILE], "tickers": ["AAPL", "MSFT"], "start": "2024-03-11", "end": "2024-12-03"},
    "train": ["2024-03-11", "2024-09-30"],
    "validation": ["2024-10-01", "2024-10-31"],
    "test": ["2024-11-01", "2024-12-03"],
    "kind": "portfolio",
    "env": {"flatten_at_close": True},
    "algorithm": "ppo",
    "hyperparameters": {"num_envs": 16, "rollout_steps": 8, "num_minibatches": 2, "hidden_sizes": [16, 16]},
}


def test_the_benchmark_file_is_the_data_file_when_it_holds_intraday_qqq(data_dir):
    daily = data_dir / BENCHMARK_FILE
    assert engine.benchmark_path_for([FIVE_MIN_FILE], default=daily, data_dir=data_dir) == data_dir / FIVE_MIN_FILE
    assert engine.benchmark_path_for([DOW30_FILE], default=daily, data_dir=data_dir) == daily
    # a daily QQQ is no baseline for bar returns (the backtests then compare at session closes)
    bars = np.array(["2024-03-11T09:35", "2024-03-11T09:40"], dtype="datetime64[s]")
    assert validation_benchmark_returns([DOW30_FILE], bars, default=daily, data_dir=data_dir) is None
    got = validation_benchmark_returns([FIVE_MIN_FILE], bars, default=daily, data_dir=data_dir)
    assert got.index[0] == pd.Timestamp("2024-03-11 09:40")


@pytest.fixture(scope="module")
def generation(data_dir, tmp_path_factory):
    task = engine.validate_task({**TASK, "data": {**TASK["data"], "paths": [str(data_dir / FIVE_MIN_FILE)]}})
    out = tmp_path_factory.mktemp("gen") / "agent.pt"
    result = engine.train_generation(
        task,
        env_steps=256,
        out_path=str(out),
        parent_path=None,
        hyperparameters=None,
        seed=0,
        device="cpu",
        data_dir=str(data_dir),
        benchmark_path=str(data_dir / BENCHMARK_FILE),
    )
    return task, out, result


def test_an_intraday_generation_is_scored_next_to_qqq_bars(generation):
    _, _, result = generation
    assert "vs_QQQ" in result.metrics
    assert result.metrics["num_periods"] == 23 * 78 - 1  # one return per bar (October 2024: 23 sessions)


def test_an_intraday_backtest_compares_with_qqq_bars_of_the_same_file(generation, data_dir):
    task, checkpoint, result = generation
    out = engine.backtest_agent(
        agent_path=checkpoint,
        expected_sha256=result.sha256,
        task=task,
        start="2024-11-01",  # the test split: 22 sessions, at least the 20 a backtest needs
        end="2024-12-03",
        benchmark_path=str(data_dir / BENCHMARK_FILE),
        data_dir=str(data_dir),
    )
    assert any("intraday bars from the same file" in n for n in out.notes)
    qqq = out.daily["benchmark_QQQ"]
    assert qqq.index[0] == pd.Timestamp("2024-11-01 09:35")
    assert str(qqq.index[1]) == "2024-11-01 09:40:00"
    raw = pd.read_csv(data_dir / FIVE_MIN_FILE)
    raw = raw[raw["tic"] == "QQQ"]
    first = raw.loc[raw["datetime_utc"] == "2024-11-26 14:30:00", "close"].item()  # the 09:35 bar (EST)
    last = raw.loc[raw["datetime_utc"] == "2024-11-26 14:35:00", "close"].item()
    moved = qqq.loc[pd.Timestamp("2024-11-26 09:40")] / qqq.loc[pd.Timestamp("2024-11-26 09:35")]
    assert moved == pytest.approx(last / first, rel=1e-12)
    assert out.metrics["QQQ"]["num_periods"] == len(qqq) - 1 == 21 * 78 + 42 - 1  # 2024-11-29 is a half day
    assert qqq.index[-1] == pd.Timestamp("2024-12-03 16:00")
