"""``python -m trainer``: help, one-line errors with exit status 2, train/evaluate/export runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.cli.main import main
from trainer.util.files import sha256_file

REPO = Path(__file__).resolve().parents[3]
TINY = [
    "--tickers", "AAPL,MSFT",
    "--env-steps", "512",
    "--num-envs", "32",
    "--hp", "rollout_steps=8",
    "--hp", "num_minibatches=2",
    "--hp", "hidden_sizes=[32, 32]",
    "--hp", "learning_rate=3e-3",
]  # fmt: skip


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "trainer", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def tiny_run(data_dir, cache_dir, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("run")
    proc = run_cli(
        "train", "--data-dir", str(data_dir), "--cache-dir", str(cache_dir), "--out", str(out), "--json", *TINY
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_help_of_the_module_exits_zero():
    proc = run_cli("--help", timeout=120)
    assert proc.returncode == 0
    for command in ("train", "evaluate", "export"):
        assert command in proc.stdout


@pytest.mark.parametrize("command", ["train", "evaluate", "export"])
def test_help_of_each_command_exits_zero(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: python -m trainer " + command in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--env-steps", "-5"],
        ["train", "--num-envs", "lots"],
        ["train", "--bogus"],
        ["train", "--train", "2010-01-01"],
        ["train", "--hp", "no-equals-sign"],
        ["evaluate"],
        ["launch"],
    ],
)
def test_bad_arguments_exit_2_with_one_error_line(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["train", "walk-forward", "evaluate", "serve"])
def test_an_unknown_flag_points_at_the_help_of_its_own_command(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    # Missing required arguments are named first; either way the hint is the command's own help.
    assert "--bogus" in err or "required" in err
    assert f"(see python -m trainer {command} --help)" in err


@pytest.mark.parametrize("flag", ["--se", "--env-st", "--rebal"])
def test_an_abbreviated_flag_is_refused_not_read_as_the_flag_it_begins(flag, capsys):
    """``--se 3`` is not ``--seed 3``: an abbreviation would change meaning when a flag is added."""
    with pytest.raises(SystemExit) as info:
        main(["train", "--data", "x.csv", flag, "3"])
    assert info.value.code == 2
    assert f"unrecognized arguments: {flag} (see" in capsys.readouterr().err


def test_an_unknown_walk_forward_flag_is_named_with_the_walk_forward_help(capsys):
    argv = ["walk-forward", "--data", "x.csv", "--start", "2010-01-01", "--end", "2012-01-01"]
    with pytest.raises(SystemExit):
        main([*argv, "--first-test-year", "2011", "--bogus"])
    err = capsys.readouterr().err
    assert err == "error: unrecognized arguments: --bogus (see python -m trainer walk-forward --help)\n"


def test_a_missing_data_file_exits_2_with_one_line_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    assert main(["train", "--data", str(missing), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and str(missing) in err


def test_overlapping_splits_exit_2_naming_the_field(data_dir, tmp_path, capsys):
    code = main(
        ["train", "--data-dir", str(data_dir), "--validation", "2019-06-01", "2020-12-31", "--out", str(tmp_path)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: validation.start") and err.count("\n") == 1


def test_a_broken_task_file_exits_2_in_a_subprocess_without_a_traceback(tmp_path):
    task = tmp_path / "task.yaml"
    task.write_text("data: {paths: [x.csv]}\ntrain: [2010-01-01, 2019-12-31]\nhyperparameters: {learning_rate: -1}\n")
    proc = run_cli("train", str(task), timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("bin.csv", bytes(range(128, 256)) * 20, "not UTF-8 text"),
        ("deep.yaml", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
        ("deep.json", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        ("big.yaml", b"# " + b"x" * (1 << 20) + b"\n", "at most 1,048,576"),
    ],
)
def test_a_task_file_that_is_binary_too_deep_or_too_large_exits_2_naming_it(tmp_path, capsys, name, content, says):
    task = tmp_path / name
    task.write_bytes(content)
    assert main(["train", str(task), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: task file {task}: ") and says in err and err.count("\n") == 1


def test_an_out_folder_that_cannot_be_written_exits_2_before_any_training(tmp_path, capsys):
    """``--out`` naming a file used to fail after the whole training, on writing the checkpoint."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    assert main(["train", "--out", str(a_file)]) == 2
    assert capsys.readouterr().err == f"error: --out {a_file}: exists and is not a folder\n"


