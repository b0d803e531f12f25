"""The windows and the objective of the direct learner (:mod:`trainer.agents.direct`), as pure
functions: draw windows of days over ticker subsets, run a policy and the env's transition over
them, and score the result (the module docstring of :mod:`trainer.agents.direct` gives the
objective and its sources).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import torch

from trainer.agents.cross_sectional import CrossSectionalPolicy
from trainer.envs.membership_mask import member_log_mean_gross, member_target, sell_non_members
from trainer.envs.portfolio_dynamics import DSR_PRIOR_VARIANCE, Dynamics, PortfolioState, target_weights, transition
from trainer.errors import ConfigError

__all__ = [
    "Objective",
    "Penalties",
    "WindowBatch",
    "action_map",
    "check_flatten",
    "draw_windows",
    "window_objective",
    "window_rollout",
]


class Penalties(NamedTuple):
    """The weights of the objective's penalty terms (see the module docstring)."""

    variance: float
    tracking: float
    turnover: float


class WindowBatch(NamedTuple):
    """Windows of days over ticker subsets, time-major.

    Attributes:
        features: (H, E, m, K) float32 per-ticker features of each window's days.
        gross: (H, E, m) gross returns ``close[t+1] / close[t]`` of the subset (env dtype).
        benchmark: (H, E) log return of the subset's cost-free daily-rebalanced 1/m portfolio
            (over each day's members when ``members`` is given).
        members: (H, E, m) bool point-in-time universe of the subset (``MarketData.members``),
            or ``None``: every ticker is a member on every day.
    """

    features: torch.Tensor
    gross: torch.Tensor
    benchmark: torch.Tensor
    members: torch.Tensor | None = None


class Objective(NamedTuple):
    """``objective`` () and its terms (each () averaged over windows), as tensors."""

    objective: torch.Tensor
    mean_log_return: torch.Tensor
    variance: torch.Tensor
    tracking_variance: torch.Tensor
    turnover: torch.Tensor


def check_flatten(env: Any) -> None:
    """The windows do not model the all-cash close of intraday sessions.

    Raises:
        ConfigError: ``env.flatten_at_close`` is on (field ``env.flatten_at_close``).
    """
    if env.flatten_at_close:
        raise ConfigError(
            "env.flatten_at_close: the direct learner's windows do not model the all-cash session close; "
            "turn it off or train another algorithm",
            field="env.flatten_at_close",
        )


def draw_windows(
    features: torch.Tensor,
    gross: torch.Tensor,
    *,
    num_windows: int,
    length: int,
    subset: int,
    generator: torch.Generator,
    members: torch.Tensor | None = None,
) -> WindowBatch:
    """Draw ``num_windows`` windows of ``length`` days, each over a random ``subset`` of tickers.

    Args:
        features: (T, N, K) float32 (:meth:`~trainer.envs.portfolio.PortfolioVecEnv.market_tensors`).
        gross: (T, N) gross returns, row ``t`` from close ``t`` to ``t+1`` (last row unused).
        num_windows, length, subset: ``E``, ``H`` and ``m``.
        generator: the agent's generator (start days and subsets), on the tables' device.
        members: (T, N) bool point-in-time universe
            (:attr:`~trainer.envs.portfolio.PortfolioVecEnv.market_members`), or ``None``.

    Raises:
        ConfigError: the train split has fewer than ``length`` steps (field ``direct.rollout_steps``).
    """
    t_days, n = gross.shape
    latest = t_days - 1 - length  # the window's last step reads gross[start + length - 1] <= T - 2
    if latest < 0:
        raise ConfigError(
            f"direct.rollout_steps: a window of {length} days needs {length + 1} train days, the split has {t_days}",
            field="direct.rollout_steps",
        )
    dev = gross.device
    starts = torch.randint(0, latest + 1, (num_windows,), device=dev, generator=generator)
    tickers = torch.rand((num_windows, n), device=dev, generator=generator).argsort(dim=1)[:, :subset]
    days = starts[None, :] + torch.arange(length, device=dev)[:, None]  # (H, E)
    rows, cols = days[:, :, None], tickers[None, :, :]
    sub_gross = gross[rows, cols]
    sub_members = None if members is None else members[rows, cols]
    return WindowBatch(features[rows, cols], sub_gross, member_log_mean_gross(sub_gross, sub_members), sub_members)


