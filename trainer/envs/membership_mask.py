"""The point-in-time universe inside the envs: trade only the members of each day.

``MarketData.members`` (T, N) bool (:mod:`trainer.data.membership`) becomes one device tensor
when an env is built (:func:`members_tensor`); each step gathers the rows of its envs' days
with ``index_select`` and applies the functions below: fixed shapes, ``torch.where`` and
arithmetic only, so the sync-free step stays free of host syncs and of float64 (E, N) work.
A panel without a mask gives ``None`` and the envs skip all of it (same results as before).

Rules (both envs trade at day ``t``'s close with day ``t``'s members):

* portfolio env: the policy's target weights are renormalised over the members and cash
  (:func:`member_target`: the softmax restricted to them, so a zero action is ``1/M`` over the
  ``M`` members of the day, up to the cash weight); whatever weight a non-member still has after
  the no-trade band or a held row is sold into cash (:func:`sell_non_members`);
* stock-trading env: no buys of non-members, and every share of a non-member is sold
  (:func:`member_trades`); random initial holdings are drawn over the start day's members
  (:func:`member_mix`).
"""

from __future__ import annotations

import numpy as np
import torch

from trainer.data.market import MarketData

__all__ = [
    "member_equal_weight_log_gross",
    "member_log_mean_gross",
    "member_mix",
    "member_target",
    "member_trades",
    "members_tensor",
    "sell_non_members",
]


def members_tensor(data: MarketData, device: torch.device) -> torch.Tensor | None:
    """(T, N) bool on ``device``: ``data.members``, or ``None`` when the panel has no mask."""
    if data.members is None:
        return None
    return torch.as_tensor(np.ascontiguousarray(data.members, dtype=bool), device=device)


def member_target(target: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
    """Target weights renormalised over the day's members and cash.

    Args:
        target: (E, N+1) float weights (stocks, then cash) summing to 1, a softmax's output.
        members: (E, N) bool, the members of each env's day.

    Returns:
        (E, N+1) of ``target``'s dtype: ``w_i m_i / (w_cash + sum_j w_j m_j)`` (the softmax over
        members and cash only), exactly 0 for non-members; a row whose members and cash hold
        no weight at all (underflow) goes all to cash.
    """
    keep = torch.cat([members, torch.ones_like(members[:, :1])], dim=1).to(target.dtype)
    kept = target * keep
    total = kept.sum(1, keepdim=True)
    tiny = torch.finfo(target.dtype).tiny
    cash = torch.zeros_like(kept)
    cash[:, -1] = 1.0
    return torch.where(total > tiny, kept / total.clamp(min=tiny), cash)


def sell_non_members(weights: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
    """Weights after selling every non-member into cash.

    Args:
        weights: (E, N+1) float weights (stocks, then cash) summing to 1.
        members: (E, N) bool.

    Returns:
        (E, N+1): non-members exactly 0, their weight added to cash; members unchanged.
    """
    n = members.shape[1]
    stocks = weights[:, :n] * members.to(weights.dtype)
    cash = weights[:, n] + (weights[:, :n] - stocks).sum(1)
    return torch.cat([stocks, cash[:, None]], dim=1)


def member_trades(
    sells: torch.Tensor, buys: torch.Tensor, holdings: torch.Tensor, members: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The stock-trading env's whole-share trades restricted to members.

    Args:
        sells, buys: (E, N) shares to sell and buy (>= 0).
        holdings: (E, N) shares held before the trade.
        members: (E, N) bool.

    Returns:
        ``(sells, buys)``: a non-member sells all its holdings and buys nothing.
    """
    out = ~members
    return torch.where(out, holdings, sells), buys.masked_fill(out, 0.0)


def member_mix(weights: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
    """Random portfolio mixes (E, N) >= 0 restricted to members and normalised to sum 1 per row
    (all 0 in a row without members: such an episode starts in cash)."""
    mixed = weights * members.to(weights.dtype)
    return mixed / mixed.sum(1, keepdim=True).clamp(min=torch.finfo(weights.dtype).tiny)


def member_equal_weight_log_gross(gross: np.ndarray, members: np.ndarray | None) -> np.ndarray:
    """(T,) float64 ``log(mean_i R_i)`` over each day's members (0 on a day without members),
    the cost-free 1/N growth of the ``excess_log_return`` reward.

    Args:
        gross: (T, N) float64 gross returns ``close[t+1] / close[t]`` (last row ones).
        members: (T, N) bool or ``None`` (every ticker).
    """
    mask = None if members is None else torch.from_numpy(np.asarray(members, dtype=bool))
    return member_log_mean_gross(torch.from_numpy(np.asarray(gross, dtype=np.float64)), mask).numpy()


def member_log_mean_gross(gross: torch.Tensor, members: torch.Tensor | None) -> torch.Tensor:
    """The cost-free 1/N log growth over the members, on tensors of any leading shape
    (differentiable; :func:`member_equal_weight_log_gross` is its NumPy face).

    Args:
        gross: (..., N) gross returns.
        members: (..., N) bool, or ``None`` (every ticker).

    Returns:
        (...,) ``log(mean_i gross_i)`` over the members of each row (0 in a row without members).
    """
    if members is None:
        return torch.log(gross.mean(dim=-1))
    count = members.sum(dim=-1)
    total = torch.where(members, gross, torch.zeros_like(gross)).sum(dim=-1)
    return torch.log(torch.where(count > 0, total / count.clamp(min=1), torch.ones_like(total)))
