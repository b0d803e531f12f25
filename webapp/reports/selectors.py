"""Reads of the reports app: owner-scoped backtests, their daily series, and comparisons.

Every read takes the user: another user's backtest is simply not found (pages and the API
answer 404, never 403, so ids do not leak).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

import pandas as pd
from django.core.files.storage import default_storage
from django.db.models import QuerySet

from webapp import engine
from webapp.core.errors import AppError
from webapp.core.query import ID_MAX
from webapp.reports.models import Backtest

#: Most backtests one comparison draws.
MAX_COMPARE = 24

AGENT, EQUAL_WEIGHT, QQQ = "agent", "equal_weight", "QQQ"
SERIES = (AGENT, QQQ, EQUAL_WEIGHT)
SERIES_LABELS = {AGENT: "Agent", QQQ: "QQQ (buy & hold)", EQUAL_WEIGHT: "Equal weight (buy & hold)"}
#: Daily CSV column holding each series' USD value.
VALUE_COLUMNS = {AGENT: "account_value", QQQ: "benchmark_QQQ", EQUAL_WEIGHT: "benchmark_equal_weight"}


@dataclass(frozen=True)
class MetricRow:
    """One row of a metrics table.

    Attributes:
        key: key in ``compute_metrics``'s dict.
        label: shown to the user.
        kind: ``"pct"`` (fraction shown as percent), ``"ratio"``, ``"days"`` or ``"date"``.
        better: ``"higher"``, ``"lower"`` or ``None`` (no best value is marked). Max drawdown
            is negative, so "higher" means closer to zero.
    """

    key: str
    label: str
    kind: str
    better: str | None


METRIC_ROWS: tuple[MetricRow, ...] = (
    MetricRow("cumulative_return", "Cumulative return", "pct", "higher"),
    MetricRow("annual_return", "Annual return (CAGR)", "pct", "higher"),
    MetricRow("annual_volatility", "Annual volatility", "pct", "lower"),
    MetricRow("sharpe_ratio", "Sharpe ratio", "ratio", "higher"),
    MetricRow("sortino_ratio", "Sortino ratio", "ratio", "higher"),
    MetricRow("calmar_ratio", "Calmar ratio", "ratio", "higher"),
    MetricRow("max_drawdown", "Max drawdown", "pct", "higher"),
    MetricRow("max_drawdown_peak", "Drawdown peak", "date", None),
    MetricRow("max_drawdown_trough", "Drawdown trough", "date", None),
    MetricRow("max_drawdown_recovery", "Drawdown recovery", "date", None),
    MetricRow("max_drawdown_duration_days", "Drawdown duration (trading days)", "days", "lower"),
    MetricRow("alpha", "Alpha vs QQQ (annual)", "pct", "higher"),
    MetricRow("beta", "Beta vs QQQ", "ratio", None),
    MetricRow("information_ratio", "Information ratio vs QQQ (daily)", "ratio", "higher"),
    MetricRow("win_rate", "Daily win rate", "pct", "higher"),
    MetricRow("daily_mean_return", "Mean daily return", "pct", "higher"),
    MetricRow("daily_volatility", "Daily volatility", "pct", "lower"),
    MetricRow("daily_sharpe_ratio", "Daily Sharpe ratio (not annualised)", "ratio", "higher"),
    MetricRow("turnover_annual", "Turnover (annual)", "ratio", None),
)


def backtest_list(*, user) -> QuerySet[Backtest]:
    """The user's backtests, newest first, without the heavy JSON (list pages stay fast)."""
    return (
        Backtest.objects.filter(owner=user)
        .select_related("run__task", "agent", "dataset")
        .defer("config", "agent__metrics", "agent__hyperparameters")
    )


def backtest_get(*, user, backtest_id: int) -> Backtest:
    """One of the user's backtests.

    Raises:
        AppError: 404 when it does not exist or belongs to someone else.
    """
    backtest = (
        Backtest.objects.filter(owner=user, pk=backtest_id).select_related("run__task", "agent", "dataset").first()
    )
    if backtest is None:
        raise AppError("backtest not found", status=404)
    return backtest


