"""The task's buffer memory estimate counts the observation the env builds on intraday bars:
the indicators plus the 3 session features per ticker (real 5-minute file)."""

from __future__ import annotations

import pytest

from tests.conftest import INTRADAY_5MIN_FILE
from tests.intraday import intraday_panel
from trainer.data.indicators import DEFAULT_INDICATORS
from trainer.data.pipeline import build_market_data
from trainer.data.sessions import SESSION_FEATURES, panel_feature_names
from trainer.envs.kinds import env_config_from_dict, make_env, observation_dim, prepare_market
from trainer.errors import ConfigError
from trainer.task import MAX_BUFFER_BYTES, TaskSpec, buffer_bytes

TICKERS = ["AAPL", "MSFT", "NVDA"]


@pytest.fixture(scope="module")
def bars(data_dir):
    return build_market_data(intraday_panel(data_dir, TICKERS, "2024-03-11", "2024-03-13"))


@pytest.mark.parametrize("kind", ["stock_trading", "portfolio"])
@pytest.mark.parametrize("observation", ["scale_free", "finrl"])
def test_the_estimated_observation_size_is_the_envs_on_5_minute_bars(bars, kind, observation):
    names = panel_feature_names(DEFAULT_INDICATORS, intraday=True)
    assert bars.feature_names == names  # the rule the pipeline built the panel with
    assert names[-3:] == SESSION_FEATURES
    config = env_config_from_dict(kind, {"observation": observation})
    env = make_env(prepare_market(bars, config), config, num_envs=1)
    assert observation_dim(config, len(TICKERS), len(names)) == (env.obs_dim, env.action_dim)
    assert observation_dim(config, len(TICKERS), len(DEFAULT_INDICATORS))[0] < env.obs_dim


def _task(num_envs: int) -> dict:
    return {
        "data": {"paths": [INTRADAY_5MIN_FILE], "tickers": TICKERS, "bar_label": "start"},
        "train": ["2024-03-11", "2025-06-30"],
        "validation": ["2025-07-01", "2025-12-31"],
        "test": ["2026-01-02", "2026-08-21"],
        "hyperparameters": {"num_envs": num_envs, "rollout_steps": 4_096},
    }


def test_task_creation_refuses_a_rollout_that_fits_only_without_the_session_features():
    num_envs = 53_000  # 4,096 x 53,000 transitions: under 48 GiB with daily observations, over with bars
    spec = TaskSpec.from_dict(_task(num_envs))  # the daily estimate (intraday unknown) lets it through
    config = spec.env
    daily_obs, act = observation_dim(config, 3, len(DEFAULT_INDICATORS))
    bar_obs, _ = observation_dim(config, 3, len(panel_feature_names(DEFAULT_INDICATORS, intraday=True)))
    assert buffer_bytes("ppo", spec.hyperparameters, daily_obs, act) <= MAX_BUFFER_BYTES
    assert buffer_bytes("ppo", spec.hyperparameters, bar_obs, act) > MAX_BUFFER_BYTES
    with pytest.raises(ConfigError, match=rf"{bar_obs}-dim observations") as err:
        TaskSpec.from_dict(_task(num_envs), intraday=True)
    assert err.value.details["field"] == "hyperparameters.num_envs"
    assert TaskSpec.from_dict(_task(40_000), intraday=True).hyperparameters["num_envs"] == 40_000
