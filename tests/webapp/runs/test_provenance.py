"""Every run, agent, bundle and model card says what produced it: the code version, torch and
numpy versions, a hash of the data files and the seed; the compare page shows them with the
seed, kind and splits; the agent page lists its backtests; the model card shows the test
figures once a backtest of the test split exists."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy
import pytest
import torch
from bs4 import BeautifulSoup

pytestmark = pytest.mark.django_db


def _data_hash(dataset) -> str:
    outer = hashlib.sha256()
    for path in dataset.source_paths():
        with open(path, "rb") as fh:
            outer.update(hashlib.sha256(fh.read()).digest())
    return f"sha256:{outer.hexdigest()}"


def _assert_provenance(found: dict, dataset, seed) -> None:
    assert found["code_version"].startswith(("git:", "paddock "))
    assert found["packages"]["torch"] == torch.__version__ and found["packages"]["numpy"] == numpy.__version__
    assert found["data_sha256"] == _data_hash(dataset)
    assert found["seed"] == seed


def test_a_run_and_its_agents_record_what_produced_them(world):
    _assert_provenance(world.run.provenance, world.dataset, world.run.seed)
    agent = world.agents[0]
    agent.refresh_from_db()
    _assert_provenance(agent.provenance, world.dataset, 1)  # the generation's seed (the fixture trained seed 1)


def test_the_model_card_and_config_carry_provenance_and_the_test_figures(world, api_client):
    from webapp.reports.models import Backtest

    agent = max(world.agents, key=lambda a: a.score)
    first = zipfile.ZipFile(io.BytesIO(b"".join(api_client.get(f"/api/agents/{agent.id}/bundle/").streaming_content)))
    card = first.read("README.md").decode()
    config = json.loads(first.read("config.json"))
    assert "## Reproducibility" in card and f"torch {torch.__version__}" in card and "Seed: 1." in card
    assert config["provenance"]["data_sha256"] == _data_hash(world.dataset)
    assert "not backtested yet" in card and config["test_metrics"] is None

    test = world.task.splits["test"]
    Backtest.objects.create(
        owner=agent.run.owner,
        agent=agent,
        run=agent.run,
        dataset=world.dataset,
        tickers=agent.tickers,
        start=test["start"],
        end=test["end"],
        status=Backtest.Status.DONE,
        metrics={
            "agent": {"sharpe_ratio": 0.812, "total_return": 0.0421, "max_drawdown": -0.0733},
            "QQQ": {"sharpe_ratio": 1.5, "total_return": 0.2},
            "equal_weight": {"sharpe_ratio": 1.1, "total_return": 0.1},
        },
    )
    again = zipfile.ZipFile(io.BytesIO(b"".join(api_client.get(f"/api/agents/{agent.id}/bundle/").streaming_content)))
    card = again.read("README.md").decode()
    assert f"Test ({test['start']} to {test['end']}, backtest): Sharpe 0.812" in card
    assert "total return 4.21 %, max drawdown -7.33 %" in card and "QQQ buy-and-hold: Sharpe 1.500" in card
    assert json.loads(again.read("config.json"))["test_metrics"]["agent"]["sharpe_ratio"] == 0.812


def test_the_agent_page_lists_its_backtests_and_what_produced_it(world, client, user):
    from webapp.reports.models import Backtest

    agent = world.agents[1]
    other = world.agents[0]
    mine = Backtest.objects.create(
        owner=user, agent=agent, run=agent.run, dataset=world.dataset, tickers=agent.tickers, start="2020-07-01",
        end="2020-12-31", status=Backtest.Status.DONE, metrics={"agent": {"sharpe_ratio": 0.5}},
    )  # fmt: skip
    theirs = Backtest.objects.create(
        owner=user, agent=other, run=other.run, dataset=world.dataset, tickers=other.tickers, start="2020-07-01",
        end="2020-12-31",
    )  # fmt: skip
    client.force_login(user)
    soup = BeautifulSoup(client.get(f"/agents/{agent.id}/").content.decode(), "html.parser")
    listed = [int(tr["data-backtest-id"]) for tr in soup.select("#agent-backtests tr[data-backtest-id]")]
    assert listed == [mine.id] and theirs.id not in listed
    assert "0.500" in soup.select_one("#agent-backtests").get_text()
    assert soup.select_one("#provenance-seed").get_text().startswith("1 (run seed")
    assert torch.__version__ in soup.select_one("#provenance").get_text()


def test_the_compare_diff_shows_seed_kind_splits_and_provenance(world, user, make_budget, client):
    from webapp.runs import services

    budget = make_budget()
    other = services.run_create(owner=user, task=world.task, budget=budget, name="seed 5", generation_steps=256, seed=5)
    client.force_login(user)
    page = client.get(f"/runs/compare/?ids={world.run.id}&ids={other.id}").content.decode()
    soup = BeautifulSoup(page, "html.parser")
    rows = {tr["data-key"]: tr for tr in soup.select("tr[data-key]")}
    for key in ("kind", "seed", "train", "validation", "test", "code version", "torch", "numpy", "data SHA-256"):
        assert key in rows, sorted(rows)
    assert "differs" in rows["seed"].get("class", []) and "differs" not in rows["test"].get("class", [])
    assert [td.get_text() for td in rows["seed"].select("td")[1:]] == ["0", "5"]
    assert rows["torch"].select("td")[1].get_text() == torch.__version__
