"""Bad input on the pages is a 400 naming the field, never a 500: JSON boxes nested a thousand
levels deep or holding an integer of thousands of digits (which Django's own ``JSONField`` let
through as a ``RecursionError`` / ``ValueError``), ids that are not whole numbers in hidden
inputs and queries, and checks that read a field which failed."""

from __future__ import annotations

import types

import pytest
from bs4 import BeautifulSoup

from tests.webapp.test_pages import _run_form

pytestmark = pytest.mark.django_db

JSON_BOXES = ["hyperparameters", "mutation", "algorithm_hyperparameters", "env_extra"]
MALFORMED = {
    "1000 nested lists": ("[" * 1000 + "]" * 1000, "JSON nested deeper than 32 levels"),
    "1000 nested objects": ('{"a":' * 1000 + "1" + "}" * 1000, "JSON nested deeper than 32 levels"),
    "500 nested lists": ("[" * 500 + "]" * 500, "JSON nested deeper than 32 levels"),
    "an integer of 5,001 digits": ('{"num_envs": 1' + "0" * 5000 + "}", "integer longer than 4,300 digits"),
    "NaN": ('{"num_envs": NaN}', "num_envs: NaN is not a number JSON allows"),
    "broken JSON": ('{"num_envs": ', "not valid JSON"),
}


@pytest.fixture
def ada(client, user):
    client.force_login(user)
    client.raise_request_exception = False  # a 500 is an answer to assert on, not an exception
    return client


@pytest.fixture
def form_world(dataset, make_budget):
    """What the New run form needs: ada's dataset and an open budget of hers."""
    return types.SimpleNamespace(dataset=dataset, budget=make_budget())


def _errors(page: bytes) -> dict[str, list[str]]:
    soup = BeautifulSoup(page.decode(), "html.parser")
    return {ul["data-error-for"]: [li.get_text() for li in ul.select("li")] for ul in soup.select("[data-error-for]")}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_json_box_is_a_400_beside_its_field_with_the_text_kept(ada, form_world, case):
    text, expected = MALFORMED[case]
    for field in JSON_BOXES:
        response = ada.post("/runs/new/", _run_form(form_world, **{field: text}))
        assert response.status_code == 400, field
        errors = _errors(response.content)
        assert list(errors) == [field], errors
        assert expected in errors[field][0]
        assert "sys.set_int_max_str_digits" not in errors[field][0]
        soup = BeautifulSoup(response.content.decode(), "html.parser")
        box = soup.find(attrs={"name": field})
        assert (box.get("value") if box.name == "input" else box.get_text().strip("\n")) == text


def test_an_unknown_kind_is_the_only_error_not_also_a_wrong_algorithm_for_stock_trading(ada, form_world):
    response = ada.post("/runs/new/", _run_form(form_world, kind="foo", algorithm="direct", hyperparameters="{}"))
    assert response.status_code == 400
    errors = _errors(response.content)
    assert list(errors) == ["kind"], errors
    assert "foo is not one of the available choices" in errors["kind"][0]


def test_checks_that_do_not_read_the_failed_kind_still_run_in_the_same_round(ada, form_world):
    errors = _errors(ada.post("/runs/new/", _run_form(form_world, kind="foo", tickers="NOPE")).content)
    assert set(errors) == {"kind", "tickers"}, errors


@pytest.mark.parametrize("posted", ["abc", "²", "1.5", "9" * 30, ""])
def test_ending_a_budget_that_is_not_a_whole_number_is_a_400_naming_budget(ada, form_world, posted):
    response = ada.post("/budgets/", {"action": "end", "budget": posted})
    assert response.status_code == 400
    shown = BeautifulSoup(response.content.decode(), "html.parser").select_one("#end-errors").get_text()
    assert shown.startswith("budget: expected a budget id (a whole number)")
    form_world.budget.refresh_from_db()
    assert form_world.budget.ended_at is None


def test_ending_a_budget_that_does_not_exist_is_still_a_404(ada, form_world):
    assert ada.post("/budgets/", {"action": "end", "budget": "999999"}).status_code == 404


@pytest.mark.parametrize("posted", ["abc", "²", "9" * 30])
def test_revoking_a_serve_token_by_a_bad_id_is_a_400_and_revokes_nothing(ada, user, posted):
    from webapp.serving import services
    from webapp.serving.models import ServeToken

    services.serve_token_create(owner=user, name="bot")
    response = ada.post("/account/serve-tokens/", {"revoke": posted})
    assert response.status_code == 400
    shown = BeautifulSoup(response.content.decode(), "html.parser").select_one("#error-revoke").get_text()
    assert "expected a serve token id (a whole number)" in shown
    assert ServeToken.objects.filter(owner=user).count() == 1


@pytest.mark.parametrize(
    ("method", "url", "data", "field"),
    [
        ("post", "/reports/new/", {"agent": "²"}, "agent"),
        ("get", "/reports/new/?agent=²", None, "agent"),
        ("get", "/runs/new/?clone=²", None, "clone"),
        ("get", "/runs/new/?clone=abc", None, "clone"),
    ],
)
def test_an_id_that_is_not_a_whole_number_in_a_page_request_is_a_400_naming_it(ada, method, url, data, field):
    response = getattr(ada, method)(url, data) if data else getattr(ada, method)(url)
    assert response.status_code == 400
    shown = BeautifulSoup(response.content.decode(), "html.parser").select_one("#refused-error").get_text()
    assert shown.startswith(f"{field}: expected a")


def test_a_new_run_page_prefilled_with_a_dataset_id_that_is_not_one_starts_blank(ada, form_world):
    assert ada.get("/runs/new/?dataset=²").status_code == 200


@pytest.mark.parametrize("k", ["²", "abc", "9" * 30])
def test_an_ensemble_of_k_agents_that_is_not_a_whole_number_is_said_on_the_run_page(ada, world, k):
    response = ada.post(f"/runs/{world.run.id}/ensemble/", {"k": k}, follow=True)
    assert response.status_code == 200
    assert "k: enter a whole number of agents" in response.content.decode()
