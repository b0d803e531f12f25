"""Every coefficient of an algorithm's config has a finite upper bound (``trainer.util.bounds``):
a typo such as ``weight_decay`` 1e300 is a ``ConfigError`` naming the field, not a traceback, a
divergence blamed on the learning rate, or an agent trained on nonsense."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from trainer.agents import ALGORITHMS
from trainer.agents.direct_config import DirectConfig
from trainer.errors import ConfigError

#: Every float setting of every algorithm, as ``(algorithm, name)``.
FLOAT_FIELDS = sorted(
    (algo, f.name)
    for algo, (_, config_cls) in ALGORITHMS.items()
    for f in dataclasses.fields(config_cls)
    if typing.get_type_hints(config_cls)[f.name] in (float, float | None)
)
#: Bounded by the env's ``logit_scale / 2`` once the task is known (``check_task``), not alone.
TASK_BOUNDED = {"kappa", "challenger_kappa"}


@pytest.mark.parametrize(("algo", "name"), [field for field in FLOAT_FIELDS if field[1] not in TASK_BOUNDED])
def test_a_coefficient_of_1e300_is_refused_naming_it(algo, name):
    with pytest.raises(ConfigError) as err:
        ALGORITHMS[algo][1].from_dict({name: 1e300})
    assert err.value.details["field"] == f"{algo}.{name}"
    assert err.value.message.startswith(f"{algo}.{name} ")


@pytest.mark.parametrize(
    ("algo", "name", "limit", "says"),
    [
        ("ppo", "learning_rate", 1e6, "more than 0 and at most 1,000,000"),
        ("ppo", "ent_coef", 1e6, "at least 0 and at most 1,000,000"),
        ("ppo", "vf_coef", 1e6, "at least 0 and at most 1,000,000"),
        ("ppo", "clip_coef", 1e6, "more than 0 and at most 1,000,000"),
        ("ppo", "value_clip_coef", 1e6, "more than 0 and at most 1,000,000"),
        ("ppo", "max_grad_norm", 1e6, "more than 0 and at most 1,000,000"),
        ("a2c", "obs_clip", 1e6, "more than 0 and at most 1,000,000"),
        ("a2c", "reward_scale", 1e6, "more than 0 and at most 1,000,000"),
        ("sac", "alpha_learning_rate", 1e6, "more than 0 and at most 1,000,000"),
        ("sac", "initial_alpha", 1e6, "more than 0 and at most 1,000,000"),
        ("sac", "target_entropy", -1e6, "at least -1,000,000 and at most 1,000,000"),
        ("sac", "target_entropy", 1e6, "at least -1,000,000 and at most 1,000,000"),
        ("td3", "exploration_noise", 10.0, "at least 0 and at most 10"),
        ("td3", "target_policy_noise", 10.0, "at least 0 and at most 10"),
        ("ddpg", "target_noise_clip", 10.0, "at least 0 and at most 10"),
        ("ddpg", "critic_learning_rate", 1e6, "more than 0 and at most 1,000,000"),
        ("direct", "max_grad_norm", 1e6, "more than 0 and at most 1,000,000"),
    ],
)
def test_a_limit_is_accepted_and_a_value_past_it_is_refused_saying_the_range(algo, name, limit, says):
    config_cls = ALGORITHMS[algo][1]
    assert getattr(config_cls.from_dict({name: limit}), name) == limit
    with pytest.raises(ConfigError) as err:
        config_cls.from_dict({name: limit * 1.5})
    assert err.value.details["field"] == f"{algo}.{name}"
    assert err.value.message.startswith(f"{algo}.{name} must be {says}, got ")


def test_the_lower_bounds_still_say_what_they_said():
    with pytest.raises(ConfigError, match=r"^ppo\.learning_rate must be > 0, got -1\.0$"):
        ALGORITHMS["ppo"][1].from_dict({"learning_rate": -1})
    with pytest.raises(ConfigError, match=r"^ppo\.ent_coef must be >= 0, got -0\.1$"):
        ALGORITHMS["ppo"][1].from_dict({"ent_coef": -0.1})


def test_the_first_out_of_range_field_is_the_one_named():
    """Each upper bound is checked beside its field's lower one, in the order of ``validate``."""
    with pytest.raises(ConfigError) as err:
        ALGORITHMS["ppo"][1].from_dict({"ent_coef": 1e300, "vf_coef": -1.0})
    assert err.value.details["field"] == "ppo.ent_coef"


def test_weight_decay_of_1e300_is_refused_before_it_reaches_adamw():
    with pytest.raises(ConfigError) as err:
        DirectConfig.from_dict({"weight_decay": 1e300})
    assert err.value.message == "direct.weight_decay must be at least 0 and at most 1,000,000, got 1e+300"


@pytest.mark.parametrize(
    ("learning_rate", "weight_decay", "step"),
    [(3e-3, 500.0, "0.003 x 500 = 1.5"), (1e-3, 1000.0, "0.001 x 1,000 = 1"), (3e-3, 1e6, "0.003 x 1,000,000 = 3000")],
)
def test_a_decay_step_that_would_zero_or_flip_every_weight_is_refused_naming_weight_decay(
    learning_rate, weight_decay, step
):
    with pytest.raises(ConfigError) as err:
        DirectConfig.from_dict({"learning_rate": learning_rate, "weight_decay": weight_decay})
    assert err.value.details["field"] == "direct.weight_decay"
    assert f"learning_rate x weight_decay = {step} must be below 1" in err.value.message
    assert f"lower weight_decay below {1 / learning_rate:g}" in err.value.message


def test_a_strong_decay_below_one_step_still_trains():
    assert DirectConfig.from_dict({"weight_decay": 300.0}).weight_decay == 300.0  # 0.9 of each weight a step
    assert DirectConfig.from_dict({"learning_rate": 1e-6, "weight_decay": 5e5}).weight_decay == 5e5
    assert DirectConfig.from_dict({"learning_rate": 1e6, "weight_decay": 0.0}).learning_rate == 1e6  # no decay
    with pytest.raises(ConfigError, match=r"^direct\.learning_rate must be more than 0 and at most 1,000,000, got"):
        DirectConfig.from_dict({"learning_rate": 1.5e6, "weight_decay": 0.0})