def backtest_same(*, agent, dataset, tickers: list[str], start: str, end: str, allow_overlap: bool) -> Backtest | None:
    """The newest backtest, queued, running or done, that a new one with these inputs would
    repeat, else ``None``.

    "The same" is every field the result depends on: the agent (its checkpoint), the dataset and
    tickers it trades, the window as parsed (``start``, ``end``) and ``allow_overlap`` (the
    report says whether the range is held out). Who asked for it (``source``) is not one of
    them; a failed backtest is not a result, so a request after it is a new one.
    """
    return (
        Backtest.objects.filter(
            agent=agent, dataset=dataset, start=start, end=end, allow_overlap=bool(allow_overlap), tickers=tickers
        )
        .exclude(status=Backtest.Status.FAILED)
        .order_by("-created_at", "-id")
        .first()
    )


def backtest_daily(backtest: Backtest) -> pd.DataFrame:
    """The daily series of a finished backtest (``DatetimeIndex`` named ``date``).

    Raises:
        AppError: 409 while it is not done; 404 when its file is gone from the storage.
    """
    if backtest.status != Backtest.Status.DONE or not backtest.daily_csv:
        raise AppError(f"backtest is {backtest.status}; its daily series is not ready", status=409)
    if not default_storage.exists(backtest.daily_csv):
        raise AppError("the backtest's daily series file is missing", status=404)
    with default_storage.open(backtest.daily_csv, "rb") as fh:
        frame = pd.read_csv(io.BytesIO(fh.read()), parse_dates=["date"], index_col="date")
    return frame


def backtest_csv_bytes(backtest: Backtest) -> bytes:
    """The stored daily CSV, byte for byte.

    Raises:
        AppError: as :func:`backtest_daily`.
    """
    backtest_daily(backtest)  # same checks
    with default_storage.open(backtest.daily_csv, "rb") as fh:
        return fh.read()


#: Columns of the metrics CSV ahead of the metric rows: the series and the short-window rule.
METRICS_CSV_HEAD = ("series", "label", "num_days", "short_window", "min_annualised_days")


def backtest_metrics_csv(backtest: Backtest) -> str:
    """The report's metrics as CSV text: one row per series (agent, QQQ, equal weight).

    Columns: :data:`METRICS_CSV_HEAD`, then every :data:`METRIC_ROWS` key (per-day mean return,
    volatility and Sharpe ratio included). Values are raw (``repr`` of floats, "" when
    undefined). ``short_window`` is ``true`` when the window has fewer than
    ``min_annualised_days`` daily returns: the annualised columns (``trainer.backtest.metrics.
    ANNUALISED_KEYS``) then keep their values but are not meaningful, as pages and the HTML
    export say ("n/a (window shorter than 63 days)"); read the per-day columns instead.

    Raises:
        AppError: 409 while the backtest is not done.
    """
    if backtest.status != Backtest.Status.DONE:
        raise AppError(f"backtest is {backtest.status}; its metrics are not ready", status=409)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*METRICS_CSV_HEAD, *(row.key for row in METRIC_ROWS)])
    for name in SERIES:
        metrics = (backtest.metrics or {}).get(name)
        if metrics is None:
            continue
        cells = [name, SERIES_LABELS[name], metrics.get("num_days", "")]
        cells += ["true" if metrics.get("short_window") else "false", metrics.get("min_annualised_days", "")]
        for row in METRIC_ROWS:
            value = metrics.get(row.key)
            cells.append("" if value is None else repr(value) if isinstance(value, float) else value)
        writer.writerow(cells)
    return out.getvalue()


def series_values(daily: pd.DataFrame) -> dict[str, pd.Series]:
    """USD value of the agent and each benchmark present in the daily series."""
    return {name: daily[col] for name, col in VALUE_COLUMNS.items() if col in daily.columns}


def best_marks(values: list[Any], better: str | None) -> list[bool]:
    """Which entries of a metrics row hold the best value (ties all marked).

    Args:
        values: one value per column (``None`` = undefined, never best).
        better: ``"higher"``, ``"lower"`` or ``None`` (nothing marked).
    """
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if better is None or len(numbers) < 2:
        return [False] * len(values)
    best = max(numbers) if better == "higher" else min(numbers)
    return [isinstance(v, int | float) and not isinstance(v, bool) and v == best for v in values]


