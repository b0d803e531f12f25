"""DRF serializers of the datasets API."""

from __future__ import annotations

from rest_framework import serializers

from webapp.market.models import Dataset


class DatasetSerializer(serializers.ModelSerializer):
    """A dataset and what the trainer's loader found in it."""

    source = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = ["id", "name", "source", "paths", "tickers", "start_date", "end_date", "notes", "created_at"]
        read_only_fields = fields

    def get_source(self, obj: Dataset) -> str:
        return "upload" if obj.upload else "data_dir"


class DatasetCreateSerializer(serializers.Serializer):
    """``POST /api/datasets/``: multipart ``name`` + ``file``, or JSON ``name`` + ``paths``
    (files relative to the shared data folder) and optional ``tickers``."""

    name = serializers.CharField(max_length=200)
    file = serializers.FileField(required=False)
    paths = serializers.ListField(child=serializers.CharField(), required=False)
    tickers = serializers.ListField(child=serializers.CharField(max_length=20), required=False)

    def validate(self, attrs):
        if bool(attrs.get("file")) == bool(attrs.get("paths")):
            raise serializers.ValidationError("give either file or paths")
        return attrs
