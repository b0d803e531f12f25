"""Server-rendered pages: what each shows, forms with errors next to fields, clone, controls."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.webapp.conftest import SPLITS, TINY_PPO

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


@pytest.fixture
def ada(client, user):
    client.force_login(user)
    return client


def _run_form(world, **changes) -> dict:
    import json

    data = {
        "name": "form run",
        "dataset": world.dataset.id,
        "tickers": "AAPL, MSFT",
        "train_start": SPLITS["train"][0],
        "train_end": SPLITS["train"][1],
        "validation_start": SPLITS["validation"][0],
        "validation_end": SPLITS["validation"][1],
        "test_start": SPLITS["test"][0],
        "test_end": SPLITS["test"][1],
        "initial_cash": 1e6,
        "hmax": 100,
        "buy_cost_pct": 0.001,
        "sell_cost_pct": 0.001,
        "reward_scaling": 1e-4,
        "algorithm": "ppo",
        "hyperparameters": json.dumps(TINY_PPO),
        "budget": world.budget.id,
        "num_pods": 1,
        "generation_steps": 256,
        "leaderboard_size": 3,
        "fresh_probability": 0.1,
        "mutation": "{}",
        "seed": 0,
    }
    data.update(changes)
    return data


def test_dashboard_and_runs_list_show_my_runs(world, ada):
    home = ada.get("/").content.decode()
    assert f'data-run-id="{world.run.id}"' in home
    page = ada.get("/runs/").content.decode()
    assert "ada-data run" in page and "1.500" in page and 'data-status="running"' in page
    assert "Page 1 of 1" in page
    assert f'data-run-id="{world.run.id}"' not in ada.get("/runs/?status=finished").content.decode()


def test_runs_list_is_a_constant_number_of_queries(world, ada, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        assert ada.get("/runs/").status_code == 200


def test_run_page_renders_leaderboard_pods_budget_and_live_hooks(world, ada):
    page = ada.get(f"/runs/{world.run.id}/").content.decode()
    for agent in world.agents:
        if agent.on_leaderboard or agent.score >= 0.5:
            assert f'data-agent-id="{agent.id}"' in page
    assert 'id="live-indicator"' in page and 'id="score-chart"' in page
    assert 'data-pod-index="0"' in page and 'id="budget-eta"' in page
    assert "vendor/plotly/plotly.min.js" in page and "js/run_live.js" in page
    assert f"/ws/runs/{world.run.id}/" in page


def test_a_valid_form_creates_and_starts_a_run(world, ada):
    response = ada.post("/runs/new/", _run_form(world, start_now="on"))
    assert response.status_code == 302
    from webapp.runs.models import Run

    run = Run.objects.get(name="form run")
    assert response["Location"] == f"/runs/{run.id}/"
    assert run.status == "running" and run.task.tickers == ["AAPL", "MSFT"]


def test_a_bad_hyperparameter_is_shown_next_to_its_field(world, ada):
    import json

    bad = _run_form(world, hyperparameters=json.dumps({**TINY_PPO, "learning_rate": -1}))
    page = ada.post("/runs/new/", bad).content.decode()
    assert 'data-error-for="hyperparameters"' in page
    assert "learning_rate" in page.split('data-error-for="hyperparameters"')[1][:300]


def test_bad_dates_and_json_are_shown_next_to_their_fields(world, ada):
    page = ada.post("/runs/new/", _run_form(world, validation_start="2019-06-01", mutation="{nope")).content.decode()
    assert 'data-error-for="mutation"' in page
    response = ada.post("/runs/new/", _run_form(world, validation_start="2019-06-01"))
    assert response.status_code == 400  # docs/reference/api.md: a page form with errors answers 400
    assert 'data-error-for="validation_start"' in response.content.decode()


def test_clone_prefills_the_form_from_a_run(world, ada):
    page = ada.get(f"/runs/new/?clone={world.run.id}").content.decode()
    assert "ada-data run (clone)" in page
    assert 'value="2020-01-01"' in page and "AAPL, MSFT, JPM" in page


def test_controls_post_to_the_services_and_show_conflicts(world, ada):
    url = f"/runs/{world.run.id}"
    assert ada.post(f"{url}/pause/").status_code == 302
    world.run.refresh_from_db()
    assert world.run.status == "paused"
    page = ada.post(f"{url}/pause/", follow=True).content.decode()
    assert "only a running run can be paused" in page
    ada.post(f"{url}/scale/", {"num_pods": 4})
    world.run.refresh_from_db()
    assert world.run.num_pods == 4


def test_agent_page_shows_score_lineage_and_download(world, ada):
    agent = world.agents[-1]
    page = ada.get(f"/agents/{agent.id}/").content.decode()
    assert 'id="download-bundle"' in page and 'id="lineage"' in page
    assert f'data-agent-id="{agent.id}"' in page
    if agent.parent_id:
        assert f'data-agent-id="{agent.parent_id}"' in page


def test_agent_page_backtests_the_agent_on_dates_the_user_picks(world, ada):
    from bs4 import BeautifulSoup
    from django.urls import reverse

    from webapp.reports.models import Backtest

    agent = world.agents[0]
    soup = BeautifulSoup(ada.get(f"/agents/{agent.id}/").content, "html.parser")
    form = soup.select_one("#backtests form#backtest-form")
    assert form["action"] == reverse("reports:backtest-new")
    start, end = soup.select_one("#backtest-start"), soup.select_one("#backtest-end")
    assert (start["value"], end["value"]) == tuple(SPLITS["test"]), "the held-out window is the default"
    assert start["min"] == str(world.dataset.start_date) and end["max"] == str(world.dataset.end_date)

    response = ada.post(form["action"], {"agent": agent.id, "start": "2021-01-04", "end": "2021-03-31"})
    backtest = Backtest.objects.get(agent=agent)
    assert response.status_code == 302
    assert response["Location"] == reverse("reports:backtest-detail", args=[backtest.id])
    assert (str(backtest.start), str(backtest.end)) == ("2021-01-04", "2021-03-31")


@pytest.mark.parametrize("path", ["/runs/", "/reports/", "/datasets/"])
def test_every_page_links_to_the_backtests_list(ada, path):
    from bs4 import BeautifulSoup

    nav = BeautifulSoup(ada.get(path).content, "html.parser").select_one("nav.nav")
    assert [a["href"] for a in nav.select("a") if a.text == "Backtests"] == ["/reports/"]


def test_dataset_upload_errors_name_the_row_and_ticker(ada):
    csv = "date,tic,open,high,low,close,volume\n2021-01-04,AAA,10,11,9,10,100\n2021-01-05,AAA,10,11,9,-3,100\n"
    upload = SimpleUploadedFile("bad.csv", csv.encode(), content_type="text/csv")
    response = ada.post("/datasets/", {"name": "bad", "file": upload})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="upload-errors"' in page and "AAA" in page


def test_dataset_page_has_a_price_chart(world, ada):
    page = ada.get(f"/datasets/{world.dataset.id}/").content.decode()
    assert 'id="price-chart"' in page and '"ticker": "AAPL"' in page


def test_users_see_their_budgets_and_staff_assign_new_ones(world, ada, client, staff, other_user):
    page = ada.get("/budgets/").content.decode()
    assert "ada-data budget" in page and 'id="budget-form"' not in page
    assert ada.post("/budgets/", {"action": "assign", "name": "x"}).status_code == 404
    client.force_login(staff)
    response = client.post(
        "/budgets/", {"action": "assign", "name": "for bob", "owner": other_user.id, "max_concurrent_pods": 2}
    )
    assert response.status_code == 302
    assert other_user.budgets.get().name == "for bob"


def test_every_page_links_a_favicon_and_favicon_ico_finds_it(ada):
    from bs4 import BeautifulSoup

    icon = BeautifulSoup(ada.get("/runs/").content, "html.parser").select_one('link[rel="icon"]')
    assert icon is not None and icon["href"].endswith("favicon.svg")
    response = ada.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == icon["href"]
