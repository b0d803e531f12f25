"""REST API of backtests: list, create, retrieve, the daily series and the metrics as CSV.

Owner-scoped: another user's backtest (or agent) answers 404. Errors use the project's one
format, ``{"error": ..., "fields": {...}}``.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.core.errors import AppError
from webapp.core.query import ListFilters, filter_by_id
from webapp.reports import selectors, services
from webapp.reports.serializers import BacktestCreateSerializer, BacktestDetailSerializer, BacktestListSerializer
from webapp.reports.views import csv_download
from webapp.runs.models import Agent


@extend_schema_view(
    list=extend_schema(
        summary="Your backtests, newest first",
        parameters=[
            OpenApiParameter("run", int, description="only this run's backtests (an id of no run of yours: none)"),
            OpenApiParameter(
                "agent", int, description="only this agent's backtests (an id of no agent of yours: none)"
            ),
        ],
    ),
    create=extend_schema(
        summary="Queue a backtest, or get the same one (agent, window, tickers, allow_overlap) not failed",
        request=BacktestCreateSerializer,
        responses={201: BacktestDetailSerializer, 200: BacktestDetailSerializer},
    ),
)
class BacktestViewSet(ListFilters, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """``/api/backtests/``: GET list, POST create (queued; runs on a ``cpu`` worker; 200 with the
    existing one when the same backtest is queued, running or done),
    GET ``<id>/``, GET ``<id>/daily.csv``, GET ``<id>/metrics.csv`` (one row per series, with the
    ``short_window`` flag)."""

    list_filters = ("run", "agent")
    list_name = "the backtests list"

    def get_queryset(self):
        """The user's backtests, newest first; ``?run=<id>`` and ``?agent=<id>`` narrow them (an
        id of nothing of the user's, however large, to none).

        Raises:
            AppError: 400 naming ``run`` or ``agent`` when it is not a whole number.
        """
        qs = selectors.backtest_list(user=self.request.user)
        if self.action != "list":
            return qs
        for name in self.list_filters:
            qs = filter_by_id(qs, self.request.query_params, name)
        return qs

    def get_serializer_class(self):
        if self.action == "create":
            return BacktestCreateSerializer
        return BacktestListSerializer if self.action == "list" else BacktestDetailSerializer

    def get_object(self):
        return selectors.backtest_get(user=self.request.user, backtest_id=int(self.kwargs["pk"]))

    def create(self, request: Request) -> Response:
        data = BacktestCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        agent = Agent.objects.filter(pk=values["agent"], run__owner=request.user).select_related("run__task").first()
        if agent is None:
            raise AppError("agent not found", fields={"agent": "not found"}, status=404)
        backtest, created = services.backtest_get_or_create(
            user=request.user,
            agent=agent,
            start=values["start"],
            end=values["end"],
            tickers=values.get("tickers"),
            allow_overlap=values["allow_overlap"],
        )
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK  # 200: the same backtest exists
        return Response(BacktestDetailSerializer(backtest).data, status=answer)

    @action(detail=True, methods=["get"], url_path="daily.csv", url_name="daily-csv")
    def daily_csv(self, request: Request, pk: str | None = None) -> HttpResponse:
        return csv_download(self.get_object(), "daily")

    @action(detail=True, methods=["get"], url_path="metrics.csv", url_name="metrics-csv")
    def metrics_csv(self, request: Request, pk: str | None = None) -> HttpResponse:
        return csv_download(self.get_object(), "metrics")


def register(router) -> None:
    """Add the backtests viewset to the project's API router (``/api/backtests/``)."""
    router.register("backtests", BacktestViewSet, basename="backtest")
