"""Datasets (upload with row/ticker errors), tasks, budgets (users read, staff write)."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db

GOOD_CSV = "date,tic,open,high,low,close,volume\n" + "".join(
    f"2021-01-{d:02d},{t},10,12,9,{10 + d / 10},1000\n" for d in (4, 5, 6, 7, 8, 11, 12) for t in ("AAA", "BBB")
)


def test_a_dataset_is_uploaded_validated_and_previewed(api_client):
    upload = SimpleUploadedFile("prices.csv", GOOD_CSV.encode(), content_type="text/csv")
    response = api_client.post("/api/datasets/", {"name": "mine", "file": upload}, format="multipart")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["tickers"] == ["AAA", "BBB"] and data["source"] == "upload"
    assert data["start_date"] == "2021-01-04" and data["end_date"] == "2021-01-12"
    prices = api_client.get(f"/api/datasets/{data['id']}/prices/").json()
    assert [s["ticker"] for s in prices["series"]] == ["AAA", "BBB"]
    assert prices["series"][0]["close"][-1] == pytest.approx(11.2)


def test_a_bad_row_in_an_upload_is_a_400_naming_row_and_ticker(api_client):
    bad = GOOD_CSV.replace("2021-01-06,BBB,10,12,9,10.6,1000", "2021-01-06,BBB,10,12,9,-5,1000")
    assert bad != GOOD_CSV
    upload = SimpleUploadedFile("prices.csv", io.BytesIO(bad.encode()).read(), content_type="text/csv")
    response = api_client.post("/api/datasets/", {"name": "bad", "file": upload}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["error"]
    details = body["fields"].get("details", {})
    assert details.get("ticker") == "BBB" or "BBB" in body["error"]
    assert "row" in details or "line" in body["error"] or "row" in body["error"]


def test_a_dataset_is_created_from_data_folder_files(api_client):
    from tests.conftest import DOW30_FILE

    response = api_client.post(
        "/api/datasets/", {"name": "dow", "paths": [DOW30_FILE], "tickers": ["AAPL", "MSFT"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["tickers"] == ["AAPL", "MSFT"]
    outside = api_client.post("/api/datasets/", {"name": "etc", "paths": ["../../etc/passwd"]}, format="json")
    assert outside.status_code == 400 and "paths.0" in outside.json()["fields"]


def test_tasks_list_and_detail(world, api_client):
    rows = api_client.get("/api/tasks/").json()["results"]
    assert [r["id"] for r in rows] == [world.task.id]
    detail = api_client.get(f"/api/tasks/{world.task.id}/").json()
    assert detail["splits"]["validation"] == {"start": "2020-01-01", "end": "2020-06-30"}


def test_users_read_their_budgets_with_usage_but_cannot_write(world, api_client):
    rows = api_client.get("/api/budgets/").json()["results"]
    assert [r["id"] for r in rows] == [world.budget.id]
    assert rows[0]["env_steps_used"] == 4 * 256
    assert api_client.post("/api/budgets/", {"name": "more", "max_concurrent_pods": 99}).status_code == 403
    assert api_client.patch(f"/api/budgets/{world.budget.id}/", {"max_concurrent_pods": 99}).status_code == 403


def test_staff_create_assign_and_change_budgets(staff_client, user, other_user):
    created = staff_client.post(
        "/api/budgets/",
        {"name": "ada gpu", "owner": "ada", "max_concurrent_pods": 4, "gpu_hours_cap": 10},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["owner"] == "ada"
    budget_id = created.json()["id"]
    changed = staff_client.patch(
        f"/api/budgets/{budget_id}/", {"owner": "bob", "max_concurrent_pods": 2}, format="json"
    )
    assert changed.status_code == 200
    assert changed.json()["owner"] == "bob" and changed.json()["max_concurrent_pods"] == 2
    bad = staff_client.patch(f"/api/budgets/{budget_id}/", {"gpu_hours_cap": -1}, format="json")
    assert bad.status_code == 400 and "gpu_hours_cap" in bad.json()["fields"]
    assert len(staff_client.get("/api/budgets/").json()["results"]) == 1
