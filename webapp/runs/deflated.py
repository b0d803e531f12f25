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
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, FloatField, Variance
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

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
    trained (one aggregate query; ensembles and agents without a Sharpe ratio do not count)."""
    row = (
        Agent.objects.filter(run_id=run_id, kind=Agent.Kind.TRAINED)
        .annotate(sharpe=Cast(KT("metrics__sharpe_ratio"), FloatField()))
        .aggregate(trials=Count("sharpe"), variance=Variance("sharpe", sample=True))
    )
    variance = row["variance"]
    return RunSharpes(trials=int(row["trials"] or 0), variance=float(variance) if variance is not None else 0.0)


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
