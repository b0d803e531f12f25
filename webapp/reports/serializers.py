"""API representations of backtests (the list omits the configuration; the daily series is
only ever served as CSV)."""

from __future__ import annotations

from rest_framework import serializers

from webapp.core.fields import InputSerializer, StrictBooleanField, StrictCharField
from webapp.reports.models import Backtest


class BacktestListSerializer(serializers.ModelSerializer):
    """A backtest in lists: status, window and the agent's headline metrics."""

    run = serializers.IntegerField(source="run_id", read_only=True)
    agent = serializers.IntegerField(source="agent_id", read_only=True)
    dataset = serializers.CharField(source="dataset.name", read_only=True)
    agent_metrics = serializers.DictField(read_only=True)

    class Meta:
        model = Backtest
        fields = [
            "id",
            "run",
            "agent",
            "dataset",
            "tickers",
            "start",
            "end",
            "allow_overlap",
            "source",
            "status",
            "error",
            "num_days",
            "agent_metrics",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class BacktestDetailSerializer(BacktestListSerializer):
    """One backtest: metrics of the agent and both benchmarks, and the configuration."""

    class Meta(BacktestListSerializer.Meta):
        fields = [*BacktestListSerializer.Meta.fields, "metrics", "config"]
        read_only_fields = fields


class BacktestCreateSerializer(InputSerializer):
    """Input of ``POST /api/backtests/``; the service checks the range and the tickers."""

    agent = serializers.IntegerField(min_value=1)
    start = StrictCharField(max_length=40)  # YYYY-MM-DD or YYYY-MM-DD HH:MM; the service checks it
    end = StrictCharField(max_length=40)
    tickers = serializers.ListField(child=StrictCharField(max_length=20), required=False, allow_empty=False)
    allow_overlap = StrictBooleanField(default=False)
