"""Stitching a study: it waits for every fold run, and a fold that ended without an agent fails
the study with a message naming it (never a half-made record)."""

from __future__ import annotations

import pytest

from webapp.runs import services as runs_services
from webapp.studies import services
from webapp.studies.models import Study

pytestmark = pytest.mark.django_db


def test_a_study_is_stitched_only_when_every_fold_run_has_ended(api_client, study_body):
    study = Study.objects.get(pk=api_client.post("/api/studies/", study_body, format="json").json()["id"])
    first, second = (f.run for f in study.folds.order_by("index"))
    runs_services.run_stop(run=first)
    assert services.study_ready_to_stitch(run_id=first.id) is None
    assert services.study_stitch(study_id=study.id) == "skipped"
    runs_services.run_stop(run=second)
    assert services.study_ready_to_stitch(run_id=second.id) == study.id
    assert services.study_stitch(study_id=study.id) == Study.Status.FAILED
    study.refresh_from_db()
    assert study.status == Study.Status.FAILED and study.result == {}
    assert f"fold 0 (run {first.id}, cancelled) has no scored agent" in study.error
    assert services.study_stitch(study_id=study.id) == "skipped"  # claimed once only
