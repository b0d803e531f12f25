"""The market state of a portfolio agent: its current weights (or cash and holdings), the
observation the portfolio env would show it, its target weights and what the env would trade.

The target weights come from the env's own action map
(:func:`~trainer.envs.portfolio_dynamics.target_weights`) and the weights traded to from the
env's own rule (:func:`~trainer.envs.portfolio_dynamics.trade`: no-trade band, band mode and
trade rate), on a one-row tensor; orders and costs follow
the env's dynamics (a trade at the close of ``(w'_i - w_i) V / close_i`` shares, costs
``cost_pct * turnover * V`` taken from every position pro rata), as the backtest's trades do
(:func:`trainer.backtest.engine.executed_trades`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.errors import DataError
from trainer.serving.bodies import cash_of, holdings_of, portfolio_value, weights_of


@dataclass(frozen=True)
class PortfolioState:
    """The portfolio a request describes, before the day's prices are known.

    Attributes:
        weights: (N+1,) float64 current weights (tickers, then cash) when the request gave them.
        cash: USD, when the request gave cash and holdings (or neither: a fresh start).
        holdings: (N,) float64 shares (fractional allowed), with ``cash``.
    """

    weights: np.ndarray | None = None
    cash: float | None = None
    holdings: np.ndarray | None = None


def portfolio_state(body: Mapping[str, Any], tickers: list[str], initial_cash: float) -> PortfolioState:
    """The current portfolio of a market-state request for a portfolio agent.

    ``{"weights": {ticker: w, ..., "cash": w}}`` (:func:`~trainer.serving.bodies.weights_of`),
    or ``"cash"`` (USD, default ``initial_cash``) and ``"holdings"`` (``{ticker: shares}``,
    fractional allowed, default none), the default being the env's fresh start: all in cash.

    Raises:
        DataError: weights together with cash or holdings (``weights``), or a bad part naming
            its field (``weights.KO``, ``cash``, ``holdings.AAPL``).
    """
    if "weights" in body:
        both = [k for k in ("cash", "holdings") if k in body]
        if both:
            raise DataError(
                f"send either weights or cash and holdings, not both (got weights and {' and '.join(both)})",
                field="weights",
            )
        return PortfolioState(weights=weights_of(body["weights"], tickers))
    return PortfolioState(cash=cash_of(body, initial_cash), holdings=holdings_of(body, tickers, whole=False))


def _named(tickers: list[str], weights: np.ndarray) -> dict[str, float]:
    return dict(zip([*tickers, "cash"], map(float, weights)))


def portfolio_answer(policy: Any, config: Any, state: PortfolioState, market: Any, t: int, day: str) -> dict[str, Any]:
    """The answer to a portfolio agent's market state on row ``t`` of ``market``.

    Args:
        policy: the agent's :class:`~trainer.serving.policy.ServedPolicy`.
        config: its ``PortfolioConfig``.
        state: from :func:`portfolio_state`.
        market: the panel the env reads (scale-free features when the agent uses them), with
            the agent's tickers and features.
        t: the row of the day acted on; ``day`` its label.

    Returns:
        ``date``, ``action`` (N+1,), ``weights`` (current, ``{ticker: w, ..., "cash": w}``),
        ``target_weights`` (the policy's), ``rebalanced_weights`` (only when the agent has a
        ``rebalance_band``, a ``trade_rate`` below 1, flattens at the close or trades a point-in-time
        universe (``market.members``, non-members sold): the weights the env trades to),
        ``rebalance_band``, ``execution_lag`` (1: the env would trade these orders at the next
        close, not this one), ``turnover`` (fraction of value), ``prices`` and the
        ``observation``; with cash and holdings also ``value``, ``cash``, ``holdings``,
        ``orders`` (per ticker: ``shares`` signed and fractional, ``side``, ``price``,
        ``value`` USD) and ``costs`` (USD).

    Raises:
        DataError: cash and holdings worth nothing (``cash``) or more than the largest float
            (``holdings.<ticker>`` or ``cash``, :func:`~trainer.serving.bodies.portfolio_value`).
    """
    import torch

    from trainer.data.sessions import session_close_mask
    from trainer.envs.membership_mask import member_target, sell_non_members
    from trainer.envs.observations import FeatureStats
    from trainer.envs.portfolio_dynamics import Dynamics, target_weights, trade
    from trainer.envs.portfolio_layout import portfolio_market_block

    tickers, n = policy.tickers, len(policy.tickers)
    close = np.asarray(market.close[t], dtype=np.float64)
    value = None
    if state.weights is not None:
        weights = state.weights
    else:
        value = portfolio_value(state.cash, state.holdings, close, tickers)
        if value <= 0:
            raise DataError("cash and holdings are worth nothing; send cash > 0 or some holdings", field="cash")
        weights = np.append(state.holdings * close, state.cash) / value

    layout = policy.config["observation_layout"]
    block = next(b for b in layout["blocks"] if b["name"] == "market")
    stats = FeatureStats.from_dict(block["feature_stats"]) if "feature_stats" in block else None
    obs = np.zeros(layout["obs_dim"], dtype=np.float32)
    obs[: block["size"]] = portfolio_market_block(
        close[None],
        market.features[t : t + 1],
        list(market.feature_names),
        feature_stats=stats,
        scales=block.get("scales"),
    )[0]
    obs[block["size"] :] = weights
    action = policy.act(obs[None])[0]

    current = torch.as_tensor(weights[None], dtype=torch.float64)
    target = target_weights(torch.as_tensor(action[None]), logit_scale=config.logit_scale, cash_bias=config.cash_bias)
    members = None if market.members is None else torch.as_tensor(market.members[t][None])
    if members is not None:  # a point-in-time universe: the day's members only, as in the env
        target = member_target(target, members)
    traded = trade(target, current, Dynamics.from_config(config))
    if members is not None:
        traded = sell_non_members(traded, members)
    if config.flatten_at_close and session_close_mask(market.dates)[t]:
        traded = torch.zeros_like(traded)
        traded[0, n] = 1.0  # all cash on a session's last bar
    target, traded = target[0].numpy(), traded[0].numpy()
    turnover = float(np.abs(traded[:n] - weights[:n]).sum())
    out: dict[str, Any] = {
        "date": day,
        "action": action.tolist(),
        "weights": _named(tickers, weights),
        "target_weights": _named(tickers, target),
    }
    if config.rebalance_band > 0 or config.trade_rate < 1 or config.flatten_at_close or members is not None:
        out["rebalanced_weights"] = _named(tickers, traded)
    out.update(
        rebalance_band=float(config.rebalance_band),
        execution_lag=int(config.execution_lag),
        turnover=turnover,
        prices=dict(zip(tickers, close.tolist())),
    )
    if value is not None:
        with np.errstate(over="ignore"):  # beyond the largest float: refused by answer()
            shares = (traded[:n] - weights[:n]) * value / close
        out.update(
            value=value,
            cash=state.cash,
            holdings=dict(zip(tickers, state.holdings.tolist())),
            orders=[
                {
                    "ticker": ticker,
                    "shares": float(shares[i]),
                    "side": "buy" if shares[i] > 0 else "sell" if shares[i] < 0 else "hold",
                    "price": float(close[i]),
                    "value": float(shares[i] * close[i]),
                }
                for i, ticker in enumerate(tickers)
            ],
            costs=float(config.cost_pct) * turnover * value,
        )
    out["observation"] = obs.tolist()
    return out
