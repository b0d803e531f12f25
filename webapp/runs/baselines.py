"""Baselines and noise next to an agent's validation result (reads of ``Agent.metrics``, which
the trainer's ``evaluate_policy`` fills; see ``trainer.pod.GenerationResult.metrics``).

Like is compared with like:

- **score** (the task's selection rule, e.g. mean - 1 std of 4 sub-window Sharpe ratios) next
  to the score of the agent's line's **untrained** policy on the same validation days by the
  same rule (``metrics["untrained"]["score"]``), and the **noise**: the sample standard
  deviation of the agent's sub-window Sharpe ratios (the spread its own score is built from);
  **within noise**: the score is no further from the untrained policy's than that deviation,
  so training may not have helped at all;
- **full-window Sharpe ratio and total return** of the agent next to those of the untrained
  policy (when its evaluation stored them), of the daily-rebalanced **1/N** portfolio and of
  **QQQ** on the same days, with the agent's **excess return** (its total return minus the
  baseline's, ``trainer.selection.baseline_relative``) and **Sharpe difference** over each;
- the random-start windows' spread of total returns.

The short-window rule (``trainer.backtest.contract.MIN_ANNUALISED_DAYS``, 63 trading days) holds
here as in the CLI and the reports: on a shorter validation window every Sharpe-based figure (the
score and the untrained policy's, the noise, the Sharpe ratios and Sharpe differences) is
annualised noise, so the texts pages show read "n/a" and ``note`` says why; the numbers stay in
the dict for the API, flagged ``short_window``.
"""

from __future__ import annotations

import statistics
from typing import Any

from webapp import engine
from webapp.core import formatting
from webapp.runs.models import Agent

#: The baselines of the comparison table, in the order pages show them. The 1/N portfolio of
#: the validation metrics (``trainer.selection.baseline_relative``) is rebalanced daily.
BASELINES = (
    ("untrained", "Untrained policy of its line"),
    ("equal_weight", "1/N rebalanced daily"),
    ("qqq", "QQQ"),
)


def short_window_note(metrics: dict[str, Any] | None) -> str:
    """``"n/a (window shorter than 63 days)"`` when ``metrics`` (an agent's validation metrics)
    cover fewer days than the short-window rule's minimum, else ``""``: what pages show instead of
    its Sharpe-based and annualised figures (``engine.withheld_metrics``)."""
    return engine.withheld_metrics(metrics or {}).get("sharpe_ratio", "")


def _relative(agent: dict[str, float | None], base: dict[str, float | None]) -> dict[str, float | None]:
    """Excess total return and Sharpe difference of the agent over one baseline."""

    def diff(key: str) -> float | None:
        a, b = agent.get(key), base.get(key)
        return None if a is None or b is None else a - b

    return {"excess_return": diff("total_return"), "sharpe_difference": diff("sharpe")}


