"""Walk-forward fold planning: anchored yearly folds with purge gaps, and errors naming the field."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainer.data.folds import Fold, check_folds, plan_folds
from trainer.errors import ConfigError

# Business days 2010-01-04 .. 2016-06-30 stand in for a trading calendar.
DAYS = pd.bdate_range("2010-01-04", "2016-06-30").values.astype("datetime64[D]")


def _index(day: str) -> int:
    return int(np.searchsorted(DAYS, np.datetime64(day, "D")))


def test_anchored_yearly_folds_train_on_everything_before_with_gaps():
    folds = plan_folds(DAYS, start="2010-01-01", end="2016-06-30", first_test_year=2014, gap_days=5)
    assert [f.test for f in folds] == [
        ("2014-01-01", "2014-12-31"),
        ("2015-01-01", "2015-12-31"),
        ("2016-01-01", "2016-06-30"),
    ]
    for fold in folds:
        assert fold.train[0] == "2010-01-04"  # anchored: every fold trains from the start
        assert _index(fold.test[0]) - _index(fold.validation[1]) == 6  # 5 days dropped between
        assert _index(fold.validation[0]) - _index(fold.train[1]) == 6
        assert _index(fold.validation[1]) - _index(fold.validation[0]) + 1 == 252
    assert folds[1].to_dict()["validation"] == {"start": folds[1].validation[0], "end": folds[1].validation[1]}


def test_rolling_windows_and_a_fold_limit():
    folds = plan_folds(
        DAYS, start="2010-01-04", end="2016-06-30", first_test_year=2013, train_days=300, gap_days=0, max_folds=2
    )
    assert len(folds) == 2
    assert [_index(f.train[1]) - _index(f.train[0]) + 1 for f in folds] == [300, 300]
    assert folds[0].validation[1] < folds[0].test[0]


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"first_test_year": 2018}, "first_test_year", "no later than the end year"),
        ({"first_test_year": 2010}, "first_test_year", "after the start year"),
        ({"first_test_year": 2011}, "first_test_year", "needs at least 126"),
        ({"end": "2016-01-10"}, "end", "needs at least 20"),
        ({"start": "2030-01-01", "end": "2031-12-31", "first_test_year": 2031}, "start", "after the last day"),
        ({"fold_years": 0}, "fold_years", ">= 1"),
        ({"gap_days": -1}, "gap_days", ">= 0"),
        ({"validation_days": 5}, "validation_days", ">= 20"),
        ({"end": "2009-01-01"}, "end", "before start"),
    ],
)
def test_bad_plans_name_the_field(changes, field, words):
    kwargs = {"start": "2010-01-04", "end": "2016-06-30", "first_test_year": 2014, **changes}
    with pytest.raises(ConfigError) as err:
        plan_folds(DAYS, **kwargs)
    assert err.value.details["field"] == field
    assert words in err.value.message


@pytest.mark.parametrize("years", [3, 10, 10**30])
def test_a_test_span_longer_than_the_study_ends_at_its_end_not_at_a_year_past_numpy(years):
    """``--fold-years 1e30`` made a year NumPy wraps round and said the span held -1510 days."""
    folds = plan_folds(DAYS, start="2010-01-04", end="2016-06-30", first_test_year=2014, fold_years=years)
    assert folds[-1].test[1] == "2016-06-30"
    assert [f.test[0] for f in folds] == ["2014-01-01"]  # one fold, 2014 to the end


def _fold(i, train, validation, test):
    return Fold(index=i, train=train, validation=validation, test=test)


def test_overlapping_test_spans_are_refused():
    a = _fold(0, ("2010-01-04", "2012-12-31"), ("2013-01-01", "2013-12-31"), ("2014-01-01", "2014-12-31"))
    b = _fold(1, ("2010-01-04", "2013-06-28"), ("2013-07-01", "2014-06-30"), ("2014-07-01", "2015-06-30"))
    with pytest.raises(ConfigError, match="inside the previous fold's test span") as err:
        check_folds([a, b], DAYS)
    assert err.value.details["field"] == "folds[1].test.start"


def test_parts_that_overlap_or_are_too_short_name_the_fold_and_part():
    overlap = _fold(0, ("2010-01-04", "2013-03-01"), ("2013-01-01", "2013-12-31"), ("2014-01-01", "2014-12-31"))
    with pytest.raises(ConfigError, match="overlap") as err:
        check_folds([overlap], DAYS)
    assert err.value.details["field"] == "folds[0].validation.start"
    short = _fold(0, ("2010-01-04", "2012-12-31"), ("2013-01-01", "2013-01-10"), ("2014-01-01", "2014-12-31"))
    with pytest.raises(ConfigError, match="holds 8 trading day") as err:
        check_folds([short], DAYS)
    assert err.value.details["field"] == "folds[0].validation.end"
    with pytest.raises(ConfigError) as err:
        check_folds([], DAYS)
    assert err.value.details["field"] == "folds"


def test_a_fold_round_trips_through_its_dict_and_bad_days_are_named():
    fold = plan_folds(DAYS, start="2010-01-04", end="2016-06-30", first_test_year=2015)[0]
    assert Fold.from_dict(fold.to_dict(), index=0) == fold
    bad = fold.to_dict()
    bad["test"] = {"start": "2015-02-30", "end": "2015-12-31"}
    with pytest.raises(ConfigError) as err:
        Fold.from_dict(bad, index=3)
    assert err.value.details["field"] == "folds[3].test.start"
