"""Bad input to ``python -m trainer`` found by a new user: impossible dates, inverted ranges,
seeds and counts out of range, generations smaller than a rollout, absurd penalties and tickers
listed twice are each one ``error: <field>: ...`` line with exit status 2, no traceback and no
output folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.cli.main import main
from trainer.errors import ConfigError
from trainer.task import validate_hyperparameters

REPO = Path(__file__).resolve().parents[3]
TINY = [
    "--tickers", "AAPL,MSFT",
    "--env-steps", "512",
    "--num-envs", "32",
    "--hp", "rollout_steps=8",
    "--hp", "num_minibatches=2",
    "--hp", "hidden_sizes=[32, 32]",
]  # fmt: skip


@pytest.fixture(scope="module")
def bundle(data_dir, tmp_path_factory) -> str:
    """A tiny PPO agent's bundle, trained on the real Dow 30 file."""
    out = tmp_path_factory.mktemp("run")
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", "train", "--data-dir", str(data_dir), "--out", str(out), "--json", *TINY],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["bundle"]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.strip()


def _usage_error(argv: list[str], capsys) -> str:
    """The one line of an argument argparse refuses (it exits 2)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return _one_error(capsys)


@pytest.mark.parametrize(
    ("dates", "says"),
    [
        (["--start", "2021-02-30", "--end", "2021-06-01"], "error: start: '2021-02-30' is not a calendar date"),
        (["--start", "2021-13-01", "--end", "2021-06-01"], "error: start: '2021-13-01' is not a calendar date"),
        (["--start", "2021-01-04", "--end", "2021-06-31"], "error: end: '2021-06-31' is not a calendar date"),
        (["--start", "garbage", "--end", "2021-06-01"], "error: start: 'garbage' is not a YYYY-MM-DD date"),
        (["--end", "2021-02-29"], "error: end: '2021-02-29' is not a calendar date"),
        (["--start", "2021-06-01", "--end", "2021-01-04"], "error: end: 2021-01-04 must be after start 2021-06-01"),
        (["--start", "2021-06-01", "--end", "2021-06-01"], "error: end: 2021-06-01 must be after start 2021-06-01"),
        (
            ["--end", "2020-06-01"],
            "error: end: 2020-06-01 must be after start 2021-01-01 (the test split's start; pass --start to choose "
            "another)",
        ),
        (
            ["--start", "2023-01-02"],
            "error: start: 2023-01-02 must be before end 2022-11-15 (the test split's end; pass --end to choose "
            "another)",
        ),
        (  # a bound left out comes from the split --split names, not from the test split
            ["--split", "validation", "--end", "2019-06-03"],
            "error: end: 2019-06-03 must be after start 2020-01-01 (the validation split's start; pass --start to "
            "choose another)",
        ),
        (
            ["--split", "validation", "--start", "2021-03-01"],
            "error: start: 2021-03-01 must be before end 2020-12-31 (the validation split's end; pass --end to "
            "choose another)",
        ),
        # an empty bound is an error, not the --split split's bound (it evaluated the test split)
        (["--start", "", "--end", ""], "error: start: '' is not a YYYY-MM-DD date"),
        (["--start", "2021-01-04", "--end", ""], "error: end: '' is not a YYYY-MM-DD date"),
        (["--end", ""], "error: end: '' is not a YYYY-MM-DD date"),
        (["--start", "2021-01-04 10:00", "--end", "2021-06-01"], "error: start: 2021-01-04 10:00 has a time of day"),
        (["--start", "2021-01-04", "--end", "2021-06-01 15:00"], "error: end: 2021-06-01 15:00 has a time of day"),
    ],
)
def test_evaluate_refuses_impossible_or_inverted_dates_naming_start_or_end(bundle, data_dir, dates, says, capsys):
    """A bound left out is the --split split's (the test split's by default), and an inverted range says so (it used to read as if
    the user had typed 2021-01-01) and names the bound the user gave."""
    assert main(["evaluate", bundle, "--data-dir", str(data_dir), *dates]) == 2
    assert _one_error(capsys).startswith(says)


@pytest.mark.parametrize("split", ["train", "validation", "test"])
@pytest.mark.parametrize(
    ("bounds", "bad", "says"),
    [
        (["2016-01-01", "2016-13-30"], "end", "'2016-13-30' is not a calendar date"),
        (["2016-01-01", "garbage"], "end", "'garbage' is not a YYYY-MM-DD date"),
        (["2016-02-30", "2016-06-30"], "start", "'2016-02-30' is not a calendar date"),
        (["", "2016-06-30"], "start", "'' is not a YYYY-MM-DD date"),
        (["2016-01-01", ""], "end", "'' is not a YYYY-MM-DD date"),
    ],
)
def test_a_bad_split_bound_on_the_command_line_names_its_split(data_dir, tmp_path, split, bounds, bad, says, capsys):
    out = tmp_path / "run"
    argv = ["train", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(out), f"--{split}", *bounds]
    assert main(argv) == 2
    assert _one_error(capsys).startswith(f"error: {split}.{bad}: {says}")  # not data.end
    assert not out.exists()


@pytest.mark.parametrize("command", ["train", "walk-forward"])
@pytest.mark.parametrize("seed", ["-1", "2147483648", "99999999999999999999"])
def test_a_seed_outside_the_web_s_bound_is_refused_naming_seed_and_the_range(command, seed, capsys):
    argv = [command, "--seed", seed]
    if command == "walk-forward":
        argv += ["--start", "2010-01-01", "--end", "2022-11-15", "--first-test-year", "2016"]
    err = _usage_error(argv, capsys)
    assert err.startswith(f"error: argument --seed: {seed} must be at least 0 and at most 2,147,483,647")


def test_the_largest_seed_is_accepted_and_is_the_web_s_bound():
    from trainer.util.bounds import SEED

    assert SEED.error(2**31 - 1) is None and SEED.error(2**31) and SEED.error(-1)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["train", "--generations", "100000"], "error: argument --generations: '100000' is more than 10,000"),
        (["train", "--generations", "1e30"], "error: argument --generations: '1e30' is more than 10,000"),
        (["train", "--generations", "-3"], "error: argument --generations: '-3' must be a whole number >= 1"),
        (["train", "--num-envs", "-2"], "error: argument --num-envs: '-2' must be a whole number >= 1"),
        (["train", "--env-steps", "99999999999999999999"], "error: argument --env-steps: '99999999999999999999' is"),
        (
            ["walk-forward", "--start", "2010-01-01", "--end", "2022-11-15", "--first-test-year", "2016",
             "--candidates", "1e30"],
            "error: argument --candidates: '1e30' is more than 64 candidates",
        ),
    ],
)  # fmt: skip
def test_counts_that_are_negative_or_huge_are_refused_by_their_flag(argv, says, capsys):
    assert _usage_error(argv, capsys).startswith(says)


def test_a_num_envs_above_the_algorithm_s_limit_names_the_hyperparameter(data_dir, tmp_path, capsys):
    argv = ["train", "--env", "portfolio", "--num-envs", "1e30", "--out", str(tmp_path / "run")]
    assert main([*argv, "--data-dir", str(data_dir)]) == 2
    assert _one_error(capsys).startswith("error: hyperparameters.num_envs: ")


@pytest.mark.parametrize(
    ("generations", "env_steps", "each", "fixes"),
    [
        ("10000", "21504", "2", "give --generations 1 or fewer or --env-steps 215,040,000 or more"),
        ("2", "21504", "10,752", "give --generations 1 or fewer or --env-steps 43,008 or more"),
        ("5", "100000", "20,000", "give --generations 4 or fewer or --env-steps 107,520 or more"),
    ],
)
def test_generations_smaller_than_a_rollout_name_generations_and_what_to_change(
    data_dir, tmp_path, generations, env_steps, each, fixes, capsys
):
    out = tmp_path / "run"
    argv = ["train", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(out)]
    assert main([*argv, "--generations", generations, "--env-steps", env_steps]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"error: --generations: {int(env_steps):,} env steps over {int(generations):,} generations")
    assert f"are {each} per generation, less than one rollout of direct (21,504 env steps)" in err
    assert err.endswith(fixes)
    assert not out.exists()


def test_too_few_env_steps_for_one_generation_still_name_env_steps(data_dir, tmp_path, capsys):
    argv = ["train", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(tmp_path / "run")]
    assert main([*argv, "--env-steps", "1000", "--generations", "5"]) == 2
    assert _one_error(capsys).startswith("error: env_steps: 1000 env steps are less than one rollout")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--hp", "variance_penalty=1e300"], "error: hyperparameters.variance_penalty: must be at least 0 and at most"),
        (["--hp", "tracking_penalty=1e7"], "error: hyperparameters.tracking_penalty: must be at least 0 and at most"),
        (["--hp", "turnover_penalty=-1"], "error: hyperparameters.turnover_penalty: must be at least 0 and at most"),
        (["--turnover-penalty", "1e300"], "error: env.turnover_penalty: must be at least 0 and at most 1,000,000"),
    ],
)
def test_an_absurd_penalty_is_refused_up_front_not_reported_as_a_divergence(data_dir, tmp_path, flags, says, capsys):
    """``variance_penalty=1e300`` used to train, overflow the first gradient and exit 1 blaming
    the learning rate; a penalty is now 0 to 1,000,000 (``trainer.util.bounds.MAX_PENALTY``)."""
    out = tmp_path / "run"
    argv = ["train", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(out), *flags]
    assert main(argv) == 2
    err = _one_error(capsys)
    assert err.startswith(says) and "1,000,000" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--env", "portfolio", "--hp", "weight_decay=1e300"],
            "error: hyperparameters.weight_decay: must be at least 0 and at most 1,000,000, got 1e+300",
        ),
        (
            ["--env", "portfolio", "--hp", "weight_decay=1000"],
            "error: hyperparameters.weight_decay: learning_rate x weight_decay = 0.003 x 1,000 = 3 must be below 1",
        ),
        (
            ["--hp", "reward_scale=1e300"],
            "error: hyperparameters.reward_scale: must be more than 0 and at most 1,000,000",
        ),
        (
            ["--algo", "td3", "--hp", "exploration_noise=1e300"],
            "error: hyperparameters.exploration_noise: must be at least 0 and at most 10, got 1e+300",
        ),
    ],
)
def test_an_absurd_coefficient_is_refused_up_front_naming_it(data_dir, tmp_path, flags, says, capsys):
    """``weight_decay=1e300`` trained into "DIRECT diverged at update 1: a parameter is NaN;
    learning_rate=0.003" (exit 1, blaming the learning rate), 1000 into an agent that held 1/N,
    PPO's ``reward_scale=1e300`` into a divergence and TD3's ``exploration_noise=1e300`` into a
    traceback; each coefficient now has an upper bound (``trainer.util.bounds``)."""
    out = tmp_path / "run"
    assert main(["train", "--data-dir", str(data_dir), "--out", str(out), *flags]) == 2
    assert _one_error(capsys).startswith(says)
    assert not out.exists()


def test_the_largest_penalty_is_accepted():
    hp = validate_hyperparameters(
        "direct", {"variance_penalty": 1e6, "tracking_penalty": 1e6, "turnover_penalty": 1e6, "weight_decay": 0.5}
    )
    assert hp["variance_penalty"] == 1e6
    with pytest.raises(ConfigError, match="variance_penalty"):
        validate_hyperparameters("direct", {"variance_penalty": 1.5e6})


@pytest.mark.parametrize(
    ("tickers", "says"),
    [
        ("AAPL,AAPL,MSFT", "error: tickers: AAPL is listed twice; list each ticker once"),
        ("aapl,MSFT,AAPL,aapl", "error: tickers: AAPL is listed 3 times; list each ticker once"),
        ("AAPL,MSFT,msft,AAPL", "error: tickers: AAPL, MSFT are each listed more than once; list each ticker once"),
    ],
)
def test_a_ticker_listed_twice_is_refused_naming_it(data_dir, tmp_path, tickers, says, capsys):
    out = tmp_path / "run"
    argv = ["train", "--env", "portfolio", "--data-dir", str(data_dir), "--out", str(out), "--tickers", tickers]
    assert main(argv) == 2
    assert _one_error(capsys) == says
    assert not out.exists()


def test_a_task_file_listing_a_ticker_twice_names_data_tickers(data_dir, tmp_path, capsys):
    task = tmp_path / "task.yaml"
    task.write_text(
        "data: {paths: [dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz], tickers: [AAPL, MSFT, AAPL]}\n"
        "train: [2010-01-01, 2019-12-31]\nvalidation: [2020-01-01, 2020-12-31]\ntest: [2021-01-01, 2022-11-15]\n"
        "kind: portfolio\n"
    )
    assert main(["train", str(task), "--data-dir", str(data_dir), "--out", str(tmp_path / "run")]) == 2
    assert _one_error(capsys) == "error: data.tickers: AAPL is listed twice; list each ticker once"


def test_an_impossible_date_in_a_subprocess_is_one_line_without_a_traceback(bundle, data_dir):
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainer", "evaluate", bundle, "--data-dir", str(data_dir), "--start", "2021-02-30"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr == "error: start: '2021-02-30' is not a calendar date\n"
