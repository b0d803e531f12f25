"""The portfolio env's dynamics as one pure, differentiable transition (:func:`transition`).

:class:`~trainer.envs.portfolio.PortfolioVecEnv` steps every env with :func:`transition` under
``torch.no_grad()``; a learner that backpropagates through the market (Moody & Saffell 2001;
Jiang, Xu & Liang 2017, arXiv 1706.10059) calls the same function with gradients, so both see
the same numbers (tested bit for bit). The function keeps no state, writes into none of its
inputs and reads nothing from the host, so it batches, compiles and runs on any device.

**Action -> target weights** (:func:`target_weights`). The action ``a`` (B, N+1) in [-1, 1]
(stocks in ticker order, then cash) becomes logits::

    z_i    = logit_scale * a_i                                    (stocks)
    z_cash = logit_scale * a_cash - cash_bias * (1 - a_cash)      (cash)
    w*     = softmax(z)                                           (long only, sums to 1)

A zero action gives every stock the same logit 0 and cash ``-cash_bias`` (default -20), so a
freshly initialised policy holds the **equal-weight portfolio** with a cash weight of
``e^-20 / (N + e^-20)`` (about 7e-11 for 29 stocks); ``a_cash = 1`` gives cash the logit
``logit_scale``, so all-cash stays reachable. Learning tilts away from 1/N, the hard-to-beat
benchmark of DeMiguel, Garlappi & Uppal (2009, "Optimal Versus Naive Diversification").

**Trade** (:func:`trade`). With pre-trade (drifted) weights ``w`` (stocks, then cash) and the
target ``w*`` of the action, the weights traded to are ``w'``:

* no-trade band ``b`` (``rebalance_band``, default 0: off), per stock. Under proportional costs
  the optimal policy leaves a region around the target untraded (Davis & Norman 1990,
  "Portfolio Selection with Transaction Costs", Math. Oper. Res. 15(4)); ``band_mode`` says
  where a stock outside it goes::

      "target" (default):  w'_i = w*_i                      if |w*_i - w_i| > b, else w_i
      "edge":              w'_i = min(max(w_i, w*_i - b), w*_i + b)

  ``"edge"`` trades only to the nearer edge of the band ``[w*_i - b, w*_i + b]``, the form of
  the optimal policy in Davis & Norman (1990) (trade to the boundary of the no-trade region);
  ``"target"`` is the simpler tolerance-band rule that trades back to the target. Then
  ``buys = sum_i max(w'_i - w_i, 0)`` and ``funds = w_cash + sum_i max(w_i - w'_i, 0)``; if
  ``buys > funds`` every buy is scaled by ``funds / buys`` (never borrows), and
  ``w'_cash = max(1 - sum_i w'_i, 0)``.
* partial adjustment ``eta`` (``trade_rate`` in (0, 1], default 1: trade all the way), on the
  whole vector after the band: ``w' <- w + eta (w' - w)``. Moving a fixed fraction of the way to
  the aim each period is the optimal trading rule under quadratic costs of Garleanu & Pedersen
  (2013, "Dynamic Trading with Predictable Returns and Transaction Costs", J. Finance 68(6),
  eq. 8, ``x_t = x_{t-1} + (a/lambda)(aim_t - x_{t-1})``); here it slows the portfolio down
  without changing where it aims. A convex combination of two long-only weight vectors that
  sum to 1, it never borrows.

**Costs and drift** (all rows at once), with value ``V_t`` and gross stock returns
``R_i = close[t+1, i] / close[t, i]``::

    turnover  tau = sum_i |w'_i - w_i|            (stocks only; cash is the other side)
    cost          = cost_pct * tau * V_t          (USD, paid at t's close)
    growth    G   = w'_cash + sum_i w'_i R_i
    V_{t+1}       = (V_t - cost) * G
    w_i(t+1)      = w'_i R_i / G,  w_cash(t+1) = w'_cash / G    (drift)

This is the proportional-cost model used for 1/N and its competitors by DeMiguel, Garlappi &
Uppal (2009, "Optimal Versus Naive Diversification", section 2, returns net of proportional
transaction costs), and the first-order form of the transaction-remainder factor
``mu_t ~ 1 - c * sum_i |w'_i - w_i|`` of Jiang, Xu & Liang (2017, eq. 16).

**Rewards** (``reward``, times ``reward_scaling``), with ``r_t = log(V_{t+1} / V_t)``:

* ``log_return``: ``r_t``. Summed over an episode it is the log growth of wealth.
* ``excess_log_return``: ``r_t - log(mean_i R_i)``, the log return over the cost-free,
  daily-rebalanced equal-weight portfolio of the same day (``log_ew_gross``).
* ``differential_sharpe``: Moody & Saffell (2001, "Learning to Trade via Direct Reinforcement",
  IEEE TNN 12(4), eq. 8-9), with the simple return ``R_t = V_{t+1}/V_t - 1``::

      A_t = A_{t-1} + eta (R_t - A_{t-1}),   B_t = B_{t-1} + eta (R_t^2 - B_{t-1})
      D_t = (B_{t-1} (R_t - A_{t-1}) - 0.5 A_{t-1} (R_t^2 - B_{t-1})) / (B_{t-1} - A_{t-1}^2)^(3/2)

  with ``eta = dsr_eta`` (the env starts each episode from ``A_0 = 0``, ``B_0 =``
  :data:`DSR_PRIOR_VARIANCE`). Other rewards pass ``A`` and ``B`` on
  unchanged.

``turnover_penalty`` ``lambda`` (default 0) subtracts ``lambda * tau`` before ``reward_scaling``:
a training-only surcharge on the turnover the costs are paid on (the ``delta |F_t - F_{t-1}|``
cost term of Moody & Saffell 2001, eq. 2); the portfolio value, and so every metric, pays only
``cost_pct``.

**Gradients.** :func:`transition` is differentiable in ``target``, the state and ``gross``
except where the rules switch: with the band on, a stock left inside it has a zero gradient
in its target (``"target"`` mode: the hard switch at ``|w*_i - w_i| = b``; ``"edge"``: the
``min``/``max``), the funding scale switches at ``buys = funds``, ``|.|`` of the turnover has
the subgradient 0 where a weight does not move, the cash weight is clamped at 0 and the
differential Sharpe ratio's variance at ``1e-12``. With the band off and ``trade_rate`` 1 it
is smooth wherever no weight sits exactly on its target.

**Execution lag** (``execution_lag`` of :class:`~trainer.envs.portfolio_config.PortfolioConfig`)
is not part of one transition: with lag 1 the caller passes the target decided one step
earlier (the env keeps it as a pending order; its first step of an episode holds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from trainer.envs.portfolio_config import PortfolioConfig

__all__ = [
    "DSR_PRIOR_VARIANCE",
    "Dynamics",
    "PortfolioState",
    "StepResult",
    "banded_target",
    "initial_state",
    "target_weights",
    "trade",
    "transition",
]

#: ``B_0`` of the differential Sharpe ratio: the second moment of a 1 % daily return.
DSR_PRIOR_VARIANCE = 1e-4


class PortfolioState(NamedTuple):
    """What one portfolio carries from step to step (``B`` rows, ``N`` stocks).

    Attributes:
        weights: (B, N+1) float drifted pre-trade weights (stocks, then cash), summing to 1.
        value: (B,) float portfolio value, USD (the env keeps it float64).
        dsr_a: (B,) float first moment ``A`` of the differential Sharpe ratio.
        dsr_b: (B,) float second moment ``B``.
    """

    weights: torch.Tensor
    value: torch.Tensor
    dsr_a: torch.Tensor
    dsr_b: torch.Tensor


@dataclass(frozen=True)
class Dynamics:
    """The settings of :class:`PortfolioConfig` that the transition reads (see its attributes
    and the module docstring); build it with :meth:`from_config`."""

    cost_pct: float = 1e-3
    rebalance_band: float = 0.0
    band_mode: str = "target"
    trade_rate: float = 1.0
    reward: str = "log_return"
    reward_scaling: float = 1.0
    dsr_eta: float = 1.0 / 63.0
    turnover_penalty: float = 0.0

    @classmethod
    def from_config(cls, config: PortfolioConfig) -> Dynamics:
        """The dynamics of ``config`` (validated here).

        Raises:
            ConfigError: ``config`` is invalid (naming the field).
        """
        config.validate()
        return cls(
            cost_pct=float(config.cost_pct),
            rebalance_band=float(config.rebalance_band),
            band_mode=config.band_mode,
            trade_rate=float(config.trade_rate),
            reward=config.reward,
            reward_scaling=float(config.reward_scaling),
            dsr_eta=float(config.dsr_eta),
            turnover_penalty=float(config.turnover_penalty),
        )


def initial_state(
    batch: int,
    num_stocks: int,
    *,
    initial_cash: float = 1e6,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> PortfolioState:
    """The state every env episode starts from: all cash, ``A_0 = 0``, ``B_0 =``
    :data:`DSR_PRIOR_VARIANCE`.

    Args:
        batch: ``B`` rows; num_stocks: ``N``.
        initial_cash: value of each row, USD.
        dtype: of the weights and moments (the value is float64, as in the env).
        device: of the tensors.

    Returns:
        :class:`PortfolioState` with weights (B, N+1) ``[0, ..., 0, 1]``.
    """
    weights = torch.zeros(batch, num_stocks + 1, dtype=dtype, device=device)
    weights[:, num_stocks] = 1.0
    return PortfolioState(
        weights,
        torch.full((batch,), float(initial_cash), dtype=torch.float64, device=device),
        torch.zeros(batch, dtype=dtype, device=device),
        torch.full((batch,), DSR_PRIOR_VARIANCE, dtype=dtype, device=device),
    )


class StepResult(NamedTuple):
    """The outcome of one :func:`transition` (``B`` rows, in ``target``'s dtype unless noted).

    Attributes:
        state: the next :class:`PortfolioState` (drifted weights at the next close; ``value``
            in the dtype of the previous value).
        reward: (B,) scaled reward (``reward_scaling`` applied, ``turnover_penalty`` included).
        log_return: (B,) ``log(V_{t+1} / V_t)``, net of costs.
        turnover: (B,) ``sum_i |w'_i - w_i|`` over the stocks, a fraction of value.
        traded: (B, N+1) post-trade weights ``w'`` (after the band, the trade rate and any
            ``after_trade`` rule).
        costs_fraction: (B,) ``cost_pct * turnover``, the costs as a fraction of ``V_t``.
    """

    state: PortfolioState
    reward: torch.Tensor
    log_return: torch.Tensor
    turnover: torch.Tensor
    traded: torch.Tensor
    costs_fraction: torch.Tensor


def target_weights(
    action: torch.Tensor, *, logit_scale: float, cash_bias: float, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Map actions to long-only target weights (stocks, then cash) that sum to 1.

    Args:
        action: (B, N+1) float in [-1, 1] (clipped; NaN counts as 0).
        logit_scale, cash_bias: see :class:`~trainer.envs.portfolio_config.PortfolioConfig`.
        dtype: of the arithmetic and the result (float64: the exact reference; float32 on
            accelerators, see :class:`~trainer.envs.portfolio.PortfolioVecEnv`'s ``dtype``).

    Returns:
        (B, N+1) ``dtype`` weights; a zero action gives ``1/N`` per stock up to a cash weight of
        ``e^-cash_bias / (N + e^-cash_bias)``.
    """
    a = torch.nan_to_num(action.to(dtype), nan=0.0).clamp(-1.0, 1.0)
    logits = a * logit_scale
    cash = a[:, -1]
    logits[:, -1] = cash * (logit_scale + cash_bias) - cash_bias
    return torch.softmax(logits, dim=1)


