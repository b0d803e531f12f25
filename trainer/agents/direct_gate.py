"""The challenger gate of the direct learner: trade an edge only where held-out days show it.

The penalised learner (the *anchor*, :class:`~trainer.agents.direct.DirectConfig`'s tracking
and turnover penalties) stays near 1/N by construction: it does no harm, and it cannot trade an
edge that needs turnover (docs/default-selection.md: a planted 5-day reversal needs 15-20 % of
value traded a day). Without the penalties the learner finds such an edge on long histories and
stays at 1/N on placebos, but on short histories it fits noise. Which of the two a task's data
supports is a question of evidence, so the learner asks it of data it did not train on:

1. The train split's last :data:`HOLDOUT_FRACTION` of days (after a :data:`HOLDOUT_GAP`-day
   gap) is held out; the rest is the *inner* train span.
2. The anchor and a *challenger* (no tracking or turnover penalty, tilt bound
   ``challenger_kappa``) each take a third of the generation's gradient steps on the inner
   span, from the same starting weights.
3. Both run once over the held-out days from 1/N (all tickers, no gradient). The challenger is
   kept only if its Sharpe ratio beats the anchor's, paired on the same days, with one-sided
   p-value <= ``challenger_alpha``: the studentised circular block bootstrap of
   :func:`trainer.backtest.relative.vs_equal_weight` (Ledoit & Wolf 2008, "Robust performance
   hypothesis testing with the Sharpe ratio", J. Empirical Finance 15(5)), with the anchor in
   the benchmark's place. This is a pre-test against the do-no-harm default, the
   champion-challenger form of a one-sided test at level ``alpha``: under no edge the
   challenger is kept with probability at most ``alpha``.
4. The winner takes the remaining steps on the whole train split (the most recent days
   included). A kept challenger's settings become the agent's. Either way the agent's
   ``challenger_alpha`` becomes 0: the question is answered for its line, and the generations
   that continue it do not ask it again of the same days (asking once per generation would
   be a test repeated until it passes).

The generation's budget is unchanged: the three phases share its gradient steps. A split whose
held-out span would be shorter than :data:`MIN_HOLDOUT_DAYS` gives no evidence, and the anchor
trains alone, as with ``challenger_alpha`` 0.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from trainer.agents.cross_sectional import CrossSectionalPolicy
from trainer.agents.direct_objective import WindowBatch, action_map, window_rollout
from trainer.backtest.relative import vs_equal_weight
from trainer.envs.portfolio_dynamics import Dynamics

__all__ = [
    "HOLDOUT_FRACTION",
    "HOLDOUT_GAP",
    "MIN_HOLDOUT_DAYS",
    "HoldoutSplit",
    "challenger_verdict",
    "gate_skipped",
    "holdout_returns",
    "holdout_split",
]

#: Share of the train split's days held out for the gate.
#: 0.35 since 2026-12-04 (rule 4c of docs/default-selection.md; 0.2 before): with a fifth held out the
#: gate stayed closed on planted markets with large edges.
HOLDOUT_FRACTION = 0.35
#: Days skipped between the inner train span and the held-out span (the task splits' gap).
HOLDOUT_GAP = 5
#: Fewest held-out days (half a trading year) that count as evidence.
MIN_HOLDOUT_DAYS = 126
#: Periods a year the gate's statistics are annualised with; the decision reads only the
#: p-value, which does not depend on it.
PERIODS_PER_YEAR = 252


class HoldoutSplit(NamedTuple):
    """Day indices of a train split's tables: inner train ``[0, cut)``, held out ``[start, T)``."""

    cut: int
    start: int


