"""Baselines and noise next to an agent's validation score (reads of ``Agent.metrics``, which
the trainer's ``evaluate_policy`` fills; see ``trainer.pod.GenerationResult.metrics``).

- **untrained**: the score of the agent's line's untrained policy on the same validation days,
  by the same selection rule (``metrics["untrained"]``);
- **equal weight** and **QQQ**: the full-window Sharpe ratios of the daily-rebalanced 1/N
  portfolio and of QQQ on the same days (``metrics["vs_equal_weight"|"vs_QQQ"]``), next to the
  agent's own full-window Sharpe ratio;
- **noise**: the sample standard deviation of the agent's sub-window Sharpe ratios (the spread
  its own score is built from) and the random-start windows' spread of total returns;
- **within noise**: the score is no further from the untrained policy's than that standard
  deviation, so training may not have helped at all.
"""

from __future__ import annotations

import statistics
from typing import Any

from webapp.runs.models import Agent
from webapp.runs.telemetry import finite_or_none


def agent_baselines(agent: Agent) -> dict[str, Any]:
    """``{"score", "sharpe", "untrained", "equal_weight", "qqq", "noise", "within_noise",
    "windows": {"count", "days", "total_return_min", "total_return_mean", "total_return_max"}}``
    (``None`` where the evaluation did not record a value)."""
    m = agent.metrics or {}
    subs = [finite_or_none(w.get("sharpe")) for w in m.get("sub_windows") or [] if isinstance(w, dict)]
    subs = [s for s in subs if s is not None]
    noise = statistics.stdev(subs) if len(subs) >= 2 else None
    untrained = finite_or_none((m.get("untrained") or {}).get("score"))
    score = finite_or_none(agent.score)
    windows = m.get("random_windows") or {}
    return {
        "score": score,
        "sharpe": finite_or_none(m.get("sharpe_ratio")),
        "untrained": untrained,
        "equal_weight": finite_or_none((m.get("vs_equal_weight") or {}).get("baseline_sharpe")),
        "qqq": finite_or_none((m.get("vs_QQQ") or {}).get("baseline_sharpe")),
        "noise": noise,
        "within_noise": (
            score is not None and untrained is not None and noise is not None and abs(score - untrained) <= noise
        ),
        "windows": {
            k: windows.get(k) for k in ("count", "days", "total_return_min", "total_return_mean", "total_return_max")
        },
    }


def baselines_text(b: dict[str, Any]) -> str:
    """One line for the leaderboard: ``"untrained -0.41 · 1/N 0.80 · QQQ 0.65 · noise ±0.32"``."""
    parts = []
    for key, label in (("untrained", "untrained"), ("equal_weight", "1/N"), ("qqq", "QQQ")):
        if b.get(key) is not None:
            parts.append(f"{label} {b[key]:.2f}")
    if b.get("noise") is not None:
        parts.append(f"noise ±{b['noise']:.2f}")
    return " · ".join(parts)
