"""The challenger gate of the direct learner: trade an edge only where held-out days show it.

The penalised learner (the *anchor*, :class:`~trainer.agents.direct.DirectConfig`'s tracking
and turnover penalties) stays near 1/N by construction: it does no harm, and it cannot trade an
edge that needs turnover (docs/default-selection.md: a planted 5-day reversal needs 15-20 % of
value traded a day). Without the penalties the learner finds such an edge on long histories and
stays at 1/N on placebos, but on short histories it fits noise. Which of the two a task's data
supports is a question of evidence, so the learner asks it of data it did not train on:

1. The train split's last :data:`HOLDOUT_FRACTION` of days (after a :data:`HOLDOUT_GAP`-day
   gap) is held out; the rest is the *inner* train span. With :data:`HOLDOUT_FOLDS` 2 a
   second fold mirrors it: the first ``HOLDOUT_FRACTION`` is held out and the days after it
   (and a gap) are its inner span (:func:`holdout_splits`).
2. In each fold the anchor and a *challenger* (no tracking or turnover penalty, tilt bound
   ``challenger_kappa``) train on the inner span from the same starting weights; the
   ``2 * HOLDOUT_FOLDS`` trainings share :data:`GATE_SHARE` of the generation's gradient
   steps equally.
3. Both run once over each fold's held-out days from 1/N (all tickers, no gradient). The
   challenger is kept only if its Sharpe ratio beats the anchor's on the pooled held-out days,
   paired, with one-sided p-value <= ``challenger_alpha``: the studentised circular block
   bootstrap of :func:`trainer.backtest.relative.vs_equal_weight` (Ledoit & Wolf 2008, "Robust
   performance hypothesis testing with the Sharpe ratio", J. Empirical Finance 15(5)), with the
   anchor in the benchmark's place. This is a pre-test against the do-no-harm default, the
   champion-challenger form of a one-sided test at level ``alpha``: under no edge the
   challenger is kept with probability at most ``alpha``. Pooling the folds is blocked
   cross-validation in time (Bergmeir & Benitez 2012, "On the use of cross-validation for time
   series predictor evaluation", Information Sciences 191): every held-out day is out of its
   fold's training sample, and an edge has to show at both ends of the split.
4. The first fold's winner takes the remaining steps on the whole train split (the most recent
   days included). A kept challenger's settings become the agent's. Either way the agent's
   ``challenger_alpha`` becomes 0: the question is answered for its line, and the generations
   that continue it do not ask it again of the same days (asking once per generation would
   be a test repeated until it passes).

The generation's budget is unchanged: the phases share its gradient steps. A split whose
held-out span would be shorter than :data:`MIN_HOLDOUT_DAYS`, or a generation with fewer steps
than the trainings need (:func:`gate_steps_needed`), gives no evidence, and the anchor trains
alone, as with ``challenger_alpha`` 0.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch

from trainer.agents.cross_sectional import CrossSectionalPolicy
from trainer.agents.direct_objective import WindowBatch, action_map, window_rollout
from trainer.backtest.relative import vs_equal_weight
from trainer.envs.membership_mask import member_log_mean_gross
from trainer.envs.portfolio_dynamics import Dynamics

__all__ = [
    "CLOSED_GATE",
    "HOLDOUT_FOLDS",
    "HOLDOUT_FRACTION",
    "HOLDOUT_GAP",
    "MIN_HOLDOUT_DAYS",
    "HoldoutSplit",
    "challenger_verdict",
    "gate_plan",
    "holdout_returns",
    "holdout_splits",
    "run_gate",
    "verdict_text",
]

#: Share of the train split's days held out for the gate.
#: 0.35 since 2026-12-04 (rule 4c of docs/default-selection.md; 0.2 before): with a fifth held out the
#: gate stayed closed on planted markets with large edges.
HOLDOUT_FRACTION = 0.35
#: Folds of the gate: 1 holds out the split's tail; 2 also its head, the mirror image, and tests
#: the pooled held-out days (twice the evidence, and an edge must show at both ends of the split).
#: 2 since 2026-12-05 (rule 4d of docs/default-selection.md; 1 before).
HOLDOUT_FOLDS = 2
#: Share of the generation's gradient steps the gate's trainings take together (each of the
#: ``2 * HOLDOUT_FOLDS`` takes an equal part); the winner trains on the whole split with the rest.
#: 1/2 since 2026-12-05 (rule 4d; 2/3 before, when one fold's two trainings took a third each).
GATE_SHARE = 1 / 2
#: What a closed gate delivers: ``"hold"``, the agent holds 1/N (``DirectConfig.hold_equal_weight``)
#: and the line keeps holding; ``"train"``, the first fold's anchor trains on with the rest of
#: the steps (the penalised learner, near 1/N). ``"hold"`` since 2026-12-06 (rule 4e of
#: docs/default-selection.md; ``"train"`` before).
CLOSED_GATE = "hold"
#: Days skipped between the inner train span and the held-out span (the task splits' gap).
HOLDOUT_GAP = 5
#: Fewest held-out days (half a trading year) that count as evidence.
MIN_HOLDOUT_DAYS = 126
#: Periods a year the gate's statistics are annualised with; the decision reads only the
#: p-value, which does not depend on it.
PERIODS_PER_YEAR = 252


class HoldoutSplit(NamedTuple):
    """Row ranges ``(start, stop)`` of one fold of the gate over a train split's tables."""

    inner: tuple[int, int]
    held: tuple[int, int]