def agent_baselines(agent: Agent) -> dict[str, Any]:
    """The agent's validation result against its baselines on the same days.

    Returns:
        ``{"score", "sharpe", "total_return", "untrained", "untrained_sharpe",
        "untrained_total_return", "equal_weight", "qqq", "noise", "within_noise",
        "comparison", "vs_untrained", "vs_equal_weight", "vs_qqq", "windows", "short_window",
        "min_annualised_days", "note", "texts", "text"}``:

        - ``untrained``: the untrained policy's score (same rule as ``score``);
        - ``equal_weight``, ``qqq``: the 1/N portfolio's and QQQ's full-window Sharpe ratios
          (to read against ``sharpe``, the agent's own);
        - ``comparison``: rows ``{"key", "label", "score", "sharpe", "total_return",
          "excess_return", "sharpe_difference"}`` for the agent (``key`` ``"agent"``) and
          each of :data:`BASELINES`; excess return and Sharpe difference are the agent's minus
          the row's (``None`` on the agent's own row);
        - ``vs_<baseline>``: ``{"excess_return", "sharpe_difference"}`` of the agent over it;
        - ``short_window``: the validation window is shorter than ``min_annualised_days`` (63);
          every Sharpe-based value is then kept here but pages show "n/a" and ``note`` (the
          reason, ``""`` otherwise); ``within_noise`` is then false (and ``None`` when the score,
          the untrained score or the noise is missing, e.g. for an ensemble);
        - ``texts``: what the leaderboard shows (:func:`leaderboard_texts`); ``text`` their one-line sum.

        Returns are fractions (0.01 = 1 %), Sharpe ratios annualised; ``None`` where the
        evaluation did not record a value.
    """
    m = agent.metrics or {}
    subs = [formatting.finite_or_none(w.get("sharpe")) for w in m.get("sub_windows") or [] if isinstance(w, dict)]
    subs = [s for s in subs if s is not None]
    noise = statistics.stdev(subs) if len(subs) >= 2 else None
    raw_untrained = m.get("untrained") or {}
    untrained = formatting.finite_or_none(raw_untrained.get("score"))
    score = formatting.finite_or_none(agent.score)
    windows = m.get("random_windows") or {}
    own = {
        "score": score,
        "sharpe": formatting.finite_or_none(m.get("sharpe_ratio")),
        "total_return": formatting.finite_or_none(m.get("total_return", m.get("cumulative_return"))),
    }
    series = {
        "untrained": {
            "score": untrained,
            "sharpe": formatting.finite_or_none(raw_untrained.get("sharpe_ratio")),
            "total_return": formatting.finite_or_none(raw_untrained.get("total_return")),
        }
    }
    for key, stored in (("equal_weight", "vs_equal_weight"), ("qqq", "vs_QQQ")):
        rel = m.get(stored) or {}
        series[key] = {
            "score": None,
            "sharpe": formatting.finite_or_none(rel.get("baseline_sharpe")),
            "total_return": formatting.finite_or_none(rel.get("baseline_total_return")),
        }
    vs = {key: _relative(own, base) for key, base in series.items()}
    for key, stored in (("equal_weight", "vs_equal_weight"), ("qqq", "vs_QQQ")):
        # the trainer's own differences, computed from the unrounded daily returns, win
        rel = m.get(stored) or {}
        for name in ("excess_return", "sharpe_difference"):
            if formatting.finite_or_none(rel.get(name)) is not None:
                vs[key][name] = formatting.finite_or_none(rel.get(name))
    note = short_window_note(m)
    comparison = [{"key": "agent", "label": "This agent", **own, "excess_return": None, "sharpe_difference": None}]
    comparison += [{"key": key, "label": label, **series[key], **vs[key]} for key, label in BASELINES]
    b = {
        **own,
        "untrained": untrained,
        "untrained_sharpe": series["untrained"]["sharpe"],
        "untrained_total_return": series["untrained"]["total_return"],
        "equal_weight": series["equal_weight"]["sharpe"],
        "qqq": series["qqq"]["sharpe"],
        "noise": noise,
        # None when there is nothing to compare (an ensemble has no untrained policy)
        "within_noise": (
            None
            if score is None or untrained is None or noise is None
            else (not note and abs(score - untrained) <= noise)
        ),
        "comparison": comparison,
        "vs_untrained": vs["untrained"],
        "vs_equal_weight": vs["equal_weight"],
        "vs_qqq": vs["qqq"],
        "windows": {
            k: windows.get(k) for k in ("count", "days", "total_return_min", "total_return_mean", "total_return_max")
        },
        "short_window": bool(note),
        "min_annualised_days": m.get("min_annualised_days"),
        "note": note,
    }
    b["texts"] = leaderboard_texts(b)
    b["text"] = baselines_text(b)
    return b