def holdout_split(num_days: int, window: int) -> HoldoutSplit | None:
    """Where to cut a train split of ``num_days`` rows for the gate; None when it cannot.

    Args:
        num_days: rows ``T`` of the split's tables (``gross`` row ``t`` is close ``t`` to ``t+1``,
            the last row unused).
        window: the learner's window length ``H``; the inner span needs ``H + 1`` rows.

    Returns:
        The split, or None when the held-out span would have fewer than
        :data:`MIN_HOLDOUT_DAYS` returns or the inner span fewer than ``window + 1`` rows.
    """
    held = int(num_days * HOLDOUT_FRACTION)
    cut = num_days - held - HOLDOUT_GAP
    if held - 1 < MIN_HOLDOUT_DAYS or cut < window + 1:
        return None
    return HoldoutSplit(cut=cut, start=num_days - held)


def gate_skipped(num_days: int, window: int, iterations: int) -> dict[str, Any] | None:
    """Why the gate cannot run on this split and budget, as ``{"skipped": reason}``; None when it can.

    Args:
        num_days: rows of the train split's tables.
        window: the learner's window length.
        iterations: gradient steps of the generation (the gate needs 3: one per phase).
    """
    held = int(num_days * HOLDOUT_FRACTION)
    if held - 1 < MIN_HOLDOUT_DAYS:
        need = math.ceil((MIN_HOLDOUT_DAYS + 1) / HOLDOUT_FRACTION)
        why = f"a train split of {num_days} days is too short to hold out {MIN_HOLDOUT_DAYS} days (needs about {need})"
        return {"skipped": why}
    if holdout_split(num_days, window) is None:
        inner = num_days - held - HOLDOUT_GAP
        return {"skipped": f"the {inner} days before the held-out span are fewer than a window of {window} + 1"}
    if iterations < 3:
        return {"skipped": f"{iterations} gradient step(s) this generation; the gate needs 3"}
    return None


@torch.no_grad()
def holdout_returns(
    policy: CrossSectionalPolicy,
    features: torch.Tensor,
    gross: torch.Tensor,
    dynamics: Dynamics,
    env_cfg: Any,
) -> np.ndarray:
    """The policy's daily net simple returns over the held-out days, from 1/N over every ticker.

    Args:
        policy: the policy to run (not changed).
        features: (D, N, K) float32 features of the held-out rows.
        gross: (D, N) gross returns of those rows; the last row is unused.
        dynamics: the env's rules.
        env_cfg: the env's config (``logit_scale``, ``cash_bias``, ``execution_lag``).

    Returns:
        (D - 1,) float64 net simple returns (fractions), costs paid.
    """
    f, g = features[:-1, None], gross[:-1, None]
    batch = WindowBatch(f, g, torch.log(g.mean(dim=2)))
    was_training = policy.training
    policy.eval()
    log_r, _ = window_rollout(policy, batch, dynamics, **action_map(env_cfg))
    policy.train(was_training)
    return np.expm1(log_r[:, 0].to(torch.float64).cpu().numpy())


def challenger_verdict(challenger: np.ndarray, anchor: np.ndarray, *, alpha: float, seed: int) -> dict[str, Any]:
    """Keep the challenger? Its held-out returns against the anchor's, paired.

    Args:
        challenger, anchor: (D,) float64 net simple returns on the same held-out days.
        alpha: the one-sided level, in (0, 0.5].
        seed: the bootstrap's seed.

    Returns:
        ``kept`` (bool: Sharpe difference > 0 and one-sided p <= ``alpha``),
        ``sharpe_difference`` and ``standard_error`` (annualised, challenger minus anchor),
        ``p_value``, ``alpha`` and ``holdout_days``.
    """
    result = vs_equal_weight(challenger, anchor, periods_per_year=PERIODS_PER_YEAR, seed=seed)
    kept = result["sharpe_difference"] > 0 and result["p_value"] <= alpha
    return {
        "kept": bool(kept),
        "sharpe_difference": float(result["sharpe_difference"]),
        "standard_error": float(result["standard_error"]),
        "p_value": float(result["p_value"]),
        "alpha": float(alpha),
        "holdout_days": int(result["n_periods"]),
    }
