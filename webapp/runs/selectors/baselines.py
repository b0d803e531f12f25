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
    # the paired statistics against both 1/N (trainer.backtest.equal_weight): interval, p-value, verdict
    vs["equal_weight"] = {**(m.get("vs_equal_weight") or {}), **vs["equal_weight"]}
    with_costs = dict(m.get("vs_equal_weight_with_costs") or {})
    note = short_window_note(m)
    comparison = [{"key": "agent", "label": "This agent", **own, "excess_return": None, "sharpe_difference": None}]
    comparison += [
        {
            "key": key,
            "label": label,
            **series[key],
            **{k: vs[key].get(k) for k in ("excess_return", "sharpe_difference")},
        }
        for key, label in BASELINES
    ]
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
        "vs_equal_weight_with_costs": with_costs,
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
    against = equal_weight_verdicts(rows)
    if against["text"]:
        text = f"{text} {against['text']}".strip()
    return {"judged": len(judged), "above_noise": len(above), "vs_equal_weight": against, "text": text}


def equal_weight_verdicts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How many leaderboard agents beat, trail or cannot be told from each 1/N on validation, by
    the studentised block-bootstrap interval of their Sharpe difference (``vs_equal_weight``).

    Returns:
        ``{"cost_free": {"beats", "trails", "indistinguishable"}, "with_costs": {...}, "text"}``
        (counts; ``text`` one sentence, "" when no agent has a verdict).
    """
    counts: dict[str, dict[str, int]] = {}
    for name, key in (("cost_free", "vs_equal_weight"), ("with_costs", "vs_equal_weight_with_costs")):
        verdicts = [(b.get(key) or {}).get("verdict") for b in rows if not b.get("note")]
        counts[name] = {v: verdicts.count(v) for v in ("beats", "trails", "indistinguishable")}
    judged = sum(counts["cost_free"].values())
    text = ""
    if judged:
        free, fair = counts["cost_free"], counts["with_costs"]
        text = (
            f"Against 1/N on the same validation days (95 % interval of the Sharpe difference): "
            f"{free['beats']} of {judged} beat the cost-free 1/N, {free['trails']} trail it; "
            f"{fair['beats']} beat 1/N traded with the task's costs, {fair['trails']} trail it; "
            "the rest cannot be told from it."
        )
    return {**counts, "text": text}


def relative_text(rel: dict[str, Any], *, short: bool = False) -> str:
    """``"+2.10 % · Sharpe +0.03 [-0.41, +0.47] · indistinguishable"``: excess total return, Sharpe
    difference with its 95 % interval and the verdict where the comparison has them ("" if
    nothing); ``short`` (a window under the short-window rule's minimum): ``"+2.10 % · Sharpe n/a"``."""
    parts = []
    if rel.get("excess_return") is not None:
        parts.append(formatting.format_percent(rel["excess_return"], signed=True))
    if rel.get("sharpe_difference") is not None:
        if short:
            parts.append("Sharpe n/a")
        else:
            interval = rel.get("ci95")
            ci = f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else ""
            parts.append(f"Sharpe {rel['sharpe_difference']:+.2f}{ci}")
    if rel.get("verdict") and not short:
        parts.append(str(rel["verdict"]))
    return " · ".join(parts)


def verdict_sentence(rel: dict[str, Any], who: str) -> str:
    """One sentence of a ``vs_equal_weight`` object, e.g. ``"Against 1/N rebalanced daily,
    cost-free: beats (Sharpe difference +0.41, 95 % interval +0.10 to +0.72, one-sided p = 0.004,
    information ratio 1.21)."``; "" without a verdict."""
    if not rel.get("verdict") or not rel.get("ci95"):
        return ""
    low, high = rel["ci95"]
    ir = rel.get("information_ratio")
    ir_text = f", information ratio {ir:.2f}" if ir is not None else ""
    return (
        f"Against {who}: {rel['verdict']} (Sharpe difference {rel['sharpe_difference']:+.2f}, 95 % interval "
        f"{low:+.2f} to {high:+.2f}, one-sided p = {rel['p_value']:.3f}{ir_text})."
    )


_SHARPE_KEYS = ("sharpe", "untrained_sharpe", "equal_weight", "qqq")


def leaderboard_texts(b: dict[str, Any]) -> dict[str, str]:
    """The leaderboard's cells of one agent (server-rendered and live rows alike).

    Returns:
        ``{"untrained": "untrained -0.28 · noise ±0.32"`` (scores, same rule),
        ``"sharpe": "0.53 · untrained 0.10 · 1/N 0.50 · QQQ 1.24"`` (full-window Sharpe ratios,
        the agent's first; 1/N rebalanced daily), ``"vs_equal_weight"``, ``"vs_qqq"``:
        :func:`relative_text`, the first with the cost-free 1/N's interval and verdict and
        ``" · with costs: <verdict>"`` against the fair 1/N}; "" where nothing was recorded. On a short window (``b["note"]``
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
    vs_equal_weight = relative_text(b.get("vs_equal_weight") or {})
    fair = (b.get("vs_equal_weight_with_costs") or {}).get("verdict")
    if vs_equal_weight and fair:
        vs_equal_weight += f" · with costs: {fair}"
    return {
        "untrained": " · ".join(score_parts),
        "sharpe": " · ".join(sharpe_parts),
        "vs_equal_weight": vs_equal_weight,
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


#: The two 1/N comparisons of ``trainer.backtest.equal_weight``, as pages label them.
EQUAL_WEIGHT_COMPARISONS = (
    ("vs_equal_weight", "1/N rebalanced daily, cost-free (headline)"),
    ("vs_equal_weight_with_costs", "1/N traded with the task's costs and band (fair)"),
)


def equal_weight_rows(metrics: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Rows of the "against 1/N" table of an agent's or a backtest's metrics: ``{"key",
    "label", "sentence", **the trainer's object}`` for each of :data:`EQUAL_WEIGHT_COMPARISONS`
    the metrics hold with a verdict (an older record, or a window under 20 returns, has none)."""
    rows = []
    for key, label in EQUAL_WEIGHT_COMPARISONS:
        rel = (metrics or {}).get(key) or {}
        if rel.get("verdict"):
            rows.append({"key": key, "label": label, "sentence": verdict_sentence(rel, label), **rel})
    return rows
