"""``python -m trainer``: the baselines next to every score (equal weight, QQQ from the benchmark
file, the untrained policy, the best agent's DSR), in text and ``--json``; short windows; an
empty ``--tickers``. Real Dow-30 data and the real benchmark file, tiny budgets."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
import torch

from trainer.artifacts.checkpoints import load_checkpoint
from trainer.cli.main import main

TINY = [
    "--env", "portfolio",
    "--algo", "ppo",
    "--tickers", "AAPL,MSFT,KO",
    "--env-steps", "512",
    "--generations", "2",
    "--num-envs", "16",
    "--hp", "rollout_steps=8",
    "--hp", "hidden_sizes=[16]",
    "--no-progress",
]  # fmt: skip
SHORT = "n/a (window shorter than 63 days)"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


def rows(text: str) -> dict[str, str]:
    """label -> value of a two-column table (labels repeat under each baseline: the last wins)."""
    lines = [line for line in text.splitlines() if not line.startswith(("data:", "note:", "agent.zip"))]
    width = max(len(line.split("  ")[0]) for line in lines)
    return {line[:width].strip(): line[width:].strip() for line in lines}


def qqq_total_return(data_dir: Path, first: str, last: str) -> float:
    """QQQ's adjusted-close total return from ``first`` to ``last`` (read here with pandas)."""
    frame = pd.read_csv(data_dir / "benchmark_etfs_daily_eodhd.csv.gz")
    close = frame[frame["tic"] == "QQQ"].set_index("date")["adj_close"]
    return float(close[last] / close[first] - 1.0)


