"""The run form's help (webapp/runs/form_help.py, shown beside the hyperparameters' JSON field)
states the upper bounds the trainer's configs enforce (trainer.util.bounds)."""

from __future__ import annotations

import re

import pytest

from trainer.agents import ALGORITHMS
from trainer.errors import ConfigError
from webapp.runs.form_help import HYPERPARAMETER_HELP

#: Bounded by the env's ``logit_scale / 2`` once the task is known, or a level in [0, 0.5].
NOT_ALONE = {"kappa", "challenger_kappa", "challenger_alpha"}


def _help_upper_bounds():
    """``(algo, name, limit)`` for every run-form help text that states an upper bound ("at most
    X" or "0 to X"): webapp/runs/form_help.py, which the form shows beside the JSON field."""
    found = []
    for algo, texts in HYPERPARAMETER_HELP.items():
        for name, text in texts.items():
            match = re.search(r"(?:at most|0 to) ([\d,]+(?:\.\d+)?)\b", text)
            if match and algo in ALGORITHMS and name not in NOT_ALONE:
                found.append((algo, name, float(match.group(1).replace(",", ""))))
    return found


@pytest.mark.parametrize(("algo", "name", "limit"), _help_upper_bounds())
def test_the_run_form_help_states_the_bound_the_trainer_enforces(algo, name, limit):
    config_cls = ALGORITHMS[algo][1]
    # direct also refuses learning_rate x weight_decay >= 1 (AdamW's decay step): the other factor is made small
    extra = {("direct", "weight_decay"): {"learning_rate": 1e-9}, ("direct", "learning_rate"): {"weight_decay": 0.0}}
    extra = extra.get((algo, name), {})
    assert getattr(config_cls.from_dict({name: limit, **extra}), name) == limit
    with pytest.raises(ConfigError):
        config_cls.from_dict({name: limit * 1.5, **extra})


def test_the_run_form_help_states_the_upper_bounds_of_the_coefficients_that_have_one():
    stated = {(algo, name) for algo, name, _ in _help_upper_bounds()}
    assert {("direct", "weight_decay"), ("ppo", "ent_coef"), ("a2c", "vf_coef"), ("td3", "exploration_noise")} <= stated
