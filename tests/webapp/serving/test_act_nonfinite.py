"""POST /api/agents/{id}/act with numbers whose answer a float cannot hold, or booleans where
numbers go: a 400 naming the field, counted as the agent's error, never a 500 (JSON has no
NaN or infinity, and DRF's renderer refused the answer)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from webapp.serving.selectors import agent_serve_stats

pytestmark = pytest.mark.django_db

DAY = "2020-07-15"  # a day of the tiny task's test split (AAPL closed near 97 USD)
HUGE_INT = 10**400  # a JSON integer no float holds


@pytest.fixture
def no_errors_logged(caplog):
    """No log record of the test is an error or carries a traceback (a 500 logs both)."""
    caplog.set_level(logging.INFO)
    yield
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert bad == [], [f"{r.name}: {r.getMessage()}" for r in bad]


def _obs(n: int, at: int, value: object) -> list[list[object]]:
    row: list[object] = [0.0] * n
    row[at] = value
    return [row]


def _bars(close: object) -> dict:
    bar = {"date": DAY, "open": 1.0, "high": 1.0, "low": 1.0, "close": close, "volume": 1.0}
    return {t: [bar] * 300 for t in ("AAPL", "MSFT", "JPM")}


def _refused(api_client, agent, body, field: str, words: str) -> None:
    """The act request is a 400 naming ``field`` alone, its error and the field's message saying ``words``."""
    response = api_client.post(f"/api/agents/{agent.id}/act", body, format="json")
    assert response.status_code == 400, response.content[:300]
    out = response.json()
    assert list(out["fields"]) == [field], out
    assert words in out["error"] and words in out["fields"][field], out


MARKET_STATES = [
    # one position alone is worth more than a float holds (the report's body)
    ({"date": DAY, "cash": 1e308, "holdings": {"AAPL": 1e308}}, "holdings.AAPL", "worth more than the largest float"),
    # each is finite, their sum is not
    ({"date": DAY, "cash": 1.5e308, "holdings": {"AAPL": 1e306}}, "cash", "value the portfolio beyond the largest"),
    pytest.param({"date": DAY, "cash": HUGE_INT}, "cash", "got a 401-digit number", id="401-digit-cash"),
    ({"date": DAY, "cash": True}, "cash", "got the boolean true"),
    ({"date": DAY, "holdings": {"MSFT": True}}, "holdings.MSFT", "got the boolean true"),
    ({"bars": _bars(False)}, "bars.AAPL[0].close", "got the boolean false"),
]


@pytest.fixture
def agent(world, settings, data_dir):
    """A stock-trading agent (the ``bundle`` fixture downloads this one's bundle)."""
    settings.PADDOCK_DATA_DIR = data_dir
    return world.agents[1]


@pytest.fixture
def portfolio_agent(portfolio_world, settings, data_dir):
    settings.PADDOCK_DATA_DIR = data_dir
    return portfolio_world.agents[0]


@pytest.mark.parametrize(("body", "field", "words"), MARKET_STATES)
def test_a_agents_state_no_float_holds_or_a_boolean_amount_is_a_400_naming_the_field(
    agent, api_client, no_errors_logged, body, field, words
):
    _refused(api_client, agent, body, field, words)
    assert agent_serve_stats(agent)["errors"] == 1


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [*MARKET_STATES, ({"date": DAY, "weights": {"AAPL": True}}, "weights.AAPL", "got the boolean true")],
)
def test_a_portfolio_agents_state_no_float_holds_or_a_boolean_is_a_400_naming_the_field(
    portfolio_agent, api_client, no_errors_logged, body, field, words
):
    _refused(api_client, portfolio_agent, body, field, words)


@pytest.mark.parametrize(
    ("at", "value", "words"),
    [
        (3, 1e300, "beyond the range of the float32 values the policy reads"),  # the report's body
        (3, -1e39, "beyond the range of the float32 values"),
        (0, True, "got the boolean true"),
        (2, False, "got the boolean false"),
        pytest.param(1, HUGE_INT, "got a 401-digit number", id="401-digit-int"),
    ],
)
def test_an_observation_value_no_float32_holds_or_a_boolean_is_a_400_naming_it(
    agent, api_client, bundle, no_errors_logged, at, value, words
):
    _refused(api_client, agent, {"observations": _obs(bundle.obs_dim, at, value)}, f"observations[0][{at}]", words)
    assert agent_serve_stats(agent)["errors"] == 1


def test_the_largest_float32_observation_is_still_answered(agent, api_client, bundle):
    obs = _obs(bundle.obs_dim, 3, float(np.finfo(np.float32).max))
    response = api_client.post(f"/api/agents/{agent.id}/act", {"observations": obs}, format="json")
    assert response.status_code == 200, response.json()
    np.testing.assert_allclose(response.json()["actions"], bundle.act(np.array(obs, dtype=np.float32)), atol=1e-5)


@pytest.mark.parametrize(
    ("text", "field", "token"),
    [
        ('{{"observations": [[{zeros}NaN]]}}', "observations[0][{last}]", "NaN"),
        ('{{"date": "' + DAY + '", "cash": Infinity}}', "cash", "Infinity"),
        ('{{"date": "' + DAY + '", "holdings": {{"AAPL": -Infinity}}}}', "holdings.AAPL", "-Infinity"),
    ],
)
def test_a_non_standard_json_number_is_refused_as_the_body_is_parsed_naming_its_field_and_token(
    agent, api_client, bundle, no_errors_logged, text, field, token
):
    """As ``python -m trainer serve`` refuses them (``body``, with the token and its place), the
    web's parser refuses ``NaN`` and ``Infinity`` before the agent sees the body, naming the token
    and the field that holds it."""
    last = bundle.obs_dim - 1
    body = text.format(zeros="0.0, " * last, last=last)
    response = api_client.post(f"/api/agents/{agent.id}/act", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    why = f"{token} is not a number JSON allows; send a finite number, or null where the field takes one"
    assert response.json()["fields"] == {field.format(last=last): why}
    assert agent_serve_stats(agent)["errors"] == 0  # the body never reached the agent