@pytest.fixture(scope="module")
def run_json(data_dir, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("run")
    code, text = run("train", *TINY, "--data-dir", str(data_dir), "--out", str(out), "--json")
    assert code == 0
    return json.loads(text)


def test_train_json_has_the_validation_sharpe_and_every_baseline(run_json, data_dir):
    best = load_checkpoint(run_json["checkpoint"])
    m = best["metrics"]
    assert run_json["validation_sharpe_ratio"] == m["sharpe_ratio"] is not None
    assert run_json["short_window"] is False
    ew = run_json["vs_equal_weight"]
    assert ew["excess_return"] == pytest.approx(run_json["validation_total_return"] - ew["baseline_total_return"])
    qqq = run_json["vs_QQQ"]
    assert run_json["benchmark"]["shown"] is True and run_json["benchmark"]["note"] is None
    # validation 2020: from the close of 2020-01-02 (the first day) to that of 2020-12-31
    assert qqq["baseline_total_return"] == pytest.approx(qqq_total_return(data_dir, "2020-01-02", "2020-12-31"))
    assert qqq["sharpe_difference"] == pytest.approx(m["sharpe_ratio"] - qqq["baseline_sharpe"])
    # the line's untrained policy, evaluated before generation 1 with its seed
    assert run_json["untrained"] == m["untrained"] and run_json["untrained"]["seed"] == 0


def test_train_dsr_deflates_the_best_of_the_generations_evaluated(run_json):
    sharpes = [load_checkpoint(Path(run_json["checkpoint"]).parent / f"generation-00{g}.pt") for g in (1, 2)]
    annual = [s["metrics"]["sharpe_ratio"] for s in sharpes]
    best = load_checkpoint(run_json["checkpoint"])["metrics"]
    assert run_json["deflated_sharpe_ratio_trials"] == 2
    # Bailey & Lopez de Prado 2014, eq. 2, per-day Sharpe ratios, normal returns
    sr, var, t = best["sharpe_ratio"] / math.sqrt(252), np.var(annual, ddof=1) / 252, best["num_days"]
    z = NormalDist().inv_cdf
    gamma = 0.5772156649015329
    sr0 = math.sqrt(var) * ((1 - gamma) * z(1 - 1 / 2) + gamma * z(1 - 1 / (2 * math.e)))
    expected = NormalDist().cdf((sr - sr0) * math.sqrt(t - 1) / math.sqrt(1 + 0.5 * sr * sr))
    assert run_json["deflated_sharpe_ratio"] == pytest.approx(expected, abs=1e-9)


def test_train_text_prints_qqq_the_untrained_policy_and_the_dsr_next_to_equal_weight(data_dir, tmp_path):
    code, text = run("train", *TINY, "--data-dir", str(data_dir), "--out", str(tmp_path))
    assert code == 0
    lines = {line.split(":")[0]: line for line in text.splitlines()}
    assert "Sharpe difference" in lines["vs equal weight (1/N) on the same days"]
    qqq = lines["vs QQQ on the same days"]
    assert "Sharpe difference" in qqq and "total return 4" in qqq  # QQQ gained 4x % in 2020
    assert "score" in lines["untrained policy on the same days"]
    assert "N = 2 generation(s) evaluated" in lines["DSR"]
    assert "4 validation sub-windows" in lines["score"]


def test_evaluate_names_the_split_and_shows_qqq_and_the_untrained_policy(run_json, data_dir):
    code, text = run("evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--split", "test")
    assert code == 0
    table = rows(text)
    assert table["score"].endswith("(mean - 1 x std of the Sharpe ratios of 4 test sub-windows)")
    assert "validation" not in table["score"]
    for label in ("vs equal weight (1/N), same days", "vs QQQ, same days", "QQQ total return", "QQQ Sharpe ratio"):
        assert label in table
    assert table["untrained policy, same days"] == "fresh PPO agent, seed 0"
    code, text = run("evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--split", "test", "--json")
    m = json.loads(text)["metrics"]
    assert m["selection"]["description"].endswith("4 test sub-windows")
    # test 2021-01-01..2022-11-15: from the close of 2021-01-04 (the first day) to 2022-11-15
    assert m["vs_QQQ"]["baseline_total_return"] == pytest.approx(qqq_total_return(data_dir, "2021-01-04", "2022-11-15"))
    assert table["QQQ total return"] == f"{100 * m['vs_QQQ']['baseline_total_return']:.2f} %"
    assert set(m["untrained"]) >= {"score", "sharpe_ratio", "total_return", "seed", "algorithm"}


def test_evaluate_on_validation_rebuilds_the_untrained_policy_the_training_scored(run_json, data_dir):
    # the best is generation 2 (seed 1) or 1: either way its line started from seed 0's policy
    code, text = run("evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--split", "validation", "--json")
    assert code == 0
    untrained = json.loads(text)["metrics"]["untrained"]
    for key in ("score", "sharpe_ratio", "total_return"):
        assert untrained[key] == pytest.approx(run_json["untrained"][key], abs=1e-12)


def test_every_sharpe_based_figure_of_a_short_window_is_na_with_the_reason(run_json, data_dir):
    code, text = run("evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--start", "2022-10-03")
    assert code == 0
    lines = [line for line in text.splitlines() if not line.startswith("score")]
    sharpe_rows = [line for line in lines if "Sharpe" in line and "daily Sharpe" not in line]
    assert len(sharpe_rows) >= 6  # agent, 1/N and QQQ Sharpe ratios, two differences, untrained
    assert all(line.endswith(SHORT) for line in sharpe_rows), sharpe_rows
    table = rows(text)
    assert table["score"].startswith(SHORT) and "sub-windows of the range" in table["score"]
    assert table["excess total return"].endswith("%")  # not annualised: shown
    code, text = run("evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--start", "2022-10-03", "--json")
    m = json.loads(text)["metrics"]
    assert m["short_window"] is True and m["vs_equal_weight"]["sharpe_difference"] is not None  # JSON keeps values


def test_a_range_shorter_than_20_trading_days_is_refused_with_exit_2_naming_end(run_json, data_dir, capsys):
    # 2022-11-14 to 2022-11-15 evaluated (exit 0) on one daily return: a Sharpe ratio of nothing
    argv = ["evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--start", "2022-11-14", "--end", "2022-11-15"]
    code, text = run(*argv)
    assert code == 2 and text == ""
    err = capsys.readouterr().err
    assert "error: end: the range 2022-11-14 to 2022-11-15 holds 2 trading day(s); it needs at least 20" in err
    assert "Traceback" not in err


def test_a_missing_or_short_benchmark_file_gives_one_note_and_no_qqq(run_json, data_dir, tmp_path):
    common = ["evaluate", run_json["bundle"], "--data-dir", str(data_dir)]
    code, text = run(*common, "--benchmark", str(tmp_path / "absent.csv"))
    assert code == 0
    notes = [line for line in text.splitlines() if "QQQ" in line]
    absent = tmp_path / "absent.csv"
    assert notes == [f"note:       QQQ not shown: no benchmark file {absent} (--benchmark FILE names one)"]
    assert "vs equal weight (1/N), same days" in text
    frame = pd.read_csv(data_dir / "benchmark_etfs_daily_eodhd.csv.gz")
    frame[frame["date"] < "2021-06-30"].to_csv(tmp_path / "until-2021-06.csv", index=False)
    code, text = run(*common, "--benchmark", str(tmp_path / "until-2021-06.csv"), "--json")
    result = json.loads(text)
    assert code == 0 and "vs_QQQ" not in result["metrics"] and result["benchmark"]["shown"] is False
    assert "until-2021-06.csv covers 1999-03-10 to 2021-06-29" in result["benchmark"]["note"]


@pytest.mark.parametrize("tickers", ["", ",", " , "])
def test_an_empty_tickers_list_is_refused_naming_the_option(tickers, data_dir, tmp_path, capsys):
    argv = ["train", "--env", "portfolio", "--tickers", tickers, "--data-dir", str(data_dir), "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --tickers: ") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # nothing trained


def test_an_end_alone_takes_its_start_from_the_split_named(run_json, data_dir):
    code, text = run(
        "evaluate", run_json["bundle"], "--data-dir", str(data_dir), "--split", "validation", "--end", "2020-06-30"
    )
    assert code == 0
    # validation 2020-01-01..2020-12-31: the range opens at its first trading day, not the test split's
    assert "range 2020-01-02 to 2020-06-30" in text.splitlines()[0], text.splitlines()[0]
