"""Clone run, submitted unchanged, makes a run that trains as the original did: for every task
kind and algorithm, a mixed tournament and every demo profile (the clone carries only the
settings of the run's own kind; a portfolio's reward scaling is not the stock-trading field)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from tests.webapp.conftest import SPLITS, TICKERS
from webapp.demo import profiles
from webapp.demo.data import import_demo_dataset
from webapp.demo.launch import ensure_budget, ensure_task
from webapp.demo.profiles import demo_mutation
from webapp.demo.sizing import size_run
from webapp.runs import services
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

ALGORITHMS = ("ppo", "a2c", "sac", "td3", "ddpg")
SMALL = {"num_envs": 4, "hidden_sizes": [16, 16]}


def form_as_posted(html: str) -> dict[str, list[str]]:
    """What a browser posts for the page's run form, untouched: every input, select and
    textarea with its current value (unchecked boxes left out, as browsers do)."""
    form = BeautifulSoup(html, "html.parser").select_one("form#run-form") or BeautifulSoup(
        html, "html.parser"
    ).select_one("form[method=post]")
    data: dict[str, list[str]] = {}
    for field in form.select("input[name], select[name], textarea[name]"):
        name = field["name"]
        if field.name == "select":
            chosen = field.select("option[selected]") or field.select("option")[:1]
            values = [o.get("value", o.get_text()) for o in chosen]
        elif field.name == "textarea":
            values = [field.get_text()]
        elif field.get("type") in ("checkbox", "radio"):
            values = [field.get("value", "on")] if field.has_attr("checked") else []
        else:
            values = [field.get("value", "")]
        data.setdefault(name, []).extend(values)
    return data


def clone_unchanged(client, run: Run) -> Run:
    """Open the run's clone page and submit it as it is; the new run."""
    page = client.get(f"/runs/new/?clone={run.id}")
    assert page.status_code == 200
    data = form_as_posted(page.content.decode())
    data.pop("start_now", None)  # created, not started: no worker needed
    before = set(Run.objects.values_list("id", flat=True))
    response = client.post("/runs/new/", data)
    if response.status_code != 302:
        soup = BeautifulSoup(response.content.decode(), "html.parser")
        errors = {e.get("data-error-for", "form"): e.get_text(" ", strip=True) for e in soup.select(".errorlist")}
        pytest.fail(f"the unchanged clone of {run.name} was refused: {errors}")
    (new_id,) = set(Run.objects.values_list("id", flat=True)) - before
    return Run.objects.select_related("task").get(pk=new_id)


def assert_same_training(clone: Run, run: Run) -> None:
    for field in ("kind", "algorithm", "hyperparameters", "env", "splits", "tickers", "selection", "algorithms"):
        assert getattr(clone.task, field) == getattr(run.task, field), field
    assert clone.task.algorithm_hyperparameters == run.task.algorithm_hyperparameters
    for field in ("num_pods", "generation_steps", "leaderboard_size", "fresh_probability", "mutation", "seed"):
        assert getattr(clone, field) == getattr(run, field), field


def _run(user, dataset, budget, *, kind, algorithm, env=None, **task_options) -> Run:
    task = services.task_create(
        owner=user,
        dataset=dataset,
        name=f"{kind} {algorithm}",
        tickers=TICKERS,
        splits=SPLITS,
        kind=kind,
        algorithm=algorithm,
        hyperparameters=dict(SMALL),
        env=env,
        **task_options,
    )
    return services.run_create(
        owner=user, task=task, budget=budget, name=f"{kind} {algorithm} run", num_pods=2, generation_steps=4096, seed=7
    )


@pytest.mark.parametrize("kind", ["stock_trading", "portfolio"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_clone_submitted_unchanged_makes_the_same_run(client, user, dataset, make_budget, kind, algorithm):
    env = (
        {"reward": "differential_sharpe", "reward_scaling": 0.5, "rebalance_band": 0.02}
        if kind == "portfolio"
        else {
            "hmax": 500,
            "reward_scaling": 2e-4,
            "episode_length": 60,
        }
    )
    run = _run(user, dataset, make_budget(), kind=kind, algorithm=algorithm, env=env)
    client.force_login(user)
    assert_same_training(clone_unchanged(client, run), run)


def test_a_clone_of_a_mixed_tournament_keeps_every_algorithm(client, user, dataset, make_budget):
    run = _run(
        user,
        dataset,
        make_budget(),
        kind="portfolio",
        algorithm="ppo",
        algorithms=["ppo", "sac", "td3"],
        algorithm_hyperparameters={"sac": {**SMALL, "tau": 0.01}},
    )
    client.force_login(user)
    clone = clone_unchanged(client, run)
    assert clone.task.algorithms == ["ppo", "sac", "td3"]
    assert_same_training(clone, run)


@pytest.mark.parametrize("profile", ["CPU_PROFILE", "GPU_PROFILE", "CI_PROFILE"])
def test_a_clone_of_each_daily_demo_run_is_accepted_unchanged(client, user, data_dir, settings, profile):
    settings.PADDOCK_DATA_DIR = data_dir
    dataset, _ = import_demo_dataset(user, root=data_dir, allow_download=False)
    chosen = getattr(profiles, profile)
    sizing = size_run(chosen, steps_per_s=50_000.0, device="cpu", training_workers=1)
    budget, _ = ensure_budget(user, sizing, chosen.budget_name)
    task = ensure_task(user, dataset, chosen)
    run = services.run_create(
        owner=user,
        task=task,
        budget=budget,
        name=f"{task.name} #1",
        num_pods=chosen.num_pods,
        generation_steps=sizing.generation_steps,
        mutation=demo_mutation(chosen.algorithm),
        seed=0,
    )
    client.force_login(user)
    assert_same_training(clone_unchanged(client, run), run)
