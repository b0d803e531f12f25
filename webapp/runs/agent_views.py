"""Pages of one agent: score, validation metrics, hyperparameters, lineage, baselines and backtest
buttons (:func:`agent_detail`), and the download of its bundle (:func:`agent_bundle`).

Objects of other users are 404s (every lookup is scoped to ``request.user``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_safe

from webapp import engine
from webapp.core.downloads import serve_file
from webapp.core.errors import AppError
from webapp.runs import scoring, services
from webapp.runs.selectors import baselines, deflated
from webapp.runs.selectors.lineage import agent_lineage
from webapp.runs.selectors.runs import agent_get
from webapp.runs.views import metrics_config


def _agent_or_404(request: HttpRequest, agent_id: int):
    agent = agent_get(user=request.user, agent_id=agent_id)
    if agent is None:
        raise Http404("agent not found")
    return agent


#: Validation metrics shown as percentages (they are fractions: 0.01 = 1 %).
_PERCENT_METRICS = {
    "total_return",
    "cumulative_return",
    "annual_return",
    "annual_volatility",
    "max_drawdown",
    "win_rate",
    "risk_free",
    "benchmark_cumulative_return",
}
_MONEY_METRICS = {"initial_value", "final_value"}
_COUNT_METRICS = {"num_days", "max_drawdown_duration_days", "env_steps"}
#: Names the agent page gives metrics whose key does not read well by itself.
_METRIC_LABELS = {
    "num_days": "Days",
    "start": "First day",
    "end": "Last day",
    "score": "Score",
    "score_defined": "Score defined",
    "risk_free": "Risk-free rate",
    "initial_value": "Initial value",
    "final_value": "Final value",
    "max_drawdown_peak": "Max drawdown peak (date)",
    "max_drawdown_trough": "Max drawdown trough (date)",
    "max_drawdown_recovery": "Max drawdown recovery (date)",
    "max_drawdown_duration_days": "Max drawdown duration (days)",
    "env_steps": "Env steps",
    "benchmark_cumulative_return": "QQQ cumulative return (same days)",
}
#: Metrics the page leaves out: the score is shown above the table.
_HIDDEN_METRICS = {"score", "score_defined"}


def metric_label(key: str) -> str:
    """``"sharpe_ratio"`` -> ``"Sharpe ratio"``; see :data:`_METRIC_LABELS` for the rest."""
    return _METRIC_LABELS.get(key) or key.replace("_", " ").capitalize()


def _metric_text(key: str, value: Any) -> str:
    """One validation metric as the agent page shows it: fractions as percentages, money in
    USD, counts with thousands separators, ratios with 3 decimals, dates as stored (ISO)."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        text = str(value)
        # A date stored as a timestamp at midnight reads as its ISO day.
        return text[:10] if len(text) > 10 and text[10:] in (" 00:00:00", "T00:00:00") else text
    if key in _PERCENT_METRICS:
        return f"{value * 100:.2f} %"
    if key in _MONEY_METRICS:
        return f"${value:,.0f}"
    if key in _COUNT_METRICS:
        return f"{value:,.0f}"
    return f"{value:.3f}"


def _hyperparameter_text(value: Any) -> str:
    """A hyperparameter without float noise (``0.00023999999999999998`` is ``0.00024``)."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return " x ".join(_hyperparameter_text(v) for v in value)
    return str(value)


@login_required
@require_GET
def agent_detail(request: HttpRequest, agent_id: int) -> HttpResponse:
    """Score, metrics, hyperparameters, lineage, bundle download and backtest buttons."""
    agent = _agent_or_404(request, agent_id)
    # the short-window rule: annualised figures of a validation window under 63 days read "n/a
    # (window shorter than 63 days)", as in the CLI and the reports
    withheld = engine.withheld_metrics(agent.metrics or {})
    metrics = [
        (metric_label(key), withheld.get(key) or _metric_text(key, value))
        for key, value in sorted(agent.metrics.items())
        if not isinstance(value, dict | list) and key not in _HIDDEN_METRICS
    ]
    if agent.metrics.get("score_defined") is False:
        metrics.insert(0, ("Score defined", "no (the returns had no variance; the score is 0)"))
    hyperparameters = [(key, _hyperparameter_text(value)) for key, value in sorted(agent.hyperparameters.items())]
    try:
        backtest_url = reverse("reports:backtest-new")
    except NoReverseMatch:  # the reports app is not installed
        backtest_url = None
    try:
        # the zip a user downloads (exported once, on the first view or download)
        bundle = services.agent_bundle(agent)
    except AppError:
        bundle = None
    return render(
        request,
        "runs/agent.html",
        {
            "agent": agent,
            "run": agent.run,
            "metrics": metrics,
            "hyperparameters": hyperparameters,
            "lineage": [
                {
                    **step,
                    "mutations": {
                        k: [_hyperparameter_text(v) for v in change] for k, change in step["mutations"].items()
                    },
                }
                for step in agent_lineage(agent)
            ],
            "backtest_url": backtest_url,
            "bundle": bundle,
            "gate": engine.gate_text(agent.metrics),
            "baselines": baselines.agent_baselines(agent),
            "vs_rows": baselines.equal_weight_rows(agent.metrics),
            "deflated_sharpe": deflated.agent_dsr(agent, run_sharpes := deflated.run_sharpes(agent.run_id)),
            "trials": run_sharpes.trials,
            "deflated_sharpe_vs_equal_weight": deflated.agent_dsr_vs_equal_weight(
                agent, ledger := deflated.task_ledger(agent.run.task_id)
            ),
            "ledger_trials": ledger.trials,
            # the rule the agent was scored by (its own record; the task's when it has none)
            "score_rule": scoring.score_rule((agent.metrics or {}).get("selection") or agent.run.task.selection),
            "metrics_config": metrics_config(
                api=reverse("api:agent-metrics", args=[agent.pk]),
                algorithm=agent.run.task.algorithm,
                group="agent",
                title="this agent and its ancestors, against the line's cumulative env steps",
            ),
        },
    )


@login_required
@require_safe
def agent_bundle(request: HttpRequest, agent_id: int):
    """Download the agent's bundle (exported on first use); ``HEAD`` gives its headers."""
    agent = _agent_or_404(request, agent_id)
    try:
        bundle = services.agent_bundle(agent)
    except AppError as exc:
        messages.error(request, exc.message)
        return redirect("runs:agent", agent_id=agent.pk)
    return serve_file(
        request, bundle.name, size=bundle.size, sha256=bundle.sha256, filename=f"paddock-agent-{agent.id}.zip"
    )
