"""The direct learner's challenger gate (trainer/agents/direct_gate.py): the unpenalised challenger
replaces the penalised default only where held-out train days show an edge, within the same budget."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from trainer.agents import make_agent
from trainer.agents.direct import DirectConfig
from trainer.agents.direct_gate import (
    HOLDOUT_FOLDS,
    HOLDOUT_FRACTION,
    HOLDOUT_GAP,
    MIN_HOLDOUT_DAYS,
    HoldoutSplit,
    challenger_verdict,
    gate_plan,
    gate_training_steps,
    holdout_splits,
)
from trainer.artifacts.bundle_reader import load_agent
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.envs.kinds import fit_stats, make_env, prepare_market
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.errors import ConfigError
from trainer.task import TaskSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from synthetic_market import generate, write_csv  # noqa: E402

SMALL = {"num_envs": 64, "rollout_steps": 10, "hidden_sizes": [8]}
START, END = "2010-01-04", "2015-12-31"


def synthetic_env(tmp_path: Path, ic: float):
    """A train-split env over a 6-year synthetic market of 6 tickers (the planted reversal of
    information coefficient ``ic``; 0 is the placebo)."""
    path = write_csv(generate(3, ic=ic, tickers=6, start=START, end=END), tmp_path / f"m{ic:g}.csv.gz")
    task = TaskSpec.from_dict(
        {
            "data": {"paths": [str(path)], "start": START, "end": END},
            "train": {"start": START, "end": "2014-06-20"},
            "validation": {"start": "2014-07-01", "end": "2014-12-31"},
            "test": {"start": "2015-01-02", "end": END},
            "kind": "portfolio",
            "algorithm": "direct",
            "env": {"rebalance_band": 0.01},
        }
    )
    market = prepare_market(
        load_market_data(DataSpec(paths=[str(path)], start=START, end=END), data_dir=None), task.env
    )
    train = market.slice(*task.train, name="train")
    return make_env(train, task.env, num_envs=1, feature_stats=fit_stats(train, task.env), state_info=False)


def learner(env, **changes):
    return make_agent("direct", env.obs_dim, env.action_dim, {**SMALL, **changes}, seed=0)


def test_the_folds_hold_out_the_split_tail_and_head_after_a_gap_and_are_absent_when_too_short():
    held = int(2516 * HOLDOUT_FRACTION)
    assert HOLDOUT_FRACTION == 0.35 and HOLDOUT_FOLDS == 2
    assert holdout_splits(2516, 21) == [
        HoldoutSplit(inner=(0, 2516 - held - HOLDOUT_GAP), held=(2516 - held, 2516)),  # the tail
        HoldoutSplit(inner=(held + HOLDOUT_GAP, 2516), held=(0, held)),  # the head, its mirror image
    ]
    need = math.ceil((MIN_HOLDOUT_DAYS + 1) / HOLDOUT_FRACTION)  # 363 days
    assert "needs about 363" in holdout_splits(need - 1, 21)  # a held-out span would be short of evidence
    assert isinstance(holdout_splits(need, 21), list)
    assert gate_plan(need, 21, 8) == holdout_splits(need, 21)
    assert "needs about 363" in gate_plan(need - 1, 21, 8)["skipped"]
    # long enough to hold out half a year, but the days beside it are shorter than a window
    assert gate_plan(500, 400, 8) == {
        "skipped": "the 320 days beside the held-out span are fewer than a window of 400 + 1"
    }
    assert gate_plan(2516, 21, 7) == {"skipped": "7 gradient step(s) this generation; the gate needs 8"}


def test_one_fold_holds_out_only_the_tail(monkeypatch):
    monkeypatch.setattr("trainer.agents.direct_gate.HOLDOUT_FOLDS", 1)
    monkeypatch.setattr("trainer.agents.direct_gate.GATE_SHARE", 2 / 3)  # rule 4c's gate: a third each
    held = int(2516 * HOLDOUT_FRACTION)
    assert holdout_splits(2516, 21) == [HoldoutSplit(inner=(0, 2516 - held - HOLDOUT_GAP), held=(2516 - held, 2516))]
    assert gate_plan(2516, 21, 3) == holdout_splits(2516, 21)
    assert gate_plan(2516, 21, 2)["skipped"].endswith("the gate needs 3")
    assert gate_training_steps(30, 1) == 10 and gate_training_steps(30, 2) == 5


def test_the_verdict_keeps_a_challenger_only_on_evidence_that_it_beats_the_anchor():
    rng = np.random.default_rng(0)
    anchor = rng.normal(3e-4, 0.01, 1000)
    edge = anchor + rng.normal(2e-3, 0.004, 1000)  # a large, steady gain
    noise = anchor + rng.normal(0.0, 0.004, 1000)  # nothing but noise beside the anchor
    kept = challenger_verdict(edge, anchor, alpha=0.05, seed=0)
    assert kept["kept"] and kept["p_value"] <= 0.05 and kept["sharpe_difference"] > 0
    assert kept["holdout_days"] == 1000
    assert not challenger_verdict(noise, anchor, alpha=0.05, seed=0)["kept"]
    assert not challenger_verdict(anchor - (edge - anchor), anchor, alpha=0.05, seed=0)["kept"]  # worse
    assert not challenger_verdict(edge, anchor, alpha=1e-9, seed=0)["kept"]  # a level nothing can reach


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"challenger_alpha": 0.6}, "direct.challenger_alpha"),
        ({"challenger_alpha": -0.01}, "direct.challenger_alpha"),
        ({"challenger_kappa": 0.0}, "direct.challenger_kappa"),
        ({"challenger_kappa": float("nan")}, "direct.challenger_kappa"),
        ({"challenger_kappa": float("inf")}, "direct.challenger_kappa"),
    ],
)
def test_bad_gate_settings_name_their_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DirectConfig.from_dict(changes)
    assert err.value.details["field"] == field


@pytest.mark.parametrize("value", ["0.1", None, True, [0.1]])
def test_a_gate_setting_that_is_not_a_number_is_refused_when_built_directly(value):
    for name in ("challenger_alpha", "challenger_kappa"):
        with pytest.raises(ConfigError) as err:
            DirectConfig(**{name: value}).validate()
        assert err.value.details["field"] == f"direct.{name}" and "number" in err.value.message


def test_a_challenger_tilt_beyond_the_env_is_refused_only_when_the_gate_is_on():
    env = PortfolioConfig()
    with pytest.raises(ConfigError) as err:
        DirectConfig(challenger_kappa=env.logit_scale).check_task(kind="portfolio", env=env, num_tickers=6)
    assert err.value.details["field"] == "direct.challenger_kappa"
    DirectConfig(challenger_kappa=env.logit_scale, challenger_alpha=0.0).check_task(
        kind="portfolio", env=env, num_tickers=6
    )
    assert "default" not in err.value.message  # the user set this one


def test_a_default_challenger_tilt_beyond_a_smaller_logit_scale_says_it_is_the_default():
    env = PortfolioConfig(logit_scale=3.0)  # the default challenger_kappa 2 needs logit_scale >= 4
    with pytest.raises(ConfigError) as err:
        DirectConfig().check_task(kind="portfolio", env=env, num_tickers=6)
    message = err.value.message
    assert err.value.details["field"] == "direct.challenger_kappa"
    assert "at its default 2" in message and "challenger_alpha=0" in message, message
    DirectConfig(challenger_kappa=1.5).check_task(kind="portfolio", env=env, num_tickers=6)


def test_a_planted_edge_opens_the_gate_within_the_generation_budget(tmp_path):
    env = synthetic_env(tmp_path, ic=0.3)
    agent = learner(env)
    stats = agent.learn(env, 30 * 64 * 10)
    verdict = stats["challenger"]
    assert verdict["kept"], verdict
    days = env.market_tensors()[1].shape[0]
    held = int(days * HOLDOUT_FRACTION)
    assert verdict["holdout_days"] == 2 * (held - 1)  # the tail's and the head's returns, a span's last row unused
    assert [f["held"] for f in verdict["folds"]] == [[days - held, days], [0, held]]
    assert all(f["sharpe_difference"] > 0 for f in verdict["folds"]), verdict["folds"]
    # the challenger's settings are now the agent's, and the question is not asked again
    assert agent.config.turnover_penalty == 0 and agent.config.tracking_penalty == 0
    assert agent.config.kappa == agent.config.challenger_kappa and agent.config.challenger_alpha == 0
    assert agent.policy.kappa == agent.config.kappa
    # one budget: half of it, 3 gradient steps each, for the two folds' anchor and challenger; 18 on the whole split
    assert stats["updates"] == 30 and stats["env_steps"] == 30 * 64 * 10
    assert "challenger" not in agent.learn(env, 3 * 64 * 10)


def test_the_placebo_keeps_the_penalised_anchor_when_closed_gates_train(tmp_path, monkeypatch):
    monkeypatch.setattr("trainer.agents.direct_gate.CLOSED_GATE", "train")  # rule 4d's closed gate
    env = synthetic_env(tmp_path, ic=0.0)
    agent = learner(env)
    before = agent.config
    stats = agent.learn(env, 30 * 64 * 10)
    assert not stats["challenger"]["kept"], stats["challenger"]
    assert agent.config == before.replace(challenger_alpha=0.0) and agent.policy.kappa == before.kappa
    assert stats["updates"] == 30
    assert "challenger" not in agent.learn(env, 3 * 64 * 10)  # asked once per line


def test_a_learner_with_the_gate_off_or_too_few_steps_trains_the_anchor_alone(tmp_path):
    env = synthetic_env(tmp_path, ic=0.3)
    assert "challenger" not in learner(env, challenger_alpha=0.0).learn(env, 30 * 64 * 10)
    # under eight steps (one each for four trainings, half the budget): no phases, and the stats say why
    assert learner(env).learn(env, 7 * 64 * 10)["challenger"] == {
        "skipped": "7 gradient step(s) this generation; the gate needs 8"
    }


def test_a_train_split_too_short_to_hold_out_half_a_year_says_so_in_the_stats_and_the_cli(tmp_path, capsys):
    path = write_csv(generate(3, ic=0.3, tickers=6, start=START, end=END), tmp_path / "short.csv.gz")
    args = ["train", "--env", "portfolio", "--data", str(path), "--out", str(tmp_path / "out")]
    args += ["--train", "2012-07-02", "2013-06-28", "--validation", "2013-07-08", "2013-12-31"]
    args += ["--test", "2014-01-08", "2014-06-30", "--env-steps", str(3 * 64 * 10), "--no-progress"]
    args += [f"--hp={k}={v}" for k, v in {"num_envs": 64, "rollout_steps": 10, "hidden_sizes": "[8]"}.items()]
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("gate:"))
    assert line.startswith("gate:       skipped, the penalised learner (near 1/N) trained alone: a train split of ")
    assert f"too short to hold out {MIN_HOLDOUT_DAYS} days (needs about 363)" in line, line


def test_a_stop_during_the_challenger_phase_leaves_the_anchor(tmp_path):
    env = synthetic_env(tmp_path, ic=0.3)
    agent = learner(env)
    before = agent.config
    polls = iter(range(1000))
    # 3 steps each: fold 1's anchor and challenger, fold 2's anchor, then a stop in fold 2's challenger
    stats = agent.learn(env, 30 * 64 * 10, should_stop=lambda: next(polls) >= 10)
    assert stats["cancelled"] and "challenger" not in stats
    assert agent.config == before and agent.policy.kappa == before.kappa
    assert stats["updates"] == 10


def test_the_cli_prints_the_gate_verdict_and_puts_it_in_the_json(tmp_path, capsys):
    path = write_csv(generate(3, ic=0.3, tickers=6, start=START, end=END), tmp_path / "planted.csv.gz")
    args = ["train", "--env", "portfolio", "--data", str(path)]
    args += ["--train", START, "2014-06-20", "--validation", "2014-07-01", "2014-12-31", "--test", "2015-01-02", END]
    args += ["--env-steps", str(30 * 64 * 10), "--no-progress"]
    args += [f"--hp={k}={v}" for k, v in {"num_envs": 64, "rollout_steps": 10, "hidden_sizes": "[8]"}.items()]
    assert main([*args, "--out", str(tmp_path / "text")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("gate:"))
    assert "open, challenger kept" in line and "one-sided p" in line and "(level 0.05)" in line, line
    assert " in 2 folds (tail +" in line and ", head +" in line, line
    assert main([*args, "--out", str(tmp_path / "json"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["challenger"]["kept"] and summary["challenger"]["p_value"] <= 0.05
    # the bundle of the kept challenger acts with its own settings
    assert load_agent(tmp_path / "json" / "agent.zip").config["hyperparameters"]["turnover_penalty"] == 0.0