def holdout_splits(num_days: int, window: int) -> list[HoldoutSplit] | str:
    """The gate's folds over a train split of ``num_days`` rows, or why it cannot cut them.

    Fold 1 holds out the split's last ``held = int(num_days * HOLDOUT_FRACTION)`` rows and
    trains on the rows before them, :data:`HOLDOUT_GAP` rows apart. With :data:`HOLDOUT_FOLDS`
    2, fold 2 mirrors it: it holds out the first ``held`` rows and trains on the rows after
    them. The two held-out spans share no day while ``HOLDOUT_FRACTION`` <= 0.5.

    Args:
        num_days: rows ``T`` of the split's tables (``gross`` row ``t`` is close ``t`` to
            ``t+1``; a span's last row is unused).
        window: the learner's window length ``H``; an inner span needs ``H + 1`` rows.

    Returns:
        One :class:`HoldoutSplit` per fold, or the reason as a sentence when a held-out span
        would have fewer than :data:`MIN_HOLDOUT_DAYS` returns or an inner span fewer than
        ``window + 1`` rows.
    """
    held = int(num_days * HOLDOUT_FRACTION)
    if held - 1 < MIN_HOLDOUT_DAYS:
        need = math.ceil((MIN_HOLDOUT_DAYS + 1) / HOLDOUT_FRACTION)
        return f"a train split of {num_days} days is too short to hold out {MIN_HOLDOUT_DAYS} days (needs about {need})"
    inner = num_days - held - HOLDOUT_GAP
    if inner < window + 1:
        return f"the {inner} days beside the held-out span are fewer than a window of {window} + 1"
    forward = HoldoutSplit(inner=(0, inner), held=(num_days - held, num_days))
    backward = HoldoutSplit(inner=(held + HOLDOUT_GAP, num_days), held=(0, held))
    return [forward, backward][:HOLDOUT_FOLDS]


def gate_plan(num_days: int, window: int, iterations: int) -> list[HoldoutSplit] | dict[str, str]:
    """The folds the gate runs on this split and budget, or ``{"skipped": reason}``.

    Args:
        num_days: rows of the train split's tables.
        window: the learner's window length.
        iterations: gradient steps of the generation; the gate needs ``3 * HOLDOUT_FOLDS``
            (each of its ``2 * HOLDOUT_FOLDS`` trainings takes ``iterations // (3 * HOLDOUT_FOLDS)``).
    """
    splits = holdout_splits(num_days, window)
    if isinstance(splits, str):
        return {"skipped": splits}
    need = gate_steps_needed(len(splits))
    if iterations < need:
        return {"skipped": f"{iterations} gradient step(s) this generation; the gate needs {need}"}
    return splits


def gate_steps_needed(folds: int) -> int:
    """Fewest gradient steps a generation needs for each of the gate's trainings to take one."""
    return math.ceil(2 * folds / GATE_SHARE - 1e-9)


def gate_training_steps(iterations: int, folds: int) -> int:
    """Gradient steps of each of the gate's ``2 * folds`` trainings out of ``iterations``."""
    return int(iterations * GATE_SHARE + 1e-9) // (2 * folds)


