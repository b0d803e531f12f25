"""The portfolio dynamics flags of ``train`` and ``walk-forward``: ``--trade-rate``,
``--band-mode`` and ``--execution-lag`` reach the task's env (and its bundle); bad values exit 2
naming the flag."""

from __future__ import annotations

import pytest

from trainer.cli.inputs import task_from_args
from trainer.cli.main import build_parser, main
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.serving.answers import answer
from trainer.serving.policy import ServedPolicy


@pytest.mark.parametrize(
    "command",
    [["train"], ["walk-forward", "--start", "2010-01-01", "--end", "2019-12-31", "--first-test-year", "2018"]],
)
def test_the_flags_reach_the_portfolio_env(command):
    flags = ["--env", "portfolio", "--trade-rate", "0.25", "--band-mode", "edge", "--execution-lag", "1"]
    env = task_from_args(build_parser().parse_args([*command, *flags]))["env"]
    assert (env["trade_rate"], env["band_mode"], env["execution_lag"]) == (0.25, "edge", 1)
    left_out = task_from_args(build_parser().parse_args([*command, "--env", "portfolio"]))["env"]
    assert not {"trade_rate", "band_mode", "execution_lag"} & set(left_out)  # the env's defaults: today's rules


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--trade-rate", "0"), ("--trade-rate", "1.5"), ("--trade-rate", "nan"), ("--trade-rate", "x"),
     ("--band-mode", "middle"), ("--execution-lag", "2"), ("--execution-lag", "one")],
)  # fmt: skip
def test_bad_values_exit_2_naming_the_flag(flag, value, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--env", "portfolio", flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and flag in err and err.count("\n") == 1


def test_a_stock_trading_task_refuses_them_by_name(data_dir, tmp_path, capsys):
    code = main(
        ["train", "--trade-rate", "0.5", "--tickers", "AAPL", "--out", str(tmp_path), "--data-dir", str(data_dir)]
    )
    assert code == 2 and "env.trade_rate" in capsys.readouterr().err


@pytest.mark.slow  # trains a tiny agent (20-40 s on a shared core)
def test_a_trained_bundle_records_them_and_evaluates_with_them(data_dir, tmp_path, capsys):
    from trainer.artifacts.bundle_reader import load_agent

    out = tmp_path / "run"
    flags = ["--env", "portfolio", "--tickers", "AAPL,MSFT,KO", "--trade-rate", "0.5", "--band-mode", "edge"]
    flags += ["--algo", "ppo", "--execution-lag", "1", "--env-steps", "256", "--num-envs", "16", "--no-progress"]
    assert main(["train", *flags, "--out", str(out), "--data-dir", str(data_dir)]) == 0
    env = load_agent(out / "agent.zip").config["env_config"]
    assert (env["trade_rate"], env["band_mode"], env["execution_lag"]) == (0.5, "edge", 1)
    capsys.readouterr()
    assert main(["evaluate", str(out / "agent.zip"), "--data-dir", str(data_dir)]) == 0
    # serving trades as the env would: from all cash, half of the way to the band's lower edge
    policy = ServedPolicy.load(out / "agent.zip")
    market = load_market_data(DataSpec.from_dict(policy.config["task"]["data"]), data_dir=data_dir)
    answered = answer(policy, {"date": "2021-06-01"}, load_market=lambda: market)
    assert answered["execution_lag"] == 1 and answered["rebalance_band"] == 0.01
    for ticker in ("AAPL", "MSFT", "KO"):
        target = answered["target_weights"][ticker]
        assert target > 0.01 and answered["rebalanced_weights"][ticker] == pytest.approx(0.5 * (target - 0.01))
