"""REST API of the runs app: budgets, tasks, runs (with lifecycle actions), agents.

Every queryset is the request user's own (``selectors``), so another user's object is a 404.
Errors use the one format ``{"error", "fields"}`` (``webapp.core.errors``).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from webapp import engine
from webapp.core.downloads import serve_file
from webapp.core.errors import AppError
from webapp.core.fields import refuse_body
from webapp.core.query import ListFilters, filter_by_id, refuse_unknown
from webapp.runs import agent_serializers, algorithms, serializers, services
from webapp.runs.models import Agent, ClusterBudget, Run, Task
from webapp.runs.selectors import curves, quotas, seed_groups
from webapp.runs.selectors.budgets import budget_queryset
from webapp.runs.selectors.runs import agent_queryset, leaderboard_queryset, run_list, task_queryset
from webapp.runs.services import archive

RUN_FILTERS = [
    OpenApiParameter("status", str, enum=[s.value for s in Run.Status], description="only runs in this status"),
    OpenApiParameter("algorithm", str, enum=list(engine.algorithms()), description="only runs of this algorithm"),
    OpenApiParameter("search", str, description="run name, task name or run id"),
    OpenApiParameter("tag", str, description="only runs with this tag (lower case); another parameter is a 400"),
]


METRIC_PARAMETERS = [
    OpenApiParameter(
        "names",
        str,
        description="comma-separated metrics (default: all the algorithm records): " + ", ".join(curves.METRICS),
    ),
    OpenApiParameter("format", str, enum=["json", "csv"], description="csv: one row per point"),
]


class CSVRenderer(BaseRenderer):
    """``text/csv`` for views that build their CSV text themselves (errors stay JSON)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, str):
            return data.encode(self.charset)
        return JSONRenderer().render(data)


def metrics_response(request: Request, payload: dict, filename: str) -> Response:
    """A curves payload as JSON, or as a CSV download when ``?format=csv``."""
    if getattr(request.accepted_renderer, "format", "") == "csv":
        return Response(
            curves.curves_csv(payload), headers={"Content-Disposition": f'attachment; filename="{filename}"'}
        )
    return Response(payload)


@extend_schema_view(
    list=extend_schema(summary="Budgets you may run on (staff: all)"),
    create=extend_schema(
        summary="Create a budget: your own, within your quota (staff: assign one to any user, no quota)"
    ),
    partial_update=extend_schema(summary="Raise or change one of your own budgets (staff: any budget, its owner too)"),
)
class BudgetViewSet(
    ListFilters,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    queryset = ClusterBudget.objects.none()  # for the schema; get_queryset scopes to the user
    serializer_class = serializers.BudgetSerializer
    list_name = "the budgets list"  # no filters: ?owner=... is a 400, not every budget
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_queryset(self):
        return budget_queryset(user=self.request.user)

    def perform_create(self, serializer):
        data = dict(serializer.validated_data)
        user = self.request.user
        if user.is_staff:
            serializer.instance = services.budget_create(actor=user, **data)
            return
        owner = data.pop("owner", None)
        if owner is not None and owner != user:
            raise AppError(
                "only staff can assign a budget to another user", fields={"owner": "not allowed"}, status=403
            )
        serializer.instance = services.budget_create_own(actor=user, **data)

    def perform_update(self, serializer):
        serializer.instance = services.budget_change(
            actor=self.request.user, budget=serializer.instance, **serializer.validated_data
        )

    @extend_schema(summary="End a budget: no generation starts on it, its quota is free again", request=None)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk=None) -> Response:
        budget = self.get_object()
        refuse_body(request.data)
        budget = services.budget_end(actor=request.user, budget=budget)
        return Response(self.get_serializer(budget).data)

    @extend_schema(
        summary="Your quota for budgets of your own and what your open budgets hold",
        responses=serializers.QuotaSerializer,
    )
    @action(detail=False, methods=["get"])
    def quota(self, request: Request) -> Response:
        return Response(serializers.QuotaSerializer(quotas.quota_of(request.user)).data)