def test_env_steps_beyond_a_billion_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--env-steps", "1e30"])
    assert info.value.code == 2 and "more than 1,000,000,000 env steps" in capsys.readouterr().err


def test_tiny_train_run_writes_a_bundle_with_the_checkpoints_actions(tiny_run, data_dir):
    checkpoint, bundle = Path(tiny_run["checkpoint"]), Path(tiny_run["bundle"])
    assert sha256_file(checkpoint) == tiny_run["checkpoint_sha256"]
    assert sha256_file(bundle) == tiny_run["bundle_sha256"]
    assert tiny_run["env_steps"] >= 512 and np.isfinite(tiny_run["score"])
    state = load_checkpoint(checkpoint)
    assert state["observation_layout"]["tickers"] == ["AAPL", "MSFT"]
    assert state["score"] == tiny_run["score"]
    trained = build_agent(state)
    loaded = load_agent(bundle)
    obs = torch.randn(64, loaded.obs_dim) * 4  # normalised-space noise still exercises every weight
    np.testing.assert_array_equal(loaded.act(obs.numpy()), trained.act(obs, deterministic=True).numpy())


def test_train_output_lists_the_traded_tickers_and_every_data_note(tiny_run):
    data = tiny_run["data"]
    assert data["tickers"] == ["AAPL", "MSFT"] and data["num_tickers"] == 2
    assert data["start"] == "2010-01-04" and data["end"] == "2022-11-15"
    assert any("adjusted" in n for n in data["notes"])  # raw-vs-adjusted prices decision