def _flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def config_diff(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows ``{"key", "values", "differs"}`` of the flattened configurations side by side
    (the metric contract and free-text notes are left out: they are the same everywhere)."""
    flat = [_flatten({k: v for k, v in (c or {}).items() if k not in ("metric_contract", "notes")}) for c in configs]
    keys = sorted({k for f in flat for k in f})
    rows = []
    for key in keys:
        values = [f.get(key) for f in flat]
        shown = [_show(v) for v in values]
        rows.append({"key": key, "values": shown, "differs": len(set(shown)) > 1})
    return rows


def _show(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


@dataclass
class Comparison:
    """Backtests compared on their common dates.

    Attributes:
        backtests: the compared backtests, in the order asked.
        labels: one short label per backtest.
        equity: DataFrame common dates x labels, agent value normalized to 1.0 on the first
            common day (plus a ``"QQQ"`` column, QQQ being the same series for every backtest).
        metrics: per backtest, the agent's metrics recomputed on the common dates.
        rows: metrics table rows ``{"row": MetricRow, "values": [...], "best": [bool...]}``.
        config_rows: :func:`config_diff` of their configurations.
    """

    backtests: list[Backtest]
    labels: list[str]
    equity: pd.DataFrame
    metrics: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    config_rows: list[dict[str, Any]]


def parse_ids(raw: Any) -> list[int]:
    """Backtest ids from ``"1,2,3"`` or a list.

    Raises:
        AppError: a value that is not a positive integer (field ``ids``).
    """
    items = raw if isinstance(raw, list | tuple) else str(raw or "").replace(" ", ",").split(",")
    ids: list[int] = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        if not text.isascii() or not text.isdigit() or int(text) < 1:  # int("²") raises
            raise AppError(f"ids: {text!r} is not a backtest id", fields={"ids": f"{text!r} is not a backtest id"})
        if int(text) not in ids:
            ids.append(int(text))
    return ids


def backtest_label(backtest: Backtest) -> str:
    """Short label: ``#<id> <run> a<agent>``."""
    return f"#{backtest.id} {backtest.run.name} · agent {backtest.agent_id}"


def compare(*, user, ids: list[int]) -> Comparison:
    """Compare the user's finished backtests on the dates they share.

    Args:
        user: the owner; another user's id is reported as not found.
        ids: 2 to :data:`MAX_COMPARE` backtest ids.

    Raises:
        AppError: 400 (field ``ids``) for too few/many ids, unfinished backtests, or no common
            dates; 404 for an id the user does not own.
    """
    if len(ids) < 2:
        raise AppError("ids: pick at least 2 backtests to compare", fields={"ids": "at least 2"})
    if len(ids) > MAX_COMPARE:
        raise AppError(f"ids: at most {MAX_COMPARE} backtests at once", fields={"ids": f"at most {MAX_COMPARE}"})
    in_range = [i for i in ids if i <= ID_MAX]  # a larger id names nothing (and SQLite refuses it)
    found = {b.id: b for b in Backtest.objects.filter(owner=user, pk__in=in_range).select_related("run", "agent")}
    missing = [i for i in ids if i not in found]
    if missing:
        raise AppError(f"backtest {missing[0]} not found", fields={"ids": f"{missing[0]} not found"}, status=404)
    backtests = [found[i] for i in ids]
    unfinished = [b.id for b in backtests if b.status != Backtest.Status.DONE]
    if unfinished:
        msg = f"backtest(s) {', '.join(map(str, unfinished))} are not done"
        raise AppError(f"ids: {msg}", fields={"ids": msg})
    labels = [backtest_label(b) for b in backtests]
    dailies = [backtest_daily(b) for b in backtests]
    common = dailies[0].index
    for daily in dailies[1:]:
        common = common.intersection(daily.index)
    if len(common) < 2:
        msg = "the backtests share fewer than 2 trading days; pick overlapping date ranges"
        raise AppError(f"ids: {msg}", fields={"ids": msg})
    equity = pd.DataFrame(index=common)
    metrics = []
    qqq = None
    for label, daily in zip(labels, dailies):
        values = daily.loc[common, VALUE_COLUMNS[AGENT]]
        equity[label] = values / values.iloc[0]
        if VALUE_COLUMNS[QQQ] in daily.columns:
            qqq = daily.loc[common, VALUE_COLUMNS[QQQ]]
        # The last common day's trades are outside the compared window (as the engine's last day).
        turnover = daily.loc[common, "turnover"].iloc[:-1] if "turnover" in daily.columns else None
        metrics.append(engine.series_metrics(values, qqq, turnover))
    if qqq is not None:
        equity[QQQ] = qqq / qqq.iloc[0]
    rows = []
    for row in METRIC_ROWS:
        values = [m.get(row.key) for m in metrics]
        rows.append({"row": row, "values": values, "best": best_marks(values, row.better)})
    return Comparison(
        backtests=backtests,
        labels=labels,
        equity=equity,
        metrics=metrics,
        rows=rows,
        config_rows=config_diff([b.config for b in backtests]),
    )
