"""The Deflated Sharpe Ratio of leaderboard agents (reads only).

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
from webapp.runs.models import Agent


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
