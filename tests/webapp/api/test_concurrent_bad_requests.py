"""Issue 28: concurrent bad requests are each a 400, never a 500 ("database is locked").

On SQLite a transaction holds the database's one write lock from its first statement
(``transaction_mode=IMMEDIATE``); a task used to be validated (its data files read, seconds)
inside one, so concurrent task requests queued on the lock and those past the lock timeout
answered 500. ``./paddock test`` runs this on SQLite and PostgreSQL.

Who may see what: ``user`` (ada) sends every request, on her own dataset.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections
from rest_framework.test import APIClient

from tests.webapp.conftest import SPLITS, TICKERS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

REQUESTS = 12


def test_concurrent_task_requests_with_bad_dates_are_each_a_400_naming_the_field(user, dataset):
    options = connections.settings["default"].setdefault("OPTIONS", {})
    kept = dict(options)
    if connections["default"].vendor == "sqlite":
        options["timeout"] = 1  # a short lock timeout shows a lock held during validation at once
    bad = {**SPLITS, "test": ["2020-07-01", "2031-12-31"]}  # past the data's last day
    body = {"name": "late", "dataset": dataset.pk, "tickers": TICKERS, "splits": bad, "algorithm": "ppo"}

    def post(_):
        client = APIClient()
        client.force_authenticate(user)
        try:
            response = client.post("/api/tasks/", body, format="json")
            return response.status_code, response.json()
        finally:
            connections.close_all()

    try:
        with ThreadPoolExecutor(REQUESTS) as pool:
            answers = list(pool.map(post, range(REQUESTS)))
    finally:
        options.clear()
        options.update(kept)
    assert [status for status, _ in answers] == [400] * REQUESTS, answers
    assert all(any(k.startswith("splits.test") for k in body["fields"]) for _, body in answers), answers
