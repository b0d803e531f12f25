"""DRF serializers of the studies API: shapes only; services do the writes."""

from __future__ import annotations

from rest_framework import serializers

from webapp.core.fields import InputSerializer, StrictCharField, StrictIntegerField
from webapp.studies.models import Study, StudyFold
from webapp.studies.services import MOST


class StudyCreateSerializer(InputSerializer):
    """Input of ``POST /api/studies/``; the service checks the plan against the data."""

    task = serializers.IntegerField(min_value=1)
    budget = serializers.IntegerField(min_value=1)
    name = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    start = StrictCharField(max_length=10)
    end = StrictCharField(max_length=10)
    first_test_year = StrictIntegerField(min_value=1900, max_value=2200)
    fold_years = StrictIntegerField(min_value=1, max_value=10, default=1)
    validation_days = StrictIntegerField(min_value=20, max_value=2520, default=252)
    gap_days = StrictIntegerField(min_value=0, max_value=252, default=5)
    num_pods = StrictIntegerField(min_value=1, max_value=64, default=2)
    generation_steps = StrictIntegerField(min_value=1, max_value=MOST["generation_steps"])
    env_steps_per_fold = StrictIntegerField(min_value=1, max_value=MOST["env_steps_per_fold"])
    seed = StrictIntegerField(min_value=0, max_value=MOST["seed"], default=0)


class StudyFoldSerializer(serializers.ModelSerializer):
    run_status = serializers.CharField(source="run.status")

    class Meta:
        model = StudyFold
        fields = ["index", "spans", "run", "run_status"]


class StudyListSerializer(serializers.ModelSerializer):
    verdict = serializers.SerializerMethodField()
    pbo = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = ["id", "name", "task", "budget", "status", "plan", "verdict", "pbo", "created_at", "finished_at"]

    def get_verdict(self, study: Study) -> str | None:
        return ((study.result or {}).get("out_of_sample") or {}).get("vs_equal_weight", {}).get("verdict")

    def get_pbo(self, study: Study) -> float | None:
        return ((study.result or {}).get("pbo") or {}).get("pbo")


class StudyDetailSerializer(StudyListSerializer):
    folds = StudyFoldSerializer(many=True, read_only=True)

    class Meta(StudyListSerializer.Meta):
        fields = [
            *StudyListSerializer.Meta.fields,
            "num_pods",
            "generation_steps",
            "env_steps_per_fold",
            "seed",
            "error",
            "folds",
            "result",
        ]
