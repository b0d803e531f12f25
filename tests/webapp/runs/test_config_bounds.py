"""The web's env bounds are the trainer's, setting by setting (generated from the config
classes' ``BOUNDS``, so they cannot drift), and the values where the two used to disagree are
refused by the API and the New run form alike, naming the field."""

from __future__ import annotations

import math

import pytest

from tests.webapp.api.test_task_limits import post_task
from tests.webapp.runs.test_form_errors import _errors
from trainer.envs.kinds import KINDS, config_class
from webapp import engine
from webapp.runs import bounds
from webapp.runs.forms import RunForm


def test_every_env_setting_the_trainer_bounds_has_the_same_bounds_on_the_web():
    assert set(engine.env_kinds()) == set(KINDS) == set(bounds.ENV_BY_KIND)
    for kind in KINDS:
        declared = config_class(kind).BOUNDS
        web = bounds.ENV_BY_KIND[kind]
        assert set(web) == set(declared), kind
        for name, bound in declared.items():
            assert web[name].limits() == bound.to_dict(), (kind, name)
            assert web[name].label, (kind, name)


def test_the_form_inputs_carry_the_trainers_limits():
    form_env = {"stock_trading": ("initial_cash", "hmax", "buy_cost_pct", "sell_cost_pct"), "portfolio": ()}
    for kind, names in {**form_env, "portfolio": ("rebalance_band",)}.items():
        for name in names:
            bound = config_class(kind).BOUNDS[name]
            attrs = RunForm.base_fields[name].widget.attrs
            assert float(attrs["min"]) == bound.low, name
            assert ("max" in attrs) == (math.isfinite(bound.high) and not bound.high_open), name
            if "max" in attrs:
                assert float(attrs["max"]) == bound.high, name


@pytest.mark.django_db
def test_a_portfolio_task_gets_every_trainer_bound_error_in_one_answer(api_client, dataset):
    # before, only cost_pct came back (the web had no bounds for the rest; the trainer named
    # dsr_eta alone on the next try, then logit_scale...)
    env = {"cost_pct": 0.5, "dsr_eta": 1, "logit_scale": 0, "turnover_penalty": -1, "rebalance_band": 1}
    response = post_task(api_client, dataset, kind="portfolio", env=env)
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert set(fields) == {f"env.{name}" for name in env}, fields
    assert fields["env.dsr_eta"] == "must be more than 0 and below 1, got 1"
    assert fields["env.rebalance_band"] == "must be at least 0 and below 1, got 1"


@pytest.mark.django_db
def test_the_form_refuses_a_no_trade_band_of_one_by_the_trainers_bound(client, user, world):
    client.force_login(user)
    errors = _errors(client, world, kind="portfolio", rebalance_band=1)
    assert errors.get("rebalance_band") == ["must be at least 0 and below 1, got 1"], errors


@pytest.mark.django_db
def test_a_stock_task_with_a_zero_turbulence_threshold_is_a_400_naming_it(api_client, dataset):
    response = post_task(api_client, dataset, env={"turbulence_threshold": 0})
    assert response.status_code == 400, response.content
    assert response.json()["fields"] == {"env.turbulence_threshold": "must be more than 0 and at most 1,000,000, got 0"}
