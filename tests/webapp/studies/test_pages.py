"""The study pages: the New study form names a bad field, a good form starts the study, and the
list and study page show it (to its owner only)."""

from __future__ import annotations

import pytest

from webapp.studies.models import Study

pytestmark = pytest.mark.django_db


@pytest.fixture
def form_body(study_body) -> dict:
    return {**study_body, "fold_years": 1, "seed": 0}


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_the_form_names_a_bad_field_and_starts_nothing(logged_in, form_body):
    response = logged_in.post("/studies/new/", {**form_body, "first_test_year": 2030})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="error-first_test_year"' in page and "2030" in page
    assert not Study.objects.exists()


def test_a_good_form_starts_the_study_and_its_page_lists_the_folds(logged_in, client, other_user, form_body):
    assert logged_in.get("/studies/new/").status_code == 200
    response = logged_in.post("/studies/new/", form_body)
    assert response.status_code == 302
    study = Study.objects.get()
    page = logged_in.get(response.url).content.decode()
    assert study.name in page and page.count("/runs/") >= 2 and 'id="study-status"' in page
    assert "2018-01-02 to 2018-12-31" in page
    assert study.name in logged_in.get("/studies/").content.decode()
    client.force_login(other_user)
    assert client.get(f"/studies/{study.id}/").status_code == 404
    assert study.name not in client.get("/studies/").content.decode()
