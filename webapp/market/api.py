"""REST API of datasets: list, retrieve, create (upload or data-folder files), price preview."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from webapp.core.parsers import BoundedJSONParser
from webapp.core.query import ListFilters
from webapp.market import services
from webapp.market.models import Dataset
from webapp.market.serializers import DatasetCreateSerializer, DatasetSerializer
from webapp.market.views import price_preview


@extend_schema_view(
    list=extend_schema(summary="Your datasets"),
    create=extend_schema(
        summary="Create a dataset (upload, or files of the data folder)",
        request={"multipart/form-data": DatasetCreateSerializer, "application/json": DatasetCreateSerializer},
        responses={201: DatasetSerializer},
    ),
)
class DatasetViewSet(
    ListFilters, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    queryset = Dataset.objects.none()  # for the schema; get_queryset scopes to the user
    serializer_class = DatasetSerializer
    list_name = "the datasets list"  # no filters: ?name=x is a 400, not every dataset
    parser_classes = [BoundedJSONParser, MultiPartParser, FormParser]

    def get_queryset(self):
        return Dataset.objects.filter(owner=self.request.user)

    def get_serializer_class(self):
        """What a ``POST`` takes (also what ``OPTIONS`` describes under ``actions.POST``, so it
        lists the fields a create accepts, not the dataset's read-only ones), else the dataset."""
        if self.request is not None and self.request.method == "POST":
            return DatasetCreateSerializer
        return DatasetSerializer

    def create(self, request, *args, **kwargs):
        form = DatasetCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        d = form.validated_data
        options = {k: d[k] for k in ("timezone", "bar_label", "session") if d.get(k)}
        extra = {"options": options, "membership": d.get("membership") or None}
        if d.get("file"):
            dataset = services.dataset_create_from_upload(owner=request.user, name=d["name"], upload=d["file"], **extra)
        else:
            dataset = services.dataset_create_from_files(
                owner=request.user, name=d["name"], paths=d["paths"], tickers=d.get("tickers") or None, **extra
            )
        return Response(DatasetSerializer(dataset).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Weekly closing prices of a few tickers, for a preview chart")
    @action(detail=True, methods=["get"])
    def prices(self, request, pk=None):
        return Response(price_preview(self.get_object()))
