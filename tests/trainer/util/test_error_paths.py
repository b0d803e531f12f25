"""An error's field path moves structurally: ``TrainerError.under`` re-roots it and rebuilds
the message from the reason, and ``reprefix`` puts a nested config's error under its place in
the task spec, whatever the nested message looked like."""

from __future__ import annotations

from trainer.errors import ConfigError, DataError, error_summary
from trainer.task import reprefix, validate_hyperparameters


def test_under_renames_the_field_and_rebuilds_the_message_keeping_type_and_details():
    moved = DataError("train.end: 2010 is before train.start", field="train.end", file="a.csv").under(
        "splits.train.end"
    )
    assert isinstance(moved, DataError)
    assert moved.message == "splits.train.end: 2010 is before train.start"
    assert moved.details == {"field": "splits.train.end", "file": "a.csv"}


def test_reason_drops_a_leading_name_only():
    assert ConfigError("ppo.gamma must be in (0, 1], got 2", field="ppo.gamma").reason == "must be in (0, 1], got 2"
    assert ConfigError("factors must be positive", field="factors[0]").reason == "factors must be positive"


def test_reprefix_swaps_the_algorithms_own_prefix_for_the_specs():
    try:
        validate_hyperparameters("ppo", {"gamma": 2})
    except ConfigError as exc:
        assert exc.details["field"] == "hyperparameters.gamma"
        assert exc.message.startswith("hyperparameters.gamma: ")
        assert "ppo." not in exc.message
    else:  # pragma: no cover - the value is out of range
        raise AssertionError("gamma 2 was accepted")
    inner = ConfigError("env.hmax: must be at least 1, got 0", field="env.hmax")
    assert reprefix(inner, "env") is inner
    assert reprefix(ConfigError("paths: none given", field="paths"), "data").message == "data.paths: none given"


def test_error_summary_is_the_first_line_cut_to_300_characters():
    assert error_summary(ValueError("first\nsecond")) == "first"
    assert error_summary(ValueError("x" * 400)) == "x" * 300
    assert error_summary(KeyError()) == "KeyError"
