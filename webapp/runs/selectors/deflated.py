"""The Deflated Sharpe Ratios of leaderboard agents (reads only): against 1/N (the headline, from
the trial ledger) and of the raw Sharpe ratio against zero (the second, labelled figure).

**Against 1/N** (:func:`agent_dsr_vs_equal_weight`): the DSR of the agent's information ratio
over the cost-free daily-rebalanced 1/N on its validation days (``metrics["vs_equal_weight"]``,
``engine.deflated_information_ratio``), with the skewness and kurtosis of its active returns.
``N`` is the number of entries in the **trial ledger** of the run's task (``models.Trial``:
every trained agent ever evaluated on the task, in this run and its other runs, pruned ones
included) and the variance is the sample variance of their information ratios
(:func:`task_ledger`). The null is "no better than 1/N": in a rising year 1/N itself scores a
high raw DSR, but an agent that only holds 1/N has an information ratio of 0.

**Raw Sharpe against zero** (the figure below, kept for comparison):

A run that evaluates many agents and keeps the best will find a high validation Sharpe ratio by
luck alone. The Deflated Sharpe Ratio (Bailey & López de Prado 2014; ``engine.deflated_sharpe_ratio``)
is the probability that an agent's true Sharpe ratio beats the best one expected from that many
skill-less trials, given the spread of the Sharpe ratios the run has seen. ``N`` is the number of
agents the run's pods trained and evaluated (with a validation Sharpe ratio) so far, the variance
is theirs (sample variance), and ``T`` the agent's number of validation returns (days, or bars for
intraday data).

Ensembles (``Agent.kind == "ensemble"``) are never trials: an ensemble averages agents already
counted, so it is no new draw, and building one (or the same one again) must not move any agent's
DSR. An ensemble's own DSR is read against the same trials: ``N`` trained agents and the variance
of their Sharpe ratios.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from django.db.models.fields.json import KT

from webapp import engine
from webapp.runs.models import Agent, Trial


@dataclass(frozen=True)
class RunSharpes:
    """The run-wide inputs of the DSR: ``trials``, the number of trained agents with a validation
    Sharpe ratio (ensembles excluded), and ``variance``, the sample variance of their annualised
    Sharpe ratios (0.0 with fewer than 2)."""

    trials: int
    variance: float


def _sharpe(metrics: dict[str, Any]) -> float | None:
    try:
        value = float(metrics.get("sharpe_ratio"))
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def run_sharpes(run_id: int) -> RunSharpes:
    """Count and sample variance of the validation Sharpe ratios of the agents the run's pods
    trained (ensembles and agents without a finite Sharpe ratio do not count).

    One query reads the ratios; the variance is computed here (``statistics.variance``, n - 1 in
    the denominator), not by the database: SQLite's ``VAR_SAMP`` (Django's Python aggregate)
    raises on a single value, which broke the first agent's leaderboard update on the default
    SQLite database, where PostgreSQL returns NULL.
    """
    values = (
        Agent.objects.filter(run_id=run_id, kind=Agent.Kind.TRAINED)
        .annotate(sharpe=KT("metrics__sharpe_ratio"))  # text (PostgreSQL) or a number (SQLite)
        .values_list("sharpe", flat=True)
    )
    sharpes = [s for s in (_sharpe({"sharpe_ratio": v}) for v in values) if s is not None]
    variance = statistics.variance(sharpes) if len(sharpes) >= 2 else 0.0
    return RunSharpes(trials=len(sharpes), variance=float(variance))


def agent_dsr(agent: Agent, stats: RunSharpes) -> float | None:
    """The agent's DSR given its run's :class:`RunSharpes` (a trained agent's or an ensemble's,
    against the same trials); ``None`` without a Sharpe ratio."""
    metrics = agent.metrics or {}
    sharpe = _sharpe(metrics)
    # Intraday metrics count bars in num_periods (num_days counts sessions there) and carry the
    # data's periods per year; daily metrics have neither and count days.
    observations = metrics.get("num_periods") or metrics.get("num_days")
    if sharpe is None or not observations or stats.trials < 1:
        return None
    return engine.deflated_sharpe_ratio(
        sharpe,
        num_trials=stats.trials,
        annual_sharpe_variance=stats.variance,
        num_observations=int(observations),
        periods_per_year=metrics.get("periods_per_year"),
    )


@dataclass(frozen=True)
class LedgerStats:
    """The trial ledger of a task: ``trials`` (every trained agent ever evaluated on it, ``N``)
    and ``variance``, the sample variance of their annualised information ratios over cost-free
    1/N (those that have one; 0.0 with fewer than 2)."""

    trials: int
    variance: float


def task_ledger(task_id: int) -> LedgerStats:
    """The :class:`LedgerStats` of a task's trial ledger (one query)."""
    values = list(Trial.objects.filter(task_id=task_id).values_list("information_ratio", flat=True))
    ratios = [v for v in values if v is not None and math.isfinite(v)]
    variance = statistics.variance(ratios) if len(ratios) >= 2 else 0.0
    return LedgerStats(trials=len(values), variance=float(variance))


def agent_dsr_vs_equal_weight(agent: Agent, stats: LedgerStats) -> float | None:
    """The agent's DSR against 1/N given its task's :class:`LedgerStats`; ``None`` without an
    information ratio (no ``vs_equal_weight`` statistics, e.g. an agent stored before them) or
    an empty ledger."""
    metrics = agent.metrics or {}
    rel = metrics.get("vs_equal_weight") or {}
    ir = _sharpe({"sharpe_ratio": rel.get("information_ratio")})
    skew, kurt, periods = rel.get("active_skewness"), rel.get("active_kurtosis"), rel.get("n_periods")
    if ir is None or skew is None or kurt is None or not periods or stats.trials < 1:
        return None
    return engine.deflated_information_ratio(
        ir,
        num_observations=int(periods),
        skewness=float(skew),
        kurtosis=float(kurt),
        num_trials=stats.trials,
        trial_variance=stats.variance,
        periods_per_year=rel.get("periods_per_year"),
    )


def dsr_text(vs_equal_weight: float | None, raw: float | None, *, note: str = "") -> str:
    """The leaderboard's DSR cell: ``"0.412 · raw 0.981"`` (against 1/N first, the raw-Sharpe DSR
    against zero second), ``"n/a"`` on a short window (``note``), ``"–"`` with neither."""
    if vs_equal_weight is None and raw is None:
        return "–"
    if note:
        return "n/a"
    first = f"{vs_equal_weight:.3f}" if vs_equal_weight is not None else "–"
    return f"{first} · raw {raw:.3f}" if raw is not None else first
