"""DRF serializers of the datasets API."""

from __future__ import annotations

from rest_framework import serializers

from webapp.core.fields import InputSerializer, StrictCharField
from webapp.market.models import Dataset


class DatasetSerializer(serializers.ModelSerializer):
    """A dataset and what the trainer's loader found in it."""

    source = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = [
            "id",
            "name",
            "source",
            "paths",
            "tickers",
            "start_date",
            "end_date",
            "interval",
            "session",
            "bars",
            "loader_options",
            "notes",
            "survivorship",
            "membership_name",
            "created_at",
        ]
        read_only_fields = fields

    def get_source(self, obj: Dataset) -> str:
        return "upload" if obj.upload else "data_dir"


class DatasetCreateSerializer(InputSerializer):
    """``POST /api/datasets/``: multipart ``name`` + ``file``, or JSON ``name`` + ``paths``
    (files relative to the shared data folder) and optional ``tickers`` (with ``paths`` only: an
    upload keeps all of its tickers, and ``tickers`` beside a file is a 400); intraday files take
    the optional loader options ``timezone`` (``auto``, ``UTC``, ``America/New_York``),
    ``bar_label`` (``auto``, ``start``, ``end``) and ``session`` (``regular``, ``extended``).
    ``membership`` (multipart, optional) is a point-in-time membership CSV ``ticker,from,to``;
    a bad one is a 400 naming ``membership`` with the row and ticker."""

    name = StrictCharField(max_length=200)
    file = serializers.FileField(required=False, allow_empty_file=True)  # the service refuses it, by name
    paths = serializers.ListField(child=StrictCharField(), required=False)
    membership = serializers.FileField(required=False, allow_empty_file=True)  # the service refuses it, by name
    tickers = serializers.ListField(child=StrictCharField(max_length=20), required=False)
    timezone = StrictCharField(max_length=40, required=False, allow_blank=True)
    bar_label = StrictCharField(max_length=10, required=False, allow_blank=True)
    session = StrictCharField(max_length=10, required=False, allow_blank=True)

    def validate(self, attrs):
        if bool(attrs.get("file")) == bool(attrs.get("paths")):
            raise serializers.ValidationError("give either file or paths")
        if attrs.get("file") and attrs.get("tickers"):  # not silently ignored
            raise serializers.ValidationError(
                {"tickers": "an uploaded file's dataset holds every ticker in it; choose tickers on the task"}
            )
        return attrs