def banded_target(target: torch.Tensor, weights: torch.Tensor, band: float, mode: str = "target") -> torch.Tensor:
    """Apply the no-trade band of the module docstring to target weights.

    Args:
        target: (B, N+1) float target weights (stocks, then cash), summing to 1.
        weights: (B, N+1) current (drifted) weights of the same dtype, summing to 1.
        band: ``rebalance_band`` in [0, 1), a fraction of portfolio value.
        mode: ``"target"`` (a stock outside the band goes to its target) or ``"edge"`` (to the
            band's nearer edge, Davis & Norman 1990).

    Returns:
        (B, N+1) weights after trading (``target``'s dtype): buys are scaled down pro rata when
        cash and the sales do not fund them; cash is the rest (>= 0, the weights sum to 1).

    Raises:
        ValueError: unknown ``mode``.
    """
    n = target.shape[1] - 1
    current, goal = weights[:, :n], target[:, :n]
    if mode == "target":
        stocks = torch.where((goal - current).abs() > band, goal, current)
    elif mode == "edge":
        stocks = torch.minimum(torch.maximum(current, goal - band), goal + band)
    else:
        raise ValueError(f"band mode must be 'target' or 'edge', got {mode!r}")
    delta = stocks - current
    buy, sell = delta.clamp(min=0.0), (-delta).clamp(min=0.0)
    buys, funds = buy.sum(1), weights[:, n] + sell.sum(1)
    tiny = torch.finfo(target.dtype).tiny
    scale = torch.where(buys > funds, funds / buys.clamp(min=tiny), torch.ones_like(buys))
    stocks = current + buy * scale[:, None] - sell
    cash = (1.0 - stocks.sum(1)).clamp(min=0.0)
    return torch.cat([stocks, cash[:, None]], dim=1)


