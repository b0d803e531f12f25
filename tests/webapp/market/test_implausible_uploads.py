"""Issue 13, item 4 through the web: implausible or unusable uploads are 400s that say what is
really wrong, name the user's file, row, ticker and date, and never echo control characters."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.webapp.conftest import SPLITS, TINY_PPO
from webapp.market.models import Dataset

pytestmark = pytest.mark.django_db


def _upload(name: str, body: bytes):
    return SimpleUploadedFile(name, body, content_type="text/csv")


def _post(api_client, name: str, body: bytes):
    return api_client.post("/api/datasets/", {"name": "up", "file": _upload(name, body)}, format="multipart")


def test_a_binary_upload_is_not_a_text_csv_file(api_client):
    response = _post(api_client, "my prices.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert response.status_code == 400
    assert response.json()["error"].startswith("my prices.csv: not a text CSV file")
    assert not Dataset.objects.exists()


def test_a_semicolon_upload_gets_the_delimiter_hint(api_client):
    response = _post(api_client, "semi.csv", b"date;tic;open;high;low;close;volume\n2021-01-04;AAA;10;11;9;10;100\n")
    assert response.status_code == 400
    assert "semicolon-separated" in response.json()["error"]


def test_a_close_outside_its_range_names_the_users_file_row_ticker_and_date(api_client):
    body = b"date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,10,100\n2021-01-05,AAA,10,11,9,99,100\n"
    response = _post(api_client, "mine.csv", body)
    assert response.status_code == 400
    payload = response.json()
    assert (
        payload["error"]
        == "mine.csv, row 2 (line 3) (AAA 2021-01-05): close 99 is outside the day's range [low 9, high 11]"
    )
    assert payload["details"] | {"file": "mine.csv"} == payload["details"]
    assert {payload["details"]["ticker"], payload["details"]["date"]} == {"AAA", "2021-01-05"}


def test_a_control_character_in_a_ticker_is_a_400_naming_the_row_and_the_page_never_shows_it(client, user):
    body = "date,tic,open,high,low,close,volume\n2021-01-04,AA\u202eB,10,11,9,10,100\n".encode()
    client.force_login(user)
    response = client.post("/datasets/", {"name": "bidi", "file": _upload("bidi.csv", body)})
    assert response.status_code == 400
    page = response.content.decode()
    assert "\u202e" not in page
    text = BeautifulSoup(page, "html.parser").get_text()
    assert "bidi.csv, row 1 (line 2): ticker 'AA\\u202eB' is not a ticker symbol" in text


def test_a_task_naming_a_ticker_with_control_characters_is_a_400_naming_the_field(api_client, dataset):
    body = {"name": "t", "dataset": dataset.id, "tickers": ["AAPL", "MS\x07FT"], "splits": SPLITS}
    response = api_client.post("/api/tasks/", {**body, "hyperparameters": TINY_PPO}, format="json")
    assert response.status_code == 400
    payload = response.json()
    assert "tickers.1" in payload["fields"]
    assert "\x07" not in payload["error"] and "\x07" not in payload["fields"]["tickers.1"]
    assert "'MS\\x07FT' is not a ticker symbol" in payload["error"]


def test_a_note_names_the_users_file_not_the_stored_one(api_client):
    body = b"date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,10,100\n2021-01-05,AAA,10,11,9,10,100\n"
    response = _post(api_client, "raw prices.csv", body)
    assert response.status_code == 201, response.json()
    assert response.json()["notes"][0].startswith("raw prices.csv: no adjusted prices in the file")


def test_tickers_beside_an_uploaded_file_are_a_400_not_silently_ignored(api_client):
    body = b"date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,10,100\n2021-01-04,BBB,10,11,9,10,100\n"
    data = {"name": "up", "file": _upload("two.csv", body), "tickers": ["AAA"]}
    response = api_client.post("/api/datasets/", data, format="multipart")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["tickers"] and "choose tickers on the task" in response.json()["error"]
    assert not Dataset.objects.exists()


def test_the_dataset_form_refuses_tickers_beside_an_upload_on_the_tickers_field(client, user):
    body = b"date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,10,100\n"
    client.force_login(user)
    response = client.post("/datasets/", {"name": "up", "file": _upload("one.csv", body), "tickers": "AAA"})
    assert response.status_code == 400
    assert "choose tickers on the run" in response.content.decode()
    assert not Dataset.objects.exists()


def test_a_five_megabyte_cell_is_named_in_a_short_error_not_echoed(api_client):
    body = b"date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9," + b"9" * 5_000_000 + b",100\n"
    response = api_client.post("/api/datasets/", {"name": "up", "file": _upload("huge.csv", body)}, format="multipart")
    assert response.status_code == 400
    assert len(response.content) < 2_000, len(response.content)
    assert (
        "close '99999" in response.json()["error"]
        and "(5,000,000 characters) is not a number" in response.json()["error"]
    )
