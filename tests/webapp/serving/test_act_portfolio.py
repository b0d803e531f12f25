"""POST /api/agents/{id}/act for a portfolio agent (a really trained one, 0.01 no-trade band):
the agent page's own command answers target weights and orders, current weights are accepted,
bad ones are 400s naming the field, and the page shows commands this agent takes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bs4 import BeautifulSoup

from webapp.serving.selectors import agent_serve_stats

pytestmark = pytest.mark.django_db

DAY = "2020-11-16"  # a day of the tiny task's test split


@pytest.fixture
def agent(portfolio_world, settings, data_dir):
    settings.PADDOCK_DATA_DIR = data_dir
    return portfolio_world.agents[0]


def _act(api_client, agent, body):
    return api_client.post(f"/api/agents/{agent.id}/act", body, format="json")


def test_the_agent_pages_command_answers_target_weights_and_orders(agent, api_client, bundle):
    assert bundle.kind == "portfolio"
    response = _act(api_client, agent, {"date": DAY, "cash": 100_000, "holdings": {"AAPL": 10}})
    assert response.status_code == 200, response.json()
    out = response.json()
    names = ["AAPL", "MSFT", "JPM", "cash"]
    assert list(out["target_weights"]) == names and list(out["rebalanced_weights"]) == names
    assert sum(out["target_weights"].values()) == pytest.approx(1.0)
    assert out["rebalance_band"] == 0.01
    np.testing.assert_allclose(out["action"], bundle.act(np.array(out["observation"], dtype=np.float32)), atol=1e-5)
    value = 100_000 + 10 * out["prices"]["AAPL"]
    assert out["value"] == pytest.approx(value) and out["weights"]["AAPL"] == pytest.approx(
        10 * out["prices"]["AAPL"] / value
    )
    for order in out["orders"]:  # orders reach the rebalanced weights at the day's close
        moved = out["rebalanced_weights"][order["ticker"]] - out["weights"][order["ticker"]]
        assert order["value"] == pytest.approx(moved * value, abs=1e-6)
    assert out["costs"] == pytest.approx(1e-3 * out["turnover"] * value)


def test_current_weights_are_a_market_state_and_the_band_holds_those_near_their_target(agent, api_client):
    fresh = _act(api_client, agent, {"date": DAY}).json()
    assert fresh["weights"]["cash"] == 1.0  # the env's fresh start
    at_target = _act(api_client, agent, {"date": DAY, "weights": fresh["target_weights"]}).json()["target_weights"]
    # a portfolio near its target but for 0.005 of AAPL held in cash: within the band, AAPL stays
    near = {**at_target, "AAPL": at_target["AAPL"] - 0.005, "cash": at_target["cash"] + 0.005}
    response = _act(api_client, agent, {"date": DAY, "weights": near})
    assert response.status_code == 200, response.json()
    out = response.json()
    assert "orders" not in out  # no value given: weights only
    assert 1e-3 < abs(out["target_weights"]["AAPL"] - near["AAPL"]) <= 0.01
    assert out["rebalanced_weights"]["AAPL"] == pytest.approx(near["AAPL"], abs=1e-12)


def test_a_date_alone_is_the_fresh_start_and_answers_its_value_orders_and_costs(agent, api_client, bundle):
    """docs/reference/serving.md: a portfolio with a value (cash and holdings, or neither: the
    env's initial cash) answers value, cash, holdings, orders and costs; weights answer none."""
    five = ("value", "cash", "holdings", "orders", "costs")
    fresh = _act(api_client, agent, {"date": DAY}).json()
    initial_cash = bundle.config["env_config"]["initial_cash"]
    given = _act(api_client, agent, {"date": DAY, "cash": initial_cash, "holdings": {}}).json()
    assert {k: fresh[k] for k in five} == {k: given[k] for k in five}
    assert fresh["value"] == fresh["cash"] == initial_cash and set(fresh["holdings"].values()) == {0.0}
    assert [o["side"] for o in fresh["orders"]] == [
        "buy" if w > 0 else "hold" for w in list(fresh["rebalanced_weights"].values())[:-1]
    ]
    weights = _act(api_client, agent, {"date": DAY, "weights": fresh["weights"]}).json()
    assert weights["target_weights"] == fresh["target_weights"]
    assert not set(five) & set(weights), "weights carry no value to trade"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"date": DAY, "weights": {"AAPL": -0.5, "cash": 1.5}}, "weights.AAPL"),
        ({"date": DAY, "weights": {"AAPL": 0.5}, "holdings": {"AAPL": 1}}, "weights"),
        ({"date": DAY, "weights": {"AAPL": 0.2, "cash": 0.2}}, "weights"),
        ({"date": DAY, "holdings": {"AAPL": -1}}, "holdings.AAPL"),
        ({"date": "2020-11-15"}, "date"),  # a Sunday
        ({"date": DAY, "weight": {"AAPL": 1.0}}, "weight"),  # misspelt: not the all-cash start
    ],
)
def test_bad_portfolio_states_are_400s_naming_the_field(agent, api_client, body, field):
    response = _act(api_client, agent, body)
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    assert agent_serve_stats(agent)["errors"] == 1


def test_the_agent_page_shows_commands_this_portfolio_agent_takes(agent, client, user, api_client):
    client.force_login(user)
    page = BeautifulSoup(client.get(f"/agents/{agent.id}/").content, "html.parser")
    for example in ("#serve-example", "#serve-example-weights"):
        body = page.select_one(example).get_text().split("-d '")[1].rstrip("'")
        body = json.loads(body.replace("YYYY-MM-DD", DAY))
        assert _act(api_client, agent, body).status_code == 200, body