def leaderboard_verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the leaderboard says as a whole: how many of its agents score above their line's
    untrained policy (the line's fresh network; for the portfolio task near 1/N, with the same band and costs) by more
    than the noise, the standard deviation of their validation sub-window Sharpe ratios.

    Args:
        rows: :func:`agent_baselines` of the leaderboard's agents.

    Returns:
        ``{"judged", "above_noise", "text"}``: agents with a score, an untrained score and a
        noise on a long enough window; those with ``score - untrained > noise``; one sentence
        for the run page ("" when no agent can be judged).
    """
    judged = [b for b in rows if not b.get("note") and None not in (b.get("score"), b.get("untrained"), b.get("noise"))]
    above = [b for b in judged if b["score"] - b["untrained"] > b["noise"]]
    if not judged:
        text = ""
    elif not above:
        text = (
            f"None of the {len(judged)} leaderboard agents scores above its untrained policy by more than "
            "the noise of its validation sub-windows: on validation they cannot be told apart from it, "
            "so expect them to do no better out of sample."
        )
    else:
        text = (
            f"{len(above)} of {len(judged)} leaderboard agents score above their untrained policy by more "
            "than the noise of their validation sub-windows (one validation period: no promise for the next)."
        )
    return {"judged": len(judged), "above_noise": len(above), "text": text}


def relative_text(rel: dict[str, float | None], *, short: bool = False) -> str:
    """``"+2.10 % · Sharpe +0.03"``: excess total return and Sharpe difference ("" if neither);
    ``short`` (a window under the short-window rule's minimum): ``"+2.10 % · Sharpe n/a"``."""
    parts = []
    if rel.get("excess_return") is not None:
        parts.append(formatting.format_percent(rel["excess_return"], signed=True))
    if rel.get("sharpe_difference") is not None:
        parts.append("Sharpe n/a" if short else f"Sharpe {rel['sharpe_difference']:+.2f}")
    return " · ".join(parts)


_SHARPE_KEYS = ("sharpe", "untrained_sharpe", "equal_weight", "qqq")


def leaderboard_texts(b: dict[str, Any]) -> dict[str, str]:
    """The leaderboard's cells of one agent (server-rendered and live rows alike).

    Returns:
        ``{"untrained": "untrained -0.28 · noise ±0.32"`` (scores, same rule),
        ``"sharpe": "0.53 · untrained 0.10 · 1/N 0.50 · QQQ 1.24"`` (full-window Sharpe ratios,
        the agent's first; 1/N rebalanced daily), ``"vs_equal_weight"``, ``"vs_qqq"``:
        :func:`relative_text`}; "" where nothing was recorded. On a short window (``b["note"]``
        set) the Sharpe-based parts read "n/a": ``"untrained": "n/a"``, ``"sharpe": "n/a
        (window shorter than 63 days)"``, ``"vs_qqq": "+2.10 % · Sharpe n/a"``.
    """
    note = b.get("note") or ""
    if note:
        return {
            "untrained": "n/a" if b.get("untrained") is not None or b.get("noise") is not None else "",
            "sharpe": note if any(b.get(k) is not None for k in _SHARPE_KEYS) else "",
            "vs_equal_weight": relative_text(b.get("vs_equal_weight") or {}, short=True),
            "vs_qqq": relative_text(b.get("vs_qqq") or {}, short=True),
        }
    score_parts = []
    if b.get("untrained") is not None:
        score_parts.append(f"untrained {b['untrained']:.2f}")
    if b.get("noise") is not None:
        score_parts.append(f"noise ±{b['noise']:.2f}")
    sharpe_parts = [] if b.get("sharpe") is None else [f"{b['sharpe']:.2f}"]
    for key, label in (("untrained_sharpe", "untrained"), ("equal_weight", "1/N"), ("qqq", "QQQ")):
        if b.get(key) is not None:
            sharpe_parts.append(f"{label} {b[key]:.2f}")
    return {
        "untrained": " · ".join(score_parts),
        "sharpe": " · ".join(sharpe_parts),
        "vs_equal_weight": relative_text(b.get("vs_equal_weight") or {}),
        "vs_qqq": relative_text(b.get("vs_qqq") or {}),
    }


def baselines_text(b: dict[str, Any]) -> str:
    """One line of everything, like with like: ``"score: untrained -0.28 · noise ±0.32;
    Sharpe: 0.53 · untrained 0.10 · 1/N 0.50 · QQQ 1.24; vs 1/N: +2.10 % · Sharpe +0.03;
    vs QQQ: ..."`` (parts without values left out)."""
    texts = b.get("texts") or leaderboard_texts(b)
    parts = []
    for key, label in (
        ("untrained", "score"),
        ("sharpe", "Sharpe"),
        ("vs_equal_weight", "vs 1/N"),
        ("vs_qqq", "vs QQQ"),
    ):
        if texts.get(key):
            parts.append(f"{label}: {texts[key]}")
    return "; ".join(parts)