@extend_schema_view(
    list=extend_schema(summary="Your tasks"),
    create=extend_schema(summary="Create a task", request=serializers.TaskCreateSerializer),
)
class TaskViewSet(
    ListFilters, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    queryset = Task.objects.none()  # for the schema; get_queryset scopes to the user
    serializer_class = serializers.TaskSerializer
    list_name = "the tasks list"  # no filters: ?dataset=3 is a 400, not every task

    def get_queryset(self):
        return task_queryset(user=self.request.user)

    def create(self, request: Request, *args, **kwargs) -> Response:
        form = serializers.TaskCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        task = services.task_create(owner=request.user, **form.validated_data)
        return Response(self.get_serializer(task).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(summary="Your runs, newest first", parameters=RUN_FILTERS),
    create=extend_schema(
        summary="Create a run (and start it with start=true)",
        request=serializers.RunCreateSerializer,
        responses={201: serializers.RunSerializer},
    ),
)
class RunViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    queryset = Run.objects.none()  # for the schema; get_queryset scopes to the user
    serializer_class = serializers.RunSerializer

    #: The filters of ``GET /api/runs/`` beside the page number (and DRF's ``format``).
    LIST_FILTERS = ("status", "algorithm", "search", "tag")

    def get_queryset(self):
        params = self.request.query_params
        if self.action == "list":
            # ?task=3 filtering nothing reads as "all runs are task 3's"
            refuse_unknown(params, self.LIST_FILTERS, what="the runs list")
            status_ = params.get("status", "")
            if status_ and status_ not in Run.Status.values:
                why = f"expected one of {', '.join(Run.Status.values)}, got {status_!r}"
                raise AppError(f"status: {why}", fields={"status": why})
        return run_list(
            user=self.request.user,
            status=params.get("status", ""),
            algorithm=params.get("algorithm", ""),
            search=params.get("search", ""),
            tag=params.get("tag", ""),
        )

    def _fresh(self, run: Run) -> Response:
        return Response(self.get_serializer(self.get_queryset().get(pk=run.pk)).data)

    def perform_destroy(self, instance: Run) -> None:
        """``DELETE``: an ended run with its agents, backtests and files (409 while it runs)."""
        archive.run_delete(run=instance)

    @extend_schema(
        summary="Set the run's tags (list of words) and/or note",
        request=serializers.AnnotateSerializer,
        responses=serializers.RunSerializer,
    )
    @action(detail=True, methods=["post"])
    def annotate(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        form = serializers.AnnotateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        archive.run_annotate(run=run, tags=form.validated_data.get("tags"), note=form.validated_data.get("note"))
        return self._fresh(run)

    @extend_schema(
        summary="Archive the run (hidden from lists unless asked for), or bring it back",
        request=serializers.ArchiveSerializer,
        responses=serializers.RunSerializer,
    )
    @action(detail=True, methods=["post"], url_path="archive")
    def archive_run(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        form = serializers.ArchiveSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        archive.run_archive(run=run, archived=form.validated_data["archived"])
        return self._fresh(run)

    def create(self, request: Request, *args, **kwargs) -> Response:
        form = serializers.RunCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        start = data.pop("start")
        if data.get("mutation") is None:  # left out or null: the new-run form's default ({} = none)
            data["mutation"] = algorithms.task_default_mutation(data["task"])
        seeds = data.pop("seeds")
        with transaction.atomic():
            runs = services.runs_create_seeds(owner=request.user, seeds=seeds, **data)
        if start:
            if len(runs) == 1:
                services.run_start(run=runs[0])
            else:
                services.runs_start(runs)
        if len(runs) == 1:
            response = self._fresh(runs[0])
            response.status_code = status.HTTP_201_CREATED
            return response
        group = seed_groups.group_summary(user=request.user, group=runs[0].seed_group)
        body = {
            "seed_group": runs[0].seed_group,
            "runs": [self.get_serializer(self.get_queryset().get(pk=run.pk)).data for run in runs],
            "summary": serializers.SeedGroupSerializer(group).data,
        }
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="A seed group: its runs and the mean and 95 % interval of their best score and test Sharpe",
        responses=serializers.SeedGroupSerializer,
    )
    @action(detail=False, methods=["get"], url_path=r"seed-groups/(?P<group>[0-9a-f]{32})")
    def seed_group(self, request: Request, group: str = "") -> Response:
        found = seed_groups.group_summary(user=request.user, group=group)
        if found is None:
            raise AppError("seed group not found", status=404)
        return Response(serializers.SeedGroupSerializer(found).data)

    @extend_schema(summary="Start a queued run", request=None, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def start(self, request: Request, pk=None) -> Response:
        run = self.get_object()  # another user's run is a 404 before its body is read
        refuse_body(request.data)
        return self._fresh(services.run_start(run=run))

    @extend_schema(summary="Pause a running run", request=None, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk=None) -> Response:
        run = self.get_object()  # another user's run is a 404 before its body is read
        refuse_body(request.data)
        return self._fresh(services.run_pause(run=run))

    @extend_schema(summary="Resume a paused run", request=None, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk=None) -> Response:
        run = self.get_object()  # another user's run is a 404 before its body is read
        refuse_body(request.data)
        return self._fresh(services.run_resume(run=run))

    @extend_schema(
        summary="Build an ensemble agent of the leaderboard's top K (mean of their actions), once per member set",
        description="201: built now. 200: the run already had an ensemble of exactly these members; it is "
        "returned with `created: false` and nothing is built. 400 (naming `k`): k outside 2..16 or above the "
        "number of agents on the leaderboard.",
        request=agent_serializers.EnsembleSerializer,
        responses={201: agent_serializers.EnsembleResultSerializer, 200: agent_serializers.EnsembleResultSerializer},
    )
    @action(detail=True, methods=["post"])
    def ensemble(self, request: Request, pk=None) -> Response:
        from webapp.runs.services import ensembles

        run = self.get_object()
        form = agent_serializers.EnsembleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        agent, created = ensembles.ensemble_get_or_create(run=run, k=form.validated_data["k"])
        body = agent_serializers.EnsembleResultSerializer(agent, context={"created": created}).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(summary="Stop a run", request=serializers.StopSerializer, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        form = serializers.StopSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return self._fresh(services.run_stop(run=run, backtest=form.validated_data["backtest"]))

    @extend_schema(
        summary="Change the pod count", request=serializers.ScaleSerializer, responses=serializers.RunSerializer
    )
    @action(detail=True, methods=["post"])
    def scale(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        form = serializers.ScaleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return self._fresh(services.run_scale(run=run, num_pods=form.validated_data["num_pods"]))

    @extend_schema(summary="The run's leaderboard, best first", responses=agent_serializers.AgentSerializer(many=True))
    @action(detail=True, methods=["get"])
    def leaderboard(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        refuse_unknown(request.query_params, (), what="a run's leaderboard")
        page = self.paginate_queryset(leaderboard_queryset(run))
        data = agent_serializers.AgentSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)

    @extend_schema(
        summary="Training curves of every generation against the lineage's cumulative env steps",
        parameters=METRIC_PARAMETERS,
        responses={200: OpenApiTypes.OBJECT, (200, "text/csv"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, BrowsableAPIRenderer, CSVRenderer])
    def metrics(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        names = curves.parse_names(request.query_params.get("names"), algorithm=run.task.algorithm)
        return metrics_response(request, curves.run_curves(run, names), f"run-{run.pk}-metrics.csv")


@extend_schema_view(
    list=extend_schema(
        summary="Agents of your runs, best first",
        parameters=[
            OpenApiParameter("run", int, description="only this run's agents (an id of no run of yours: none)"),
            OpenApiParameter(
                "on_leaderboard",
                bool,
                description="only agents on (true, 1) or off (false, 0) the leaderboard; another value: 400",
            ),
            OpenApiParameter(
                "kind",
                str,
                enum=[choice.value for choice in Agent.Kind],
                description="only trained agents (of the pods) or only ensembles; any other value: 400 naming kind",
            ),
        ],
    ),
)
class AgentViewSet(ListFilters, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Agent.objects.none()  # for the schema; get_queryset scopes to the user
    serializer_class = agent_serializers.AgentSerializer
    list_filters = ("run", "on_leaderboard", "kind")
    list_name = "the agents list"

    def get_queryset(self):
        qs = agent_queryset(user=self.request.user)
        if self.action != "list":
            return qs
        params = self.request.query_params
        qs = filter_by_id(qs, params, "run")
        if "on_leaderboard" in params:
            if params["on_leaderboard"] not in ("true", "1", "false", "0"):
                message = f"expected true, false, 1 or 0, got {params['on_leaderboard'][:40]!r}"
                raise AppError(f"on_leaderboard: {message}", fields={"on_leaderboard": message})
            qs = qs.filter(on_leaderboard=params["on_leaderboard"] in ("true", "1"))
        if "kind" in params:
            kinds = [choice.value for choice in Agent.Kind]
            if params["kind"] not in kinds:
                message = f"expected one of {', '.join(kinds)}, got {params['kind']!r}"
                raise AppError(f"kind: {message}", fields={"kind": message})
            qs = qs.filter(kind=params["kind"])
        return qs.order_by("-run_id", F("score").desc(nulls_last=True), "created_seq")

    @extend_schema(
        summary="Download the agent bundle (zip); supports Range, If-Range and If-None-Match",
        responses={
            (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="the whole bundle"),
            (206, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="the requested range"),
            304: OpenApiResponse(description="ETag matched If-None-Match"),
            416: OpenApiResponse(description="range not satisfiable"),
        },
    )
    @extend_schema(
        summary="Training curves of the agent's generation and its ancestors', oldest first",
        parameters=METRIC_PARAMETERS,
        responses={200: OpenApiTypes.OBJECT, (200, "text/csv"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, BrowsableAPIRenderer, CSVRenderer])
    def metrics(self, request: Request, pk=None) -> Response:
        agent = self.get_object()
        names = curves.parse_names(request.query_params.get("names"), algorithm=agent.run.task.algorithm)
        return metrics_response(request, curves.agent_curves(agent, names), f"agent-{agent.pk}-metrics.csv")

    @action(detail=True, methods=["get", "head"])
    def bundle(self, request: Request, pk=None):
        agent = self.get_object()
        bundle = services.agent_bundle(agent)
        return serve_file(
            request, bundle.name, size=bundle.size, sha256=bundle.sha256, filename=f"paddock-agent-{agent.id}.zip"
        )
