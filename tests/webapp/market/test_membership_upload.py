"""A dataset's point-in-time membership file: uploaded with the dataset, refused with a 400 naming
``membership``, the row and the ticker (never a 500, never a server path), and, once accepted,
part of every task's data spec (``data.membership``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.membership_files import MEMBERSHIP, write_prices
from tests.webapp.conftest import TINY_PPO
from webapp.market.models import Dataset

pytestmark = pytest.mark.django_db

SPLITS = {"train": ["2018-01-02", "2019-06-28"], "validation": ["2019-07-01", "2019-09-30"]}
SPLITS["test"] = ["2019-10-01", "2019-12-31"]


@pytest.fixture(scope="module")
def prices(data_dir, tmp_path_factory) -> bytes:
    return write_prices(data_dir, tmp_path_factory.mktemp("prices")).read_bytes()


def _body(prices: bytes, membership: str, name: str = "members.csv") -> dict:
    return {
        "name": "dow3",
        "file": SimpleUploadedFile("dow3.csv", prices, content_type="text/csv"),
        "membership": SimpleUploadedFile(name, membership.encode(), content_type="text/csv"),
    }


@pytest.mark.parametrize(
    ("membership", "message", "details"),
    [
        (
            "ticker,from,to\nAAPL,2000-01-01,\nXOM,1928-10-01,2020-08-28\n",
            "membership row 2 (XOM): a member from 1928-10-01 to 2020-08-28, but the data has no prices of XOM",
            {"row": 2, "ticker": "XOM"},
        ),
        (
            "ticker,from,to\nAAPL,2000-01-01,\nMSFT,2019-02-30,\n",
            "membership row 2 (MSFT): from '2019-02-30' is not a YYYY-MM-DD date",
            {"row": 2, "ticker": "MSFT", "column": "from"},
        ),
        (
            "ticker,from,to\nMSFT,2000-01-01,\nMSFT,2019-01-01,2019-02-01\n",
            "membership row 2 (MSFT): overlaps row 1",
            {"row": 2, "ticker": "MSFT"},
        ),
    ],
)
def test_a_bad_membership_file_is_a_400_naming_the_field_row_and_ticker(
    api_client, prices, settings, membership, message, details
):
    response = api_client.post("/api/datasets/", _body(prices, membership), format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["error"].startswith(message) and list(body["fields"]) == ["membership"]
    assert {k: body["details"][k] for k in details} == details
    assert "uploads/" not in repr(body) and str(settings.PADDOCK_UPLOADS_DIR) not in repr(body)
    assert not Dataset.objects.exists()
    stored = Path(settings.PADDOCK_UPLOADS_DIR) / "memberships"
    assert not stored.exists() or not any(p.is_file() for p in stored.rglob("*")), "a refused file is not kept"


def test_the_upload_page_shows_a_refused_membership_file_as_a_400(client, user, prices):
    client.force_login(user)
    response = client.post("/datasets/", _body(prices, "ticker,from,to\nAAPL,2019-05-01,2019-04-01\n"))
    assert response.status_code == 400
    assert "membership row 1 (AAPL): from 2019-05-01 is after to 2019-04-01" in response.content.decode()


def test_an_accepted_membership_file_reaches_every_task_of_the_dataset(api_client, client, user, prices):
    from webapp.runs import services
    from webapp.runs.selectors.runs import task_spec

    response = api_client.post("/api/datasets/", _body(prices, MEMBERSHIP), format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["membership_name"] == "members.csv"
    assert body["survivorship"].startswith("Point-in-time universe") and "members.csv" in body["survivorship"]
    dataset = Dataset.objects.get(pk=body["id"])
    task = services.task_create(
        owner=user, dataset=dataset, name="pit", tickers=None, splits=SPLITS, kind="portfolio",
        algorithm="ppo", hyperparameters=TINY_PPO,
    )  # fmt: skip
    path = Path(task_spec(task)["data"]["membership"])
    assert path.read_text() == MEMBERSHIP
    client.force_login(user)
    page = client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert 'id="membership"' in page and "Point-in-time universe" in page


def test_a_task_trading_only_tickers_that_are_never_members_is_a_400_naming_tickers(api_client, user, prices):
    """Such a task would hold cash every day and be scored as if that were a strategy."""
    from webapp.core.errors import AppError
    from webapp.runs import services

    never_jpm = "ticker,from,to\nAAPL,2000-01-01,\nMSFT,2000-01-01,\n"
    response = api_client.post("/api/datasets/", _body(prices, never_jpm), format="multipart")
    assert response.status_code == 201, response.json()
    dataset = Dataset.objects.get(pk=response.json()["id"])
    with pytest.raises(AppError) as info:
        services.task_create(
            owner=user, dataset=dataset, name="cash", tickers=["JPM"], splits=SPLITS, kind="portfolio",
            algorithm="ppo", hyperparameters=TINY_PPO,
        )  # fmt: skip
    assert list(info.value.fields) == ["tickers"]
    assert "none of JPM is a member" in info.value.fields["tickers"] and "members.csv" in info.value.fields["tickers"]
    services.task_create(
        owner=user, dataset=dataset, name="fine", tickers=["AAPL"], splits=SPLITS, kind="portfolio",
        algorithm="ppo", hyperparameters=TINY_PPO,
    )  # fmt: skip
