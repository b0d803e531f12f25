"""Backtests: an agent run day by day over dates it did not train on, scored against QQQ.

A :class:`Backtest` is created ``queued`` by ``services.backtest_get_or_create`` (a user's
request; one repeating a backtest that is not failed gets that one) or
``services.backtests_for_run`` (the best agents of a finished run, on the task's test split),
and run by the Celery task ``webapp.reports.tasks.run_backtest`` on the ``cpu`` queue.

Summary numbers live in the row (``metrics``, ``config``: small JSON read by list and compare
pages); the daily series (account value, cash, holdings, trades, costs, turnover and the
benchmark values) is a CSV file in Django's default storage (``daily_csv``), read only by the
report page, the exports and the compare chart.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Backtest(models.Model):
    """One backtest of one agent over ``[start, end]`` (inclusive bounds as task splits take
    them: ``YYYY-MM-DD`` exchange dates, or ``YYYY-MM-DD HH:MM`` exchange-time bar ends on an
    intraday dataset; the service checks that end comes after start).

    Status flow: ``queued`` -> ``running`` -> ``done`` | ``failed``. A worker claims the row
    with a conditional update (``queued`` -> ``running``), so a redelivered task message is a
    no-op.

    ``metrics`` is ``{"agent": {...}, "equal_weight": {...}, "QQQ": {...}}`` as computed by
    ``trainer.backtest.metrics.compute_metrics`` (rates are fractions, ``None`` where a
    metric is undefined). ``config`` records what was run: agent, run, task, data window,
    tickers, trading costs and rules, the policy file's digest, and the metric contract.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Source(models.TextChoices):
        USER = "user", "requested"
        END_OF_RUN = "end_of_run", "end of run"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="backtests")
    agent = models.ForeignKey("runs.Agent", on_delete=models.CASCADE, related_name="backtests")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="backtests")
    dataset = models.ForeignKey("market.Dataset", on_delete=models.PROTECT, related_name="backtests")
    tickers = models.JSONField(default=list, help_text="traded tickers, in the agent's action order")
    start = models.CharField(max_length=19, help_text="YYYY-MM-DD, or YYYY-MM-DD HH:MM (intraday, bar end)")
    end = models.CharField(max_length=19, help_text="YYYY-MM-DD, or YYYY-MM-DD HH:MM (intraday, bar end)")
    allow_overlap = models.BooleanField(
        default=False, help_text="the range may overlap the task's train/validation dates (not a held-out test)"
    )
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.USER)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    config = models.JSONField(default=dict, blank=True)
    num_days = models.PositiveIntegerField(null=True, blank=True, help_text="trading days backtested")
    daily_csv = models.CharField(
        max_length=300, blank=True, help_text="name of the daily series in the default storage"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"])]
        constraints = [
            # End-of-run backtests are created once per agent and window, however often the
            # run-finished trigger fires.
            models.UniqueConstraint(
                fields=["agent", "start", "end"],
                condition=Q(source="end_of_run"),
                name="reports_backtest_end_of_run_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"backtest {self.id} (agent {self.agent_id}, {self.start} to {self.end})"

    @property
    def agent_metrics(self) -> dict:
        """The agent's own metrics (empty until done)."""
        return (self.metrics or {}).get("agent", {})

    @property
    def qqq_metrics(self) -> dict:
        """QQQ buy-and-hold's metrics on the same dates (empty until done)."""
        return (self.metrics or {}).get("QQQ", {})

    @property
    def equal_weight_metrics(self) -> dict:
        """The equal-weight portfolio's metrics on the same dates (empty until done)."""
        return (self.metrics or {}).get("equal_weight", {})
