"""Serving an agent of 5-minute bars: ``{"date": "YYYY-MM-DD HH:MM"}`` is the bar ending then
(exchange time); a bare day is that day's last bar (real 5-minute file of ../shared/data)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from tests.conftest import INTRADAY_5MIN_FILE
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.errors import DataError
from trainer.serving.answers import answer
from trainer.serving.policy import ServedPolicy


@pytest.fixture(scope="module")
def policy(data_dir, tmp_path_factory) -> ServedPolicy:
    """A tiny PPO stock-trading agent trained on AAPL and MSFT 5-minute bars."""
    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("bars_bundle")
    args = [
        "train", "--data", INTRADAY_5MIN_FILE, "--data-dir", str(data_dir), "--out", str(folder),
        "--tickers", "AAPL,MSFT", "--train", "2024-03-11", "2024-09-30", "--validation", "2024-10-01", "2024-11-15",
        "--test", "2024-11-18", "2024-12-31", "--env-steps", "256", "--num-envs", "16",
        "--hp", "rollout_steps=8", "--hp", "num_minibatches=2", "--hp", "hidden_sizes=[16, 16]",
    ]  # fmt: skip
    assert main(args) == 0
    return ServedPolicy.load(folder / "agent.zip")


@pytest.fixture(scope="module")
def market(policy, data_dir):
    return load_market_data(DataSpec.from_dict(policy.config["task"]["data"]), data_dir=data_dir)


@pytest.fixture(scope="module")
def raw(data_dir) -> pd.DataFrame:
    frame = pd.read_csv(data_dir / INTRADAY_5MIN_FILE)
    return frame[frame["tic"].isin(["AAPL", "MSFT"])].set_index(["datetime_utc", "tic"])["close"]


def test_a_bar_time_acts_on_the_bar_ending_then(policy, market, raw):
    out = answer(policy, {"date": "2024-11-18 10:00"}, load_market=lambda: market)
    assert out["date"] == "2024-11-18 10:00"
    # the file stamps the bar's start in UTC: 09:55 EST is 14:55 UTC
    assert out["prices"] == {t: raw[("2024-11-18 14:55:00", t)] for t in ("AAPL", "MSFT")}


def test_a_bare_day_acts_on_its_last_bar(policy, market, raw):
    out = answer(policy, {"date": "2024-11-18"}, load_market=lambda: market)
    assert out["date"] == "2024-11-18 16:00"
    assert out["prices"] == {t: raw[("2024-11-18 20:55:00", t)] for t in ("AAPL", "MSFT")}
    half = answer(policy, {"date": "2024-11-29"}, load_market=lambda: market)  # the day after Thanksgiving
    assert half["date"] == "2024-11-29 13:00"
    assert half["prices"] == {t: raw[("2024-11-29 17:55:00", t)] for t in ("AAPL", "MSFT")}
    same = answer(policy, {"date": "2024-11-18 16:00"}, load_market=lambda: market)
    assert same["action"] == out["action"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("2024-11-18 10:03", "not the end of a bar"),
        ("2024-11-18 09:30", "not the end of a bar"),  # the first bar ends 09:35
        ("2024-11-18 25:00", "not a calendar date and time"),
        ("2024-11-16", "not a trading day"),  # a Saturday
        ("18/11/2024", "YYYY-MM-DD HH:MM"),
        (20241118, "YYYY-MM-DD HH:MM"),
    ],
)
def test_a_bad_bar_time_is_a_data_error_naming_date(policy, market, value, words):
    with pytest.raises(DataError) as err:
        answer(policy, {"date": value}, load_market=lambda: market)
    assert err.value.details["field"] == "date"
    assert words in err.value.message
