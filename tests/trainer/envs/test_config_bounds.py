"""The env configs' declared bounds (``BOUNDS``) are what ``validate`` enforces, and the values
the web used to refuse while the trainer took them (issue 26 step 4) are refused by the
trainer too, naming the field."""

from __future__ import annotations

import math

import pytest

from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.errors import ConfigError
from trainer.util.bounds import MAX_LOGIT, Bound

CONFIGS = (EnvConfig, PortfolioConfig)


def _probes(bound: Bound) -> list[tuple[float, bool]]:
    """Values at and around both limits, each with whether it is within ``bound``."""
    step = 1 if bound.integer else 1e-9 * max(1.0, abs(bound.low))
    probes = [(bound.low, not bound.low_open), (bound.low - step, False)]
    if math.isfinite(bound.high):
        high_step = 1 if bound.integer else 1e-9 * max(1.0, abs(bound.high))
        probes += [(bound.high, not bound.high_open), (bound.high + high_step, False)]
    return probes


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_validate_enforces_exactly_the_declared_bounds_naming_the_field(config):
    assert config.BOUNDS, "every env config declares the bounds of its numeric settings"
    for name, bound in config.BOUNDS.items():
        for value, inside in _probes(bound):
            if inside:
                config.from_dict({name: value})
                continue
            with pytest.raises(ConfigError) as caught:
                config.from_dict({name: value})
            assert caught.value.details["field"] == f"env.{name}", (name, value)
            assert bound.error(value) in caught.value.message
        if bound.nullable:
            config.from_dict({name: None})


@pytest.mark.parametrize(
    ("config", "name", "value", "expected"),
    [
        # values the web refused and the trainer (command line, task files) took before
        (EnvConfig, "initial_cash", 1e300, "at most 10,000,000,000 USD"),
        (EnvConfig, "initial_cash", 10, "at least 100"),
        (EnvConfig, "hmax", 2_000_000, "at most 1,000,000"),
        (EnvConfig, "buy_cost_pct", 0.5, "at most 0.1"),
        (EnvConfig, "sell_cost_pct", 0.5, "at most 0.1"),
        (EnvConfig, "reward_scaling", 5, "at most 1"),
        (EnvConfig, "turbulence_threshold", 0, "more than 0"),
        (EnvConfig, "turbulence_threshold", 1e7, "at most 1,000,000"),
        (PortfolioConfig, "initial_cash", 10, "at least 100"),
        (PortfolioConfig, "cost_pct", 0.5, "at most 0.1"),
        (PortfolioConfig, "reward_scaling", 5, "at most 1"),
    ],
)
def test_a_value_the_web_refused_is_refused_by_the_trainer_too(config, name, value, expected):
    with pytest.raises(ConfigError) as caught:
        config.from_dict({name: value})
    assert caught.value.details["field"] == f"env.{name}"
    assert expected in caught.value.message


def test_bound_errors_lists_every_bad_value_at_once():
    errors = PortfolioConfig.bound_errors({"cost_pct": 0.5, "dsr_eta": 1, "turnover_penalty": -1, "reward": "x"})
    assert set(errors) == {"env.cost_pct", "env.dsr_eta", "env.turnover_penalty"}
    assert errors["env.dsr_eta"] == "must be more than 0 and below 1, got 1"


def test_a_bound_says_its_range_for_help_texts_and_errors():
    assert Bound(1, 256, integer=True).text() == "1 to 256"
    assert Bound(0, 1, low_open=True).text() == "more than 0, at most 1"
    assert Bound(0).text() == "at least 0"
    assert Bound(1, 256, integer=True).error(10**400) == "must be at least 1 and at most 256, got a 401-digit number"
    assert Bound(1, 256, integer=True).error(2.5) == "must be a whole number, got 2.5"
    assert Bound(0, 1).error(True) == "must be a number, got True"
    assert Bound(0, 1, nullable=True).error("x") == "must be a number or null, got 'x'"


def test_a_cost_stress_stays_within_the_cost_bound():
    from trainer.backtest.robustness import scaled_costs

    assert scaled_costs(PortfolioConfig(cost_pct=0.05), 3).validate().cost_pct == 0.1
    assert scaled_costs(PortfolioConfig(cost_pct=0.001), 3).cost_pct == pytest.approx(0.003)
    stressed = scaled_costs(EnvConfig(buy_cost_pct=0.04, sell_cost_pct=0.01), 3).validate()
    assert (stressed.buy_cost_pct, stressed.sell_cost_pct) == (0.1, pytest.approx(0.03))


def test_the_selection_rule_checks_its_declared_bounds():
    from trainer.selection import SelectionRule

    for data, message in [
        ({"windows": 13}, "selection.windows: must be at least 2 and at most 12, got 13"),
        ({"windows": 4.0}, "selection.windows: must be an integer, got 4.0"),
        ({"k": -1}, "selection.k: must be at least 0 and at most 100, got -1"),
        ({"k": 1e300}, "selection.k: must be at least 0 and at most 100, got 1e+300"),
        ({"k": True}, "selection.k: must be a number, got True"),
    ]:
        with pytest.raises(ConfigError) as caught:
            SelectionRule.from_dict(data)
        assert caught.value.message == message
    assert SelectionRule.from_dict({"windows": 12, "k": 0}).windows == 12
    assert SelectionRule.from_dict({"k": 100}).k == 100


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_real_valued_env_setting_has_a_finite_upper_bound(config):
    # logit_scale and cash_bias had none: 1e308 was accepted and the run died of a float32 overflow
    unbounded = [name for name, bound in config.BOUNDS.items() if not bound.integer and math.isinf(bound.high)]
    assert unbounded == [], f"{config.__name__}: {unbounded} take any finite number"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("logit_scale", 1e308, "env.logit_scale: must be more than 0 and at most 100, got 1e+308"),
        ("logit_scale", 1e30, "env.logit_scale: must be more than 0 and at most 100, got 1e+30"),
        ("cash_bias", 1e308, "env.cash_bias: must be at least 0 and at most 100, got 1e+308"),
    ],
)
def test_a_portfolio_logit_setting_past_max_logit_is_refused_naming_it(name, value, expected):
    with pytest.raises(ConfigError) as caught:
        PortfolioConfig.from_dict({name: value})
    assert caught.value.details["field"] == f"env.{name}"
    assert caught.value.message == expected


def test_the_largest_logit_settings_keep_the_action_map_and_the_tilt_policy_finite_in_float32():
    import torch

    from trainer.agents.cross_sectional import CrossSectionalPolicy
    from trainer.envs.portfolio_dynamics import target_weights

    config = PortfolioConfig.from_dict({"logit_scale": MAX_LOGIT, "cash_bias": MAX_LOGIT})
    action = torch.tensor([[1.0, -1.0, 0.0, -1.0], [-1.0, -1.0, -1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    weights = target_weights(action, logit_scale=config.logit_scale, cash_bias=config.cash_bias, dtype=torch.float32)
    assert torch.isfinite(weights).all()
    assert torch.allclose(weights.sum(dim=1), torch.ones(3))
    # the policy's tilt bound may reach logit_scale / 2; its e^kappa must not overflow float32
    policy = CrossSectionalPolicy(2, [8], MAX_LOGIT / 2, logit_scale=config.logit_scale)
    scores = torch.tensor([[1e6, -1e6, 0.0], [-1e6, -1e6, 1e6]])
    out = policy.action_from_scores(scores, None, torch.full((2, 4), 0.25))
    assert torch.isfinite(out).all() and out.abs().max() <= 1.0 + 1e-6
