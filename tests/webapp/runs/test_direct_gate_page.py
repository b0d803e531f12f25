"""The direct learner's challenger gate reaches the web: a generation's metrics keep the gate's
verdict, the agent page shows it in the CLI's words and the API returns it."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import DOW30_FILE
from tests.webapp.conftest import make_world
from webapp import engine

pytestmark = pytest.mark.django_db

DIRECT = {"num_envs": 16, "rollout_steps": 10, "hidden_sizes": [8]}


def _task(data_dir) -> dict:
    """Four Dow tickers over 2012-2019, the direct learner with its gate on (its default)."""
    return {
        "data": {"paths": [str(data_dir / DOW30_FILE)], "tickers": ["AAPL", "MSFT", "JPM", "KO"]},
        "train": ["2012-01-03", "2019-12-20"],
        "validation": ["2020-01-02", "2020-12-31"],
        "test": ["2021-01-04", "2021-12-31"],
        "kind": "portfolio",
        "env": {"rebalance_band": 0.01},
        "algorithm": "direct",
        "hyperparameters": DIRECT,
    }


@pytest.fixture(scope="module")
def direct_generation(data_dir, tmp_path_factory):
    """One real direct generation of :func:`_task`."""
    spec = engine.validate_task(_task(data_dir))
    out = tmp_path_factory.mktemp("direct-gate") / "agent.pt"
    result = engine.train_generation(
        spec,
        env_steps=16 * 10 * 12,
        out_path=str(out),
        parent_path=None,
        hyperparameters=None,
        seed=0,
        device="cpu",
        data_dir=str(data_dir),
    )
    return {"path": out, **dataclasses.asdict(result)}


def test_a_direct_generation_keeps_its_gate_verdict_in_its_metrics(direct_generation):
    gate = direct_generation["metrics"]["challenger_gate"]
    assert isinstance(gate["kept"], bool) and len(gate["folds"]) == 2 and 0 <= gate["p_value"] <= 1
    text = engine.gate_text(direct_generation["metrics"])
    assert text.startswith("open, challenger kept" if gate["kept"] else "closed, no edge shown")
    assert " in 2 folds (tail " in text and f"one-sided p {gate['p_value']:.3f}" in text
    assert engine.gate_text({"sharpe_ratio": 1.0}) is None  # an agent without a gate: no line


def test_the_agent_page_and_the_api_show_the_gate(client, user, api_client, direct_generation):
    world = make_world(
        user,
        "gate-data",
        checkpoint=direct_generation,
        scores=[0.4],
        kind="portfolio",
        env={"rebalance_band": 0.01},
        algorithm="direct",
        hyperparameters=DIRECT,
    )
    agent = world.agents[0]
    client.force_login(user)
    html = client.get(f"/agents/{agent.pk}/").content.decode()
    assert 'id="challenger-gate"' in html
    assert f"Challenger gate: {engine.gate_text(direct_generation['metrics'])}" in html.replace("&#x27;", "'")
    body = api_client.get(f"/api/agents/{agent.pk}/").json()
    assert body["metrics"]["challenger_gate"]["folds"] == direct_generation["metrics"]["challenger_gate"]["folds"]


def test_a_generation_of_a_holding_line_says_why_it_holds(direct_generation, data_dir, tmp_path):
    assert not direct_generation["metrics"]["challenger_gate"]["kept"]  # four Dow tickers, 2012-2019: closed
    spec = engine.validate_task(_task(data_dir))
    result = engine.train_generation(
        spec,
        env_steps=16 * 10 * 3,
        out_path=str(tmp_path / "next.pt"),
        parent_path=str(direct_generation["path"]),
        hyperparameters=None,
        seed=1,
        device="cpu",
        data_dir=str(data_dir),
    )
    assert result.metrics["challenger_gate"] == {"held": True, "closed_gate": "hold"}
    assert engine.gate_text(result.metrics).startswith(
        "closed earlier in this line, no edge shown: the agent holds 1/N"
    )