def trade(target: torch.Tensor, weights: torch.Tensor, dynamics: Dynamics) -> torch.Tensor:
    """The weights traded to from ``weights`` when aiming at ``target``: the band (if on), then
    the partial adjustment (if ``trade_rate`` < 1) of the module docstring.

    Args:
        target: (B, N+1) float target weights, summing to 1.
        weights: (B, N+1) current weights of the same dtype, summing to 1.
        dynamics: the rules.

    Returns:
        (B, N+1) post-trade weights; ``target`` itself when the band is off and ``trade_rate``
        is 1 (today's rule, bit for bit).
    """
    traded = target
    if dynamics.rebalance_band > 0:
        traded = banded_target(traded, weights, dynamics.rebalance_band, dynamics.band_mode)
    if dynamics.trade_rate < 1:
        traded = weights + dynamics.trade_rate * (traded - weights)
    return traded


def transition(
    state: PortfolioState,
    target: torch.Tensor,
    gross: torch.Tensor,
    log_ew_gross: torch.Tensor,
    dynamics: Dynamics,
    *,
    after_trade: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> StepResult:
    """One close-to-close step of ``B`` portfolios: trade toward ``target``, pay costs, drift.

    Args:
        state: the portfolios before trading (weights of ``target``'s dtype).
        target: (B, N+1) float target weights (stocks, then cash), summing to 1.
        gross: (B, N) gross returns ``close[t+1] / close[t]`` of the stocks, ``target``'s dtype.
        log_ew_gross: (B,) ``log(mean_i gross_i)`` (read by ``excess_log_return`` only).
        dynamics: the rules (:meth:`Dynamics.from_config`).
        after_trade: optional map of the (B, N+1) post-trade weights to those actually held
            (the env's all-cash rule of ``flatten_at_close``); it must keep them summing to 1.

    Returns:
        :class:`StepResult`. No input is modified; gradients flow as the module docstring says.
    """
    n = gross.shape[1]
    weights = state.weights
    traded = trade(target, weights, dynamics)
    if after_trade is not None:
        traded = after_trade(traded)
    turnover = (traded[:, :n] - weights[:, :n]).abs().sum(1)
    costs_fraction = dynamics.cost_pct * turnover
    kept = 1.0 - costs_fraction  # fraction of value left after costs
    grown = torch.cat([traded[:, :n] * gross, traded[:, n:]], dim=1)
    growth = grown.sum(1)
    new_weights = grown / growth[:, None]
    factor = kept * growth
    value = state.value * factor.to(state.value.dtype)
    log_ret = torch.log(factor)
    dsr_a, dsr_b = state.dsr_a, state.dsr_b
    if dynamics.reward == "log_return":
        raw = log_ret
    elif dynamics.reward == "excess_log_return":
        raw = log_ret - log_ew_gross
    else:
        r = factor - 1.0
        a, b = dsr_a, dsr_b
        raw = (b * (r - a) - 0.5 * a * (r * r - b)) / (b - a * a).clamp(min=1e-12).pow(1.5)
        dsr_a, dsr_b = a + dynamics.dsr_eta * (r - a), b + dynamics.dsr_eta * (r * r - b)
    if dynamics.turnover_penalty > 0:
        raw = raw - dynamics.turnover_penalty * turnover
    return StepResult(
        state=PortfolioState(new_weights, value, dsr_a, dsr_b),
        reward=raw * dynamics.reward_scaling,
        log_return=log_ret,
        turnover=turnover,
        traded=traded,
        costs_fraction=costs_fraction,
    )
