"""Reads of seed groups: the runs of one configuration made with several seeds, and the
group's mean with its 95 % interval (Student's t over the runs, the runs being the
independent draws: the spread between seeds is the noise a single run's figure carries).

Figures: the best validation score of each run, and the best test Sharpe ratio of its
end-of-run backtests where they exist (``webapp.runs.selectors.run_table``'s annotation).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from scipy import stats

from webapp.runs.models import Run
from webapp.runs.selectors import run_table


def mean_interval(values: list[float], confidence: float = 0.95) -> dict[str, Any]:
    """``{"n", "mean", "low", "high", "std"}`` of ``values``: the mean and its two-sided
    Student-t interval, ``mean ± t(1 - (1 - confidence) / 2, n - 1) · s / sqrt(n)`` with ``s``
    the sample standard deviation (e.g. Wasserman, *All of Statistics*, 2004, §6.3). With
    fewer than 2 values the interval is ``None`` (one run says nothing about the spread)."""
    clean = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(clean)
    if n == 0:
        return {"n": 0, "mean": None, "low": None, "high": None, "std": None}
    mean = statistics.fmean(clean)
    if n < 2:
        return {"n": 1, "mean": mean, "low": None, "high": None, "std": None}
    std = statistics.stdev(clean)
    half = float(stats.t.ppf(1 - (1 - confidence) / 2, n - 1)) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "low": mean - half, "high": mean + half, "std": std}


def group_summary(*, user, group: str) -> dict[str, Any] | None:
    """The user's runs of ``group`` (seed order) and the statistics of their best validation
    score and best test Sharpe ratio; ``None`` for an empty group name or no such runs."""
    if not group:
        return None
    runs = list(run_table.with_columns(Run.objects.filter(owner=user, seed_group=group)).order_by("seed", "id"))
    if not runs:
        return None
    return {
        "group": group,
        "runs": runs,
        "seeds": [r.seed for r in runs],
        "score": mean_interval([r.best_score for r in runs]),
        "test_sharpe": mean_interval([r.best_test_sharpe for r in runs]),
    }
