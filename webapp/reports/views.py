"""Pages of the reports app: backtest list, request form, report, exports and comparison.

Views stay thin: selectors read (owner-scoped, 404 for anyone else's backtest), services write,
``charts`` builds the figures.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from webapp import engine
from webapp.core import query
from webapp.core.errors import AppError
from webapp.core.forms import id_message, whole_number
from webapp.core.limits import refusal_response
from webapp.market.selectors import dataset_survivorship
from webapp.reports import charts, selectors, services
from webapp.reports.models import Backtest
from webapp.runs.models import Agent
from webapp.runs.selectors import baselines, deflated


def format_metric(value: Any, kind: str) -> str:
    """A metric for the screen: fractions as percent, ratios with 3 decimals, ``—`` if undefined."""
    if value is None:
        return "—"
    if kind == "pct":
        return f"{value * 100:.2f} %"
    if kind == "ratio":
        return f"{value:.3f}"
    if kind == "days":
        return f"{int(value)}"
    return str(value)


def metric_table(columns: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of a metrics table: one per :data:`selectors.METRIC_ROWS` entry.

    Args:
        columns: ``(series_key, label, metrics)`` per column.

    Returns:
        ``[{"key", "label", "better", "cells": [{"series", "raw", "text", "best"}]}]``;
        ``raw`` is the exact value as text (``repr`` of the float, "" when undefined), so
        tests and scripts can read it from ``data-value``.
    """
    rows = []
    withheld = [engine.withheld_metrics(m) for _, _, m in columns]
    for row in selectors.METRIC_ROWS:
        values = [m.get(row.key) for _, _, m in columns]
        # an annualised figure of a short window is shown as "n/a (...)" and never ranks best;
        # its value stays in data-value and in the JSON, flagged short_window
        shown = [None if row.key in w else v for w, v in zip(withheld, values)]
        best = selectors.best_marks(shown, row.better)
        cells = [
            {
                "series": series,
                "raw": "" if v is None else repr(v) if isinstance(v, float) else str(v),
                "text": w.get(row.key) or format_metric(v, row.kind),
                "best": b,
            }
            for (series, _, _), v, b, w in zip(columns, values, best, withheld)
        ]
        rows.append({"key": row.key, "label": row.label, "better": row.better or "", "cells": cells})
    return rows


def _get(request: HttpRequest, backtest_id: int) -> Backtest:
    try:
        return selectors.backtest_get(user=request.user, backtest_id=backtest_id)
    except AppError as exc:
        raise Http404(exc.message) from exc


def _selection_context(agent: Agent) -> dict[str, Any]:
    """The agent's Deflated Sharpe Ratio (``webapp.runs.selectors.deflated``): its validation Sharpe ratio
    deflated by the number of agents its run has evaluated and the variance of their Sharpe
    ratios (Bailey & López de Prado 2014)."""
    stats = deflated.run_sharpes(agent.run_id)
    return {
        "dsr": deflated.agent_dsr(agent, stats),
        "trials": stats.trials,
        "validation_sharpe": (agent.metrics or {}).get("sharpe_ratio"),
    }


def _report_context(backtest: Backtest) -> dict[str, Any]:
    columns = [
        (name, selectors.SERIES_LABELS[name], backtest.metrics[name])
        for name in selectors.SERIES
        if name in (backtest.metrics or {})
    ]
    config = backtest.config or {}
    return {
        "backtest": backtest,
        "columns": columns,
        "rows": metric_table(columns),
        "config": config,
        "agent": backtest.agent,  # the live record: an ensemble's members also for reports made before they were stored
        "contract": config.get("metric_contract", ""),
        "selection": _selection_context(backtest.agent),
        "vs_rows": baselines.equal_weight_rows(backtest.metrics),
        "robustness": (backtest.metrics or {}).get("robustness"),
        "survivorship": dataset_survivorship(backtest.dataset),
    }


