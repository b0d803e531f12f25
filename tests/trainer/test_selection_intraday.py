"""The validation score of an intraday agent annualises with the bars' own periods per year."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.intraday import intraday_panel
from trainer.data.pipeline import build_market_data
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.evaluation import evaluate_policy
from trainer.selection import SelectionRule


@pytest.fixture(scope="module")
def bars(data_dir):
    """AAPL, MSFT, NVDA, 2024-03-11 to 2024-03-22: ten sessions of 78 five-minute bars."""
    return build_market_data(intraday_panel(data_dir, ["AAPL", "MSFT", "NVDA"], "2024-03-11", "2024-03-22"))


def _weights_policy(obs: torch.Tensor) -> torch.Tensor:
    # a fixed tilt, so the account moves every bar
    return torch.tensor([[1.0, -0.5, 0.2, -1.0]]).expand(obs.shape[0], 4)


def test_sub_window_sharpes_of_5_minute_bars_use_78_x_252_periods_a_year(bars):
    rule = SelectionRule("mean_minus_std", windows=4, k=1.0)
    metrics = evaluate_policy(_weights_policy, bars, PortfolioConfig(), random_windows=0, selection=rule)
    assert len(bars.dates) == 10 * 78
    full = evaluate_policy(
        _weights_policy, bars, PortfolioConfig(), random_windows=0, selection=SelectionRule("full_sharpe")
    )
    subs = [w["sharpe"] for w in metrics["sub_windows"]]
    assert all(s is not None for s in subs)
    # the whole-window rule equals the Sharpe ratio the metrics report (empyrical, 78 x 252)
    assert full["score"] == pytest.approx(full["sharpe_ratio"], rel=1e-9)
    # recompute each quarter by hand from the account values of a bar-by-bar replay
    from trainer.backtest.engine import daily_frame
    from trainer.backtest.policy_run import run_policy
    from trainer.envs.kinds import make_env
    from trainer.evaluation import eval_config

    env = make_env(bars, eval_config(PortfolioConfig()), num_envs=1, device="cpu", seed=0)
    values = daily_frame(run_policy(_weights_policy, env, start_day=0, seed=0), bars)["account_value"].to_numpy()
    r = values[1:] / values[:-1] - 1.0
    quarter = len(r) // 4 + 1  # 779 returns: windows of 195, 195, 195, 194
    hand = []
    for lo, hi in ((0, quarter), (quarter, 2 * quarter), (2 * quarter, 3 * quarter), (3 * quarter, len(r))):
        w = r[lo:hi]
        hand.append(w.mean() / w.std(ddof=1) * math.sqrt(78 * 252))
    np.testing.assert_allclose(subs, hand, rtol=1e-9)
    assert metrics["score"] == pytest.approx(np.mean(hand) - np.std(hand), rel=1e-9)
