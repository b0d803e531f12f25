"""Scale-free features and train-split statistics: hand-computed values and no leak of later days."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from trainer.envs.observations import FeatureStats, fit_feature_stats, scale_free_features, scale_free_market
from trainer.errors import DataError


def test_log_returns_volatility_and_indicator_ratios_match_hand_computed_values(two_stocks):
    close = two_stocks.close
    values, names = scale_free_features(close, two_stocks.features, two_stocks.feature_names)
    assert names[:5] == ("logret_1", "logret_5", "logret_21", "logret_63", "vol_21")
    t = 30
    assert values[t, 0, 0] == pytest.approx(np.log(close[t, 0] / close[t - 1, 0]), rel=1e-5)
    assert values[t, 1, 1] == pytest.approx(np.log(close[t, 1] / close[t - 5, 1]), rel=1e-5)
    assert values[t, 0, 2] == pytest.approx(np.log(close[t, 0] / close[t - 21, 0]), rel=1e-5)
    assert values[t, 0, 3] == pytest.approx(np.log(close[t, 0] / close[0, 0]), rel=1e-5)  # shortened window
    daily = np.diff(np.log(close[:, 0]))
    assert values[t, 0, 4] == pytest.approx(np.std(daily[t - 21 : t]), rel=1e-4)
    assert values[0, 0, 4] == 0.0
    f = two_stocks.feature_names.index("boll_ub")
    assert values[t, 0, names.index("boll_ub_rel")] == pytest.approx(
        two_stocks.features[t, 0, f] / close[t, 0] - 1, rel=1e-4
    )
    f = two_stocks.feature_names.index("macd")
    assert values[t, 0, names.index("macd_ratio")] == pytest.approx(
        two_stocks.features[t, 0, f] / close[t, 0], rel=1e-4
    )
    assert values[t, 0, names.index("rsi_30")] == pytest.approx(
        two_stocks.features[t, 0, two_stocks.feature_names.index("rsi_30")]
    )


def test_features_are_causal_so_later_prices_do_not_change_earlier_rows(dow30_market):
    changed_close = dow30_market.close.copy()
    changed_close[1500:] *= 3.0  # a later regime at three times the price
    changed = dataclasses.replace(dow30_market, close=changed_close)
    a = scale_free_market(dow30_market).features
    b = scale_free_market(changed).features
    np.testing.assert_array_equal(a[:1500, :, :5], b[:1500, :, :5])


def test_statistics_come_from_the_train_split_only(dow30_market):
    market = scale_free_market(dow30_market)
    train = market.slice("2010-01-01", "2016-12-31")
    stats = fit_feature_stats(train)
    flat = train.features.reshape(-1, train.features.shape[2]).astype(np.float64)
    np.testing.assert_allclose(stats.mean, flat.mean(axis=0), rtol=1e-12)
    # Wild validation/test prices leave the train statistics exactly as they were.
    wild = dow30_market.close.copy()
    wild[train.num_days :] *= np.linspace(1, 10, wild.shape[0] - train.num_days)[:, None]
    wild_market = scale_free_market(dataclasses.replace(dow30_market, close=wild))
    assert fit_feature_stats(wild_market.slice("2010-01-01", "2016-12-31")) == stats
    assert stats.fitted_on == ("2010-01-04", "2016-12-30")
    assert FeatureStats.from_dict(stats.to_dict()) == stats
    z = stats.apply(market.features, market.feature_names)
    assert np.abs(z).max() <= 5.0
    with pytest.raises(DataError):
        stats.apply(dow30_market.features, dow30_market.feature_names)
