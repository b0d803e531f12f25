"""REST API of walk-forward studies: ``/api/studies/`` list and create, ``<id>/`` detail,
``<id>/cancel/``. Owner-scoped: another user's study (task, budget) answers 404."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.core.errors import AppError
from webapp.core.query import ListFilters
from webapp.runs.models import ClusterBudget, Task
from webapp.studies import selectors, services
from webapp.studies.serializers import StudyCreateSerializer, StudyDetailSerializer, StudyListSerializer


class StudyViewSet(ListFilters, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """``/api/studies/``: GET list, POST create (plans the folds and starts one run per fold),
    GET ``<id>/`` (folds, runs and, when done, the stitched record with ``vs_equal_weight`` and
    PBO), POST ``<id>/cancel/``."""

    list_name = "the studies list"  # no filters: ?task=3 is a 400, not every study

    def get_queryset(self):
        return selectors.study_list(user=self.request.user)

    def get_serializer_class(self):
        if self.action == "create":
            return StudyCreateSerializer
        return StudyListSerializer if self.action == "list" else StudyDetailSerializer

    def get_object(self):
        return selectors.study_get(user=self.request.user, study_id=int(self.kwargs["pk"]))

    @extend_schema(request=StudyCreateSerializer, responses={201: StudyDetailSerializer})
    def create(self, request: Request) -> Response:
        data = StudyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        task = Task.objects.filter(pk=values.pop("task"), owner=request.user).select_related("dataset").first()
        if task is None:
            raise AppError("task not found", fields={"task": "not found"}, status=404)
        budget = ClusterBudget.objects.filter(pk=values.pop("budget")).first()
        if budget is None or (budget.owner_id != request.user.id and not request.user.is_staff):
            raise AppError("budget not found", fields={"budget": "not found"}, status=404)
        study = services.study_create(owner=request.user, task=task, budget=budget, **values)
        return Response(StudyDetailSerializer(study).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: StudyDetailSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        study = services.study_cancel(study=self.get_object())
        return Response(StudyDetailSerializer(study).data)


def register(router) -> None:
    """Add the studies viewset to the project's API router."""
    router.register("studies", StudyViewSet, basename="study")
