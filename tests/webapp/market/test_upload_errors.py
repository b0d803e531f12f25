"""Errors of a rejected upload as the user sees them: the file's own name (never a path on the
server), the row/ticker/date details next to the message, each said once."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db

DUPLICATE_ROWS = (
    "date,tic,open,high,low,close,volume\n"
    "2021-01-04,AAA,10,11,9,10,100\n"
    "2021-01-04,AAA,10,11,9,12,100\n"
    "2021-01-05,AAA,10,11,9,10,100\n"
)


def _upload(name="dup.csv", body=DUPLICATE_ROWS):
    return SimpleUploadedFile(name, body.encode(), content_type="text/csv")


def test_the_api_names_the_uploaded_file_not_a_server_path(api_client, settings):
    response = api_client.post("/api/datasets/", {"name": "dup", "file": _upload()}, format="multipart")
    assert response.status_code == 400
    body = response.json()
    text = repr(body)
    assert str(settings.MEDIA_ROOT) not in text and "uploads/" not in text
    assert "dup.csv" in body["error"]
    assert "details" not in body["fields"], "details are not a field"
    assert body["details"]["file"] == "dup.csv"


def test_the_upload_page_shows_the_error_once_with_the_file_name(client, user, settings):
    client.force_login(user)
    response = client.post("/datasets/", {"name": "dup", "file": _upload()})
    assert response.status_code == 400
    page = response.content.decode()
    from bs4 import BeautifulSoup

    box = BeautifulSoup(page, "html.parser").select_one("#upload-errors")
    text = box.get_text(" ", strip=True)
    assert str(settings.MEDIA_ROOT) not in page and "uploads/" not in page
    message = box.select_one("p.error").get_text(strip=True)
    assert "dup.csv" in message
    assert text.count(message) == 1, "the message is shown once"


def test_an_empty_file_is_refused_by_its_name_on_the_page_and_the_api(client, user, api_client):
    from bs4 import BeautifulSoup

    from webapp.market.models import Dataset

    client.force_login(user)
    page = client.post("/datasets/", {"name": "e", "file": _upload("empty.csv", "")})
    assert page.status_code == 400
    soup = BeautifulSoup(page.content.decode(), "html.parser")
    assert soup.select_one("#upload-errors p.error").get_text(strip=True) == "file: empty.csv is empty (0 bytes)"
    assert "Upload a file or pick files" not in soup.get_text(), "a file was given: it is not 'missing'"
    api = api_client.post("/api/datasets/", {"name": "e", "file": _upload("empty.csv", "")}, format="multipart")
    assert api.status_code == 400 and api.json()["fields"] == {"file": "empty.csv is empty (0 bytes)"}
    assert not Dataset.objects.exists()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (DUPLICATE_ROWS, "dup.csv"),
        ("date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,ten,100\n", "close"),
        ("date,tic,open,high,low,volume\n2021-01-04,AAA,10,11,9,100\n", "close"),
    ],
)
def test_a_rejected_upload_is_reported_on_the_file_field_naming_the_column(api_client, body, said):
    """The user filled in ``name`` and ``file``: the data's faults (a duplicate row, a column
    that is not a number or is missing) are reported on ``file``, never on an internal name such
    as ``close`` or ``non_field_errors``; the message still says the column."""
    response = api_client.post("/api/datasets/", {"name": "bad", "file": _upload(body=body)}, format="multipart")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"file"}, fields
    assert said in fields["file"] or said in response.json()["error"]
