"""Budgets of one's own: every user creates, raises and ends budgets within a quota (a
default from the settings, raised per user by staff); the demo's budget counts against none.

Who may see what: ada (``user``) makes budgets of her own; bob (``other_user``) must get a 404
for each of them; sam (``staff``) raises ada's quota.
"""

from __future__ import annotations

import pytest

from webapp.core.errors import AppError

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _quota(settings):
    settings.PADDOCK_QUOTA_DEVICE_HOURS = 2.0
    settings.PADDOCK_QUOTA_PODS = 2


def _create(client, **body):
    body.setdefault("name", "mine")
    return client.post("/api/budgets/", body, format="json")


def test_a_non_staff_user_makes_a_budget_of_their_own(api_client, user):
    response = _create(api_client, gpu_hours_cap=1.5, max_concurrent_pods=2)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["owner"] == "ada" and body["purpose"] == "own" and body["gpu_hours_cap"] == 1.5
    quota = api_client.get("/api/budgets/quota/").json()
    assert quota["device_hours"] == 2.0 and quota["hours_held"] == 1.5 and quota["hours_left"] == 0.5
    assert quota["pods_left"] == 0 and quota["raised"] is False


def test_a_budget_above_the_quota_is_a_400_naming_the_quota(api_client):
    assert _create(api_client, name="first", gpu_hours_cap=1.5).status_code == 201
    response = _create(api_client, name="second", gpu_hours_cap=1.0, max_concurrent_pods=3)
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert "quota" in fields["gpu_hours_cap"] and "0.5 h left" in fields["gpu_hours_cap"]
    assert "quota" in fields["max_concurrent_pods"] and "1 left" in fields["max_concurrent_pods"]
    missing = _create(api_client, name="no cap")
    assert missing.status_code == 400 and "quota" in missing.json()["fields"]["gpu_hours_cap"]


def test_another_users_budget_stays_404(api_client, other_client):
    budget_id = _create(api_client, gpu_hours_cap=1).json()["id"]
    assert other_client.get(f"/api/budgets/{budget_id}/").status_code == 404
    assert other_client.patch(f"/api/budgets/{budget_id}/", {"gpu_hours_cap": 0.5}, format="json").status_code == 404
    assert other_client.post(f"/api/budgets/{budget_id}/end/").status_code == 404
    assert other_client.get("/api/budgets/").json()["results"] == []


def test_a_user_cannot_give_a_budget_to_someone_else(api_client, other_user):
    response = _create(api_client, gpu_hours_cap=1, owner="bob")
    assert response.status_code == 403 and not other_user.budgets.exists()


def test_raising_within_the_quota_works_and_above_it_is_refused(api_client):
    budget_id = _create(api_client, gpu_hours_cap=1, max_concurrent_pods=1).json()["id"]
    raised = api_client.patch(
        f"/api/budgets/{budget_id}/", {"gpu_hours_cap": 2, "max_concurrent_pods": 2}, format="json"
    )
    assert raised.status_code == 200 and raised.json()["gpu_hours_cap"] == 2
    too_much = api_client.patch(f"/api/budgets/{budget_id}/", {"gpu_hours_cap": 2.5}, format="json")
    assert too_much.status_code == 400 and "quota" in too_much.json()["fields"]["gpu_hours_cap"]
    owner = api_client.patch(f"/api/budgets/{budget_id}/", {"owner": "bob"}, format="json")
    assert owner.status_code == 400 and "owner" in owner.json()["fields"]


def test_ending_a_budget_frees_its_quota_and_stops_new_generations(api_client, user, task):
    from webapp.runs import services

    budget_id = _create(api_client, gpu_hours_cap=2).json()["id"]
    budget = user.budgets.get(pk=budget_id)
    run = services.run_create(owner=user, task=task, budget=budget, name="late", num_pods=1, generation_steps=256)
    assert _create(api_client, name="another", gpu_hours_cap=1).status_code == 400
    ended = api_client.post(f"/api/budgets/{budget_id}/end/")
    assert ended.status_code == 200 and ended.json()["ended_at"]
    assert api_client.post(f"/api/budgets/{budget_id}/end/").status_code == 409
    assert _create(api_client, name="another", gpu_hours_cap=2).status_code == 201
    with pytest.raises(AppError) as refused:
        services.run_start(run=run)
    assert "ended" in str(refused.value)


