"""The one loop that runs a deterministic policy through a market env: the validation score of
a generation (:func:`trainer.evaluation.evaluate_policy`) and the backtest
(:func:`trainer.backtest.engine.run_backtest`) both call :func:`run_policy`, so they cannot
disagree about what a policy did on a day."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trainer.errors import ConfigError
from trainer.util.nonfinite import check_policy_actions

__all__ = ["Policy", "PolicyTrace", "run_policy"]

Policy = Callable[[torch.Tensor], Any]
"""obs (E, obs_dim) float32 -> action (E, action_dim) in [-1, 1] (tensor or array; ``(N,)``
is accepted when there is one env)."""


@dataclass(frozen=True)
class PolicyTrace:
    """What each env of a :func:`run_policy` call went through, one column per day.

    ``E`` is the number of envs, ``L`` the longest episode in steps, ``N`` the tickers. Column
    ``t`` is the account at the close of the episode's ``t``-th day, before that day's trades;
    columns past the end of a shorter episode hold NaN (``days``: -1).

    Attributes:
        values: (E, L + 1) float64 portfolio value in USD (column 0: before the first trade).
        days: (E, L + 1) int64 day indices into the env's data.
        cash: (E, L + 1) float64 cash in USD.
        holdings: (E, L + 1, N) float64 shares held entering each day.
        costs: (E, L + 1) float64 USD of transaction costs paid at each day's close (the last
            column is 0: the episode ends at that close).
        actions: (E, L, N) float32 the policy's raw actions, one per step.
    """

    values: np.ndarray
    days: np.ndarray
    cash: np.ndarray
    holdings: np.ndarray
    costs: np.ndarray
    actions: np.ndarray


def _as_action(raw: Any, num_envs: int, num_stocks: int, device: torch.device) -> torch.Tensor:
    action = torch.as_tensor(raw).detach().to(device=device, dtype=torch.float32)
    if num_envs == 1 and action.shape == (num_stocks,):
        action = action[None]
    if tuple(action.shape) != (num_envs, num_stocks):
        raise ConfigError(
            f"policy returned an action of shape {tuple(action.shape)}; expected ({num_envs}, {num_stocks}), "
            "one per ticker",
            field="policy",
        )
    return action


@torch.no_grad()
def run_policy(
    policy: Policy, env: Any, *, start_day: int | None, seed: int | None = None, policy_name: str = "the policy"
) -> PolicyTrace:
    """Run every env of ``env`` for exactly one episode with ``policy``, recording each day.

    Args:
        policy: see :data:`Policy`; called under ``torch.no_grad()`` once per step.
        env: a :class:`~trainer.envs.stock_trading.StockTradingVecEnv` (or an env with the same
            ``info`` keys: ``portfolio_value``, ``cash``, ``holdings``, ``costs``, ``day``) whose
            episode settings are what the caller wants (no random start for a backtest).
        start_day: day index every env starts on, or ``None`` for the env's own start days.
        seed: reset seed of the env (its random start days, if any).
        policy_name: who the policy is, for errors (e.g. ``"agent 12"``).

    Returns:
        A :class:`PolicyTrace`.

    Raises:
        ConfigError: the policy returns an action of the wrong shape.
        PolicyError: the policy returns a NaN or infinite action (a diverged agent: refused,
            never run as "hold"), naming ``policy_name`` and the day.
    """
    options = {"start_day": start_day} if start_day is not None else None
    obs, info = env.reset(seed=seed, options=options)
    num_envs, num_stocks = env.num_envs, env.action_dim
    columns = {key: [info[key].clone()] for key in ("portfolio_value", "cash", "holdings", "day")}
    costs: list[torch.Tensor] = []
    actions: list[torch.Tensor] = []
    active = torch.ones(num_envs, dtype=torch.bool, device=env.device)
    history = [active]
    while bool(active.any()):
        action = _as_action(policy(obs), num_envs, num_stocks, env.device)
        first_active = int(active.nonzero()[0, 0])
        check_policy_actions(action, policy=policy_name, date=env.data.dates[int(columns["day"][-1][first_active])])
        actions.append(action)
        obs, _reward, terminated, truncated, info = env.step(action)
        costs.append(info["costs"].clone())
        for key, column in columns.items():
            column.append(info[key].clone())
        active = active & ~(terminated | truncated)
        history.append(active)

    # alive[:, t]: column t belongs to the episode (the env had not ended before step t)
    alive = torch.stack(history[:-1], dim=1).cpu().numpy()
    alive = np.concatenate([np.ones((num_envs, 1), dtype=bool), alive], axis=1)

    def stacked(items: list[torch.Tensor], dtype: Any) -> np.ndarray:
        return torch.stack(items, dim=1).cpu().numpy().astype(dtype, copy=False)

    values = stacked(columns["portfolio_value"], np.float64)
    cash = stacked(columns["cash"], np.float64)
    holdings = stacked(columns["holdings"], np.float64)
    days = stacked(columns["day"], np.int64)
    # a step's costs count while the env was in its episode; the last day of an episode trades nothing
    cost = np.where(alive[:, 1:], stacked(costs, np.float64), 0.0)
    cost = np.concatenate([cost, np.zeros((num_envs, 1))], axis=1)
    values[~alive], cash[~alive], days[~alive], cost[~alive] = np.nan, np.nan, -1, np.nan
    holdings[~alive] = np.nan
    acted = torch.stack(actions, dim=1).cpu().numpy()
    acted[~alive[:, 1:]] = np.nan
    return PolicyTrace(values=values, days=days, cash=cash, holdings=holdings, costs=cost, actions=acted)
