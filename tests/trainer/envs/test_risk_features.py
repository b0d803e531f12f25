"""The opt-in risk features (observation "scale_free_risk"): hand-computed values, causality, and
an env and a direct learner that read them, while the default layout stays as it was."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.envs.kinds import env_config_from_dict, make_env, observation_dim, prepare_market
from trainer.envs.observations import RISK_FEATURE_NAMES, fit_feature_stats, risk_features, scale_free_market
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.errors import ConfigError


def test_volatility_beta_correlation_and_momentum_match_hand_computed_values(dow30_market):
    close = dow30_market.close[:, :5]
    values = risk_features(close)
    d = np.diff(np.log(close), axis=0)  # d[s - 1] is the return from day s - 1 to day s
    market = np.log(np.exp(d).mean(axis=1))
    for t in (200, 400):
        window, m = d[t - 63 : t], market[t - 63 : t]  # the 63 returns up to day t
        for i in range(5):
            r = window[:, i]
            cov = np.mean((r - r.mean()) * (m - m.mean()))
            assert values[t, i, 0] == pytest.approx(np.std(r), rel=1e-4)
            assert values[t, i, 1] == pytest.approx(cov / np.var(m), rel=1e-3)
            assert values[t, i, 2] == pytest.approx(np.corrcoef(r, m)[0, 1], rel=1e-3)
            assert values[t, i, 3] == pytest.approx(np.log(close[t - 21, i] / close[max(t - 252, 0), i]), rel=1e-5)
    assert (values[0] == 0).all()  # no history: no risk, no momentum


def test_risk_features_are_causal_so_later_prices_do_not_change_earlier_rows(dow30_market):
    close = dow30_market.close
    changed = close.copy()
    changed[1000:] *= np.linspace(1.0, 3.0, close.shape[0] - 1000)[:, None] ** np.arange(1, close.shape[1] + 1)
    np.testing.assert_array_equal(risk_features(close)[:1000], risk_features(changed)[:1000])


def test_a_portfolio_env_with_risk_features_appends_them_and_the_default_layout_is_unchanged(dow30_market):
    risky = PortfolioConfig(observation="scale_free_risk")
    prepared = prepare_market(dow30_market, risky)
    assert prepared.feature_names[-4:] == RISK_FEATURE_NAMES
    assert prepared.feature_names[:-4] == scale_free_market(dow30_market).feature_names
    env = make_env(prepared, risky, num_envs=2, feature_stats=fit_feature_stats(prepared))
    n, f = dow30_market.num_stocks, len(dow30_market.feature_names)
    assert (env.obs_dim, env.action_dim) == observation_dim(risky, n, f)
    assert env.observation_layout()["blocks"][0]["feature_names"][-4:] == list(RISK_FEATURE_NAMES)
    default = PortfolioConfig()
    plain = make_env(prepare_market(dow30_market, default), default, num_envs=2)
    assert plain.obs_dim == env.obs_dim - 4 * n == observation_dim(default, n, f)[0]
    assert not set(RISK_FEATURE_NAMES) & set(plain.observation_layout()["feature_names"])


def test_the_stock_trading_env_refuses_the_risk_layout_by_name():
    with pytest.raises(ConfigError) as err:
        env_config_from_dict("stock_trading", {"observation": "scale_free_risk"})
    assert err.value.details["field"] == "env.observation"