def test_staff_assign_a_budget_outside_the_quota_that_its_user_reads_but_only_staff_change_or_end(
    api_client, staff_client
):
    """The permission model docs/reference/api.md states for ``/api/budgets/``."""
    assigned = staff_client.post(
        "/api/budgets/", {"name": "lab", "owner": "ada", "gpu_hours_cap": 5, "max_concurrent_pods": 4}, format="json"
    )
    assert assigned.status_code == 201, assigned.json()  # above ada's 2 h and 2 pods
    budget_id = assigned.json()["id"]
    assert assigned.json()["purpose"] == "assigned"
    assert api_client.get(f"/api/budgets/{budget_id}/").json()["name"] == "lab"
    assert api_client.get("/api/budgets/quota/").json()["hours_held"] == 0
    assert api_client.patch(f"/api/budgets/{budget_id}/", {"gpu_hours_cap": 6}, format="json").status_code == 403
    assert api_client.post(f"/api/budgets/{budget_id}/end/").status_code == 403
    changed = staff_client.patch(f"/api/budgets/{budget_id}/", {"gpu_hours_cap": 6}, format="json")
    assert changed.status_code == 200 and changed.json()["gpu_hours_cap"] == 6
    assert staff_client.post(f"/api/budgets/{budget_id}/end/").status_code == 200


def test_staff_raise_a_users_quota_in_the_app(client, staff, user, api_client):
    client.force_login(staff)
    page = client.post(
        "/budgets/",
        {"action": "quota", "quota-user": user.id, "quota-device_hours": 10, "quota-max_concurrent_pods": 4},
    )
    assert page.status_code == 302
    assert _create(api_client, gpu_hours_cap=8, max_concurrent_pods=4).status_code == 201
    assert api_client.get("/api/budgets/quota/").json()["raised"] is True


def test_a_user_cannot_set_quotas(client, user):
    client.force_login(user)
    assert (
        client.post("/budgets/", {"action": "quota", "quota-user": user.id, "quota-device_hours": 99}).status_code
        == 404
    )


def test_the_budgets_page_creates_raises_and_ends_an_own_budget(client, user):
    client.force_login(user)
    page = client.get("/budgets/").content.decode()
    assert 'id="own-budget-form"' in page and "2 device hours" in page
    over = client.post(
        "/budgets/", {"action": "own", "own-name": "big", "own-gpu_hours_cap": 5, "own-max_concurrent_pods": 1}
    )
    assert over.status_code == 400 and "quota" in over.content.decode()
    made = client.post(
        "/budgets/", {"action": "own", "own-name": "small", "own-gpu_hours_cap": 1, "own-max_concurrent_pods": 1}
    )
    assert made.status_code == 302
    budget = user.budgets.get(name="small")
    raised = client.post(
        "/budgets/",
        {"action": "raise", "raise-budget": budget.id, "raise-gpu_hours_cap": 2, "raise-max_concurrent_pods": 2},
    )
    assert raised.status_code == 302
    budget.refresh_from_db()
    assert budget.gpu_hours_cap == 2 and budget.max_concurrent_pods == 2
    assert client.post("/budgets/", {"action": "end", "budget": budget.id}).status_code == 302
    budget.refresh_from_db()
    assert budget.ended_at is not None


def test_the_demo_budget_counts_against_no_quota(user):
    from webapp.demo.launch import ensure_budget
    from webapp.demo.sizing import Sizing
    from webapp.runs.selectors import quotas

    sizing = Sizing(
        steps_per_s=None, device="cpu", concurrent_pods=2, generation_steps=1000, generations=10, max_wall_clock_s=600
    )
    budget, created = ensure_budget(user, sizing)
    assert created and budget.purpose == "demo"
    quota = quotas.quota_of(user)
    assert quota.hours_held == 0 and quota.pods_held == 0 and quota.pods_left == 2


def test_the_budgets_page_counts_pods_in_words_and_rounds_the_hours_cap(client, user):
    client.force_login(user)
    made = client.post(
        "/budgets/",
        {"action": "own", "own-name": "third", "own-gpu_hours_cap": 1 / 3, "own-max_concurrent_pods": 1},
    )
    assert made.status_code == 302
    page = client.get("/budgets/").content.decode()
    assert "1 pod left" in page and "1 pods" not in page
    assert "of 0.333</td>" in page and "of 0.3333333" not in page


def test_the_new_run_page_of_a_user_without_a_budget_links_the_budgets_page(client, user):
    client.force_login(user)
    html = client.get("/runs/new/").content.decode()
    assert 'You have no budget yet: create one on the <a href="/budgets/">Budgets page</a>' in html
    own = {"action": "own", "own-name": "first", "own-gpu_hours_cap": 1, "own-max_concurrent_pods": 1}
    assert client.post("/budgets/", own).status_code == 302  # the page it links makes one ...
    assert "You have no budget yet" not in client.get("/runs/new/").content.decode()  # ... and the line goes
