"""Diverged training fails loudly (issue 20): a NaN agent is never scored, saved, bundled or ranked.

Real Dow-30 data, real agents with an exploding learning rate; the CLI runs in a subprocess.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer.artifacts.bundle import export_bundle
from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint
from trainer.backtest.engine import run_backtest
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.errors import BundleError, Diverged, PolicyError
from trainer.evaluation import evaluate_policy
from trainer.pod import run_generation
from trainer.task import TaskSpec

REPO = Path(__file__).resolve().parents[2]
TICKERS = ["AAPL", "MSFT", "JPM"]
SMALL_PPO = {"num_envs": 32, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [32, 32]}
SMALL_SAC = {"num_envs": 16, "hidden_sizes": [32, 32], "batch_size": 64, "learning_starts": 64}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


def task_with(algorithm: str, hyperparameters: dict) -> TaskSpec:
    task = demo_task_dict()
    task["data"]["tickers"] = list(TICKERS)
    task["algorithm"] = algorithm
    task["hyperparameters"] = hyperparameters
    return TaskSpec.from_dict(task)


@pytest.fixture(scope="module")
def market(data_dir, tmp_path_factory):
    spec = task_with("ppo", SMALL_PPO)
    return load_market_data(spec.data, data_dir=data_dir, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def healthy(market, tmp_path_factory):
    """A healthy PPO generation: its checkpoint and result."""
    out = tmp_path_factory.mktemp("healthy") / "g1.pt"
    result = run_generation(task_with("ppo", SMALL_PPO), env_steps=1024, out_path=out, device="cpu", market_data=market)
    return result


# ---------------------------------------------------------------------------- training
def test_ppo_with_an_exploding_learning_rate_fails_the_generation_with_one_line(market, tmp_path):
    out = tmp_path / "g1.pt"
    task = task_with("ppo", {**SMALL_PPO, "learning_rate": 1000})
    points = []
    with pytest.raises(Diverged) as info:
        run_generation(task, env_steps=8192, out_path=out, device="cpu", market_data=market, telemetry=points.append)
    message = info.value.message
    assert re.fullmatch(r"PPO diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); learning_rate=1000", message)
    assert "\n" not in message
    details = info.value.details
    assert details["algorithm"] == "ppo" and details["hyperparameters"] == {"learning_rate": 1000.0}
    assert f"at update {details['update']}:" in message
    assert not out.exists()  # no checkpoint of a diverged agent
    # the non-finite number is recorded as such in the stats, not as a missing value
    assert details["stats"][details["quantity"]] == details["value"]
    assert details["stats"]["updates"] >= details["update"]
    json.dumps(info.value.to_dict(), allow_nan=False)  # JSON-able as is
    # the training curve got a point for the rollout that diverged (its NaN losses are gaps)
    assert points and points[-1]["generation_env_steps"] == details["stats"]["env_steps"]


def test_sac_with_an_exploding_learning_rate_fails_the_generation_with_one_line(market, tmp_path):
    out = tmp_path / "g1.pt"
    task = task_with("sac", {**SMALL_SAC, "actor_learning_rate": 1e6, "critic_learning_rate": 1e6})
    with pytest.raises(Diverged) as info:
        run_generation(task, env_steps=2048, out_path=out, device="cpu", market_data=market)
    assert re.fullmatch(
        r"SAC diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); actor_learning_rate=1e\+06, "
        r"critic_learning_rate=1e\+06, alpha_learning_rate=0.0003",
        info.value.message,
    )
    details = info.value.details
    assert details["stats"][details["quantity"]] == details["value"]
    assert not out.exists()


OFF_POLICY_SMALL = {"num_envs": 16, "hidden_sizes": [32, 32], "batch_size": 64, "learning_starts": 64}


@pytest.mark.parametrize(
    ("algorithm", "hyperparameters", "names"),
    [
        (
            "a2c",
            {"num_envs": 32, "rollout_steps": 8, "hidden_sizes": [32, 32], "learning_rate": 1e6},
            "learning_rate=1e\\+06",
        ),
        (
            "td3",
            {**OFF_POLICY_SMALL, "actor_learning_rate": 1e6, "critic_learning_rate": 1e6},
            "actor_learning_rate=1e\\+06, critic_learning_rate=1e\\+06",
        ),
        (
            "ddpg",
            {**OFF_POLICY_SMALL, "actor_learning_rate": 1e6, "critic_learning_rate": 1e6},
            "actor_learning_rate=1e\\+06, critic_learning_rate=1e\\+06",
        ),
    ],
)
def test_every_other_algorithm_fails_loudly_too(market, tmp_path, algorithm, hyperparameters, names):
    out = tmp_path / "g1.pt"
    with pytest.raises(Diverged) as info:
        run_generation(
            task_with(algorithm, hyperparameters), env_steps=2048, out_path=out, device="cpu", market_data=market
        )
    assert re.fullmatch(
        rf"{algorithm.upper()} diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); {names}", info.value.message
    )
    assert not out.exists()


def test_a_healthy_generation_records_losses_entropy_kl_and_gradient_norm(healthy):
    stats = healthy.stats
    for name in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm"):
        assert isinstance(stats[name], float) and math.isfinite(stats[name]), name
    assert load_checkpoint(healthy.checkpoint_path)["stats"]["grad_norm"] == stats["grad_norm"]


# ---------------------------------------------------------------------------- evaluation
def nan_policy(obs: torch.Tensor) -> torch.Tensor:
    return torch.full((obs.shape[0], len(TICKERS)), float("nan"))


def test_evaluation_refuses_a_policy_with_nan_actions_naming_it(market, healthy):
    validation = market.slice("2020-01-01", "2020-12-31")
    with pytest.raises(PolicyError, match=r"^agent 7 emits non-finite actions \(NaN\) on 2020-01-02"):
        evaluate_policy(nan_policy, validation, TaskSpec.from_dict(demo_task_dict()).env, policy_name="agent 7")


def test_backtest_refuses_a_policy_with_infinite_actions_naming_it(market):
    def inf_policy(obs: torch.Tensor) -> torch.Tensor:
        return torch.full((1, len(TICKERS)), float("inf"))

    with pytest.raises(PolicyError, match=r"^agent 9 emits non-finite actions \(infinite values\) on 2021-01-04"):
        run_backtest(inf_policy, market, start="2021-01-04", end="2021-03-31", policy_name="agent 9")


# ---------------------------------------------------------------------------- checkpoints
@pytest.fixture
def nan_checkpoint(healthy, tmp_path) -> Path:
    """The healthy checkpoint with one actor weight set to NaN (as an older Paddock saved them)."""
    state = load_checkpoint(healthy.checkpoint_path)
    weight = next(k for k in state["agent"]["actor"] if k.endswith("weight"))
    state["agent"]["actor"][weight][0, 0] = float("nan")
    path = tmp_path / "nan.pt"
    save_checkpoint(state, path)
    return path


def test_export_refuses_a_checkpoint_with_nan_parameters(nan_checkpoint, tmp_path, capsys):
    with pytest.raises(BundleError, match=r"holds NaN or infinite parameters \(actor\.mean\.0\.weight\)"):
        export_bundle(nan_checkpoint, tmp_path / "agent.zip")
    assert main(["export", str(nan_checkpoint), "--out", str(tmp_path / "agent.zip")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: checkpoint {nan_checkpoint}: the agent state holds NaN") and err.count("\n") == 1
    assert not (tmp_path / "agent.zip").exists()


def test_evaluate_command_refuses_a_checkpoint_with_nan_parameters(nan_checkpoint, data_dir, capsys):
    assert main(["evaluate", str(nan_checkpoint), "--data-dir", str(data_dir)]) == 2
    assert "holds NaN or infinite parameters" in capsys.readouterr().err


# ---------------------------------------------------------------------------- command line
def test_train_command_exits_1_with_the_line_and_json_reports_failed(data_dir, tmp_path):
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    out = tmp_path / "run"
    args = [
        "train", "--data-dir", str(data_dir), "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
        "--tickers", "AAPL,MSFT", "--env-steps", "65536", "--num-envs", "64", "--hp", "learning_rate=1000",
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", *args, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"error: PPO diverged at update \d+: [a-zA-Z ]+ is (NaN|inf|-inf); learning_rate=1000", line)
    report = json.loads(proc.stdout)
    assert report["status"] == "failed" and report["reason"] == line.removeprefix("error: ")
    assert report["diverged"]["hyperparameters"] == {"learning_rate": 1000.0}
    assert not list(out.glob("*.pt")) and not (out / "agent.zip").exists()  # no checkpoint, no bundle
