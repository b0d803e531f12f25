"""What ``python -m trainer train`` refuses, as the web does (``tests/webapp/runs/test_task_edges.py``):
a split outside the dataset's days, named with the data's own first or last day (a train split
from 1990 trained from 2010 silently; a short test split said the data ended on its own last
day), and an env setting past its bound in a task file (``logit_scale`` 1e308 was a torch
traceback, exit status 1). Each is one ``error:`` line and exit status 2."""

from __future__ import annotations

import json

import pytest

from tests.trainer.cli.test_input_errors import TINY, _one_error
from trainer.cli.main import main

DOW30 = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--train", "1990-01-01", "2019-12-31"],
            f"error: train.start: 1990-01-01 is before the first data day 2010-01-04 in {DOW30}",
        ),
        (
            ["--train", "2009-06-01", "2019-12-31"],
            f"error: train.start: 2009-06-01 is before the first data day 2010-01-04 in {DOW30}",
        ),
        (
            ["--test", "2021-01-04", "2023-06-30"],
            f"error: test.end: 2023-06-30 is after the last data day 2022-11-15 in {DOW30}",
        ),
        (  # the data's last day, not the test split's (the range the command line loads)
            ["--env", "portfolio", "--algo", "ppo", "--test", "2021-01-04", "2021-01-08"],
            "error: test.end: the test split 2021-01-04 to 2021-01-08 holds 5 trading day(s); it needs at least 20 "
            "(the data covers 2010-01-04 to 2022-11-15)",
        ),
    ],
)
def test_a_split_outside_the_data_is_refused_naming_the_datas_own_edge(data_dir, tmp_path, flags, says, capsys):
    argv = ["train", "--data-dir", str(data_dir), "--out", str(tmp_path / "run"), *TINY, *flags]
    assert main(argv) == 2
    assert _one_error(capsys) == says


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"logit_scale": 1e308}, "error: env.logit_scale: must be more than 0 and at most 100, got 1e+308"),
        ({"logit_scale": 1e30}, "error: env.logit_scale: must be more than 0 and at most 100, got 1e+30"),
        ({"cash_bias": 1e308}, "error: env.cash_bias: must be at least 0 and at most 100, got 1e+308"),
    ],
)
def test_a_task_files_env_logit_setting_past_its_bound_exits_2_naming_it(data_dir, tmp_path, setting, says, capsys):
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps(
            {
                "kind": "portfolio",
                "data": {"paths": [DOW30], "tickers": ["AAPL", "MSFT", "KO"]},
                "train": ["2010-01-01", "2019-12-31"],
                "validation": ["2020-01-01", "2020-12-31"],
                "test": ["2021-01-01", "2022-11-15"],
                "env": setting,
            }
        )
    )
    argv = ["train", str(task), "--data-dir", str(data_dir), "--out", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 2
    assert _one_error(capsys) == says
