"""``check_splits_in_data``, the one rule of a task's splits that the web and the command line
call: a split may reach at most a weekend and a holiday past the dataset's first or last day, and
the error names the split bound, the data's own edge and the file."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.data.files import trading_dates
from trainer.data.splits import check_splits_in_data
from trainer.errors import ConfigError

SPLITS = {
    "train": ("2010-01-01", "2019-12-31"),
    "validation": ("2020-01-01", "2020-12-31"),
    "test": ("2021-01-01", "2022-11-15"),
}


@pytest.fixture(scope="module")
def dow30_days(dow30_path) -> np.ndarray:
    return trading_dates([dow30_path], tickers=["AAPL", "MSFT"])


def test_splits_within_a_weekend_of_the_datas_edges_are_counted(dow30_days):
    counts = check_splits_in_data(SPLITS, dow30_days, file="dow30.csv.gz")
    assert counts["train"] == 2516 and counts["test"] == 472


@pytest.mark.parametrize(
    ("split", "bounds", "field", "says"),
    [
        ("train", ("2009-12-28", "2019-12-31"), "train.start", "2009-12-28 is before the first data day 2010-01-04"),
        ("train", ("1990-01-01", "2019-12-31"), "train.start", "1990-01-01 is before the first data day 2010-01-04"),
        ("test", ("2021-01-01", "2022-11-21"), "test.end", "2022-11-21 is after the last data day 2022-11-15"),
    ],
)
def test_a_split_past_the_data_names_its_bound_and_the_datas_edge(dow30_days, split, bounds, field, says):
    with pytest.raises(ConfigError) as caught:
        check_splits_in_data({**SPLITS, split: bounds}, dow30_days, file="dow30.csv.gz")
    assert caught.value.message == f"{field}: {says} in dow30.csv.gz"
    assert caught.value.details["field"] == field


def test_a_walk_forward_study_before_the_data_is_refused_not_cut_to_it(dow30_days):
    from trainer.data.folds import plan_folds

    with pytest.raises(ConfigError) as caught:
        plan_folds(dow30_days, start="1990-01-01", end="2019-12-31", first_test_year=2018)
    assert caught.value.details["field"] == "start"
    assert caught.value.message.startswith("start: 1990-01-01 is before the data, which starts on 2010-01-04")