def action_map(env_cfg: Any) -> dict[str, Any]:
    """The env settings that turn a policy's action into trades, as the keyword arguments of
    :func:`window_rollout` and :func:`window_objective`: ``logit_scale``, ``cash_bias``,
    ``execution_lag``."""
    return {
        "logit_scale": env_cfg.logit_scale,
        "cash_bias": env_cfg.cash_bias,
        "execution_lag": env_cfg.execution_lag,
    }


def window_rollout(
    policy: CrossSectionalPolicy,
    batch: WindowBatch,
    dynamics: Dynamics,
    *,
    logit_scale: float,
    cash_bias: float,
    execution_lag: int = 0,
    start_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the policy and the env's transition over every window from 1/m (differentiable).

    Args:
        policy: the cross-sectional policy (its action is mapped by the env's
            :func:`~trainer.envs.portfolio_dynamics.target_weights`, as when it acts in the env).
        batch: the windows (:func:`draw_windows`).
        dynamics: the env's rules (``Dynamics.from_config(env.config)``).
        logit_scale, cash_bias: the env's action map.
        execution_lag: the env's ``execution_lag``: with 1, the target decided on day ``t``'s
            observation trades at close ``t + 1``, as the env keeps it as a pending order (the
            window's first day holds).
        start_weights: (E, m + 1) weights every window starts from; default 1/m in each stock,
            no cash (the anchor's own portfolio, so the first day pays no entry cost); with
            ``batch.members``, 1/M over the first day's M members (all cash without members).

    With ``batch.members`` the env's point-in-time rules apply each day, as in
    :meth:`~trainer.envs.portfolio.PortfolioVecEnv.step`: the target is renormalised over the
    day's members and cash, and whatever a non-member still holds after the trade is sold into
    cash (:mod:`trainer.envs.membership_mask`).

    Returns:
        ``(log_returns, turnover)``, both (H, E) in the env's dtype: each day's net log return
        (after costs) and the fraction of value traded.
    """
    h, e, m = batch.gross.shape
    dtype, dev, members = batch.gross.dtype, batch.gross.device, batch.members
    if start_weights is None:
        weights = torch.zeros((e, m + 1), dtype=dtype, device=dev)
        weights[:, :m] = 1.0 / m
        if members is not None:
            weights = member_target(weights, members[0])
    else:
        weights = start_weights.to(dtype)
    state = PortfolioState(
        weights=weights,
        value=torch.ones(e, dtype=torch.float64, device=dev),
        dsr_a=torch.zeros(e, dtype=dtype, device=dev),
        dsr_b=torch.full((e,), DSR_PRIOR_VARIANCE, dtype=dtype, device=dev),
    )
    base, cash = policy.market_scores(batch.features)  # every day of every window in one pass
    log_returns, turnovers = [], []
    pending = weights  # with execution_lag, the first day holds
    for t in range(h):
        action = policy.action_from_scores(base[t], cash[t] if cash is not None else None, state.weights)
        target = target_weights(action, logit_scale=logit_scale, cash_bias=cash_bias, dtype=dtype)
        after_trade = None
        if members is not None:
            target = member_target(target, members[t])
            after_trade = partial(sell_non_members, members=members[t])
        if execution_lag:
            target, pending = pending, target
        step = transition(state, target, batch.gross[t], batch.benchmark[t], dynamics, after_trade=after_trade)
        state = step.state
        log_returns.append(step.log_return)
        turnovers.append(step.turnover)
    return torch.stack(log_returns), torch.stack(turnovers)


def window_objective(
    policy: CrossSectionalPolicy,
    batch: WindowBatch,
    dynamics: Dynamics,
    penalties: Penalties,
    *,
    logit_scale: float,
    cash_bias: float,
    execution_lag: int = 0,
    start_weights: torch.Tensor | None = None,
) -> Objective:
    """Score the windows of :func:`window_rollout` (same arguments, plus ``penalties``).

    Returns:
        :class:`Objective`: ``J`` of the module docstring, in daily log-return units, and its terms.
    """
    r, tau = window_rollout(
        policy,
        batch,
        dynamics,
        logit_scale=logit_scale,
        cash_bias=cash_bias,
        execution_lag=execution_lag,
        start_weights=start_weights,
    )
    mean_r = r.mean(dim=0)
    variance = r.var(dim=0, correction=0)
    tracking = (r - batch.benchmark).var(dim=0, correction=0)
    turnover = tau.mean(dim=0)
    j = mean_r - penalties.variance * variance - penalties.tracking * tracking - penalties.turnover * turnover
    return Objective(j.mean(), mean_r.mean(), variance.mean(), tracking.mean(), turnover.mean())