def test_a_named_ticker_listed_after_the_train_start_exits_2_naming_it_and_the_range(data_dir, tmp_path, capsys):
    # DOW lists on 2019-03-20; the demo task trains from 2010
    argv = ["train", "--data-dir", str(data_dir), "--out", str(tmp_path), "--tickers", "AAPL,DOW", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ticker DOW does not cover the range 2010-01-01 to 2022-11-15")
    assert "2019-03-20 to 2022-11-15" in err and len(err.strip().splitlines()) == 1


def test_splits_on_the_command_line_set_the_data_range_so_a_later_listed_ticker_trains(
    data_dir, cache_dir, tmp_path, capsys
):
    # DOW lists on 2019-03-20: fine for splits from 2019-06-03, whatever the demo task's range.
    splits = ["--train", "2019-06-03", "2020-12-31", "--validation", "2021-01-04", "2021-06-30"]
    splits += ["--test", "2021-07-01", "2022-11-15"]
    tiny = [*TINY[2:], "--tickers", "AAPL,DOW", "--no-progress", "--json"]
    argv = ["train", "--data-dir", str(data_dir), "--cache-dir", str(cache_dir), "--out", str(tmp_path), *splits]
    assert main([*argv, *tiny]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)["data"]
    assert data["tickers"] == ["AAPL", "DOW"]
    assert data["start"] == "2019-06-03" and data["end"] == "2022-11-15"


def test_evaluate_gives_the_same_metrics_for_checkpoint_and_bundle(tiny_run, data_dir, cache_dir, capsys):
    common = ["--data-dir", str(data_dir), "--cache-dir", str(cache_dir), "--split", "validation", "--json"]
    assert main(["evaluate", tiny_run["checkpoint"], *common]) == 0
    from_checkpoint = json.loads(capsys.readouterr().out)
    assert main(["evaluate", tiny_run["bundle"], *common]) == 0
    from_bundle = json.loads(capsys.readouterr().out)
    assert from_checkpoint["metrics"] == from_bundle["metrics"]
    # the validation split is what the pod scored
    assert from_bundle["metrics"]["score"] == pytest.approx(tiny_run["score"], abs=1e-9)


def test_evaluate_json_has_vs_equal_weight_with_interval_and_verdict_against_both_one_over_n(
    tiny_run, data_dir, cache_dir, capsys
):
    common = ["--data-dir", str(data_dir), "--cache-dir", str(cache_dir), "--split", "test", "--json"]
    assert main(["evaluate", tiny_run["bundle"], *common]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    for key in ("vs_equal_weight", "vs_equal_weight_with_costs"):
        rel = metrics[key]
        for field in ("sharpe_difference", "p_value", "active_return_annual", "tracking_error", "information_ratio"):
            assert isinstance(rel[field], float), (key, field)
        low, high = rel["ci95"]
        assert low <= rel["sharpe_difference"] <= high and 0 < rel["p_value"] <= 1
        assert rel["verdict"] == ("beats" if low > 0 else "trails" if high < 0 else "indistinguishable")
        assert rel["reps"] == 2000 and rel["n_periods"] == metrics["num_days"]
    assert metrics["vs_equal_weight"]["benchmark"] == "1/N rebalanced daily, cost-free"
    # the fair 1/N pays the task's 0.1 % costs: it earns less than the cost-free one
    assert (
        metrics["vs_equal_weight_with_costs"]["baseline_total_return"]
        < metrics["vs_equal_weight"]["baseline_total_return"]
    )


def test_evaluate_prints_a_table_for_the_test_split(tiny_run, data_dir, cache_dir, capsys):
    assert main(["evaluate", tiny_run["bundle"], "--data-dir", str(data_dir), "--cache-dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "test 2021-01-04 to 2022-11-15, 2 tickers" in out
    # the data pipeline's decisions are printed: traded tickers and its notes (warm-up, adjustment)
    assert "data:       2 tickers traded (AAPL, MSFT)" in out
    assert "note:       " in out and "adjusted prices used" in out
    assert "Sharpe ratio" in out and "max drawdown" in out
    assert "vs 1/N with costs, same days" in out and "(95 % CI " in out


def test_evaluate_on_a_short_range_shows_annualised_figures_as_na_and_keeps_them_in_json(
    tiny_run, data_dir, cache_dir, capsys
):
    common = [
        "--data-dir",
        str(data_dir),
        "--cache-dir",
        str(cache_dir),
        "--start",
        "2021-01-04",
        "--end",
        "2021-02-12",
    ]
    assert main(["evaluate", tiny_run["bundle"], *common]) == 0
    lines = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines()}
    for label in ("annual return", "Sharpe ratio", "Sortino ratio", "Calmar ratio"):
        assert lines[label].endswith("n/a (window shorter than 63 days)"), lines[label]
    assert lines["total return"].endswith("%") and lines["mean daily return"].endswith("%")
    assert main(["evaluate", tiny_run["bundle"], *common, "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["short_window"] is True and metrics["sharpe_ratio"] is not None


def test_export_rebuilds_the_same_bundle(tiny_run, tmp_path, capsys):
    out = tmp_path / "again.zip"
    assert main(["export", tiny_run["checkpoint"], "--out", str(out)]) == 0
    assert tiny_run["bundle_sha256"] in capsys.readouterr().out
    assert sha256_file(out) == tiny_run["bundle_sha256"]


def test_evaluating_a_tampered_bundle_exits_2(tiny_run, tmp_path, capsys):
    bad = tmp_path / "bad.zip"
    data = Path(tiny_run["bundle"]).read_bytes()
    bad.write_bytes(data[:-200])
    assert main(["evaluate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bundle ") and str(bad) in err


@pytest.mark.slow
def test_demo_task_trains_from_the_command_line_in_a_few_minutes(data_dir, cache_dir, tmp_path):
    """The Dow-30 demo task with PPO's defaults (1024 envs), on a CPU-sized budget."""
    proc = run_cli(
        "train", "--data-dir", str(data_dir), "--cache-dir", str(cache_dir), "--out", str(tmp_path),
        "--env-steps", "65536", "--generations", "2", "--json", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["generations"] == 2 and result["env_steps"] >= 65536
    agent = load_agent(result["bundle"])
    assert len(agent.tickers) == 29  # DOW (listed 2019) is dropped by the default policy
    assert agent.config["task"]["validation"] == {"start": "2020-01-01", "end": "2020-12-31"}
    second = load_checkpoint(tmp_path / "generation-002.pt")
    assert second["generation"] == 2 and second["total_env_steps"] == result["env_steps"]


@pytest.mark.parametrize(
    ("algo", "hp"),
    [
        ("a2c", ["--hp", "rollout_steps=4", "--hp", "hidden_sizes=[16]"]),
        ("td3", ["--hp", "hidden_sizes=[16]", "--hp", "learning_starts=64", "--hp", "batch_size=32"]),
        ("ddpg", ["--hp", "hidden_sizes=[16]", "--hp", "learning_starts=64", "--hp", "batch_size=32"]),
    ],
)
def test_train_with_each_new_algorithm_writes_a_bundle_whose_onnx_matches_the_checkpoint(
    algo, hp, data_dir, cache_dir, tmp_path, capsys
):
    args = ["train", "--algo", algo, "--data-dir", str(data_dir), "--cache-dir", str(cache_dir)]
    args += ["--out", str(tmp_path), "--json", "--tickers", "AAPL,MSFT", "--env-steps", "256", "--num-envs", "16"]
    assert main(args + hp) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    state = load_checkpoint(result["checkpoint"])
    assert state["algorithm"] == algo and state["hyperparameters"]["hidden_sizes"] == [16]
    loaded = load_agent(result["bundle"])
    assert loaded.algorithm == algo
    obs = torch.randn(8, loaded.obs_dim) * 4
    expected = build_agent(state).act(obs, deterministic=True).numpy()
    np.testing.assert_array_equal(loaded.act(obs.numpy()), expected)
    onnx_bytes = zipfile.ZipFile(result["bundle"]).read("policy.onnx")
    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"obs": obs.numpy()})[0], expected, atol=1e-5)


def test_train_env_portfolio_trains_a_portfolio_agent_and_evaluate_shows_baseline_relative_results(
    data_dir, tmp_path, capsys
):
    out = tmp_path / "run"
    common = ["--data-dir", str(data_dir)]
    code = main(
        ["train", "--env", "portfolio", "--algo", "ppo", "--reward", "excess_log_return", "--tickers", "AAPL,MSFT,KO"]
        + ["--env-steps", "2048", "--num-envs", "16", "--out", str(out), "--no-progress", *common]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "mean - 1 x std of the Sharpe ratios of 4 validation sub-windows" in printed
    assert "vs equal weight (1/N) on the same days" in printed
    from trainer.artifacts.bundle_reader import load_agent

    agent = load_agent(out / "agent.zip")
    assert agent.kind == "portfolio" and agent.action_dim == 4
    assert agent.config["env_config"]["reward"] == "excess_log_return"
    assert agent.config["env_config"]["rebalance_band"] == 0.01  # --env portfolio's default band
    assert main(["evaluate", str(out / "agent.zip"), *common]) == 0
    assert "excess total return" in capsys.readouterr().out
    # A stock-trading task refuses a portfolio reward by name.
    assert main(["train", "--reward", "log_return", "--tickers", "AAPL", "--out", str(tmp_path / "x"), *common]) == 2
    assert "env.reward" in capsys.readouterr().err


def test_train_turnover_options_reach_the_portfolio_env_and_are_refused_by_name(data_dir, tmp_path, capsys):
    common = ["--data-dir", str(data_dir), "--algo", "ppo", "--env-steps", "256", "--num-envs", "16", "--no-progress"]
    # stock trading has no band: refused by name before any training
    code = main(["train", "--rebalance-band", "0.01", "--tickers", "AAPL", "--out", str(tmp_path / "a"), *common])
    assert code == 2 and "env.rebalance_band" in capsys.readouterr().err
    # three tickers: 1/N = 1/3, so a band of 0.4 would never leave the initial cash
    args = ["train", "--env", "portfolio", "--tickers", "AAPL,MSFT,KO", "--rebalance-band", "0.4"]
    assert main(args + ["--out", str(tmp_path / "b"), *common]) == 2
    assert "env.rebalance_band" in capsys.readouterr().err
    assert main(args[:-1] + ["-0.1", "--out", str(tmp_path / "c"), *common]) == 2
    assert "env.rebalance_band" in capsys.readouterr().err
    args = ["train", "--env", "portfolio", "--tickers", "AAPL,MSFT,KO", "--turnover-penalty", "-1"]
    assert main(args + ["--out", str(tmp_path / "d"), *common]) == 2
    assert "env.turnover_penalty" in capsys.readouterr().err


def test_without_data_dir_or_its_variable_the_shared_folder_beside_the_checkout_is_read(monkeypatch, tmp_path):
    """The default ``--data-dir`` is ``<checkout>/../shared/data`` (not a folder inside the
    checkout): a user who cloned next to ``shared/`` trains without naming the data."""
    from trainer.cli import main as cli

    assert cli.SHARED_DATA_DIR == REPO.parent / "shared" / "data"
    monkeypatch.delenv("PADDOCK_DATA_DIR", raising=False)
    fake = tmp_path / "shared" / "data"
    monkeypatch.setattr(cli, "SHARED_DATA_DIR", fake)
    assert cli.default_data_dir() is None  # absent: relative paths resolve against the current folder
    fake.mkdir(parents=True)
    assert cli.default_data_dir() == str(fake)
