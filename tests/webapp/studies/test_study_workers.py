"""A tiny 2-fold study end to end on real Celery workers: each fold is a run that trains on the
workers; when both have ended the record is stitched on a worker and shown on the study page."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from webapp.runs import services as runs_services
from webapp.runs.models import Run
from webapp.studies.models import Study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _wait(predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        runs_services.runs_ensure_work(redispatch_after=30)  # what beat would do
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_two_fold_study_trains_on_the_workers_and_stitches_its_record(workers, api_client, client, user, study_body):
    workers.start("alpha")
    workers.start("beta")
    response = api_client.post("/api/studies/", study_body, format="json")
    assert response.status_code == 201, response.json()
    study_id = response.json()["id"]

    def ended() -> bool:
        return Study.objects.filter(pk=study_id, status__in=Study.TERMINAL).exists()

    _wait(ended, timeout=240, what="the study to be stitched")
    study = Study.objects.get(pk=study_id)
    assert study.status == Study.Status.DONE, study.error
    runs = Run.objects.filter(study_fold__study=study)
    assert {r.status for r in runs} == {Run.Status.FINISHED}
    study.budget.refresh_from_db()
    assert study.budget.env_steps_used <= 2 * 512  # the budget held for the whole study

    result = study.result
    assert [f["test"]["start"][:4] for f in result["folds"]] == ["2018", "2019"]
    for fold, run in zip(result["folds"], runs.order_by("study_fold__index"), strict=True):
        best = run.agents.filter(on_leaderboard=True).order_by("-score").first()
        assert fold["selected"]["agent"] == best.id and fold["run"] == run.id
    oos = result["out_of_sample"]
    assert oos["dates"][0].startswith("2018") and oos["dates"][-1] == "2019-12-31"
    assert len(oos["returns"]) == len(oos["equal_weight"]) == len(oos["dates"])
    assert oos["vs_equal_weight"]["verdict"] in ("beats", "trails", "indistinguishable")
    assert result["pbo"]["pbo"] is None or 0 <= result["pbo"]["pbo"] <= 1

    detail = api_client.get(f"/api/studies/{study_id}/").json()
    assert detail["verdict"] == oos["vs_equal_weight"]["verdict"]
    client.force_login(user)
    page = client.get(f"/studies/{study_id}/").content.decode()
    assert 'id="study-equity"' in page and "vendor/plotly/plotly.min.js" in page
    assert oos["vs_equal_weight"]["verdict"] in page and 'id="folds-table"' in page