@login_required
@require_GET
def backtest_list(request: HttpRequest) -> HttpResponse:
    """The user's backtests; tick some to compare them. ``?run=<id>`` and ``?agent=<id>`` narrow
    them as in ``/api/backtests/``; a value that is not a whole number is a 400 naming it."""
    backtests = selectors.backtest_list(user=request.user)
    filters: dict[str, int] = {}
    for name in ("run", "agent"):
        try:
            value = query.id_param(request.GET, name, allow_blank=True)
        except AppError as exc:
            context = {"backtests": [], "max_compare": selectors.MAX_COMPARE, "error": exc.message, "filters": {}}
            return render(request, "reports/list.html", context, status=400)
        if value is not None:
            filters[name] = value
            backtests = query.filter_by_id(backtests, request.GET, name, allow_blank=True)  # beyond any id: none
    context = {"backtests": backtests[:200], "max_compare": selectors.MAX_COMPARE, "filters": filters}
    return render(request, "reports/list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def backtest_new(request: HttpRequest) -> HttpResponse:
    """Request a backtest of an agent (``?agent=<id>``); defaults to the task's test split."""
    agent_id = request.POST.get("agent") or request.GET.get("agent")
    if agent_id and whole_number(agent_id) is None:  # "²".isdigit() is true, yet the lookup raised
        why = id_message("an agent", agent_id)
        return refusal_response(AppError(f"agent: {why}", fields={"agent": why}), path=request.path)
    agent = (
        Agent.objects.filter(pk=whole_number(agent_id), run__owner=request.user).select_related("run__task").first()
        if agent_id
        else None
    )
    if agent is None:
        raise Http404("agent not found")
    test = (agent.run.task.splits or {}).get("test") or {}
    form = {
        "start": request.POST.get("start", test.get("start", "")),
        "end": request.POST.get("end", test.get("end", "")),
        "allow_overlap": request.POST.get("allow_overlap") == "on",
    }
    error = None
    fields: dict[str, Any] = {}
    if request.method == "POST":
        try:
            backtest, created = services.backtest_get_or_create(
                user=request.user,
                agent=agent,
                start=form["start"],
                end=form["end"],
                allow_overlap=form["allow_overlap"],
            )
        except AppError as exc:
            if exc.status == 404:
                raise Http404(exc.message) from exc
            error, fields = exc.message, exc.fields
        else:
            if not created:
                messages.info(request, f"This backtest exists already ({backtest.status}): here is its report.")
            return redirect("reports:backtest-detail", backtest_id=backtest.id)
    context = {"agent": agent, "form": form, "error": error, "fields": fields, "splits": agent.run.task.splits}
    return render(request, "reports/new.html", context, status=400 if error else 200)


#: Optional benchmarks on the report's equity curve (from ``PADDOCK_BENCHMARK_FILE``).
EXTRA_BENCHMARKS = ("SPY", "DIA")


def _extra_benchmarks(daily) -> dict:
    """SPY and DIA bought and held from the same capital on the backtest's dates (those the
    benchmark file holds)."""
    if daily.empty:
        return {}
    return engine.benchmark_values(
        settings.PADDOCK_BENCHMARK_FILE, EXTRA_BENCHMARKS, daily.index, float(daily["account_value"].iloc[0])
    )


@login_required
@require_GET
def backtest_detail(request: HttpRequest, backtest_id: int) -> HttpResponse:
    """The report: charts, metrics against QQQ and equal weight, configuration, contract."""
    backtest = _get(request, backtest_id)
    context = _report_context(backtest)
    if backtest.status == Backtest.Status.DONE:
        daily = selectors.backtest_daily(backtest)
        context["figures"] = [
            {"id": div_id, "data_id": f"{div_id}-data", "figure": charts.figure_data(fig)}
            for div_id, fig in charts.report_figures(daily, _extra_benchmarks(daily)).items()
        ]
        context["trades"], context["trades_total"] = charts.trade_rows(daily)
    return render(request, "reports/report.html", context)


@login_required
@require_GET
def backtest_export_html(request: HttpRequest, backtest_id: int) -> HttpResponse:
    """The report as one self-contained HTML file (Plotly inlined, works offline)."""
    backtest = _get(request, backtest_id)
    try:
        daily = selectors.backtest_daily(backtest)
    except AppError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    figures = charts.report_figures(daily)
    fragments = [
        charts.figure_html(fig, div_id, include_plotlyjs=(i == 0)) for i, (div_id, fig) in enumerate(figures.items())
    ]
    context = {**_report_context(backtest), "fragments": fragments, "exported_at": timezone.now()}
    html = render_to_string("reports/export.html", context, request=None)
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="paddock-backtest-{backtest.id}.html"'
    return response


#: The report's CSV downloads: name in the file name -> how to read it from a finished backtest.
CSV_EXPORTS = {"daily": selectors.backtest_csv_bytes, "metrics": selectors.backtest_metrics_csv}


def csv_download(backtest: Backtest, kind: str) -> HttpResponse:
    """One of :data:`CSV_EXPORTS` as an attachment ``paddock-backtest-<id>-<kind>.csv``.

    Raises:
        AppError: as the reader (409 while not done, 404 when the file is gone).
    """
    response = HttpResponse(CSV_EXPORTS[kind](backtest), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="paddock-backtest-{backtest.id}-{kind}.csv"'
    return response


def _csv_page(request: HttpRequest, backtest_id: int, kind: str) -> HttpResponse:
    backtest = _get(request, backtest_id)
    try:
        return csv_download(backtest, kind)
    except AppError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")


@login_required
@require_GET
def backtest_daily_csv(request: HttpRequest, backtest_id: int) -> HttpResponse:
    """The daily series as CSV (account value, cash, holdings, trades, costs, benchmarks)."""
    return _csv_page(request, backtest_id, "daily")


@login_required
@require_GET
def backtest_metrics_csv(request: HttpRequest, backtest_id: int) -> HttpResponse:
    """The metrics table as CSV, one row per series, with the ``short_window`` flag."""
    return _csv_page(request, backtest_id, "metrics")


@login_required
@require_GET
def backtest_compare(request: HttpRequest) -> HttpResponse:
    """Compare backtests (``?ids=1,2,3``): overlaid equity, best metrics marked, config diff."""
    raw = request.GET.getlist("ids")
    context: dict[str, Any] = {"max_compare": selectors.MAX_COMPARE}
    try:
        ids = selectors.parse_ids(raw if len(raw) > 1 else (raw[0] if raw else ""))
        comparison = selectors.compare(user=request.user, ids=ids)
    except AppError as exc:
        if exc.status == 404:
            raise Http404(exc.message) from exc
        context["error"] = exc.message
        return render(request, "reports/compare.html", context, status=400)
    columns = [
        (str(b.id), label, metrics)
        for b, label, metrics in zip(comparison.backtests, comparison.labels, comparison.metrics)
    ]
    context.update(
        {
            "comparison": comparison,
            "columns": columns,
            "rows": metric_table(columns),
            "config_rows": comparison.config_rows,
            "figure": {
                "id": "compare-chart",
                "data_id": "compare-chart-data",
                "figure": charts.figure_data(charts.compare_figure(comparison.equity)),
            },
            "common": (comparison.equity.index[0].date(), comparison.equity.index[-1].date(), len(comparison.equity)),
        }
    )
    return render(request, "reports/compare.html", context)
