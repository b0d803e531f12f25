"""A number out of its bound is told the whole range, the same words at either end: budget hours
-1 said "greater than or equal to 0" where 0 is refused too, API pods 1e30 said "<=
9223372036854775807" where 0 got "1 to 1,024", and the run page's scale form said ">= 1" only."""

from __future__ import annotations

import pytest
from django.test import Client

from webapp.runs import budget_forms, forms

pytestmark = pytest.mark.django_db

HOURS = "must be more than 0 and at most 1,000,000"
PODS = "must be at least 1 and at most 1,024"


@pytest.mark.parametrize("hours", ["-1", "0", "2000000"])
def test_the_own_budget_form_states_the_hours_range_at_either_end(user, hours):
    form = budget_forms.OwnBudgetForm({"own-name": "b", "own-gpu_hours_cap": hours, "own-max_concurrent_pods": "1"})
    assert not form.is_valid()
    assert [HOURS in e for e in form.errors["gpu_hours_cap"]] == [True], form.errors
    assert "greater than or equal" not in str(form.errors)


@pytest.mark.parametrize("pods", ["0", "5000", "99999999999999999999"])
def test_the_raise_and_staff_budget_forms_state_the_pods_range(user, staff, pods):
    raised = budget_forms.RaiseBudgetForm(
        {"raise-budget": "1", "raise-gpu_hours_cap": "1", "raise-max_concurrent_pods": pods}
    )
    staff_form = forms.BudgetForm({"name": "b", "owner": user.id, "max_concurrent_pods": pods})
    for form in (raised, staff_form):
        assert not form.is_valid()
        assert [PODS in e for e in form.errors["max_concurrent_pods"]] == [True], form.errors


def test_the_quota_form_states_the_budget_bounds_the_quota_is_checked_against(user):
    form = budget_forms.QuotaForm({"quota-user": user.id, "quota-device_hours": "0", "quota-max_concurrent_pods": "0"})
    assert not form.is_valid()
    assert HOURS in form.errors["device_hours"][0] and PODS in form.errors["max_concurrent_pods"][0]


@pytest.mark.parametrize("pods", ["0", "1e30", "2000", "99999999999999999999"])
def test_api_budget_pods_out_of_range_is_one_message_stating_the_range(api_client, pods):
    body = '{"name": "b", "gpu_hours_cap": 1, "max_concurrent_pods": ' + pods + "}"
    response = api_client.post("/api/budgets/", body, content_type="application/json")
    assert response.status_code == 400
    assert PODS in response.json()["fields"]["max_concurrent_pods"], response.json()
    assert "9223372036854775807" not in response.content.decode()


@pytest.mark.parametrize("pods", ["1e9", "abc", "0", "300"])
def test_the_run_pages_scale_form_states_the_upper_bound_too(world, user, pods):
    client = Client()
    client.force_login(user)
    page = client.post(f"/runs/{world.run.id}/scale/", {"num_pods": pods}, follow=True).content.decode()
    assert "at most 256" in page or "1 to 256" in page, page[:2000]
    world.run.refresh_from_db()
    assert world.run.num_pods == 2