def run_gate(agent: Any, run: Any, tables: tuple, rules: tuple, splits: list) -> dict | None:
    """Steps 2-3 of the gate: per fold, the anchor and the challenger train on the inner span
    from the same start and run over the held-out span; one test on the pooled held-out days.

    Args:
        agent: the :class:`~trainer.agents.direct.DirectAgent` (its config is the anchor's).
        run: its training run (counts steps; ``cancelled`` when a stop was asked).
        tables: the train split's ``(features (T, N, K), gross (T, N), members (T, N) bool or
            None)``.
        rules: ``(Dynamics, env config)``.
        splits: the folds of :func:`gate_plan`.

    Returns:
        The verdict of :func:`challenger_verdict` with ``folds`` (per fold: ``held`` rows and
        the held-out ``sharpe_difference``) and ``closed_gate`` (:data:`CLOSED_GATE`); None when
        a stop came first (the agent is then the first fold's anchor, or the anchor in
        training). The agent is left as the first fold's winner: the challenger's settings when
        kept, the anchor's with ``challenger_alpha`` 0 otherwise (and ``hold_equal_weight``
        with ``CLOSED_GATE`` ``"hold"``).
    """
    anchor_cfg = agent.config
    steps = gate_training_steps(run.iterations, len(splits))
    start, first, pooled, folds = agent._snapshot(), {}, {"anchor": [], "challenger": []}, []
    for split in splits:
        inner, held = (tuple(None if x is None else x[slice(*rows)] for x in tables) for rows in split)
        for role, cfg in (("anchor", anchor_cfg), ("challenger", anchor_cfg.challenger())):
            agent._restore(start, cfg)
            agent._train(run, inner, rules, steps)
            if run.cancelled:
                if "anchor" in first:
                    agent._restore(first["anchor"], anchor_cfg)
                return None
            pooled[role].append(holdout_returns(agent.policy, *held[:2], *rules, members=held[2]))
            if not folds:
                first[role] = agent._snapshot()
        gain = _sharpe(pooled["challenger"][-1]) - _sharpe(pooled["anchor"][-1])
        folds.append({"held": list(split.held), "sharpe_difference": gain})
    challenger, anchor = (np.concatenate(pooled[role]) for role in ("challenger", "anchor"))
    verdict = challenger_verdict(challenger, anchor, alpha=anchor_cfg.challenger_alpha, seed=agent.updates)
    if verdict["kept"]:
        agent._restore(first["challenger"], anchor_cfg.challenger())
    else:  # answered either way: one test per line, not one per generation
        closed = anchor_cfg.replace(challenger_alpha=0.0, hold_equal_weight=CLOSED_GATE == "hold")
        agent._restore(first["anchor"], closed)
    return {**verdict, "folds": folds, "closed_gate": CLOSED_GATE}


def _sharpe(returns: np.ndarray) -> float:
    """Annualised Sharpe ratio of daily returns (0 when they do not vary)."""
    sd = returns.std(ddof=1)
    return float(returns.mean() / sd * math.sqrt(PERIODS_PER_YEAR)) if sd > 0 else 0.0


@torch.no_grad()
def holdout_returns(
    policy: CrossSectionalPolicy,
    features: torch.Tensor,
    gross: torch.Tensor,
    dynamics: Dynamics,
    env_cfg: Any,
    members: torch.Tensor | None = None,
) -> np.ndarray:
    """The policy's daily net simple returns over the held-out days, from 1/N over every ticker
    (over the first day's members with ``members``).

    Args:
        policy: the policy to run (not changed).
        features: (D, N, K) float32 features of the held-out rows.
        gross: (D, N) gross returns of those rows; the last row is unused.
        dynamics: the env's rules.
        env_cfg: the env's config (``logit_scale``, ``cash_bias``, ``execution_lag``).
        members: (D, N) bool point-in-time universe of those rows, or ``None`` (every ticker).

    Returns:
        (D - 1,) float64 net simple returns (fractions), costs paid.
    """
    f, g = features[:-1, None], gross[:-1, None]
    held = None if members is None else members[:-1, None]
    batch = WindowBatch(f, g, member_log_mean_gross(g, held), held)
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


def verdict_text(verdict: dict[str, Any]) -> str:
    """The gate's verdict (:func:`run_gate`, or ``{"skipped": reason}``) as one line for users,
    as the CLI's ``gate:`` line and the web's agent page show it."""
    if "skipped" in verdict:
        return f"skipped, the penalised learner (near 1/N) trained alone: {verdict['skipped']}"
    if verdict.get("held"):
        return (
            "closed earlier in this line, no edge shown: the agent holds 1/N and trained nothing "
            "(hold_equal_weight, set when the line's gate closed)"
        )
    if verdict["kept"]:
        kept = "open, challenger kept (no tracking or turnover penalty: it trades the edge it showed)"
    elif verdict.get("closed_gate") == "hold":
        kept = "closed, no edge shown: the agent holds 1/N"
    else:
        kept = "closed, no edge shown: the penalised learner (near 1/N) is kept"
    return (
        f"{kept}: held-out Sharpe difference, challenger minus penalised, {verdict['sharpe_difference']:+.3f} ± "
        f"{verdict['standard_error']:.3f} over {verdict['holdout_days']} days{_fold_text(verdict.get('folds', ()))}, "
        f"one-sided p {verdict['p_value']:.3f} (level {verdict['alpha']:g})"
    )


def _fold_text(folds) -> str:
    """`` in 2 folds (tail +0.312, head +0.254)`` for a two-fold gate; empty for one fold."""
    if len(folds) < 2:
        return ""
    names = ("tail", "head")
    parts = ", ".join(f"{names[i] if i < 2 else i + 1} {f['sharpe_difference']:+.3f}" for i, f in enumerate(folds))
    return f" in {len(folds)} folds ({parts})"
