"""Datasets from the data folder and from uploads, validated by the trainer's loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import DOW30_FILE
from webapp.core.errors import AppError
from webapp.market import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-12345")


def test_a_dataset_from_a_data_folder_file_records_its_tickers_and_dates(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    ds = services.dataset_create_from_files(owner=user, name="dow", paths=[DOW30_FILE], tickers=["AAPL", "KO"])
    assert ds.tickers == ["AAPL", "KO"]
    assert str(ds.start_date) == "2010-01-04" and str(ds.end_date) == "2022-11-15"
    assert ds.source_paths() == [str(data_dir / DOW30_FILE)]


def test_a_path_outside_the_data_folder_is_refused(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    with pytest.raises(AppError) as exc:
        services.dataset_create_from_files(owner=user, name="x", paths=["../main/manage.py"])
    assert "paths.0" in exc.value.fields


def test_an_unknown_ticker_is_named(user, data_dir, settings):
    settings.PADDOCK_DATA_DIR = data_dir
    with pytest.raises(AppError) as exc:
        services.dataset_create_from_files(owner=user, name="x", paths=[DOW30_FILE], tickers=["NOPE"])
    assert "NOPE" in exc.value.message


def test_an_uploaded_csv_becomes_a_dataset_and_a_bad_one_is_removed(user):
    good = (
        b"date,tic,open,high,low,close,volume\n2020-01-02,AAA,10,11,9,10.5,1000\n2020-01-03,AAA,10.5,11,10,10.8,1200\n"
    )
    ds = services.dataset_create_from_upload(
        owner=user, name="mine", upload=SimpleUploadedFile("aaa.csv", good, content_type="text/csv")
    )
    assert ds.tickers == ["AAA"] and str(ds.end_date) == "2020-01-03"
    bad = b"date,tic,open,high,low,close,volume\n2020-01-02,AAA,10,11,9,oops,1000\n"
    assert Path(ds.upload.path).is_file()
    folder = Path(ds.upload.path).parent
    before = sorted(folder.iterdir())
    with pytest.raises(AppError):
        services.dataset_create_from_upload(owner=user, name="bad", upload=SimpleUploadedFile("bad.csv", bad))
    assert sorted(folder.iterdir()) == before, "the rejected file is not kept"
    ds.upload.delete(save=False)


def test_the_price_preview_is_stored_at_creation_with_every_ticker_and_read_back(user, data_dir, settings, tmp_path):
    from tests.conftest import DOW30_FILE
    from webapp.market import services as market

    settings.PADDOCK_DATA_DIR = data_dir
    settings.PADDOCK_CACHE_DIR = tmp_path
    dataset = market.dataset_create_from_files(owner=user, name="dow all", paths=[DOW30_FILE])
    stored = list((tmp_path / "previews").glob(f"dataset-{dataset.pk}-*.json"))
    assert len(stored) == 1, "written when the dataset was created"
    preview = market.dataset_preview(dataset)
    assert [s["ticker"] for s in preview["series"]] == list(dataset.tickers)  # all of them, not the first 8
    assert len(dataset.tickers) > 8
    stored[0].write_text('{"series": [], "tickers_total": 0}')
    assert market.dataset_preview(dataset)["series"] == [], "the page reads the stored preview, not the files"


def test_a_bad_row_of_a_ticker_left_out_is_refused_at_import(user, dow30_path, tmp_path, settings):
    import pandas as pd

    from webapp.market.models import Dataset

    rows = pd.read_csv(dow30_path, nrows=3000)
    rows = rows[rows["tic"].isin(["AAPL", "KO"])].reset_index(drop=True)
    bad = int(rows.index[rows["tic"] == "KO"][5])
    rows.loc[bad, "close"] = -1.0  # a KO row; the dataset keeps only AAPL
    rows.to_csv(tmp_path / "two.csv", index=False)
    settings.PADDOCK_DATA_DIR = tmp_path
    with pytest.raises(AppError) as exc:
        services.dataset_create_from_files(owner=user, name="aapl", paths=["two.csv"], tickers=["AAPL"])
    assert f"row {bad + 1} " in exc.value.message and "KO" in exc.value.message and "close" in exc.value.message
    assert not Dataset.objects.exists()


def test_a_file_named_twice_or_too_many_files_are_refused_before_any_is_read(api_client, data_dir, settings):
    """500 copies of one path read the file 500 times (minutes, gigabytes) and stored a dataset
    after the client had given up: now a 400 before any read."""
    import time

    settings.PADDOCK_DATA_DIR = data_dir
    started = time.monotonic()
    response = api_client.post("/api/datasets/", {"name": "many", "paths": [DOW30_FILE] * 500}, format="json")
    assert response.status_code == 400 and "at most 32" in response.json()["fields"]["paths"]
    response = api_client.post(
        "/api/datasets/", {"name": "twice", "paths": [DOW30_FILE, f"./{DOW30_FILE}"]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["fields"] == {"paths.1": f"{DOW30_FILE!r} is paths.0 again"}
    assert time.monotonic() - started < 5.0
    assert not services.Dataset.objects.exists()
